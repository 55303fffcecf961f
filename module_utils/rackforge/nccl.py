"""Pure parser for the output of NVIDIA nccl-tests (all_reduce_perf and its siblings; no I/O).

Public, stable API (names and return shapes do not change):

- parse_nccl_tests(text) -> {"devices": [...], "rows": [...], "avg_busbw": float|None, "out_of_bounds": int|None}
    devices: {"rank": int, "host": str, "device": int (CUDA index), "name": str}, one per "#  Rank" line
    rows:    {"size": int, "count": int, "type": str, "redop": str|None,
              "oop_time_us", "oop_algbw", "oop_busbw": float, "oop_wrong": int|float|None,
              "ip_time_us", "ip_algbw", "ip_busbw": float|None, "ip_wrong": int|float|None}
- ParseError(ValueError): raised, and nothing else, on text that is not nccl-tests output.

The format follows nccl-tests' own printing code: src/common.cu (device lines, column header, result rows
and footer; moved to src/util.cu in 2025) and, before 2.13, each test's print_header() in src/<op>.cu.
It is held to real captures in tests/fixtures/realworld/nccl-tests. What varies by version:

- device line: "#   Rank  0 on host device  0 [0x18] name" (2017), then with "Pid 1234" (2019), then with
  "Group  0" as well (2.13.4, 2022-09); the bracket holds the PCI bus ("0x18") or, since 2.14.1, the
  domain:bus:device ("0000:18:00").
- columns, read from the "#  size count type ..." header line: before 2.13 only the ops with a reduction
  print redop and only rooted ops print root; since 2.13 all print both (redop "none", root -1 where
  unused; 2.13.0-2.13.3 leave redop blank). Root is not returned. redop is None where none is printed.
- wrong: since 2.13 "#wrong" is a count of wrong elements (int); before, "error" is the largest relative
  error in e-notation (float; 2e-07 is normal for float sums). "N/A" (run with -c 0) -> None.
  out_of_bounds is the pass/fail count in every version.
- newer columns: per-iteration i_min/i_max/i_p99/i_cv% (2.19.2) and a trailing timestamp (2.17.6/2.18.5)
  are skipped; "cputime" (-C 1) is read as the time column. The 2017 layout (bytes/N/op/res, time in ms) is not read.

Lines that are not table rows are ignored (NCCL INFO/WARN, MPI/UCX noise, comments). A prefix added by
`mpirun --tag-output` ("[1,0]<stdout>:") or `srun -l` (" 0: ") is removed first. avg_busbw and
out_of_bounds are None when the footer is missing (run cut short); a run without result rows raises.
"""

from __future__ import annotations

import math
import re

__all__ = ["ParseError", "parse_nccl_tests"]


class ParseError(ValueError):
    """Raised when text is not nccl-tests output."""


_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+: )")
_DEVICE = re.compile(
    r"^#\s+Rank\s+([0-9]+)(?:\s+Group\s+[0-9]+)?(?:\s+Pid\s+[0-9]+)?\s+on\s+(.+?)\s+device\s+([0-9]+)\s+\[[^\]]*\]\s*(.*)$"
)
_FOOTER = re.compile(r"^#?\s*(Out of bounds values|Avg bus bandwidth)\s*:\s*(\S*)")
_INT = re.compile(r"^-?[0-9]+$")
_FLOAT = re.compile(r"^[-+]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|inf|nan)$")
_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_TIME = ("time", "cputime")
_WRONG = ("#wrong", "error")
_PREFIX_COLUMNS = ("size", "count", "type", "redop", "root")


def _int(token, what):
    if not _INT.match(token):
        raise ParseError("nccl-tests: %s is not an integer: %r" % (what, token))
    return int(token)


def _float(token, what):
    if not _FLOAT.match(token):
        raise ParseError("nccl-tests: %s is not a number: %r" % (what, token))
    return float(token)


def _wrong(token, column):
    if token == "N/A":
        return None
    value = _float(token, column)
    if column == "error":
        return value
    if math.isnan(value) or math.isinf(value) or value != int(value) or value < 0:
        raise ParseError("nccl-tests: #wrong is not a count: %r" % token)
    return int(value)


def _layout(columns):
    """Map a column header ("size count type redop root time algbw busbw #wrong time ...") to a layout."""
    if columns[:1] != ["size"]:
        raise ParseError("nccl-tests: column header does not start with size: %r" % " ".join(columns))
    first = next((i for i, c in enumerate(columns) if c in _TIME), None)
    if first is None:
        raise ParseError("nccl-tests: column header without a time column: %r" % " ".join(columns))
    prefix = columns[:first]
    if not {"size", "count", "type"} <= set(prefix) or not set(prefix) <= set(_PREFIX_COLUMNS) or len(set(prefix)) != len(prefix):
        raise ParseError("nccl-tests: unexpected leading columns: %r" % " ".join(prefix))
    groups = []
    width = first
    for name in columns[first:]:
        if name in _TIME:
            groups.append({"time": width})
        elif name in ("algbw", "busbw") or name in _WRONG:
            if name in groups[-1] or (name in _WRONG and ("#wrong" in groups[-1] or "error" in groups[-1])):
                raise ParseError("nccl-tests: column %r twice in one result group" % name)
            groups[-1][name] = width
        width += 2 if name == "timestamp" else 1  # a timestamp ("2026-06-08 10:00:00") is two tokens
    for group in groups:
        if "algbw" not in group or "busbw" not in group:
            raise ParseError("nccl-tests: result group without algbw/busbw: %r" % " ".join(columns))
    if len(groups) > 2:
        raise ParseError("nccl-tests: more than two result groups: %r" % " ".join(columns))
    return {"prefix": {name: i for i, name in enumerate(prefix)}, "groups": groups, "width": width}


def _row(tokens, layout):
    prefix = layout["prefix"]
    if len(tokens) == layout["width"] - 1 and "redop" in prefix:  # 2.13.0-2.13.3 print a blank redop for ops without one
        tokens = [*tokens[: prefix["redop"]], None, *tokens[prefix["redop"] :]]
    if len(tokens) != layout["width"]:
        raise ParseError("nccl-tests: row has %d fields, the header %d: %r" % (len(tokens), layout["width"], " ".join(tokens)))
    row = {
        "size": _int(tokens[prefix["size"]], "size"),
        "count": _int(tokens[prefix["count"]], "count"),
        "type": tokens[prefix["type"]],
        "redop": tokens[prefix["redop"]] if "redop" in prefix else None,
    }
    for name in ("type", "redop"):
        if row[name] is not None and not _WORD.match(row[name]):
            raise ParseError("nccl-tests: %s is not a name: %r" % (name, row[name]))
    if "root" in prefix:
        _int(tokens[prefix["root"]], "root")
    for key, group in zip(("oop", "ip"), layout["groups"] + [None]):
        if group is None:
            row.update({key + "_time_us": None, key + "_algbw": None, key + "_busbw": None, key + "_wrong": None})
            continue
        row[key + "_time_us"] = _float(tokens[group["time"]], "time")
        row[key + "_algbw"] = _float(tokens[group["algbw"]], "algbw")
        row[key + "_busbw"] = _float(tokens[group["busbw"]], "busbw")
        column = "#wrong" if "#wrong" in group else "error" if "error" in group else None
        row[key + "_wrong"] = _wrong(tokens[group[column]], column) if column else None
    return row


def parse_nccl_tests(text):
    """Parse the stdout of an nccl-tests binary (see the module docstring for the returned shape)."""
    if not isinstance(text, str):
        raise ParseError("nccl-tests: expected text, got %s" % type(text).__name__)
    devices, rows = [], []
    footer = {"Avg bus bandwidth": None, "Out of bounds values": None}
    layout = None
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw, count=1).strip()
        if not line:
            continue
        m = _FOOTER.match(line)
        if m:
            value = m.group(2)
            if m.group(1) == "Avg bus bandwidth":
                footer[m.group(1)] = _float(value, "Avg bus bandwidth")
            else:
                footer[m.group(1)] = _int(value, "Out of bounds values")
            continue
        if line.startswith("#"):
            m = _DEVICE.match(line)
            if m:
                devices.append({"rank": int(m.group(1)), "host": m.group(2), "device": int(m.group(3)), "name": m.group(4)})
                continue
            columns = line[1:].split()
            if columns[:1] == ["size"] or ("busbw" in columns and "algbw" in columns):
                layout = _layout(columns)
            continue
        tokens = line.split()
        if layout is not None and _INT.match(tokens[0]) and tokens[0][0] != "-":
            rows.append(_row(tokens, layout))
    if not rows:
        raise ParseError("nccl-tests: no result rows (not nccl-tests output, or the run printed no table)")
    return {"devices": devices, "rows": rows, "avg_busbw": footer["Avg bus bandwidth"], "out_of_bounds": footer["Out of bounds values"]}
