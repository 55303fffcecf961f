"""Parsers for `nvidia-smi topo -m` and `topo -p2p` (no I/O); re-exported by
ansible.module_utils.rackforge.nvidia_smi, the public import path (see its docstring)."""

from __future__ import annotations

import re

from ansible.module_utils.rackforge.nvidia_smi_common import ParseError, _text

TOPO_CODE_RE = re.compile(r"^(?:X|SYS|SOC|NODE|PHB|PXB|PIX|PSB|NV[0-9]+)$")
# `topo -p2p <cap>` cells (its legend): Self, Status Ok, Chipset / GPU / Topology not supported, Not supported, Unknown
P2P_CODES = ("X", "OK", "CNS", "GNS", "TNS", "NS", "U")


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
