"""Pure parser for perftest's ib_{write,read,send}_{bw,lat} report (no I/O).

Public, stable API (names and return shapes do not change):

- parse_perftest(text) -> dict
    {"kind": "bw" | "lat", "test": str, "device": str | None,
     "link_type": "Ethernet" | "IB" | None, "gid_index": int | None, "mtu": int | None,
     "bw_unit": "Gb/sec" | "MB/sec" | None, "rows": [dict, ...]}
  bw rows:  {"bytes", "iterations", "bw_peak", "bw_avg", "msg_rate_mpps"}
  lat rows: {"bytes", "iterations", "t_min_us", "t_max_us", "t_typical_us", "t_avg_us",
             "t_stdev_us", "p99_us", "p99_9_us"}
  Values are the printed numbers (bytes and iterations int, the rest float); a column the
  layout does not print is None. Rows are in the order printed (-a gives one per size,
  --run_infinitely one per interval).
- gid_addresses(text) -> {"local": str | None, "remote": str | None}
  The IPv4 address behind the GID perftest printed under its " local address:" and " remote
  address:" lines (PERF_GID_FMT, sixteen bytes in decimal; only an IPv4-mapped GID, a RoCE
  port's with an IPv4 address, has one). This is how a client learns the partner's RoCE
  address for an RDMA-CM run (perftest -R connects to that address, not to the node's).
- ParseError(ValueError): raised, and only it, on text that is not a perftest report.

The formats follow perftest's source (linux-rdma/perftest): the column headers RESULT_FMT*,
the row formats REPORT_FMT* and RESULT_LINE in src/perftest_parameters.h, the banner of
ctx_print_test_info() and the reports of print_full_bw_report() / print_report_lat() in
src/perftest_parameters.c. They are held to the captures in tests/fixtures/realworld/perftest.
The column header line names the layout, so it is read, not guessed from a value count:
bw prints MsgRate[Mpps] since 2012 and names the unit in brackets (MB/sec; MiB/sec from
perftest 24.07, the same 2^20-byte unit, reported here as "MB/sec"; Gb/sec with
--report_gbits); lat prints t_avg, t_stdev and the 99 % / 99.9 % percentiles since 4.4
(2016), and only #bytes, #iterations, t_avg and tps in duration (-D) mode. Per-port, #sl
(raw Ethernet QoS), tps and CPU_Util columns are read for the layout and not returned.
Lines around the table (banner, address lines, warnings such as "Conflicting CPU frequency
values detected") are skipped; a line in the table that starts with a digit must be a row.
-C (--report-cycles) prints cycles under the usec header; the text cannot tell them apart.
"""

from __future__ import annotations

import re


class ParseError(ValueError):
    """Raised when text is not perftest's report."""


# (header pattern, row key or None for a column read but not returned, value type)
_BW_UNIT = r"\[(Gb/sec|MB/sec|MiB/sec)\]"
_COLUMNS = (
    (re.compile(r"#bytes"), "bytes", int),
    (re.compile(r"#sl"), None, int),
    (re.compile(r"#iterations"), "iterations", int),
    (re.compile(r"BW peak" + _BW_UNIT), "bw_peak", float),
    (re.compile(r"BW average" + _BW_UNIT), "bw_avg", float),
    (re.compile(r"MsgRate\[Mpps\]"), "msg_rate_mpps", float),
    (re.compile(r"BW Port[12]" + _BW_UNIT), None, float),
    (re.compile(r"MsgRate Port[12]\[Mpps\]"), None, float),
    (re.compile(r"t_min\[usec\]"), "t_min_us", float),
    (re.compile(r"t_max\[usec\]"), "t_max_us", float),
    (re.compile(r"t_typical\[usec\]"), "t_typical_us", float),
    (re.compile(r"t_avg\[usec\]"), "t_avg_us", float),
    (re.compile(r"t_stdev\[usec\]"), "t_stdev_us", float),
    (re.compile(r"99% percentile\[usec\]"), "p99_us", float),
    (re.compile(r"99\.9% percentile\[usec\]"), "p99_9_us", float),
    (re.compile(r"tps average"), None, float),
    (re.compile(r"CPU_Util\[%\]"), None, float),
)
_ROW_KEYS = {
    "bw": ("bytes", "iterations", "bw_peak", "bw_avg", "msg_rate_mpps"),
    "lat": ("bytes", "iterations", "t_min_us", "t_max_us", "t_typical_us", "t_avg_us", "t_stdev_us", "p99_us", "p99_9_us"),
}
_NUMBER = {int: re.compile(r"\d+$"), float: re.compile(r"-?\d+(?:\.\d+)?$")}

_TITLE = re.compile(r"^\s*((?:Send|RDMA_Write|RDMA_Read|Atomic)\w*\b.*\b(?:BW|Latency)\b.*\bTest)\s*$")
_DEVICE = re.compile(r"^\s*Dual-port\s*:.*\bDevice\s*:\s*(\S+)")
_LINK = re.compile(r"^\s*Link type\s*:\s*(\S+)")
_GID = re.compile(r"^\s*GID index\s*:\s*(\d+)\s*$", re.IGNORECASE)
_MTU = re.compile(r"^\s*Mtu\s*:\s*(\d+)\s*(?:\[B\]|B)?\s*$")
_RULE = re.compile(r"^\s*-{20,}\s*$")
_RAW_SAMPLES = re.compile(r"^\s*#,\s*(?:usec|cycles)\s*$")
_SIDE = re.compile(r"^\s*(local|remote) address\s*:")
_GID_BYTES = re.compile(r"^\s*GID\s*:\s*((?:\d{1,3}:){15}\d{1,3})\s*$")


def _layout(header):
    """' #bytes #iterations ...' -> (kind, bw_unit, [(key, type), ...]); ParseError on a column it does not know."""
    columns, units, pos = [], set(), 0
    text = header.rstrip()
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        for pattern, key, convert in _COLUMNS:
            m = pattern.match(text, pos)
            if m:
                columns.append((key, convert))
                if m.groups():
                    units.add("MB/sec" if m.group(1) == "MiB/sec" else m.group(1))
                pos = m.end()
                break
        else:
            raise ParseError("perftest column header has an unknown column at %r: %r" % (text[pos:], header.strip()))
    keys = [key for key, _ in columns]
    if keys[:2] != ["bytes", "iterations"] and keys[:3] != ["bytes", None, "iterations"]:
        raise ParseError("perftest column header must start with #bytes and #iterations: %r" % header.strip())
    if "bw_avg" in keys and "bw_peak" in keys:
        kind = "bw"
    elif "t_typical_us" in keys or "t_avg_us" in keys:
        kind = "lat"
    else:
        raise ParseError("perftest column header is neither a bandwidth nor a latency table: %r" % header.strip())
    stray = set(keys) - set(_ROW_KEYS[kind]) - {None}
    if stray:
        raise ParseError("perftest %s column header also names %s: %r" % (kind, sorted(stray), header.strip()))
    if len(units) > 1:
        raise ParseError("perftest column header mixes bandwidth units %s: %r" % (sorted(units), header.strip()))
    return kind, (units.pop() if units else None), columns


def _row(line, columns, number):
    """One table row -> {key: value} for the returned keys; ParseError naming what is wrong."""
    fields = line.split()
    if len(fields) != len(columns):
        raise ParseError(
            "perftest result row %d has %d values, the column header names %d: %r" % (number, len(fields), len(columns), line.strip())
        )
    row = {}
    for field, (key, convert) in zip(fields, columns):
        if not _NUMBER[convert].match(field):
            wanted = "an integer" if convert is int else "a number"
            raise ParseError("perftest result row %d: %r is not %s: %r" % (number, field, wanted, line.strip()))
        if key is not None:
            row[key] = convert(field)
    return row


def parse_perftest(text):
    """Parse the report of ib_write_bw / ib_read_bw / ib_send_bw / ib_*_lat (see the module docstring)."""
    if not isinstance(text, str):
        raise ParseError("perftest output must be text (str), got %s" % type(text).__name__)
    if not text.strip():
        raise ParseError("perftest output is empty")
    result = {"kind": None, "test": None, "device": None, "link_type": None, "gid_index": None, "mtu": None, "bw_unit": None}
    rows, columns, layout = [], None, None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("#bytes"):
            kind, unit, columns = _layout(line)
            if layout is not None and layout != (kind, unit, columns):
                raise ParseError("perftest output line %d starts a second table with other columns: %r" % (number, stripped))
            layout = (kind, unit, columns)
        elif _RULE.match(line) or _RAW_SAMPLES.match(line):
            columns = None
        elif columns is not None and stripped[:1].isdigit():
            row = dict.fromkeys(_ROW_KEYS[layout[0]])
            row.update(_row(line, columns, number))
            rows.append(row)
        else:
            _banner(line, result)
    if layout is None:
        raise ParseError("no perftest result table: no ' #bytes  #iterations ...' column header line")
    if not rows:
        raise ParseError("perftest result table has a column header but no result rows (run cut short?)")
    if result["test"] is None:
        raise ParseError("no perftest test title (such as 'RDMA_Write BW Test') before the result table")
    result["kind"], result["bw_unit"] = layout[0], layout[1]
    if ("BW" if result["kind"] == "bw" else "Latency") not in result["test"].split():
        raise ParseError("perftest title %r does not match its %s result table" % (result["test"], result["kind"]))
    result["rows"] = rows
    return result


def _banner(line, result):
    """Fill the banner facts from one line outside the rows (the first match wins)."""
    for key, pattern, convert in (
        ("test", _TITLE, str),
        ("device", _DEVICE, str),
        ("link_type", _LINK, str),
        ("gid_index", _GID, int),
        ("mtu", _MTU, int),
    ):
        m = pattern.match(line)
        if m and result[key] is None:
            value = convert(m.group(1))
            result[key] = None if key == "link_type" and value not in ("Ethernet", "IB") else value


def gid_addresses(text):
    """{"local": ip or None, "remote": ip or None}: the IPv4 address of the first GID printed under
    each side's address line (see the module docstring); ParseError when text is not a str."""
    if not isinstance(text, str):
        raise ParseError("perftest output must be text (str), got %s" % type(text).__name__)
    found, side = {"local": None, "remote": None}, None
    for line in text.splitlines():
        m = _SIDE.match(line)
        if m:
            side = m.group(1)
            continue
        m = _GID_BYTES.match(line)
        if m and side and found[side] is None:
            raw = [int(x) for x in m.group(1).split(":")]
            if all(x <= 255 for x in raw) and raw[:10] == [0] * 10 and raw[10:12] == [255, 255]:
                found[side] = ".".join(str(x) for x in raw[12:])
        side = None
    return found
