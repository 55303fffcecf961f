"""Simulated nvidia-smi (SIMULATION)."""

from __future__ import annotations

import os
import sys
import time

from hwsimlib.state import (
    DRIVER_FILE,
    RUN,
    fabric_state,
    faults,
    gpu_state,
    installed,
    loaded_driver,
    node,
    present_gpus,
    profile,
    save_json,
    uuid_for,
)

NVML_FAIL = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


def _bus(prof, i):
    return "00000000:%s:00.0" % prof["gpu"]["bus_ids"][i].upper()


def _gpu_uuid(i):
    return "GPU-" + uuid_for(node()["seed"], "gpu", i)


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
        save_json(os.path.join(RUN, "gpu.json"), state)
        out.append("All done.")
    sys.stdout.write("\n".join(out) + "\n")
    return rc
