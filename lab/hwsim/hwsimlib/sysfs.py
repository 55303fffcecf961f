"""The simulated sysfs tree under $HWSIM_SYSFS, re-rendered at boot and after fault changes."""

from __future__ import annotations

import hashlib
import os
import shutil

from hwsimlib.state import SYSFS, nic_faulted, node, present_gpus, profile


def write_file(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write("%s\n" % value)


def render_sysfs():
    """(Re)build the simulated sysfs tree with boot-time defaults (what a reboot gives)."""
    prof = profile()
    seed = node()["seed"]
    if os.path.isdir(SYSFS):
        shutil.rmtree(SYSFS)
    pci = os.path.join(SYSFS, "bus/pci/devices")
    g = prof["gpu"]
    for i in present_gpus():
        dev = os.path.join(pci, "0000:%s:00.0" % g["bus_ids"][i].lower())
        write_file(os.path.join(dev, "vendor"), g["pci_vendor"])
        write_file(os.path.join(dev, "device"), g["pci_device"])
        write_file(os.path.join(dev, "subsystem_device"), g["subsystem"])
        write_file(os.path.join(dev, "class"), "0x030200")
        write_file(os.path.join(dev, "numa_node"), g["numa"][i])
    for bus in prof.get("nvswitch", {}).get("bus_ids", []):
        dev = os.path.join(pci, "0000:%s:00.0" % bus)
        write_file(os.path.join(dev, "vendor"), prof["nvswitch"]["pci_vendor"])
        write_file(os.path.join(dev, "device"), prof["nvswitch"]["pci_device"])
        write_file(os.path.join(dev, "class"), "0x068000")
        write_file(os.path.join(dev, "numa_node"), 0)
    for nic in prof["nics"]:
        dev = os.path.join(pci, "0000:%s:00.0" % nic["bus_id"])
        write_file(os.path.join(dev, "vendor"), nic["pci_vendor"])
        write_file(os.path.join(dev, "device"), nic["pci_device"])
        write_file(os.path.join(dev, "class"), "0x020000")
        write_file(os.path.join(dev, "numa_node"), nic["numa"])
        ib = os.path.join(SYSFS, "class/infiniband", nic["ca"])
        port = os.path.join(ib, "ports/1")
        is_down = nic_faulted("rdma_port_down", nic)
        write_file(os.path.join(ib, "fw_ver"), nic["firmware"])
        write_file(os.path.join(ib, "node_type"), "1: CA")
        write_file(os.path.join(ib, "device/net", nic["netdev"], "ifindex"), 10 + prof["nics"].index(nic))
        write_file(os.path.join(port, "state"), "1: DOWN" if is_down else "4: ACTIVE")
        write_file(os.path.join(port, "phys_state"), "3: Disabled" if is_down else "5: LinkUp")
        write_file(os.path.join(port, "rate"), "40 Gb/sec (4X QDR)" if is_down else "%d Gb/sec (4X)" % nic["rate"])
        write_file(os.path.join(port, "link_layer"), nic["link_layer"])
        for counter in ("symbol_error", "link_downed", "port_rcv_errors", "port_xmit_discards", "link_error_recovery"):
            write_file(os.path.join(port, "counters", counter), 0)
        for counter in ("out_of_buffer", "local_ack_timeout_err", "np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets"):
            write_file(os.path.join(port, "hw_counters", counter), 0)
        write_file(os.path.join(ib, "tc/1/traffic_class"), "")
        net = os.path.join(SYSFS, "class/net", nic["netdev"])
        write_file(os.path.join(net, "mtu"), 9000 if nic["role"] == "rdma" else 1500)  # as the OS network config sets it
        write_file(os.path.join(net, "operstate"), "down" if is_down else "up")
        write_file(os.path.join(net, "speed"), -1 if is_down else nic["rate"] * 1000)
        write_file(os.path.join(net, "address"), _mac(seed, nic["ca"]))
        write_file(os.path.join(net, "device/vendor"), nic["pci_vendor"])
        write_file(os.path.join(net, "device/device"), nic["pci_device"])
        for point in ("roce_np", "roce_rp"):
            for prio in range(8):
                write_file(os.path.join(net, "ecn", point, "enable", str(prio)), 0)
        write_file(os.path.join(net, "ecn", "roce_np", "cnp_dscp"), 48)
        write_file(os.path.join(net, "ecn", "roce_np", "cnp_802p_prio"), 6)
    write_file(os.path.join(SYSFS, ".hwsim"), "simulated sysfs tree, profile %s" % prof["name"])


def _mac(seed, name):
    h = hashlib.sha256(("mac/%s/%s" % (seed, name)).encode()).hexdigest()
    return "a0:88:c2:%s:%s:%s" % (h[0:2], h[2:4], h[4:6])


def sysfs_read(rel, default=""):
    try:
        with open(os.path.join(SYSFS, rel)) as fh:
            return fh.read().strip()
    except OSError:
        return default


def render_sysfs_keep_runtime():
    """Re-render after a fault change, keeping runtime-written files (ECN, MTU, traffic class)."""
    keep = {}
    for dirpath, _dirs, files in os.walk(SYSFS):
        for name in files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, SYSFS)
            if "/ecn/" in rel or rel.endswith("/mtu") or rel.endswith("traffic_class") or rel.startswith(("module/", "kernel/config/")):
                with open(path) as fh:
                    keep[rel] = fh.read()
    render_sysfs()
    for rel, value in keep.items():
        path = os.path.join(SYSFS, rel)
        if os.path.exists(path) or rel.startswith(("module/", "kernel/config/")):
            write_file(path, value.rstrip("\n"))
