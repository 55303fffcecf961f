"""Pure parsers for nvidia-smi output (no I/O).

Public, stable API (other tooling calls these; names and return shapes do not change, keys are
only ever added):

- parse_nvlink_status(text) -> list[dict]
- parse_fabric(text) -> list[dict]

Further helpers used by rackforge's modules: parse_nvlink_errors, parse_query_text,
parse_query_xml, parse_query_gpu_csv, parse_topo_m, parse_topo_p2p, parse_gpu_list.

Every parser accepts real nvidia-smi output (driver branches 418 to 595, Linux and Windows) and
the lab simulator's output alike; both are unit-tested in tests/unit against captures under
tests/fixtures/realworld. On text that is not the output a parser expects, or that is cut short,
each raises ParseError (and nothing else) naming what is wrong; none returns an empty result for
output it could not read.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

GPU_HEADER_RE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)\s*$")
# "Link 3: 26.562 GB/s", "Link 4: <inactive>"; anything a newer driver prints after the speed is kept as text
LINK_SPEED_RE = re.compile(r"^Link (\d+): (?:([0-9]+(?:\.[0-9]+)?) GB/s|<inactive>)(?:(?:\s+|\s*[,;(|])(.*))?$")
# "Link 0: Replay Errors: 0" (<= 565), "Link 0: Malformed packet Errors: 0", "Link 0: FEC Errors - 3: 0", "Link 0: Effective BER: 15e-255"
LINK_COUNTER_RE = re.compile(r"^Link (\d+): ([A-Za-z][^:]*?)\s*:\s*(\S+)$")
ALL_INACTIVE_MARK = "all links are inactive"
# ESC [ ... final byte: colours and underline (590+ underlines the topo -m header), cursor codes
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")
TOPO_CODE_RE = re.compile(r"^(?:X|SYS|SOC|NODE|PHB|PXB|PIX|PSB|NV[0-9]+)$")
# `topo -p2p <cap>` cells (its legend): Self, Status Ok, Chipset / GPU / Topology not supported, Not supported, Unknown
P2P_CODES = ("X", "OK", "CNS", "GNS", "TNS", "NS", "U")
NA_VALUES = ("N/A", "[N/A]", "")


class ParseError(ValueError):
    """Raised when text is not the nvidia-smi output the parser expects."""


def _text(text, what):
    """The output as str, without terminal escape codes and with Unix line ends."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise ParseError("%s: expected the command's output as text, got %s" % (what, type(text).__name__))
    return ANSI_RE.sub("", text).replace("\r\n", "\n").replace("\r", "\n")


def _gpu_header(line):
    m = GPU_HEADER_RE.match(line.strip())
    if not m:
        return None
    return {"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3)}


def _nvlink_notice(line):
    """The reason a GPU prints one line instead of its links, or None when the line is no such notice.

    Real texts: "NVML: Unable to retrieve NVLink information as all links are inActive" (555; 590+ spell
    it "Nvlink"), "Nvlink queries are not supported for Devices in MIG mode" (MIG enabled),
    "Device does not have or support Nvlink" (595, no NVLink hardware), "NVML: Unable to retrieve NVLink
    information: Not Supported".
    """
    low = line.lower()
    if "nvlink" not in low:
        return None
    if ALL_INACTIVE_MARK in low:
        return "all_inactive"
    if "mig mode" in low:
        return "mig_mode"
    if "not supported" in low or "not have or support" in low:
        return "not_supported"
    return None


def _new_gpu(header, gpus, what, **fields):
    if any(g["index"] == header["index"] for g in gpus):
        raise ParseError("%s: GPU %d is listed twice" % (what, header["index"]))
    gpu = dict(header, notice=None, reason=None, **fields)
    gpus.append(gpu)
    return gpu


def parse_nvlink_status(text):
    """Parse `nvidia-smi nvlink -s` (or `--status`).

    One dict per GPU, in output order:
    {"index": int, "name": str, "uuid": str, "links": {int: float | None}, "all_inactive": bool,
     "notice": str | None, "reason": None | "all_inactive" | "mig_mode" | "not_supported",
     "link_details": {int: str}}
    Link speed is GB/s; None means the link is printed as <inactive>. A GPU that prints one notice
    line instead of its links has links == {}, that line in "notice" and its kind in "reason":
    "all_inactive" (NVML: ... all links are inActive; all_inactive is then True too), "mig_mode"
    (NVLink queries are not supported in MIG mode) or "not_supported" (no NVLink on this device).
    link_details holds text a driver prints after a link's speed (none of the known ones do).
    """
    what = "nvlink status"
    gpus = []
    current = None
    for raw in _text(text, what).split("\n"):
        line = raw.strip()
        if not line:
            continue
        header = _gpu_header(line)
        if header:
            current = _new_gpu(header, gpus, what, links={}, all_inactive=False, link_details={})
            continue
        if current is None:
            raise ParseError("%s: text before the first 'GPU n: <name> (UUID: ...)' line: %r" % (what, line[:200]))
        reason = _nvlink_notice(line)
        if reason:
            if current["links"] or current["notice"]:
                raise ParseError("%s: GPU %d prints both links and %r" % (what, current["index"], line[:200]))
            current["notice"], current["reason"] = line, reason
            current["all_inactive"] = reason == "all_inactive"
            continue
        m = LINK_SPEED_RE.match(line)
        if m and current["notice"] is None:
            link = int(m.group(1))
            if link in current["links"]:
                raise ParseError("%s: GPU %d link %d is listed twice" % (what, current["index"], link))
            current["links"][link] = float(m.group(2)) if m.group(2) else None
            if m.group(3):
                current["link_details"][link] = m.group(3).strip()
            continue
        raise ParseError("%s: unexpected line under GPU %d: %r" % (what, current["index"], line[:200]))
    if not gpus:
        raise ParseError("%s: no 'GPU n: <name> (UUID: ...)' line in the output" % what)
    for gpu in gpus:
        if not gpu["links"] and gpu["notice"] is None:
            raise ParseError("%s: GPU %d has neither link lines nor a notice (output cut short?)" % (what, gpu["index"]))
        if gpu["links"] and all(v is None for v in gpu["links"].values()):
            gpu["all_inactive"] = True
    return gpus


def _counter_key(name):
    """'Replay Errors' -> 'replay', 'Malformed packet Errors' -> 'malformed_packet', 'Tx discards' -> 'tx_discards'."""
    low = name.strip().lower()
    if low.endswith(" errors"):
        low = low[: -len(" errors")]
    return re.sub(r"[^a-z0-9]+", "_", low).strip("_")


def _is_error_counter(name):
    """Counters that count failures: '... Errors', '... discards', '... events' (not the FEC
    histogram 'FEC Errors - N', not the pre-correction 'Raw ...' lane counters, not BER)."""
    low = name.strip().lower()
    return low.endswith(("errors", "discards", "events")) and not low.startswith("raw ")


def parse_nvlink_errors(text):
    """Parse `nvidia-smi nvlink -e` / `--errorcounters`.

    Per GPU {"index", "name", "uuid", "links": {int: {counter: int}}, "other": {int: {name: str}},
    "notice": str | None, "reason": as in parse_nvlink_status}.
    links holds the error counters: up to 565 "replay", "recovery", "crc"; 570+ (NVLink 5) names such
    as "malformed_packet", "buffer_overrun", "rx", "rx_remote", "rx_general", "local_link_integrity",
    "tx_discards", "link_recovery_successful_events", "link_recovery_failed_events",
    "total_link_recovery_events", "effective", "symbol". other holds what is not an error count, as
    printed: the FEC histogram ("FEC Errors - 0" counts corrected codewords and grows on healthy
    links), BER values, "Raw ..." lane counters, and any counter printed as N/A.
    Blank separator lines and an elision marker such as "[...]" are tolerated.
    """
    what = "nvlink errors"
    gpus = []
    current = None
    for raw in _text(text, what).split("\n"):
        line = raw.strip()
        if not line or line in ("[...]", "```"):
            continue
        header = _gpu_header(line)
        if header:
            current = _new_gpu(header, gpus, what, links={}, other={})
            continue
        if current is None:
            raise ParseError("%s: text before the first 'GPU n: <name> (UUID: ...)' line: %r" % (what, line[:200]))
        reason = _nvlink_notice(line)
        if reason:
            current["notice"], current["reason"] = line, reason
            continue
        m = LINK_COUNTER_RE.match(line)
        if not m:
            raise ParseError("%s: unexpected line under GPU %d: %r" % (what, current["index"], line[:200]))
        link, name, value = int(m.group(1)), m.group(2), m.group(3)
        if _is_error_counter(name) and re.match(r"^[0-9]+$", value):
            current["links"].setdefault(link, {})[_counter_key(name)] = int(value)
        else:
            current["other"].setdefault(link, {})[name.strip()] = value
    if not gpus:
        raise ParseError("%s: no 'GPU n: <name> (UUID: ...)' line in the output" % what)
    return gpus


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def parse_query_text(text):
    """Parse `nvidia-smi -q` text into {"header": {key: value}, "gpus": [section, ...]}.

    Each GPU section is a nested dict keyed by the printed labels; leaves are the printed
    strings ("Completed", "700.00 W"). The section's bus id is under "Bus Id Header".
    Works on a whole dump and on `-q -d ...` excerpts. A section printed twice under the same
    parent (one "MIG Device" per MIG instance) keeps the last one. Text with neither a GPU section
    nor the "Attached GPUs" line of the dump's header is not -q output: ParseError.
    """
    header = {}
    gpus = []
    stack = []  # (indent, dict)
    for raw in _text(text, "nvidia-smi -q").split("\n"):
        line = raw.rstrip()
        if not line.strip() or line.startswith("====="):
            continue
        ind = _indent(line)
        body = line.strip()
        if ind == 0 and re.match(r"^GPU [0-9A-Fa-f]{4,}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$", body):
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
    if not gpus and "Attached GPUs" not in header:
        raise ParseError("nvidia-smi -q: neither a 'GPU <bus id>' section nor 'Attached GPUs' in the output: %r" % text[:200])
    return {"header": header, "gpus": gpus}


def parse_fabric(text):
    """Parse every `Fabric` section of `nvidia-smi -q` output, in order.

    {"state": str, "status": str, "clique_id": str, "cluster_uuid": str, "health_summary": str | None}
    Values are as printed ("Completed", "In Progress", "N/A", "Success"). Keys a driver does not
    print (535 has no CliqueId/ClusterUUID) read "N/A"; health_summary is None unless the driver
    prints Fabric/Health/Summary (570+; 590 prints "N/A" where it does not apply).
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
    """'700.00 W' -> 700.0, '1980 MHz' -> 1980, 'N/A' / 'Requested functionality has been deprecated' / None -> None."""
    if value is None:
        return None
    m = re.match(r"^\s*(-?[0-9]+)(\.[0-9]+)?(?![0-9.])", value)
    if not m:
        return None
    if cast is int:
        return int(m.group(1))
    return float(m.group(1) + (m.group(2) or ""))


def _xml_text(node, path):
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    return found.text.strip()


def _first_number(node, tags):
    for tag in tags:
        value = _number(_xml_text(node, tag))
        if value is not None:
            return value
    return None


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


def _power_block(block):
    """Power readings of one <gpu_power_readings> / <power_readings> / <module_power_readings> block (W, None where N/A).

    Tags by driver branch: up to 530 <power_draw>, <power_limit> (requested) and <enforced_power_limit>;
    535-545 <power_draw>, <current_power_limit> (in force) and <requested_power_limit>; 550+ no
    <power_draw> but <average_power_draw> (1 s average) and <instant_power_draw>. draw is
    power_draw, else the average, else the instantaneous reading (590 prints the average as N/A on
    some GeForce parts); limit is the limit in force, requested_limit what was last set (-pl).
    """
    return {
        "draw": _first_number(block, ("power_draw", "average_power_draw", "instant_power_draw")),
        "draw_average": _first_number(block, ("average_power_draw",)),
        "draw_instant": _first_number(block, ("instant_power_draw",)),
        "limit": _first_number(block, ("current_power_limit", "enforced_power_limit", "power_limit")),
        "requested_limit": _first_number(block, ("requested_power_limit", "power_limit")),
        "default_limit": _first_number(block, ("default_power_limit",)),
        "min_limit": _first_number(block, ("min_power_limit",)),
        "max_limit": _first_number(block, ("max_power_limit",)),
    }


def _supported_clocks(gpu, position):
    supported = {}
    for mem in gpu.findall("supported_clocks/supported_mem_clock"):
        raw = _xml_text(mem, "value")
        mem_value = _number(raw, int)
        if mem_value is None:
            raise ParseError("nvidia-smi -q -x: GPU %d supported memory clock %r is not a number" % (position, raw))
        graphics = []
        for g in mem.findall("supported_graphics_clock"):
            value = _number(g.text, int)
            if value is None:
                raise ParseError(
                    "nvidia-smi -q -x: GPU %d supported graphics clock %r (memory %d MHz) is not a number" % (position, g.text, mem_value)
                )
            graphics.append(value)
        supported[mem_value] = graphics
    return supported


def parse_query_xml(text):
    """Parse `nvidia-smi -q -x` into plain facts.

    {"driver_version", "cuda_version", "attached_gpus": int, "gpus": [ {
        "index", "minor_number", "name", "uuid", "bus_id", "architecture", "persistence_mode": bool,
        "mig_mode", "memory_total_mib", "clocks", "applications_clocks", "default_applications_clocks",
        "max_clocks" ({"graphics": MHz, "sm": MHz, "mem": MHz}), "power": {"draw", "draw_average",
        "draw_instant", "limit", "requested_limit", "default_limit", "min_limit", "max_limit"} (W, None
        where N/A), "module_power": the same for <module_power_readings> or None where the driver
        prints none, "supported_clocks": {mem MHz: [graphics MHz, ...]}, "fabric": {"state", "status"} } ]}
    index is the GPU's position in the output, which is nvidia-smi's enumeration (PCI bus) order:
    the number `nvidia-smi -i` takes. minor_number is /dev/nvidia<N> (None where N/A, as on
    Windows); it can differ from index. mig_mode is <mig_mode><current_mig> as printed, None where N/A.
    Power tags of drivers 418 to 595 are read (see _power_block).
    """
    data = text
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    if not isinstance(data, bytes):
        raise ParseError("nvidia-smi -q -x: expected the command's output as text, got %s" % type(text).__name__)
    try:
        root = ET.fromstring(data)
    except (ET.ParseError, LookupError, ValueError) as exc:
        raise ParseError("nvidia-smi -q -x: not XML (%s)" % exc) from exc
    if root.tag != "nvidia_smi_log":
        raise ParseError("nvidia-smi -q -x: root element is %r, not nvidia_smi_log" % root.tag)
    gpus = []
    for position, gpu in enumerate(root.findall("gpu")):
        power = gpu.find("gpu_power_readings")
        if power is None:
            power = gpu.find("power_readings")
        module_power = gpu.find("module_power_readings")
        mig = _xml_text(gpu, "mig_mode/current_mig")
        gpus.append(
            {
                "index": position,
                "minor_number": _number(_xml_text(gpu, "minor_number"), int),
                "name": _xml_text(gpu, "product_name"),
                "uuid": _xml_text(gpu, "uuid"),
                "bus_id": gpu.get("id") or _xml_text(gpu, "pci/pci_bus_id"),
                "architecture": _xml_text(gpu, "product_architecture"),
                "persistence_mode": _xml_text(gpu, "persistence_mode") == "Enabled",
                "mig_mode": None if mig in NA_VALUES else mig,
                "memory_total_mib": _number(_xml_text(gpu, "fb_memory_usage/total"), int),
                "clocks": _clock_block(gpu, "clocks"),
                "applications_clocks": _clock_block(gpu, "applications_clocks"),
                "default_applications_clocks": _clock_block(gpu, "default_applications_clocks"),
                "max_clocks": _clock_block(gpu, "max_clocks"),
                "power": _power_block(power),
                "module_power": _power_block(module_power) if module_power is not None else None,
                "supported_clocks": _supported_clocks(gpu, position),
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


QUERY_FIELD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def parse_query_gpu_csv(text, fields=None):
    """Parse `--query-gpu=... --format=csv[,noheader][,nounits]` into a list of dicts.

    With a header line the keys are the header's field names without units
    ("memory.total [MiB]" -> "memory.total"); with noheader, pass `fields`.
    Values stay strings as printed ("765 MHz" with units, "765" with nounits, "[N/A]").
    A header that is not a list of field names (an error message printed instead) is a ParseError.
    """
    lines = [ln for ln in _text(text, "query-gpu").split("\n") if ln.strip()]
    if fields is None:
        if not lines:
            return []
        fields = [re.sub(r"\s*\[[^\]]*\]$", "", f.strip()) for f in lines[0].split(",")]
        lines = lines[1:]
    bad = [f for f in fields if not isinstance(f, str) or not QUERY_FIELD_RE.match(f)]
    if bad:
        raise ParseError("query-gpu: %r are not field names (not --query-gpu csv output?)" % (bad[:5],))
    rows = []
    for line in lines:
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            raise ParseError("query-gpu: %d fields expected, %d found in %r" % (len(fields), len(values), line[:200]))
        rows.append(dict(zip(fields, values)))
    return rows


def _topo_cells(line):
    """A topo -m row's cells: TAB-separated as nvidia-smi prints them (empty cells kept), else by whitespace."""
    if "\t" in line:
        return [c.strip() for c in line.strip(" \n").split("\t")]
    return line.split()


def parse_topo_p2p(text):
    """Parse `nvidia-smi topo -p2p <r|w|n|a|p>`, the P2P status of every GPU pair (NVML's
    nvmlDeviceGetP2PStatus; n is NVLink).

    {"devices": ["GPU0", ...], "status": {"GPU0": {"GPU1": "OK", ...}, ...}} with the codes of the
    legend (OK, CNS, GNS, TNS, NS, U). The header's terminal escape codes are ignored. A missing
    header or row, a row of the wrong width, a code not in the legend or X off the diagonal is a
    ParseError.
    """
    what = "topo -p2p"
    lines = [ln for ln in _text(text, what).split("\n")]
    header_idx = next((i for i, ln in enumerate(lines) if [c for c in _topo_cells(ln) if c][:1] == ["GPU0"]), None)
    if header_idx is None:
        raise ParseError("%s: no header row starting with GPU0: %r" % (what, text[:200]))
    devices = [c for c in _topo_cells(lines[header_idx]) if c]
    if not all(re.match(r"^GPU[0-9]+$", d) for d in devices) or len(set(devices)) != len(devices):
        raise ParseError("%s: the header is not a list of GPUs: %r" % (what, lines[header_idx].strip()))
    status = {}
    for line in lines[header_idx + 1 :]:
        if not line.strip() or line.strip().startswith("Legend"):
            break
        cells = [c for c in _topo_cells(line) if c]
        row = cells[0] if cells else ""
        if row not in devices or row in status:
            raise ParseError("%s: unexpected line in the matrix: %r" % (what, line[:200]))
        values = cells[1:]
        if len(values) != len(devices):
            raise ParseError("%s: row %s has %d cells for %d GPUs: %r" % (what, row, len(values), len(devices), line[:200]))
        for dev, value in zip(devices, values):
            if value not in P2P_CODES or (dev == row) != (value == "X"):
                raise ParseError("%s: %s to %s is %r (codes: %s; X on the diagonal only)" % (what, row, dev, value, ", ".join(P2P_CODES)))
        status[row] = {dev: value for dev, value in zip(devices, values) if dev != row}
    missing = [d for d in devices if d not in status]
    if missing:
        raise ParseError("%s: the matrix has no row for %s (output cut short?)" % (what, ", ".join(missing)))
    return {"devices": devices, "status": status}


def parse_topo_m(text):
    """Parse the matrix of `nvidia-smi topo -m`.

    {"devices": ["GPU0", ..., "NIC0", ...], "links": {"GPU0": {"GPU1": "NV18", "NIC0": "PIX", ...}},
     "cpu_affinity": {row: str}, "numa_affinity": {row: str}, "gpu_numa_id": {row: str},
     "nics": {"NIC0": "mlx5_0", ...}}
    Terminal escape codes (590+ underlines the header row) are ignored. Affinity cells printed
    empty (Windows, NIC rows) are left out. nics comes from the "NIC Legend:" section ({} without
    one). A matrix that is empty, misses a device's row, has a row of the wrong width, a diagonal
    other than X or a cell that is no topology code (X, SYS, NODE, PHB, PXB, PIX, NV<n>, older SOC
    and PSB) is a ParseError.
    """
    what = "topo -m"
    lines = _text(text, what).split("\n")
    header_idx = None
    for i, line in enumerate(lines):
        cells = [c for c in _topo_cells(line) if c]
        if cells and cells[0] == "GPU0" and (len(cells) == 1 or cells[1] != "X"):
            header_idx = i
            break
    if header_idx is None:
        raise ParseError("%s: no header row starting with GPU0: %r" % (what, text[:200]))
    head = lines[header_idx]
    header = [c.strip() for c in (head.split("\t") if "\t" in head else re.split(r"\s{2,}", head.strip())) if c.strip()]
    devices = []
    for name in header:
        if not re.match(r"^(?:GPU|NIC)[0-9]+$", name):
            break
        devices.append(name)
    extra = header[len(devices) :]
    if len(set(devices)) != len(devices):
        raise ParseError("%s: header names a device twice: %r" % (what, head.strip()))
    out = {"devices": devices, "links": {}, "cpu_affinity": {}, "numa_affinity": {}, "gpu_numa_id": {}, "nics": {}}
    n = len(devices)
    end = len(lines)
    for i in range(header_idx + 1, len(lines)):
        line = lines[i]
        if not line.strip() or line.strip().startswith("Legend"):
            end = i
            break
        cells = _topo_cells(line)
        row = cells[0] if cells else ""
        if row not in devices:
            raise ParseError("%s: unexpected line in the matrix: %r" % (what, line[:200]))
        if row in out["links"]:
            raise ParseError("%s: row %s is printed twice" % (what, row))
        values = cells[1 : 1 + n]
        if len(values) < n:
            raise ParseError("%s: row %s has %d cells for %d devices: %r" % (what, row, len(values), n, line[:200]))
        for dev, value in zip(devices, values):
            if not TOPO_CODE_RE.match(value):
                raise ParseError("%s: %s to %s is %r, not a topology code" % (what, row, dev, value))
            if (dev == row) != (value == "X"):
                raise ParseError("%s: %s to %s is %r (X belongs on the diagonal only)" % (what, row, dev, value))
        out["links"][row] = {dev: val for dev, val in zip(devices, values) if dev != row}
        rest = cells[1 + n :]
        if "CPU Affinity" in extra and rest and rest[0]:
            out["cpu_affinity"][row] = rest[0]
        if "NUMA Affinity" in extra and len(rest) > 1 and rest[1]:
            out["numa_affinity"][row] = rest[1]
        if "GPU NUMA ID" in extra and len(rest) > 2 and rest[-1]:
            out["gpu_numa_id"][row] = rest[-1]
    missing = [d for d in devices if d not in out["links"]]
    if missing:
        raise ParseError("%s: the matrix has no row for %s (output cut short?)" % (what, ", ".join(missing)))
    in_nic_legend = False
    for line in lines[end:]:
        body = line.strip()
        if body == "NIC Legend:":
            in_nic_legend = True
            continue
        m = re.match(r"^(NIC[0-9]+): (\S+)$", body)
        if in_nic_legend and m:
            out["nics"][m.group(1)] = m.group(2)
    return out


GPU_LIST_RE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)$")
MIG_LIST_RE = re.compile(r"^MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^)]+)\)$")


def parse_gpu_list(text):
    """Parse `nvidia-smi -L`: [{"index", "name", "uuid", "mig_devices": [{"profile", "index", "uuid"}]}].

    "No devices were found" reads as []. Any other line that is neither a GPU nor a MIG device
    line is a ParseError.
    """
    gpus = []
    for raw in _text(text, "nvidia-smi -L").split("\n"):
        line = raw.strip()
        if not line or line == "No devices were found":
            continue
        m = GPU_LIST_RE.match(line)
        if m:
            index = int(m.group(1))
            if any(g["index"] == index for g in gpus):
                raise ParseError("nvidia-smi -L: GPU %d is listed twice" % index)
            gpus.append({"index": index, "name": m.group(2), "uuid": m.group(3), "mig_devices": []})
            continue
        m = MIG_LIST_RE.match(line)
        if m and gpus:
            gpus[-1]["mig_devices"].append({"profile": m.group(1), "index": int(m.group(2)), "uuid": m.group(3)})
            continue
        raise ParseError("nvidia-smi -L: unexpected line %r" % line[:200])
    return gpus
