"""The simulated sysfs tree under $HWSIM_SYSFS, re-rendered at boot and after fault changes (SIMULATION).

Laid out as /sys is, so that the REAL rdma-core tools can read it: lab/sysfs_redirect (a preload
library; /etc/ld.so.preload in a lab node) shows `class/infiniband` and `class/infiniband_mad` of
this tree at /sys/class/infiniband[_mad]. Every attribute the real `ibstat` (libibumad 44:
get_ca/get_port in libibumad/umad.c) and `ibstatus` (infiniband-diags/scripts/ibstatus) read
is here, in the text format the kernel prints it in (drivers/infiniband/core/sysfs.c of Linux
6.1, and the mlx5 driver's device attributes):

  class/infiniband/<ca>/  node_type "1: CA", node_guid / sys_image_guid "xxxx:xxxx:xxxx:xxxx",
                          fw_ver, hca_type "MT<pci device, decimal>", hw_rev "%x", board_id
    ports/1/              state "4: ACTIVE", phys_state "5: LinkUp", rate "400 Gb/sec (4X NDR)",
                          lid / sm_lid "0x%x", lid_mask_count / sm_sl "%u", cap_mask "0x%08x",
                          link_layer, gids/<i> (%pI6), gid_attrs/{types,ndevs}/<i>, pkeys/<i>
                          "0x%04x", counters/, hw_counters/
    device/net/<netdev>/  the port's netdev (as the PCI device's net/ directory)

The rest is what the product's modules read under their sysfs root: bus/pci/devices (GPUs,
NVSwitches, NICs), class/net/<netdev> (mtu, operstate, speed, address, ecn/), tc/1/traffic_class,
module/ and kernel/config/ (written by the simulated kernel, kernel.py).

Values are consistent with the simulator's other NIC tools (nic.py reads them from here): the
MAC, node GUID, port GUID and GIDs all derive from one seeded MAC per NIC, as on a ConnectX
(node GUID = OUI + 0300 + the MAC's last three bytes; a RoCE port's default GID is the
link-local address from the MAC's EUI-64). A port with the rdma_port_down fault is DOWN /
Disabled at the kernel's link-down default rate (40 Gb/sec (4X QDR)) with an empty GID table,
as the real captures show (tests/fixtures/realworld/ibstat/h100-roce-cx7-400g-two-ports-down).
Simplification: the GID table lists its populated entries only (index 0 always, all zeros when
the port is down); a real port lists every index of its table, unused ones reading as zeros.
"""

from __future__ import annotations

import hashlib
import os
import shutil

from hwsimlib.pci_sim import render_pci
from hwsimlib.state import SYSFS, nic_faulted, node, profile

# mlx5 reports an Ethernet port's speed as an IB width x lane speed (translate_eth_proto_oper /
# translate_eth_ext_proto_oper in drivers/infiniband/hw/mlx5/main.c); rate_show prints
# "<Gb/s> Gb/sec (<width>X <speed>)". Keys: the link speed in Gb/s.
ETH_RATE = {
    400: "400 Gb/sec (4X NDR)",  # 400GAUI-4
    200: "200 Gb/sec (4X HDR)",  # 200GAUI-4
    100: "100 Gb/sec (4X EDR)",  # 100GBASE-CR4/SR4 (CAUI-4)
    50: "50 Gb/sec (2X EDR)",  # 50GAUI-2
    40: "40 Gb/sec (4X QDR)",
    25: "25 Gb/sec (1X EDR)",
    10: "10 Gb/sec (1X QDR)",
}
# what a link-down mlx5 Ethernet port reports (the query's 4X QDR defaults)
DOWN_RATE = "40 Gb/sec (4X QDR)"
# port_cap_flags of the real captures: RoCE ports show only CM_SUP; the InfiniBand value is
# that of the ConnectX-7 NDR capture (h100-ib-cx7-400g-eth-ports-disabled)
CAP_MASK = {"Ethernet": 0x00010000, "InfiniBand": 0xA751E848}
GID_TYPES = ("IB/RoCE v1", "RoCE v2")  # ib_cache_gid_type_str(), in table order
ZERO_GID = ":".join(["0000"] * 8)


def write_file(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write("%s\n" % value)


def _mac(seed, name):
    h = hashlib.sha256(("mac/%s/%s" % (seed, name)).encode()).hexdigest()
    return "a0:88:c2:%s:%s:%s" % (h[0:2], h[2:4], h[4:6])


def nic_mac(nic, seed=None):
    return _mac(node()["seed"] if seed is None else seed, nic["ca"])


def node_guid(nic, seed=None):
    """The CA's node GUID (16 hex digits): the MAC's OUI, 0300, the MAC's last three bytes."""
    mac = nic_mac(nic, seed).split(":")
    return "".join(mac[:3]) + "0300" + "".join(mac[3:])


def port_guid(nic, seed=None):
    """Port 1's GUID: on RoCE the interface id of the default GID (modified EUI-64 of the MAC),
    on InfiniBand the node GUID (as the ConnectX-7 NDR captures show)."""
    if nic["link_layer"] != "Ethernet":
        return node_guid(nic, seed)
    mac = [int(b, 16) for b in nic_mac(nic, seed).split(":")]
    eui = [mac[0] ^ 0x02, *mac[1:3], 0xFF, 0xFE, *mac[3:]]
    return "".join("%02x" % b for b in eui)


def _groups(hex16):
    return ":".join(hex16[i : i + 4] for i in range(0, 16, 4))


def _ipv4_gid(ip):
    """An IPv4 address as the kernel prints its GID: the IPv4-mapped IPv6 address, %pI6."""
    return "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % tuple(int(x) for x in ip.split("."))


def nic_ipv4(nic):
    """The NIC's RoCE address on this node (profile pattern, node index), or None."""
    if not nic.get("ipv4"):
        return None
    return nic["ipv4"] % int(node().get("index", 1))


def port_down(nic):
    return nic_faulted("rdma_port_down", nic)


def gid_table(nic):
    """[(gid text, type, netdev)] of port 1 in table order; [] when the port is down.

    RoCE: the default (link-local) GID, then one per IPv4 address, each once per RoCE type.
    InfiniBand: the subnet prefix fe80::/64 with the port GUID (type IB, no netdev)."""
    if port_down(nic):
        return []
    if nic["link_layer"] != "Ethernet":
        return [("fe80:0000:0000:0000:" + _groups(port_guid(nic)), GID_TYPES[0], None)]
    rows = [("fe80:0000:0000:0000:" + _groups(port_guid(nic)), t, nic["netdev"]) for t in GID_TYPES]
    ip = nic_ipv4(nic)
    if ip:
        rows += [(_ipv4_gid(ip), t, nic["netdev"]) for t in GID_TYPES]
    return rows


def _lid(nic, prof):
    """An InfiniBand port's LID (unique per node and NIC); RoCE ports have none."""
    if nic["link_layer"] == "Ethernet":
        return 0
    return 0x100 * int(node().get("index", 1)) + prof["nics"].index(nic) + 1


def render_infiniband(prof, nic, seed):
    """class/infiniband/<ca>: the CA and its port 1, in the kernel's formats."""
    ib = os.path.join(SYSFS, "class/infiniband", nic["ca"])
    down = port_down(nic)
    eth = nic["link_layer"] == "Ethernet"
    guid = _groups(node_guid(nic, seed))
    write_file(os.path.join(ib, "node_type"), "1: CA")
    write_file(os.path.join(ib, "node_guid"), guid)
    write_file(os.path.join(ib, "sys_image_guid"), guid)
    write_file(os.path.join(ib, "fw_ver"), nic["firmware"])
    write_file(os.path.join(ib, "hca_type"), "MT%d" % int(nic["pci_device"], 16))
    write_file(os.path.join(ib, "hw_rev"), "%x" % int(nic.get("pci_revision", 0)))
    write_file(os.path.join(ib, "board_id"), nic.get("board_id", "MT_0000000838"))
    write_file(os.path.join(ib, "device/net", nic["netdev"], "ifindex"), 10 + prof["nics"].index(nic))
    port = os.path.join(ib, "ports/1")
    write_file(os.path.join(port, "state"), "1: DOWN" if down else "4: ACTIVE")
    write_file(os.path.join(port, "phys_state"), "3: Disabled" if down else "5: LinkUp")
    rate = DOWN_RATE if down else ETH_RATE.get(nic["rate"])
    if rate is None:
        raise ValueError("hwsim: profile NIC %s: no mlx5 rate text for %r Gb/s (known: %s)" % (nic["ca"], nic["rate"], sorted(ETH_RATE)))
    write_file(os.path.join(port, "rate"), rate)
    write_file(os.path.join(port, "lid"), "0x%x" % (0 if down else _lid(nic, prof)))
    write_file(os.path.join(port, "sm_lid"), "0x%x" % (0 if eth or down else 1))
    write_file(os.path.join(port, "lid_mask_count"), 0)
    write_file(os.path.join(port, "sm_sl"), 0)
    write_file(os.path.join(port, "cap_mask"), "0x%08x" % CAP_MASK[nic["link_layer"]])
    write_file(os.path.join(port, "link_layer"), nic["link_layer"])
    table = gid_table(nic) or [(ZERO_GID, None, None)]
    for index, (gid, kind, netdev) in enumerate(table):
        write_file(os.path.join(port, "gids", str(index)), gid)
        # attributes the kernel cannot print (an empty entry, an IB GID's netdev: EINVAL) are not rendered
        if kind:
            write_file(os.path.join(port, "gid_attrs/types", str(index)), kind)
        if netdev:
            write_file(os.path.join(port, "gid_attrs/ndevs", str(index)), netdev)
    write_file(os.path.join(port, "pkeys/0"), "0xffff")  # the default partition; RoCE's table has this one entry
    for counter in ("symbol_error", "link_downed", "port_rcv_errors", "port_xmit_discards", "link_error_recovery"):
        write_file(os.path.join(port, "counters", counter), 0)
    for counter in ("out_of_buffer", "local_ack_timeout_err", "np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets"):
        write_file(os.path.join(port, "hw_counters", counter), 0)
    write_file(os.path.join(ib, "tc/1/traffic_class"), "")


def render_sysfs(keep_config=None):
    """(Re)build the simulated sysfs tree with boot-time defaults (what a reboot gives).

    keep_config: {bdf: config space} that setpci wrote since the boot (kept on a fault's re-render)."""
    prof = profile()
    seed = node()["seed"]
    if os.path.isdir(SYSFS):
        shutil.rmtree(SYSFS)
    render_pci(prof, keep_config)
    for nic in prof["nics"]:
        render_infiniband(prof, nic, seed)
        is_down = port_down(nic)
        net = os.path.join(SYSFS, "class/net", nic["netdev"])
        write_file(os.path.join(net, "mtu"), 9000 if nic["role"] == "rdma" else 1500)  # as the OS network config sets it
        write_file(os.path.join(net, "operstate"), "down" if is_down else "up")
        write_file(os.path.join(net, "speed"), -1 if is_down else nic["rate"] * 1000)
        write_file(os.path.join(net, "address"), nic_mac(nic, seed))
        write_file(os.path.join(net, "device/vendor"), nic["pci_vendor"])
        write_file(os.path.join(net, "device/device"), nic["pci_device"])
        for point in ("roce_np", "roce_rp"):
            for prio in range(8):
                write_file(os.path.join(net, "ecn", point, "enable", str(prio)), 0)
        write_file(os.path.join(net, "ecn", "roce_np", "cnp_dscp"), 48)
        write_file(os.path.join(net, "ecn", "roce_np", "cnp_802p_prio"), 6)
    write_file(os.path.join(SYSFS, ".hwsim"), "simulated sysfs tree, profile %s" % prof["name"])


def sysfs_read(rel, default=""):
    try:
        with open(os.path.join(SYSFS, rel)) as fh:
            return fh.read().strip()
    except OSError:
        return default


# what modules loaded at runtime added to the tree (kept across a fault's re-render)
RUNTIME_TREES = ("module/", "kernel/config/", "kernel/mm/", "class/infiniband_verbs/")


def render_sysfs_keep_runtime():
    """Re-render after a fault change, keeping runtime-written files (ECN, MTU, traffic class)."""
    keep = {}
    configs = {}
    pci = os.path.join(SYSFS, "bus/pci/devices")
    for bdf in os.listdir(pci) if os.path.isdir(pci) else []:
        with open(os.path.join(pci, bdf, "config"), "rb") as fh:
            configs[bdf] = fh.read()
    for dirpath, _dirs, files in os.walk(SYSFS):
        for name in files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, SYSFS)
            if rel.startswith("devices/"):
                continue
            if "/ecn/" in rel or rel.endswith("/mtu") or rel.endswith("traffic_class") or rel.startswith(RUNTIME_TREES):
                with open(path) as fh:
                    keep[rel] = fh.read()
    render_sysfs(configs)
    for rel, value in keep.items():
        path = os.path.join(SYSFS, rel)
        if os.path.exists(path) or rel.startswith(RUNTIME_TREES):
            write_file(path, value.rstrip("\n"))
