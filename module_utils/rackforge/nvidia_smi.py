"""Pure parsers for nvidia-smi output (no I/O).

Public, stable API (other tooling calls these; names and return shapes do not change):

- parse_nvlink_status(text) -> list[dict]
- parse_fabric(text) -> list[dict]

Further helpers used by rackforge's modules: parse_nvlink_errors, parse_query_text,
parse_query_xml, parse_query_gpu_csv, parse_topo_m, parse_gpu_list.

Every parser accepts real nvidia-smi output and the lab simulator's output alike; both are
unit-tested in tests/unit against captures under tests/fixtures/realworld.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

GPU_HEADER_RE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)\s*$")
LINK_SPEED_RE = re.compile(r"^\s*Link (\d+): (?:([0-9.]+) GB/s|<inactive>)\s*$")
LINK_ERROR_RE = re.compile(r"^\s*Link (\d+): (Replay|Recovery|CRC) Errors: (\d+)\s*$")
ALL_INACTIVE_MARK = "all links are inActive"


class ParseError(ValueError):
    """Raised when text is not the nvidia-smi output the parser expects."""


def _gpu_header(line):
    m = GPU_HEADER_RE.match(line.strip())
    if not m:
        return None
    return {"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3)}


def parse_nvlink_status(text):
    """Parse `nvidia-smi nvlink -s` (or `--status`).

    One dict per GPU, in output order:
    {"index": int, "name": str, "uuid": str, "links": {int: float | None}, "all_inactive": bool}
    Link speed is GB/s; None means the link is printed as <inactive>. A GPU followed by the
    NVML line "Unable to retrieve NVLink information as all links are inActive" has
    links == {} and all_inactive True.
    """
    gpus = []
    current = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        header = _gpu_header(line)
        if header:
            current = dict(header, links={}, all_inactive=False)
            gpus.append(current)
            continue
        if current is None:
            raise ParseError("nvlink status: text before the first 'GPU n:' line: %r" % line)
        if ALL_INACTIVE_MARK in line:
            current["all_inactive"] = True
            continue
        m = LINK_SPEED_RE.match(line)
        if m:
            current["links"][int(m.group(1))] = float(m.group(2)) if m.group(2) else None
            continue
        raise ParseError("nvlink status: unexpected line %r" % line)
    for gpu in gpus:
        if gpu["links"] and all(v is None for v in gpu["links"].values()):
            gpu["all_inactive"] = True
    return gpus


def parse_nvlink_errors(text):
    """Parse `nvidia-smi nvlink -e`: per GPU {"index","name","uuid","links": {int: {"replay","recovery","crc"}}}.

    Blank separator lines and an elision marker such as "[...]" are tolerated.
    """
    gpus = []
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line in ("[...]", "```"):
            continue
        header = _gpu_header(line)
        if header:
            current = dict(header, links={})
            gpus.append(current)
            continue
        if current is None:
            raise ParseError("nvlink errors: text before the first 'GPU n:' line: %r" % line)
        if ALL_INACTIVE_MARK in line:
            continue
        m = LINK_ERROR_RE.match(line)
        if not m:
            raise ParseError("nvlink errors: unexpected line %r" % line)
        counters = current["links"].setdefault(int(m.group(1)), {})
        counters[m.group(2).lower()] = int(m.group(3))
    return gpus


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def parse_query_text(text):
    """Parse `nvidia-smi -q` text into {"header": {key: value}, "gpus": [section, ...]}.

    Each GPU section is a nested dict keyed by the printed labels; leaves are the printed
    strings ("Completed", "700.00 W"). The section's bus id is under "Bus Id Header".
    Works on a whole dump and on `-q -d ...` excerpts.
    """
    header = {}
    gpus = []
    stack = []  # (indent, dict)
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.startswith("====="):
            continue
        ind = _indent(line)
        body = line.strip()
        if ind == 0 and body.startswith("GPU "):
            section = {"Bus Id Header": body[4:].strip()}
            gpus.append(section)
            stack = [(0, section)]
            continue
        if ind == 0 and not gpus:
            key, _, value = body.partition(":")
            header[key.strip()] = value.strip()
            continue
        if not stack:
            continue
        while len(stack) > 1 and stack[-1][0] >= ind:
            stack.pop()
        parent = stack[-1][1]
        if ":" in body:
            key, _, value = body.partition(":")
            key = key.strip()
            value = value.strip()
            if key in parent and isinstance(parent[key], dict):
                continue
            parent[key] = value
        else:
            child = {}
            parent[body] = child
            stack.append((ind, child))
    return {"header": header, "gpus": gpus}


def parse_fabric(text):
    """Parse every `Fabric` section of `nvidia-smi -q` output, in order.

    {"state": str, "status": str, "clique_id": str, "cluster_uuid": str, "health_summary": str | None}
    Values are as printed ("Completed", "In Progress", "N/A", "Success"). Keys a driver does not
    print (535 has no CliqueId/ClusterUUID) read "N/A"; health_summary is None unless the driver
    prints Fabric/Health/Summary (570+).
    """
    result = []
    for gpu in parse_query_text(text)["gpus"]:
        fabric = gpu.get("Fabric")
        if not isinstance(fabric, dict):
            continue
        health = fabric.get("Health")
        summary = health.get("Summary") if isinstance(health, dict) else None
        result.append(
            {
                "state": fabric.get("State", "N/A"),
                "status": fabric.get("Status", "N/A"),
                "clique_id": fabric.get("CliqueId", "N/A"),
                "cluster_uuid": fabric.get("ClusterUUID", "N/A"),
                "health_summary": summary,
            }
        )
    return result


def _number(value, cast=float):
    """'700.00 W' -> 700.0, '1980 MHz' -> 1980, 'N/A' / None -> None."""
    if value is None:
        return None
    m = re.match(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)", value)
    if not m:
        return None
    return cast(float(m.group(1))) if cast is int else cast(m.group(1))


def _xml_text(node, path):
    found = node.find(path)
    if found is None or found.text is None:
        return None
    return found.text.strip()


def _clock_block(gpu, tag, keys=("graphics_clock", "sm_clock", "mem_clock")):
    block = gpu.find(tag)
    if block is None:
        return {}
    out = {}
    for key in keys:
        value = _number(_xml_text(block, key), int)
        if value is not None:
            out[key.replace("_clock", "")] = value
    return out


def parse_query_xml(text):
    """Parse `nvidia-smi -q -x` into plain facts.

    {"driver_version", "cuda_version", "attached_gpus": int, "gpus": [ {
        "index", "name", "uuid", "bus_id", "architecture", "persistence_mode": bool,
        "memory_total_mib", "clocks", "applications_clocks", "default_applications_clocks",
        "max_clocks" ({"graphics": MHz, "sm": MHz, "mem": MHz}), "power": {"draw", "limit",
        "default_limit", "min_limit", "max_limit"} (W, None where N/A),
        "supported_clocks": {mem MHz: [graphics MHz, ...]}, "fabric": {"state", "status"} } ]}
    Handles <gpu_power_readings> (535+) and the older <power_readings>.
    """
    try:
        root = ET.fromstring(text.encode() if isinstance(text, str) else text)
    except ET.ParseError as exc:
        raise ParseError("nvidia-smi -q -x: not XML (%s)" % exc) from exc
    if root.tag != "nvidia_smi_log":
        raise ParseError("nvidia-smi -q -x: root element is %r, not nvidia_smi_log" % root.tag)
    gpus = []
    for position, gpu in enumerate(root.findall("gpu")):
        power = gpu.find("gpu_power_readings")
        if power is None:
            power = gpu.find("power_readings")
        supported = {}
        for mem in gpu.findall("supported_clocks/supported_mem_clock"):
            mem_value = _number(_xml_text(mem, "value"), int)
            supported[mem_value] = [_number(g.text, int) for g in mem.findall("supported_graphics_clock")]
        minor = _number(_xml_text(gpu, "minor_number"), int)
        gpus.append(
            {
                "index": position if minor is None else minor,
                "name": _xml_text(gpu, "product_name"),
                "uuid": _xml_text(gpu, "uuid"),
                "bus_id": gpu.get("id") or _xml_text(gpu, "pci/pci_bus_id"),
                "architecture": _xml_text(gpu, "product_architecture"),
                "persistence_mode": _xml_text(gpu, "persistence_mode") == "Enabled",
                "memory_total_mib": _number(_xml_text(gpu, "fb_memory_usage/total"), int),
                "clocks": _clock_block(gpu, "clocks"),
                "applications_clocks": _clock_block(gpu, "applications_clocks"),
                "default_applications_clocks": _clock_block(gpu, "default_applications_clocks"),
                "max_clocks": _clock_block(gpu, "max_clocks"),
                "power": {
                    "draw": _number(_xml_text(power, "power_draw")) if power is not None else None,
                    "limit": _number(_xml_text(power, "current_power_limit") or _xml_text(power, "power_limit"))
                    if power is not None
                    else None,
                    "default_limit": _number(_xml_text(power, "default_power_limit")) if power is not None else None,
                    "min_limit": _number(_xml_text(power, "min_power_limit")) if power is not None else None,
                    "max_limit": _number(_xml_text(power, "max_power_limit")) if power is not None else None,
                },
                "supported_clocks": supported,
                "fabric": {
                    "state": _xml_text(gpu, "fabric/state") or "N/A",
                    "status": _xml_text(gpu, "fabric/status") or "N/A",
                },
            }
        )
    return {
        "driver_version": _xml_text(root, "driver_version"),
        "cuda_version": _xml_text(root, "cuda_version"),
        "attached_gpus": _number(_xml_text(root, "attached_gpus"), int),
        "gpus": gpus,
    }


def parse_query_gpu_csv(text, fields=None):
    """Parse `--query-gpu=... --format=csv[,noheader][,nounits]` into a list of dicts.

    With a header line the keys are the header's field names without units
    ("memory.total [MiB]" -> "memory.total"); with noheader, pass `fields`.
    Values stay strings as printed ("765 MHz" with units, "765" with nounits).
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    if fields is None:
        fields = [re.sub(r"\s*\[.*\]$", "", f.strip()) for f in lines[0].split(",")]
        lines = lines[1:]
    rows = []
    for line in lines:
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            raise ParseError("query-gpu: %d fields expected, %d found in %r" % (len(fields), len(values), line))
        rows.append(dict(zip(fields, values)))
    return rows


def parse_topo_m(text):
    """Parse the matrix of `nvidia-smi topo -m`.

    {"devices": ["GPU0", ...], "links": {"GPU0": {"GPU1": "NV18", ...}}, "cpu_affinity": {...},
     "numa_affinity": {...}}. The legend, if present, is ignored.
    """
    lines = [ln.rstrip() for ln in text.splitlines()]
    header_idx = next((i for i, ln in enumerate(lines) if ln.strip().startswith("GPU0")), None)
    if header_idx is None:
        raise ParseError("topo -m: no header row starting with GPU0")
    header = re.split(r"\t+|\s{2,}", lines[header_idx].strip())
    devices = [h for h in header if re.match(r"^(GPU|NIC)\d+$", h)]
    extra = header[len(devices) :]
    out = {"devices": devices, "links": {}, "cpu_affinity": {}, "numa_affinity": {}}
    for line in lines[header_idx + 1 :]:
        if not line.strip() or line.strip().startswith("Legend"):
            break
        cells = line.split()
        row = cells[0]
        if row not in devices:
            continue
        values = cells[1 : 1 + len(devices)]
        out["links"][row] = {dev: val for dev, val in zip(devices, values) if dev != row}
        rest = cells[1 + len(devices) :]
        if "CPU Affinity" in extra and rest:
            out["cpu_affinity"][row] = rest[0]
        if "NUMA Affinity" in extra and len(rest) > 1:
            out["numa_affinity"][row] = rest[1]
    return out


GPU_LIST_RE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)")


def parse_gpu_list(text):
    """Parse `nvidia-smi -L`: [{"index", "name", "uuid"}]."""
    return [
        {"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3)}
        for m in (GPU_LIST_RE.match(ln.strip()) for ln in text.splitlines())
        if m
    ]
