"""Pure parsers for nvidia-smi output (no I/O).

Public, stable API (other tooling calls these; names and return shapes do not change, keys are
only ever added):

- parse_nvlink_status(text) -> list[dict]
- parse_fabric(text) -> list[dict]

Further helpers used by rackforge's modules: fabric_of, parse_nvlink_errors, parse_query_text,
parse_query_xml, parse_query_gpu_csv, parse_topo_m, parse_topo_p2p, parse_gpu_list.

Every parser accepts real nvidia-smi output (driver branches 418 to 595, Linux and Windows); each is
unit-tested in tests/unit against captures under tests/fixtures/realworld. On text that is not the
output a parser expects, or that is cut short, each raises ParseError (and nothing else) naming what
is wrong; none returns an empty result for output it could not read.

Import every name from here. The code is split by output: nvidia_smi_xml (-q -x), nvidia_smi_topo
(topo -m, topo -p2p) and nvidia_smi_common (ParseError, the one class all of them raise, and the text
helpers); this module re-exports them.
"""

from __future__ import annotations

import re

from ansible.module_utils.rackforge.nvidia_smi_common import ANSI_RE, NA_VALUES, ParseError, _text
from ansible.module_utils.rackforge.nvidia_smi_topo import P2P_CODES, TOPO_CODE_RE, parse_topo_m, parse_topo_p2p
from ansible.module_utils.rackforge.nvidia_smi_xml import parse_query_xml

__all__ = [
    "ANSI_RE",
    "NA_VALUES",
    "P2P_CODES",
    "TOPO_CODE_RE",
    "ParseError",
    "fabric_of",
    "parse_fabric",
    "parse_gpu_list",
    "parse_nvlink_errors",
    "parse_nvlink_status",
    "parse_query_gpu_csv",
    "parse_query_text",
    "parse_query_xml",
    "parse_topo_m",
    "parse_topo_p2p",
]

GPU_HEADER_RE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)\s*$")
# "Link 3: 26.562 GB/s", "Link 4: <inactive>"; anything a newer driver prints after the speed is kept as text
LINK_SPEED_RE = re.compile(r"^Link (\d+): (?:([0-9]+(?:\.[0-9]+)?) GB/s|<inactive>)(?:(?:\s+|\s*[,;(|])(.*))?$")
# "Link 0: Replay Errors: 0" (<= 565), "Link 0: Malformed packet Errors: 0", "Link 0: FEC Errors - 3: 0", "Link 0: Effective BER: 15e-255"
LINK_COUNTER_RE = re.compile(r"^Link (\d+): ([A-Za-z][^:]*?)\s*:\s*(\S+)$")
ALL_INACTIVE_MARK = "all links are inactive"


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
    return fabric_of(parse_query_text(text)["gpus"])


def fabric_of(gpus):
    """parse_fabric's entries from GPU sections already parsed by parse_query_text."""
    result = []
    for gpu in gpus:
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
