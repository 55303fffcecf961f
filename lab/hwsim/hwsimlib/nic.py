"""Simulated RDMA NIC tools: ibstat, ibv_devinfo, rdma, show_gids, ethtool -S (SIMULATION)."""

from __future__ import annotations

import os
import sys

from hwsimlib.state import faults, guid_for, nic_faulted, nic_state, node, pfc_effective, profile
from hwsimlib.sysfs import sysfs_read


def _port_view(nic):
    down = nic_faulted("rdma_port_down", nic)
    return {
        "state": "Down" if down else "Active",
        "physical_state": "Disabled" if down else "LinkUp",
        "rate": 40 if down else nic["rate"],
    }


def ibstat(args):
    prof = profile()
    seed = node()["seed"]
    nics = sorted(prof["nics"], key=lambda n: n["ca"])
    if args:
        nics = [n for n in nics if n["ca"] == args[0]]
        if not nics:
            sys.stderr.write("ibpanic: [%d] main: stat of IB device '%s' failed: No such file or directory\n" % (os.getpid(), args[0]))
            return 255
    out = []
    for nic in nics:
        v = _port_view(nic)
        guid = guid_for(seed, nic["ca"])
        port_guid = "0x0000000000000000" if v["state"] == "Down" else "0x%s" % guid_for(seed, nic["ca"], 1)
        out += [
            "CA '%s'" % nic["ca"],
            "\tCA type: %s" % nic["ca_type"],
            "\tNumber of ports: 1",
            "\tFirmware version: %s" % nic["firmware"],
            "\tHardware version: 0",
            "\tNode GUID: 0x%s" % guid,
            "\tSystem image GUID: 0x%s" % guid,
            "\tPort 1:",
            "\t\tState: %s" % v["state"],
            "\t\tPhysical state: %s" % v["physical_state"],
            "\t\tRate: %d" % v["rate"],
            "\t\tBase lid: 0",
            "\t\tLMC: 0",
            "\t\tSM lid: 0",
            "\t\tCapability mask: 0x00010000",
            "\t\tPort GUID: %s" % port_guid,
            "\t\tLink layer: %s" % nic["link_layer"],
        ]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


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
    prof = profile()
    seed = node()["seed"]
    nics = sorted(prof["nics"], key=lambda n: n["ca"])
    if "-d" in args:
        nics = [n for n in nics if n["ca"] == args[args.index("-d") + 1]]
    out = []
    for nic in nics:
        v = _port_view(nic)
        g = guid_for(seed, nic["ca"])
        guid = ":".join(g[k : k + 4] for k in range(0, 16, 4))
        mtu = _active_mtu(nic)
        out += [
            "hca_id:\t%s" % nic["ca"],
            "\ttransport:\t\t\tInfiniBand (0)",
            "\tfw_ver:\t\t\t\t%s" % nic["firmware"],
            "\tnode_guid:\t\t\t%s" % guid,
            "\tsys_image_guid:\t\t\t%s" % guid,
            "\tvendor_id:\t\t\t0x02c9",
            "\tvendor_part_id:\t\t\t%d" % nic["vendor_part_id"],
            "\thw_ver:\t\t\t\t0x0",
            "\tboard_id:\t\t\tMT_0000000838",
            "\tphys_port_cnt:\t\t\t1",
            "\t\tport:\t1",
            "\t\t\tstate:\t\t\t%s" % ("PORT_DOWN (1)" if v["state"] == "Down" else "PORT_ACTIVE (4)"),
            "\t\t\tmax_mtu:\t\t4096 (5)",
            "\t\t\tactive_mtu:\t\t%d (%d)" % (mtu, MTU_CODE[mtu]),
            "\t\t\tsm_lid:\t\t\t0",
            "\t\t\tport_lid:\t\t0",
            "\t\t\tport_lmc:\t\t0x00",
            "\t\t\tlink_layer:\t\t%s" % nic["link_layer"],
            "",
        ]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def rdma(args):
    if args[:2] not in (["link", "show"], ["link"], ["link", "list"], ["-j", "link"]):
        sys.stderr.write("hwsim rdma: only 'rdma link show' is simulated\n")
        return 2
    prof = profile()
    out = []
    for nic in sorted(prof["nics"], key=lambda n: n["ca"]):
        v = _port_view(nic)
        out.append(
            "link %s/1 state %s physical_state %s netdev %s"
            % (nic["ca"], "DOWN" if v["state"] == "Down" else "ACTIVE", "DISABLED" if v["state"] == "Down" else "LINK_UP", nic["netdev"])
        )
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def nic_by_netdev(name):
    for nic in profile()["nics"]:
        if nic["netdev"] == name:
            return nic
    return None


def _node_index():
    return int(node().get("index", 1))


def show_gids(args):
    prof = profile()
    seed = node()["seed"]
    rows = ["DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV", "---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---"]
    n = 0
    for nic in sorted(prof["nics"], key=lambda x: x["ca"]):
        if args and nic["ca"] != args[0]:
            continue
        g = guid_for(seed, nic["ca"], 1)
        ll = "fe80:0000:0000:0000:%s:%s:%s:%s" % (g[0:4], g[4:8], g[8:12], g[12:16])
        for k, ver in enumerate(("v1", "v2")):
            rows.append("%s\t1\t%d\t%s\t\t\t%s\t%s" % (nic["ca"], k, ll, ver, nic["netdev"]))
            n += 1
        if nic.get("ipv4") and not nic_faulted("rdma_port_down", nic):
            ip = nic["ipv4"] % _node_index()
            o = [int(x) for x in ip.split(".")]
            mapped = "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % tuple(o)
            for k, ver in enumerate(("v1", "v2")):
                rows.append("%s\t1\t%d\t%s\t%s  \t%s\t%s" % (nic["ca"], 2 + k, mapped, ip, ver, nic["netdev"]))
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
