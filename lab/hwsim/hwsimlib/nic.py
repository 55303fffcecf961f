"""Simulated RDMA NIC tools: ibv_devinfo, rdma, show_gids, ethtool -S (SIMULATION).

`ibstat` and `ibstatus` are not simulated: the real binaries (infiniband-diags) read this
simulator's sysfs tree at /sys/class/infiniband through the sysfs redirect library
(lab/sysfs_redirect; /etc/ld.so.preload in a lab node, LD_PRELOAD in tests/unit/ibsim_helper.py).
The simulated tools below take every value they share with ibstat (GUIDs, port state, link
layer, GIDs, firmware) from the same tree (sysfs.py), so all of them tell one story.
"""

from __future__ import annotations

import os
import sys

from hwsimlib.state import SYSFS, faults, nic_faulted, nic_state, pfc_effective, profile
from hwsimlib.sysfs import ZERO_GID, sysfs_read


def _cas():
    return sorted(profile()["nics"], key=lambda n: n["ca"])


def _ca_attr(nic, name, default=""):
    return sysfs_read("class/infiniband/%s/%s" % (nic["ca"], name), default)


def _port_attr(nic, name, default=""):
    return sysfs_read("class/infiniband/%s/ports/1/%s" % (nic["ca"], name), default)


def _code(text):
    """The number of a sysfs "4: ACTIVE" / "5: LinkUp" attribute (0 when absent)."""
    head = text.split(":", 1)[0].strip()
    return int(head) if head.isdigit() else 0


IBV_PORT_STATE = {1: "PORT_DOWN", 2: "PORT_INIT", 3: "PORT_ARMED", 4: "PORT_ACTIVE"}
RDMA_STATE = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE"}
RDMA_PHYS_STATE = {2: "POLLING", 3: "DISABLED", 5: "LINK_UP"}


def _active_mtu(nic):
    if nic_faulted("roce_mtu_1024", nic):
        return 1024
    try:
        mtu = int(sysfs_read("class/net/%s/mtu" % nic["netdev"], "1500"))
    except ValueError:
        mtu = 1500
    for ib_mtu in (4096, 2048, 1024, 512, 256):
        if mtu >= ib_mtu + 58:  # RoCE headers must fit in the Ethernet MTU
            return ib_mtu
    return 256


MTU_CODE = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}


def ibv_devinfo(args):
    # libibverbs first checks the uverbs ABI (rdma-core libibverbs/init.c): without ib_uverbs
    # loaded ibv_get_device_list() fails with ENOSYS and devinfo.c perror()s and returns -1
    if not os.path.exists(os.path.join(SYSFS, "class/infiniband_verbs/abi_version")):
        sys.stderr.write("Failed to get IB devices list: Function not implemented\n")
        return 255
    nics = _cas()
    if "-d" in args:
        nics = [n for n in nics if n["ca"] == args[args.index("-d") + 1]]
    out = []
    for nic in nics:
        state = _code(_port_attr(nic, "state"))
        mtu = _active_mtu(nic)
        out += [
            "hca_id:\t%s" % nic["ca"],
            "\ttransport:\t\t\tInfiniBand (0)",
            "\tfw_ver:\t\t\t\t%s" % _ca_attr(nic, "fw_ver"),
            "\tnode_guid:\t\t\t%s" % _ca_attr(nic, "node_guid"),
            "\tsys_image_guid:\t\t\t%s" % _ca_attr(nic, "sys_image_guid"),
            "\tvendor_id:\t\t\t0x02c9",
            "\tvendor_part_id:\t\t\t%d" % nic["vendor_part_id"],
            "\thw_ver:\t\t\t\t0x%X" % int(_ca_attr(nic, "hw_rev", "0"), 16),
            "\tboard_id:\t\t\t%s" % _ca_attr(nic, "board_id"),
            "\tphys_port_cnt:\t\t\t1",
            "\t\tport:\t1",
            "\t\t\tstate:\t\t\t%s (%d)" % (IBV_PORT_STATE.get(state, "PORT_NOP"), state),
            "\t\t\tmax_mtu:\t\t4096 (5)",
            "\t\t\tactive_mtu:\t\t%d (%d)" % (mtu, MTU_CODE[mtu]),
            "\t\t\tsm_lid:\t\t\t%d" % int(_port_attr(nic, "sm_lid", "0x0"), 16),
            "\t\t\tport_lid:\t\t%d" % int(_port_attr(nic, "lid", "0x0"), 16),
            "\t\t\tport_lmc:\t\t0x%02x" % int(_port_attr(nic, "lid_mask_count", "0")),
            "\t\t\tlink_layer:\t\t%s" % _port_attr(nic, "link_layer"),
            "",
        ]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def rdma(args):
    if args[:2] not in (["link", "show"], ["link"], ["link", "list"], ["-j", "link"]):
        sys.stderr.write("hwsim rdma: only 'rdma link show' is simulated\n")
        return 2
    out = []
    for nic in _cas():
        state, phys = _code(_port_attr(nic, "state")), _code(_port_attr(nic, "phys_state"))
        out.append(
            "link %s/1 state %s physical_state %s netdev %s"
            % (nic["ca"], RDMA_STATE.get(state, "NOP"), RDMA_PHYS_STATE.get(phys, str(phys)), nic["netdev"])
        )
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def nic_by_netdev(name):
    for nic in profile()["nics"]:
        if nic["netdev"] == name:
            return nic
    return None


def _ipv4_of_gid(gid):
    """a.b.c.d of an IPv4-mapped GID (0000:...:ffff:0a64:0001), else None."""
    words = gid.split(":")
    if len(words) != 8 or words[:6] != ["0000"] * 5 + ["ffff"]:
        return None
    packed = "".join(words[6:])
    return ".".join(str(int(packed[i : i + 2], 16)) for i in range(0, 8, 2))


def show_gids(args):
    """MLNX_OFED's show_gids table, from the port's GID table in the sysfs tree (non-empty entries)."""
    rows = ["DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV", "---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---"]
    n = 0
    for nic in _cas():
        if args and nic["ca"] != args[0]:
            continue
        gids = os.path.join(SYSFS, "class/infiniband", nic["ca"], "ports/1/gids")
        for index in sorted(int(i) for i in os.listdir(gids)) if os.path.isdir(gids) else []:
            gid = _port_attr(nic, "gids/%d" % index)
            if gid == ZERO_GID:
                continue
            ver = "v2" if _port_attr(nic, "gid_attrs/types/%d" % index) == "RoCE v2" else "v1"
            netdev = _port_attr(nic, "gid_attrs/ndevs/%d" % index)
            ip = _ipv4_of_gid(gid)
            if ip:
                rows.append("%s\t1\t%d\t%s\t%s  \t%s\t%s" % (nic["ca"], index, gid, ip, ver, netdev))
            else:
                rows.append("%s\t1\t%d\t%s\t\t\t%s\t%s" % (nic["ca"], index, gid, ver, netdev))
            n += 1
    rows.append("n_gids_found=%d" % n)
    sys.stdout.write("\n".join(rows) + "\n")
    return 0


def ethtool(args):
    if len(args) != 2 or args[0] not in ("-S", "--statistics"):
        sys.stderr.write("hwsim ethtool: only 'ethtool -S <if>' is simulated\n")
        return 2
    nic = nic_by_netdev(args[1])
    if nic is None:
        sys.stderr.write("Cannot get stats strings information: No such device\n")
        return 1
    st = nic_state()[nic["ca"]]
    pfc = pfc_effective(nic, st)
    down = nic_faulted("rdma_port_down", nic)
    storm = sum(int(f.get("count", 1)) for f in faults("pause_storm") if f["ca"] == nic["ca"])
    rows = [
        ("rx_packets", 0),
        ("rx_bytes", 0),
        ("tx_packets", 0),
        ("tx_bytes", 0),
        ("rx_out_of_buffer", 0),
        ("rx_crc_errors_phy", 0),
        ("rx_symbol_err_phy", 0),
        ("link_down_events_phy", 1 if down else 0),
        ("rx_discards_phy", 0),
        ("rx_pause_ctrl_phy", 0),
        ("tx_pause_ctrl_phy", 0),
        ("tx_pause_storm_warning_events", storm),
        ("tx_pause_storm_error_events", storm),
    ]
    for prio in range(8):
        rows += [
            ("rx_prio%d_bytes" % prio, 0),
            ("rx_prio%d_packets" % prio, 0),
            ("tx_prio%d_bytes" % prio, 0),
            ("tx_prio%d_packets" % prio, 0),
        ]
        if pfc[prio]:  # mlx5 lists per-priority pause counters only for PFC-enabled priorities
            rows += [
                ("rx_prio%d_pause" % prio, 0),
                ("rx_prio%d_pause_duration" % prio, 0),
                ("tx_prio%d_pause" % prio, 0),
                ("tx_prio%d_pause_duration" % prio, 0),
                ("rx_prio%d_pause_transition" % prio, 0),
            ]
    if not any(pfc):
        rows += [
            ("rx_global_pause", 0),
            ("rx_global_pause_duration", 0),
            ("tx_global_pause", 0),
            ("tx_global_pause_duration", 0),
            ("rx_global_pause_transition", 0),
        ]
    sys.stdout.write("NIC statistics:\n" + "".join("     %s: %d\n" % kv for kv in rows))
    return 0
