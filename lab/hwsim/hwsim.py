#!/usr/bin/python3
"""rackforge lab hardware simulator (SIMULATION, not a driver).

One multi-call program. Called as `nvidia-smi`, `ibstat`, `ibv_devinfo`, `rdma`, `mlnx_qos`,
`ethtool`, `show_gids` it prints output in the exact formats of the real tools (checked by
tests/unit/test_hwsim_fidelity.py, which parses both with the same parsers). Called as
`modinfo`, `modprobe`, `lsmod` it simulates the node's kernel modules (a container cannot load
real ones): the parameter lists are those of Debian 12's kernel (see KERNEL_MODULES). Called as
`hwsim` it administers the simulated node: `init`, `boot`, `fault`, `state`.

State:
  /etc/hwsim/profile.json     the node's hardware profile (data, lab/hwsim/profiles/)
  /var/lib/hwsim/node.json    persistent: faults, seed (survives a reboot)
  /run/hwsim/*.json           volatile: GPU clocks/power/persistence, NIC QoS, loaded driver
                              (/run is a tmpfs: a container restart is a simulated reboot)
  $HWSIM_SYSFS (default /var/lib/hwsim/sys)   the simulated sysfs tree, re-rendered at boot

The GPU side only answers once the simulated driver package (lab mirror) is installed:
/usr/lib/hwsim/driver-version holds the installed version; `hwsim boot` "loads" it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time

ETC = os.environ.get("HWSIM_ETC", "/etc/hwsim")
VARLIB = os.environ.get("HWSIM_VARLIB", "/var/lib/hwsim")
RUN = os.environ.get("HWSIM_RUN", "/run/hwsim")
SYSFS = os.environ.get("HWSIM_SYSFS", os.path.join(VARLIB, "sys"))
DRIVER_FILE = os.environ.get("HWSIM_DRIVER_FILE", "/usr/lib/hwsim/driver-version")
FM_FILE = os.environ.get("HWSIM_FM_FILE", "/usr/lib/hwsim/fabricmanager-version")

FAULTS = {
    "nvlink_inactive": "GPU <gpu> links <l1,l2,..> print <inactive>",
    "gpu_links_all_inactive": "GPU <gpu>: NVML cannot read NVLink (all links inactive)",
    "fabric_in_progress": "NVSwitch fabric stays 'In Progress' even with fabric manager running",
    "gpu_missing": "GPU <gpu> has fallen off the bus (gone from PCI and nvidia-smi)",
    "rdma_port_down": "port 1 of <ca> is Down/Disabled",
    "pfc_off": "<ca> refuses PFC: every priority stays disabled",
    "roce_mtu_1024": "<ca> active MTU stuck at 1024",
    "nvlink_errors": "GPU <gpu> link <link> gains <count> replay/recovery/CRC errors",
    "pause_storm": "<ca> reports <count> tx_pause_storm_error_events (the NIC cut off a PFC pause storm)",
}


# Kernel modules of the simulated kernel: `modinfo -p` of Debian 12's linux-image-6.1.0-57-amd64
# (captured into tests/fixtures/captured/modinfo-p-debian12-6.1.0-57.txt). Inbox ib_uverbs has
# no parameters: `disable_raw_qp_enforcement` exists only in MLNX_OFED's ib_uverbs, and
# `disable_raw_qp` exists nowhere.
KERNEL_VERSION = "6.1.0-57-amd64"
KERNEL_MODULES = {
    "mlx5_core": {
        "depends": [],
        "params": [
            ("debug_mask", "debug mask: 1 = dump cmd data, 2 = dump cmd exec time, 3 = both. Default=0", "uint", "0"),
            ("prof_sel", "profile selector. Valid range 0 - 2", "uint", "2"),
        ],
    },
    "ib_core": {
        "depends": [],
        "params": [
            ("send_queue_size", "Size of send queue in number of work requests", "int", "128"),
            ("recv_queue_size", "Size of receive queue in number of work requests", "int", "512"),
            ("netns_mode", "Share device among net namespaces; default=1 (shared)", "bool", "Y"),
            ("force_mr", "Force usage of MRs for RDMA READ/WRITE operations", "bool", "N"),
        ],
    },
    "mlx5_ib": {"depends": ["mlx5_core", "ib_core", "ib_uverbs"], "params": []},
    "ib_uverbs": {"depends": ["ib_core"], "params": []},
    "rdma_cm": {"depends": ["ib_core"], "params": []},
    "rdma_ucm": {"depends": ["rdma_cm", "ib_uverbs", "ib_core"], "params": []},
    "ib_umad": {"depends": ["ib_core"], "params": []},
    "tcp_bbr": {"depends": [], "params": []},
    # the container runtime's modules (container_runtime role)
    "overlay": {
        "depends": [],
        "params": [
            ("check_copy_up", "Obsolete; does nothing", "", ""),
            ("redirect_max", "Maximum length of absolute redirect xattr value", "ushort", "256"),
            ("redirect_dir", "Default to on or off for the redirect_dir feature", "bool", "N"),
            ("redirect_always_follow", "Follow redirects even if redirect_dir feature is turned off", "bool", "Y"),
            ("index", "Default to on or off for the inodes index feature", "bool", "N"),
            ("nfs_export", "Default to on or off for the NFS export feature", "bool", "N"),
            ("xino_auto", "Auto enable xino feature", "bool", "N"),
            ("metacopy", "Default to on or off for the metadata only copy up feature", "bool", "N"),
        ],
    },
    "llc": {"depends": [], "params": []},
    "stp": {"depends": ["llc"], "params": []},
    "bridge": {"depends": ["llc", "stp"], "params": []},
    "br_netfilter": {"depends": ["bridge"], "params": []},
}
# loaded by the hardware (PCI/auxiliary device probe) at every boot, before modules-load.d
BOOT_MODULES = ("mlx5_core", "ib_core", "mlx5_ib", "ib_uverbs")


# ----------------------------------------------------------------------------- state helpers
def _load(path, default):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return default


def _save(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)


def profile():
    prof = _load(os.path.join(ETC, "profile.json"), None)
    if prof is None:
        sys.stderr.write("hwsim: no profile at %s/profile.json (run 'hwsim init')\n" % ETC)
        sys.exit(2)
    return prof


def node():
    return _load(os.path.join(VARLIB, "node.json"), {"faults": [], "seed": "lab"})


def faults(kind=None):
    found = node()["faults"]
    return [f for f in found if kind is None or f["kind"] == kind]


def nic_faulted(kind, nic):
    """True when a fault of this kind is injected on this NIC (by its CA name)."""
    return nic["ca"] in {f["ca"] for f in faults(kind)}


def _uuid(seed, *parts):
    h = hashlib.sha256(("%s/%s" % (seed, "/".join(str(p) for p in parts))).encode()).hexdigest()
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])


def _guid(seed, *parts):
    h = hashlib.sha256(("guid/%s/%s" % (seed, "/".join(str(p) for p in parts))).encode()).hexdigest()
    return "a088c203" + h[:8]


def gpu_state():
    prof = profile()
    g = prof["gpu"]
    default = {
        str(i): {
            "persistence": False,
            "app_graphics": g["clocks"]["default_app_graphics"],
            "app_mem": g["clocks"]["default_app_mem"],
            "locked": None,
            "power_limit": g["power"]["default"],
        }
        for i in range(g["count"])
    }
    state = _load(os.path.join(RUN, "gpu.json"), {})
    for key, value in default.items():
        state.setdefault(key, value)
    return state


def nic_state():
    prof = profile()
    default_map = {str(d): d // 8 for d in range(64)}
    default = {
        nic["ca"]: {
            "trust": "pcp",
            "pfc": [0] * 8,
            "cable_len": 7,
            "dscp2prio": default_map,
            "buffer_size": [262016, 0, 0, 0, 0, 0, 0, 0],
            "prio2buffer": [0] * 8,
        }
        for nic in prof["nics"]
    }
    state = _load(os.path.join(RUN, "nic.json"), {})
    for key, value in default.items():
        state.setdefault(key, value)
    return state


def present_gpus():
    prof = profile()
    missing = {int(f["gpu"]) for f in faults("gpu_missing")}
    return [i for i in range(prof["gpu"]["count"]) if i not in missing]


def loaded_driver():
    return _load(os.path.join(RUN, "driver.json"), {}).get("version")


def installed(path):
    try:
        with open(path) as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def fabric_state():
    """(state, status) as nvidia-smi -q prints them for an NVSwitch system."""
    prof = profile()
    if not prof.get("nvswitch", {}).get("count"):
        return "N/A", "N/A"
    if faults("fabric_in_progress"):
        return "In Progress", "N/A"
    fm = _load(os.path.join(RUN, "fabricmanager.json"), {})
    if fm.get("running") and fm.get("version") == loaded_driver():
        return "Completed", "Success"
    return "Not Started", "N/A"


# ----------------------------------------------------------------------------- sysfs tree
def _write(path, value):
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
        _write(os.path.join(dev, "vendor"), g["pci_vendor"])
        _write(os.path.join(dev, "device"), g["pci_device"])
        _write(os.path.join(dev, "subsystem_device"), g["subsystem"])
        _write(os.path.join(dev, "class"), "0x030200")
        _write(os.path.join(dev, "numa_node"), g["numa"][i])
    for bus in prof.get("nvswitch", {}).get("bus_ids", []):
        dev = os.path.join(pci, "0000:%s:00.0" % bus)
        _write(os.path.join(dev, "vendor"), prof["nvswitch"]["pci_vendor"])
        _write(os.path.join(dev, "device"), prof["nvswitch"]["pci_device"])
        _write(os.path.join(dev, "class"), "0x068000")
        _write(os.path.join(dev, "numa_node"), 0)
    for nic in prof["nics"]:
        dev = os.path.join(pci, "0000:%s:00.0" % nic["bus_id"])
        _write(os.path.join(dev, "vendor"), nic["pci_vendor"])
        _write(os.path.join(dev, "device"), nic["pci_device"])
        _write(os.path.join(dev, "class"), "0x020000")
        _write(os.path.join(dev, "numa_node"), nic["numa"])
        ib = os.path.join(SYSFS, "class/infiniband", nic["ca"])
        port = os.path.join(ib, "ports/1")
        is_down = nic_faulted("rdma_port_down", nic)
        _write(os.path.join(ib, "fw_ver"), nic["firmware"])
        _write(os.path.join(ib, "node_type"), "1: CA")
        _write(os.path.join(ib, "device/net", nic["netdev"], "ifindex"), 10 + prof["nics"].index(nic))
        _write(os.path.join(port, "state"), "1: DOWN" if is_down else "4: ACTIVE")
        _write(os.path.join(port, "phys_state"), "3: Disabled" if is_down else "5: LinkUp")
        _write(os.path.join(port, "rate"), "40 Gb/sec (4X QDR)" if is_down else "%d Gb/sec (4X)" % nic["rate"])
        _write(os.path.join(port, "link_layer"), nic["link_layer"])
        for counter in ("symbol_error", "link_downed", "port_rcv_errors", "port_xmit_discards", "link_error_recovery"):
            _write(os.path.join(port, "counters", counter), 0)
        for counter in ("out_of_buffer", "local_ack_timeout_err", "np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets"):
            _write(os.path.join(port, "hw_counters", counter), 0)
        _write(os.path.join(ib, "tc/1/traffic_class"), "")
        net = os.path.join(SYSFS, "class/net", nic["netdev"])
        _write(os.path.join(net, "mtu"), 9000 if nic["role"] == "rdma" else 1500)  # as the OS network config sets it
        _write(os.path.join(net, "operstate"), "down" if is_down else "up")
        _write(os.path.join(net, "speed"), -1 if is_down else nic["rate"] * 1000)
        _write(os.path.join(net, "address"), _mac(seed, nic["ca"]))
        _write(os.path.join(net, "device/vendor"), nic["pci_vendor"])
        _write(os.path.join(net, "device/device"), nic["pci_device"])
        for point in ("roce_np", "roce_rp"):
            for prio in range(8):
                _write(os.path.join(net, "ecn", point, "enable", str(prio)), 0)
        _write(os.path.join(net, "ecn", "roce_np", "cnp_dscp"), 48)
        _write(os.path.join(net, "ecn", "roce_np", "cnp_802p_prio"), 6)
    _write(os.path.join(SYSFS, ".hwsim"), "simulated sysfs tree, profile %s" % prof["name"])


def _mac(seed, name):
    h = hashlib.sha256(("mac/%s/%s" % (seed, name)).encode()).hexdigest()
    return "a0:88:c2:%s:%s:%s" % (h[0:2], h[2:4], h[4:6])


def sysfs_read(rel, default=""):
    try:
        with open(os.path.join(SYSFS, rel)) as fh:
            return fh.read().strip()
    except OSError:
        return default


# ----------------------------------------------------------------------------- nvidia-smi
NVML_FAIL = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


def _bus(prof, i):
    return "00000000:%s:00.0" % prof["gpu"]["bus_ids"][i].upper()


def _gpu_uuid(i):
    return "GPU-" + _uuid(node()["seed"], "gpu", i)


def _select(args):
    """-i/--id selects GPUs by index, bus id or UUID; returns indices present."""
    prof = profile()
    ids = present_gpus()
    sel = None
    for flag in ("-i", "--id"):
        if flag in args:
            sel = args[args.index(flag) + 1]
    for a in args:
        if a.startswith("--id="):
            sel = a.split("=", 1)[1]
    if sel is None:
        return ids
    chosen = []
    for token in sel.split(","):
        token = token.strip()
        for i in ids:
            if token in (str(i), _bus(prof, i), _gpu_uuid(i)):
                chosen.append(i)
    if not chosen:
        sys.stderr.write("No devices were found\n")
        sys.exit(6)
    return chosen


def _kv(indent, key, value, width=42):
    pad = width - indent
    return "%s%-*s: %s" % (" " * indent, pad, key, value)


def _gpu_clocks(i, state):
    prof = profile()
    c = prof["gpu"]["clocks"]
    s = state[str(i)]
    if s["locked"]:
        gr = s["locked"][1]
    else:
        gr = c["idle_graphics"]
    return {"graphics": gr, "sm": gr, "mem": s["app_mem"], "video": c["max_video"] // 2}


QUERY_SECTIONS = ("PCI", "CLOCK", "SUPPORTED_CLOCKS", "POWER", "PERFORMANCE", "MEMORY")


def query_text(indices, sections=None):
    prof = profile()
    g = prof["gpu"]
    state = gpu_state()
    fstate, fstatus = fabric_state()
    out = [
        "",
        "==============NVSMI LOG==============",
        "",
        "%-42s: %s" % ("Timestamp", time.strftime("%a %b %d %H:%M:%S %Y")),
        "%-42s: %s" % ("Driver Version", loaded_driver()),
        "%-42s: %s" % ("CUDA Version", "12.4"),
        "",
        "%-42s: %d" % ("Attached GPUs", len(present_gpus())),
    ]
    want = lambda name: sections is None or name in sections
    for i in indices:
        s = state[str(i)]
        clk = _gpu_clocks(i, state)
        out.append("GPU %s" % _bus(prof, i))
        if sections is None:
            out += [
                _kv(4, "Product Name", g["name"]),
                _kv(4, "Product Brand", "NVIDIA"),
                _kv(4, "Product Architecture", g["architecture"]),
                _kv(4, "Persistence Mode", "Enabled" if s["persistence"] else "Disabled"),
                _kv(4, "GPU UUID", _gpu_uuid(i)),
                _kv(4, "Minor Number", i),
                _kv(4, "VBIOS Version", g["vbios"]),
                _kv(4, "Module ID", i + 1),
            ]
        if want("PCI"):
            out += [
                "    PCI",
                _kv(8, "Bus", "0x%s" % g["bus_ids"][i].upper()),
                _kv(8, "Device", "0x00"),
                _kv(8, "Domain", "0x0000"),
                _kv(8, "Device Id", "0x%s10DE" % g["pci_device"][2:].upper()),
                _kv(8, "Bus Id", _bus(prof, i)),
            ]
        if want("MEMORY"):
            out += [
                "    FB Memory Usage",
                _kv(8, "Total", "%d MiB" % g["memory_mib"]),
                _kv(8, "Reserved", "551 MiB"),
                _kv(8, "Used", "0 MiB"),
                _kv(8, "Free", "%d MiB" % (g["memory_mib"] - 551)),
            ]
        if want("POWER"):
            out += [
                "    GPU Power Readings",
                _kv(8, "Power Draw", "%.2f W" % g["power"]["idle_draw"]),
                _kv(8, "Current Power Limit", "%.2f W" % s["power_limit"]),
                _kv(8, "Requested Power Limit", "%.2f W" % s["power_limit"]),
                _kv(8, "Default Power Limit", "%.2f W" % g["power"]["default"]),
                _kv(8, "Min Power Limit", "%.2f W" % g["power"]["min"]),
                _kv(8, "Max Power Limit", "%.2f W" % g["power"]["max"]),
            ]
        if want("CLOCK"):
            out += [
                "    Clocks",
                _kv(8, "Graphics", "%d MHz" % clk["graphics"]),
                _kv(8, "SM", "%d MHz" % clk["sm"]),
                _kv(8, "Memory", "%d MHz" % clk["mem"]),
                _kv(8, "Video", "%d MHz" % clk["video"]),
                "    Applications Clocks",
                _kv(8, "Graphics", "%d MHz" % s["app_graphics"]),
                _kv(8, "Memory", "%d MHz" % s["app_mem"]),
                "    Default Applications Clocks",
                _kv(8, "Graphics", "%d MHz" % g["clocks"]["default_app_graphics"]),
                _kv(8, "Memory", "%d MHz" % g["clocks"]["default_app_mem"]),
                "    Max Clocks",
                _kv(8, "Graphics", "%d MHz" % g["clocks"]["max_graphics"]),
                _kv(8, "SM", "%d MHz" % g["clocks"]["max_sm"]),
                _kv(8, "Memory", "%d MHz" % g["clocks"]["max_mem"]),
                _kv(8, "Video", "%d MHz" % g["clocks"]["max_video"]),
            ]
        if sections is not None and "SUPPORTED_CLOCKS" in sections:  # a full -q does not print them
            out.append("    Supported Clocks")
            for mem, graphics in g["supported_clocks"].items():
                out.append(_kv(8, "Memory", "%s MHz" % mem))
                out += [_kv(12, "Graphics", "%d MHz" % gr) for gr in graphics]
        if sections is None:
            out += [
                "    Fabric",
                _kv(8, "State", fstate),
                _kv(8, "Status", fstatus),
                _kv(8, "CliqueId", "0" if fstate == "Completed" else "N/A"),
                _kv(8, "ClusterUUID", "00000000-0000-0000-0000-000000000000" if fstate == "Completed" else "N/A"),
                "        Health",
                _kv(12, "Bandwidth", "N/A"),
                _kv(4, "Processes", "None"),
            ]
        out.append("")
    return "\n".join(out) + "\n"


def _x(tag, value, indent):
    return "%s<%s>%s</%s>" % (" " * indent, tag, value, tag)


def query_xml(indices):
    prof = profile()
    g = prof["gpu"]
    state = gpu_state()
    fstate, fstatus = fabric_state()
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
        "<nvidia_smi_log>",
        _x("timestamp", time.strftime("%a %b %d %H:%M:%S %Y"), 4),
        _x("driver_version", loaded_driver(), 4),
        _x("cuda_version", "12.4", 4),
        _x("attached_gpus", len(present_gpus()), 4),
    ]
    for i in indices:
        s = state[str(i)]
        clk = _gpu_clocks(i, state)
        out += [
            '    <gpu id="%s">' % _bus(prof, i),
            _x("product_name", g["name"], 8),
            _x("product_brand", "NVIDIA", 8),
            _x("product_architecture", g["architecture"], 8),
            _x("persistence_mode", "Enabled" if s["persistence"] else "Disabled", 8),
            _x("uuid", _gpu_uuid(i), 8),
            _x("minor_number", i, 8),
            _x("vbios_version", g["vbios"], 8),
            "        <pci>",
            _x("pci_bus", g["bus_ids"][i].upper(), 12),
            _x("pci_device_id", "%s10DE" % g["pci_device"][2:].upper(), 12),
            _x("pci_bus_id", _bus(prof, i), 12),
            "        </pci>",
            "        <fb_memory_usage>",
            _x("total", "%d MiB" % g["memory_mib"], 12),
            _x("reserved", "551 MiB", 12),
            _x("used", "0 MiB", 12),
            _x("free", "%d MiB" % (g["memory_mib"] - 551), 12),
            "        </fb_memory_usage>",
            "        <gpu_power_readings>",
            _x("power_state", "P0", 12),
            _x("power_draw", "%.2f W" % g["power"]["idle_draw"], 12),
            _x("current_power_limit", "%.2f W" % s["power_limit"], 12),
            _x("requested_power_limit", "%.2f W" % s["power_limit"], 12),
            _x("default_power_limit", "%.2f W" % g["power"]["default"], 12),
            _x("min_power_limit", "%.2f W" % g["power"]["min"], 12),
            _x("max_power_limit", "%.2f W" % g["power"]["max"], 12),
            "        </gpu_power_readings>",
            "        <clocks>",
            _x("graphics_clock", "%d MHz" % clk["graphics"], 12),
            _x("sm_clock", "%d MHz" % clk["sm"], 12),
            _x("mem_clock", "%d MHz" % clk["mem"], 12),
            _x("video_clock", "%d MHz" % clk["video"], 12),
            "        </clocks>",
            "        <applications_clocks>",
            _x("graphics_clock", "%d MHz" % s["app_graphics"], 12),
            _x("mem_clock", "%d MHz" % s["app_mem"], 12),
            "        </applications_clocks>",
            "        <default_applications_clocks>",
            _x("graphics_clock", "%d MHz" % g["clocks"]["default_app_graphics"], 12),
            _x("mem_clock", "%d MHz" % g["clocks"]["default_app_mem"], 12),
            "        </default_applications_clocks>",
            "        <max_clocks>",
            _x("graphics_clock", "%d MHz" % g["clocks"]["max_graphics"], 12),
            _x("sm_clock", "%d MHz" % g["clocks"]["max_sm"], 12),
            _x("mem_clock", "%d MHz" % g["clocks"]["max_mem"], 12),
            _x("video_clock", "%d MHz" % g["clocks"]["max_video"], 12),
            "        </max_clocks>",
            "        <fabric>",
            _x("state", fstate, 12),
            _x("status", fstatus, 12),
            "        </fabric>",
            "        <supported_clocks>",
        ]
        for mem, graphics in g["supported_clocks"].items():
            out.append("            <supported_mem_clock>")
            out.append(_x("value", "%s MHz" % mem, 16))
            out += [_x("supported_graphics_clock", "%d MHz" % gr, 16) for gr in graphics]
            out.append("            </supported_mem_clock>")
        out += ["        </supported_clocks>", "    </gpu>"]
    out.append("</nvidia_smi_log>")
    return "\n".join(out) + "\n"


def _query_field(i, field, state, units):
    prof = profile()
    g = prof["gpu"]
    s = state[str(i)]
    clk = _gpu_clocks(i, state)
    mhz = lambda v: "%d MHz" % v if units else "%d" % v
    watt = lambda v: "%.2f W" % v if units else "%.2f" % v
    mib = lambda v: "%d MiB" % v if units else "%d" % v
    table = {
        "index": lambda: str(i),
        "name": lambda: g["name"],
        "uuid": lambda: _gpu_uuid(i),
        "pci.bus_id": lambda: _bus(prof, i),
        "driver_version": lambda: loaded_driver(),
        "vbios_version": lambda: g["vbios"],
        "persistence_mode": lambda: "Enabled" if s["persistence"] else "Disabled",
        "memory.total": lambda: mib(g["memory_mib"]),
        "clocks.gr": lambda: mhz(clk["graphics"]),
        "clocks.current.graphics": lambda: mhz(clk["graphics"]),
        "clocks.mem": lambda: mhz(clk["mem"]),
        "clocks.current.memory": lambda: mhz(clk["mem"]),
        "clocks.applications.graphics": lambda: mhz(s["app_graphics"]),
        "clocks.applications.memory": lambda: mhz(s["app_mem"]),
        "clocks.default_applications.graphics": lambda: mhz(g["clocks"]["default_app_graphics"]),
        "clocks.default_applications.memory": lambda: mhz(g["clocks"]["default_app_mem"]),
        "clocks.max.graphics": lambda: mhz(g["clocks"]["max_graphics"]),
        "clocks.max.memory": lambda: mhz(g["clocks"]["max_mem"]),
        "power.draw": lambda: watt(g["power"]["idle_draw"]),
        "power.limit": lambda: watt(s["power_limit"]),
        "enforced.power.limit": lambda: watt(s["power_limit"]),
        "power.default_limit": lambda: watt(g["power"]["default"]),
        "power.min_limit": lambda: watt(g["power"]["min"]),
        "power.max_limit": lambda: watt(g["power"]["max"]),
        "temperature.gpu": lambda: "31",
        "utilization.gpu": lambda: "0 %" if units else "0",
    }
    if field not in table:
        sys.stderr.write('Field "%s" is not a valid field to query.\n\n' % field)
        sys.exit(2)
    return table[field]()


UNITS = {
    "memory.total": "MiB",
    "power.draw": "W",
    "power.limit": "W",
    "enforced.power.limit": "W",
    "power.default_limit": "W",
    "power.min_limit": "W",
    "power.max_limit": "W",
    "utilization.gpu": "%",
}


def query_gpu_csv(indices, fields, fmt):
    state = gpu_state()
    opts = fmt.split(",")
    units = "nounits" not in opts
    lines = []
    if "noheader" not in opts:
        head = []
        for f in fields:
            unit = UNITS.get(f) or ("MHz" if f.startswith("clocks.") else None)
            head.append("%s [%s]" % (f, unit) if unit and units else f)
        lines.append(", ".join(head))
    for i in indices:
        lines.append(", ".join(_query_field(i, f, state, units) for f in fields))
    return "\n".join(lines) + "\n"


def nvlink_status(indices):
    prof = profile()
    g = prof["gpu"]
    inactive = {}
    for f in faults("nvlink_inactive"):
        inactive.setdefault(int(f["gpu"]), set()).update(int(x) for x in str(f["links"]).split(","))
    all_down = {int(f["gpu"]) for f in faults("gpu_links_all_inactive")}
    out = []
    for i in indices:
        out.append("GPU %d: %s (UUID: %s)" % (i, g["name"], _gpu_uuid(i)))
        if not g["nvlink"]["links"] or i in all_down:
            out.append("NVML: Unable to retrieve NVLink information as all links are inActive")
            continue
        for link in range(g["nvlink"]["links"]):
            speed = "<inactive>" if link in inactive.get(i, ()) else "%s GB/s" % g["nvlink"]["speed_gbps"]
            out.append("         Link %d: %s" % (link, speed))
    return "\n".join(out) + "\n"


def nvlink_errors(indices):
    prof = profile()
    g = prof["gpu"]
    extra = {}
    for f in faults("nvlink_errors"):
        extra[(int(f["gpu"]), int(f["link"]))] = int(f.get("count", 1))
    out = []
    for i in indices:
        out.append("GPU %d: %s (UUID: %s)" % (i, g["name"], _gpu_uuid(i)))
        for link in range(g["nvlink"]["links"]):
            n = extra.get((i, link), 0)
            out += [
                "         Link %d: Replay Errors: %d" % (link, n),
                "         Link %d: Recovery Errors: %d" % (link, 0),
                "         Link %d: CRC Errors: %d" % (link, n),
                "",
            ]
    return "\n".join(out).rstrip("\n") + "\n"


def topo_m():
    prof = profile()
    g = prof["gpu"]
    ids = present_gpus()
    down = {int(f["gpu"]) for f in faults("gpu_links_all_inactive")}
    names = ["GPU%d" % i for i in ids]
    head = "\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    rows = [head]
    for i in ids:
        cells = []
        for j in ids:
            if i == j:
                cells.append(" X ")
            elif g["nvlink"]["links"] and i not in down and j not in down:
                cells.append("NV%d" % g["nvlink"]["links"])
            else:
                cells.append("NODE" if g["numa"][i] == g["numa"][j] else "SYS")
        rows.append("GPU%d\t" % i + "\t".join(cells) + "\t%s\t%d\t\tN/A" % (g["cpu_affinity"][i], g["numa"][i]))
    legend = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""
    return "\n".join(rows) + "\n" + legend


def nvidia_smi(args):
    version = installed(DRIVER_FILE)
    loaded = loaded_driver()
    if not version or not loaded:
        sys.stdout.write(NVML_FAIL)
        return 9
    if version != loaded:
        sys.stdout.write("Failed to initialize NVML: Driver/library version mismatch\nNVML library version: %s\n" % version)
        return 18
    prof = profile()
    if args[:1] == ["nvlink"]:
        idx = _select(args)
        if "-s" in args or "--status" in args:
            sys.stdout.write(nvlink_status(idx))
            return 0
        if "-e" in args or "--error-counters" in args:
            sys.stdout.write(nvlink_errors(idx))
            return 0
        sys.stderr.write("hwsim nvidia-smi: nvlink supports -s and -e only\n")
        return 2
    if args[:1] == ["topo"]:
        sys.stdout.write(topo_m())
        return 0
    if "-L" in args or "--list-gpus" in args:
        for i in present_gpus():
            sys.stdout.write("GPU %d: %s (UUID: %s)\n" % (i, prof["gpu"]["name"], _gpu_uuid(i)))
        return 0
    idx = _select(args)
    query = [a for a in args if a.startswith("--query-gpu=")]
    if query:
        fmt = next((a.split("=", 1)[1] for a in args if a.startswith("--format=")), "csv")
        sys.stdout.write(query_gpu_csv(idx, query[0].split("=", 1)[1].split(","), fmt))
        return 0
    if "-q" in args or "--query" in args:
        if "-x" in args or "--xml-format" in args:
            sys.stdout.write(query_xml(idx))
            return 0
        sections = None
        if "-d" in args:
            sections = set(args[args.index("-d") + 1].upper().split(","))
            if "CLOCK" in sections:
                sections.add("CLOCK")
        sys.stdout.write(query_text(idx, sections))
        return 0
    return _nvidia_smi_set(args, idx, prof)


def _nvidia_smi_set(args, idx, prof):
    state = gpu_state()
    g = prof["gpu"]
    if os.geteuid() != 0 and not os.environ.get("HWSIM_ALLOW_NONROOT"):
        sys.stdout.write("Insufficient Permissions\n")
        return 4

    def arg(*names):
        for n in names:
            if n in args:
                return args[args.index(n) + 1]
            for a in args:
                if a.startswith(n + "="):
                    return a.split("=", 1)[1]
        return None

    pm = arg("-pm", "--persistence-mode")
    ac = arg("-ac", "--applications-clocks")
    pl = arg("-pl", "--power-limit")
    lgc = arg("-lgc", "--lock-gpu-clocks")
    out = []
    rc = 0
    for i in idx:
        s = state[str(i)]
        bus = _bus(prof, i)
        if pm is not None:
            s["persistence"] = pm in ("1", "ENABLED")
            out.append("%s persistence mode for GPU %s." % ("Enabled" if s["persistence"] else "Disabled", bus))
        if ac is not None:
            mem, gr = (int(v) for v in ac.split(","))
            if gr in g["supported_clocks"].get(str(mem), []):
                s["app_mem"], s["app_graphics"] = mem, gr
                out.append('Applications clocks set to "(MEM %d, SM %d)" for GPU %s' % (mem, gr, bus))
            else:
                out.append(
                    'Specified clock combination "(MEM %d, SM %d)" is not supported for GPU %s. '
                    "Run 'nvidia-smi -q -d SUPPORTED_CLOCKS' to see list of supported clock combinations" % (mem, gr, bus)
                )
                out.append("Treating as warning and moving on.")
        if "-rac" in args or "--reset-applications-clocks" in args:
            s["app_mem"], s["app_graphics"] = g["clocks"]["default_app_mem"], g["clocks"]["default_app_graphics"]
            out.append("Applications clocks reset to default for GPU %s." % bus)
        if lgc is not None:
            lo, hi = (int(v) for v in lgc.split(","))
            if lo > hi or hi > g["clocks"]["max_graphics"]:
                out.append("Invalid clock values %d,%d for GPU %s." % (lo, hi, bus))
                rc = 3
            else:
                s["locked"] = [lo, hi]
                out.append('GPU clocks set to "(gpuClkMin %d, gpuClkMax %d)" for GPU %s' % (lo, hi, bus))
        if "-rgc" in args or "--reset-gpu-clocks" in args:
            s["locked"] = None
            out.append("GPU clocks reset for GPU %s." % bus)
        if pl is not None:
            watts = float(pl)
            if not g["power"]["min"] <= watts <= g["power"]["max"]:
                out.append(
                    "Provided power limit %.2f W is not a valid power limit which should be between %.2f W and %.2f W for GPU %s"
                    % (watts, g["power"]["min"], g["power"]["max"], bus)
                )
                rc = 2
            else:
                old = s["power_limit"]
                s["power_limit"] = watts
                out.append("Power limit for GPU %s was set to %.2f W from %.2f W." % (bus, watts, old))
    if rc:
        out.append("Terminating early due to previous errors.")
    else:
        _save(os.path.join(RUN, "gpu.json"), state)
        out.append("All done.")
    sys.stdout.write("\n".join(out) + "\n")
    return rc


# ----------------------------------------------------------------------------- NIC tools
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
        guid = _guid(seed, nic["ca"])
        port_guid = "0x0000000000000000" if v["state"] == "Down" else "0x%s" % _guid(seed, nic["ca"], 1)
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
        g = _guid(seed, nic["ca"])
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


def _nic_by_netdev(name):
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
        g = _guid(seed, nic["ca"], 1)
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


def _pfc_effective(nic, st):
    if nic_faulted("pfc_off", nic):
        return [0] * 8
    return st["pfc"]


def mlnx_qos_print(nic, st):
    out = ["DCBX mode: OS controlled", "Priority trust state: %s" % st["trust"]]
    if st["trust"] == "dscp":
        out.append("dscp2prio mapping:")
        for prio in range(8):
            dscps = sorted((int(d) for d, p in st["dscp2prio"].items() if p == prio), reverse=True)
            out.append("        prio:%d dscp:%s" % (prio, "".join("%02d," % d for d in dscps)))
    out.append("Receive buffer size (bytes): %s" % ",".join(str(b) for b in st["buffer_size"]) + ",")
    out.append("Cable len: %d" % st["cable_len"])
    pfc = _pfc_effective(nic, st)
    out += [
        "PFC configuration:",
        "        priority    0   1   2   3   4   5   6   7",
        "        enabled     " + "   ".join(str(v) for v in pfc) + "   ",
        "        buffer      " + "   ".join(str(v) for v in st["prio2buffer"]) + "   ",
    ]
    tc_of = {0: 1, 1: 0}
    for tc in range(8):
        prios = [p for p in range(8) if tc_of.get(p, p) == tc]
        out.append("tc: %d ratelimit: unlimited, tsa: vendor" % tc)
        out.append("         priority:  " + " ".join(str(p) for p in prios))
    return "\n".join(out) + "\n"


def mlnx_qos(args):
    if "-i" not in args:
        sys.stderr.write("Usage: mlnx_qos -i <interface> [options]\n")
        return 2
    netdev = args[args.index("-i") + 1]
    nic = _nic_by_netdev(netdev)
    if nic is None:
        sys.stderr.write("Netlink error: No such device %s\n" % netdev)
        return 1
    state = nic_state()
    st = state[nic["ca"]]

    def opt(name):
        for i, a in enumerate(args):
            if a == name and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(name + "="):
                return a.split("=", 1)[1]
        return None

    changed = False
    trust = opt("--trust")
    if trust is not None:
        if trust not in ("pcp", "dscp"):
            sys.stderr.write("Invalid trust state %s\n" % trust)
            return 1
        st["trust"] = trust
        changed = True
    pfc = opt("--pfc") or opt("-f")
    if pfc is not None:
        vals = [int(v) for v in pfc.split(",")]
        if len(vals) != 8 or any(v not in (0, 1) for v in vals):
            sys.stderr.write("PFC must be 8 comma separated 0/1 values\n")
            return 1
        st["pfc"] = vals
        changed = True
    cable = opt("--cable_len")
    if cable is not None:
        st["cable_len"] = int(cable)
        changed = True
    bufsize = opt("--buffer_size")
    if bufsize is not None:
        vals = [int(v) for v in bufsize.split(",")]
        if len(vals) != 8 or sum(vals) > 262016:
            sys.stderr.write("Buffer sizes must be 8 values summing to at most 262016 bytes\n")
            return 1
        st["buffer_size"] = vals
        changed = True
    p2b = opt("--prio2buffer")
    if p2b is not None:
        st["prio2buffer"] = [int(v) for v in p2b.split(",")]
        changed = True
    dscp = opt("--dscp2prio")
    if dscp is not None:
        action, _, pair = dscp.partition(",")
        d, _, p = pair.partition(",")
        if action == "set":
            st["dscp2prio"][str(int(d))] = int(p)
            changed = True
    if changed:
        _save(os.path.join(RUN, "nic.json"), state)
    sys.stdout.write(mlnx_qos_print(nic, st))
    return 0


def ethtool(args):
    if len(args) != 2 or args[0] not in ("-S", "--statistics"):
        sys.stderr.write("hwsim ethtool: only 'ethtool -S <if>' is simulated\n")
        return 2
    nic = _nic_by_netdev(args[1])
    if nic is None:
        sys.stderr.write("Cannot get stats strings information: No such device\n")
        return 1
    st = nic_state()[nic["ca"]]
    pfc = _pfc_effective(nic, st)
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


# ----------------------------------------------------------------------------- kernel modules
def loaded_modules():
    return _load(os.path.join(RUN, "modules.json"), [])


def _module_options(name):
    """{param: value} from `options NAME k=v ...` lines in /etc/modprobe.d/*.conf."""
    opts = {}
    conf_dir = os.environ.get("HWSIM_MODPROBE_D", "/etc/modprobe.d")
    if not os.path.isdir(conf_dir):
        return opts
    for fname in sorted(os.listdir(conf_dir)):
        if not fname.endswith(".conf"):
            continue
        with open(os.path.join(conf_dir, fname)) as fh:
            for line in fh:
                words = line.split("#", 1)[0].split()
                if len(words) >= 3 and words[0] == "options" and words[1] == name:
                    opts.update(w.split("=", 1) for w in words[2:] if "=" in w)
    return opts


def load_module(name, cli_opts=None):
    """modprobe: load dependencies first; parameters from modprobe.d, then the command line.
    An unknown parameter is ignored with a warning, as the real kernel does."""
    mods = loaded_modules()
    if name in mods:
        return 0
    for dep in KERNEL_MODULES[name]["depends"]:
        load_module(dep)
        mods = loaded_modules()
    opts = dict(_module_options(name), **(cli_opts or {}))
    known = {p[0]: p[3] for p in KERNEL_MODULES[name]["params"]}
    base = os.path.join(SYSFS, "module", name)
    os.makedirs(base, exist_ok=True)
    _write(os.path.join(base, "initstate"), "live")
    for param, default in known.items():
        _write(os.path.join(base, "parameters", param), opts.get(param, default))
    for param in sorted(set(opts) - set(known)):
        sys.stderr.write("%s: unknown parameter '%s' ignored\n" % (name, param))
    if name == "rdma_cm":
        # configfs rdma_cm: the real directory per device appears on mkdir; the simulator
        # shows it ready-made, with the kernel's defaults
        for nic in profile()["nics"]:
            port = os.path.join(SYSFS, "kernel/config/rdma_cm", nic["ca"], "ports/1")
            _write(os.path.join(port, "default_roce_mode"), "RoCE v2")
            _write(os.path.join(port, "default_roce_tos"), 0)
    mods.append(name)
    _save(os.path.join(RUN, "modules.json"), mods)
    return 0


def modprobe(args):
    flags = [a for a in args if a.startswith("-")]
    words = [a for a in args if not a.startswith("-")]
    if not words:
        sys.stderr.write("modprobe: ERROR: missing parameters. See -h.\n")
        return 1
    if "-r" in flags or "--remove" in flags:
        mods = loaded_modules()
        for name in words:
            if name in mods:
                mods.remove(name)
                shutil.rmtree(os.path.join(SYSFS, "module", name), ignore_errors=True)
        _save(os.path.join(RUN, "modules.json"), mods)
        return 0
    name = words[0].replace("-", "_")
    if name not in KERNEL_MODULES:
        sys.stderr.write("modprobe: FATAL: Module %s not found in directory /lib/modules/%s\n" % (words[0], KERNEL_VERSION))
        return 1
    if "-n" in flags or "--dry-run" in flags:
        return 0
    return load_module(name, dict(w.split("=", 1) for w in words[1:] if "=" in w))


def modinfo(args):
    field = None
    if "-F" in args or "--field" in args:  # modinfo -F FIELD: that field's value only
        i = args.index("-F") if "-F" in args else args.index("--field")
        field, args = args[i + 1], args[:i] + args[i + 2 :]
    words = [a for a in args if not a.startswith("-")]
    if not words:
        sys.stderr.write("modinfo: ERROR: missing module or filename.\n")
        return 1
    rc = 0
    for word in words:
        name = word.replace("-", "_")
        mod = KERNEL_MODULES.get(name)
        if mod is None:
            sys.stderr.write("modinfo: ERROR: Module %s not found.\n" % word)
            rc = 1
            continue
        params = [("%s:%s (%s)" % (p, desc, kind)) if kind else "%s:%s" % (p, desc) for p, desc, kind, _ in mod["params"]]
        if field is not None:
            values = {
                "name": [name],
                "filename": ["/lib/modules/%s/kernel/simulated/%s.ko" % (KERNEL_VERSION, name)],
                "depends": [",".join(mod["depends"])],
                "parm": params,
            }.get(field, [])
            sys.stdout.write("".join(v + "\n" for v in values))
            continue
        if "-p" in args or "--parameters" in args:
            sys.stdout.write("".join(line + "\n" for line in params))
            continue
        sys.stdout.write("filename:       /lib/modules/%s/kernel/simulated/%s.ko\n" % (KERNEL_VERSION, name))
        sys.stdout.write("depends:        %s\n" % ",".join(mod["depends"]))
        sys.stdout.write("vermagic:       %s SMP preempt mod_unload modversions\n" % KERNEL_VERSION)
        for line in params:
            sys.stdout.write("parm:           %s\n" % line)
    return rc


def lsmod(_args):
    rows = ["Module                  Size  Used by"]
    mods = loaded_modules()
    for name in sorted(mods):
        users = [m for m in mods if name in KERNEL_MODULES[m]["depends"]]
        rows.append("%-19s %9d  %d %s" % (name, 16384, len(users), ",".join(users)))
    sys.stdout.write("\n".join(rows) + "\n")
    return 0


def boot_modules():
    """What a boot loads: the hardware's drivers, then /etc/modules-load.d (systemd-modules-load)."""
    for name in BOOT_MODULES:
        load_module(name)
    conf_dir = os.environ.get("HWSIM_MODULES_LOAD_D", "/etc/modules-load.d")
    if os.path.isdir(conf_dir):
        for fname in sorted(os.listdir(conf_dir)):
            if fname.endswith(".conf"):
                with open(os.path.join(conf_dir, fname)) as fh:
                    for line in fh:
                        name = line.split("#", 1)[0].strip().replace("-", "_")
                        if name in KERNEL_MODULES:
                            load_module(name)


# ----------------------------------------------------------------------------- admin
def admin(args):
    usage = (
        "usage: hwsim init PROFILE.json [--seed S] [--index N]\n"
        "       hwsim boot            (what a reboot does: reset volatile state, load driver)\n"
        "       hwsim fault add KIND key=value ... | fault clear | fault list\n"
        "       hwsim fabricmanager start|stop   (called by the simulated fabric manager unit)\n"
        "       hwsim state\n"
        "faults: " + ", ".join(sorted(FAULTS)) + "\n"
    )
    if not args:
        sys.stderr.write(usage)
        return 2
    cmd = args[0]
    if cmd == "init":
        with open(args[1]) as fh:
            prof = json.load(fh)
        _save(os.path.join(ETC, "profile.json"), prof)
        data = node()
        if "--seed" in args:
            data["seed"] = args[args.index("--seed") + 1]
        if "--index" in args:
            data["index"] = int(args[args.index("--index") + 1])
        _save(os.path.join(VARLIB, "node.json"), data)
        return admin(["boot"])
    if cmd == "boot":
        if os.path.isdir(RUN):
            shutil.rmtree(RUN)
        os.makedirs(RUN)
        version = installed(DRIVER_FILE)
        if version:
            _save(os.path.join(RUN, "driver.json"), {"version": version})
        render_sysfs()
        boot_modules()
        return 0
    if cmd == "load-driver":
        # the driver package's postinst: modprobe succeeds when no other version is loaded
        version = installed(DRIVER_FILE)
        if version and not loaded_driver():
            _save(os.path.join(RUN, "driver.json"), {"version": version})
        return 0
    if cmd == "fabricmanager":
        fm_version = installed(FM_FILE)
        if args[1] == "start":
            if not fm_version:
                sys.stderr.write("nv-fabricmanager: not installed\n")
                return 1
            if fm_version != loaded_driver():
                sys.stderr.write(
                    "fabric manager version %s does not match the loaded driver %s; "
                    "fabric manager and driver versions must be identical\n" % (fm_version, loaded_driver())
                )
                return 1
            _save(os.path.join(RUN, "fabricmanager.json"), {"running": True, "version": fm_version})
        else:
            _save(os.path.join(RUN, "fabricmanager.json"), {"running": False})
        return 0
    if cmd == "fault":
        data = node()
        if args[1:2] == ["add"]:
            kind = args[2]
            if kind not in FAULTS:
                sys.stderr.write("unknown fault %r; known: %s\n" % (kind, ", ".join(sorted(FAULTS))))
                return 2
            fault = {"kind": kind}
            for kv in args[3:]:
                key, _, value = kv.partition("=")
                fault[key] = value
            data["faults"].append(fault)
        elif args[1:2] == ["clear"]:
            data["faults"] = []
        elif args[1:2] == ["list"]:
            sys.stdout.write(json.dumps(data["faults"]) + "\n")
            return 0
        _save(os.path.join(VARLIB, "node.json"), data)
        render_sysfs_keep_runtime()
        return 0
    if cmd == "state":
        sys.stdout.write(
            json.dumps(
                {"node": node(), "gpu": gpu_state(), "nic": nic_state(), "driver_loaded": loaded_driver(), "fabric": fabric_state()},
                indent=1,
            )
            + "\n"
        )
        return 0
    sys.stderr.write(usage)
    return 2


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
            _write(path, value.rstrip("\n"))


TOOLS = {
    "nvidia-smi": nvidia_smi,
    "ibstat": ibstat,
    "ibv_devinfo": ibv_devinfo,
    "rdma": rdma,
    "show_gids": show_gids,
    "mlnx_qos": mlnx_qos,
    "ethtool": ethtool,
    "modinfo": modinfo,
    "modprobe": modprobe,
    "lsmod": lsmod,
    "hwsim": admin,
}


def main(argv):
    name = os.path.basename(argv[0])
    if name.endswith(".py"):
        name = "hwsim"
    if name == "hwsim" and len(argv) > 1 and argv[1] in TOOLS:
        name, argv = argv[1], argv[1:]
    return TOOLS.get(name, admin)(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
