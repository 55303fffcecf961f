"""Pure parser for NVIDIA Xid events in kernel logs (no I/O).

Public, stable API:

- parse_xid(text) -> list[dict], one dict per Xid line, in log order:
  {"pci": str, "xid": int, "pid": int | None, "name": str | None, "detail": str}
- parse_kmsg(text) -> list[dict], one per /dev/kmsg record: {"seq": int, "usec": int, "message": str}
- ParseError(ValueError): the text is not text, or a line has "NVRM: Xid" but cannot be read.

Format. The NVIDIA kernel driver (NVRM) logs every Xid event as one kernel message; NVIDIA's
"XID Errors" document (docs.nvidia.com/deploy/xid-errors) describes these messages and lists what
each number means. Their shape, as real logs show it (tests/fixtures/realworld/kernel-log-xid):

    NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of waiting ...
    NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
    NVRM: Xid (PCI:0000:01:00): 31, Ch 00000003, engmask 00000101, intr 10000000     (older drivers)
    NVRM: Xid (0000:03:00): 13, 0003 00000000 00008297 00001098 00000000 00000044   (2012 drivers)

- "pci": the address inside the parentheses, without the "PCI:" that current drivers put before it
  (2012-era drivers print none): domain:bus:device, e.g. "0000:3b:00", no function number.
- "pid" / "name": newer drivers put them after the number; pid='<unknown>' and name=<unknown>
  (process not known, e.g. an ECC event) become None, and so do fields an older driver does not
  print. "name" is the process name up to the next ", " (a name with ", " in it cannot be told apart).
- "detail": the rest of the line, stripped (it may itself hold commas); "" when nothing follows.

Whatever stands before "NVRM:" is ignored: dmesg "[  219.470994] ", dmesg -T "[Sun Feb 23 16:24:18
2025] ", syslog / journalctl -k "Dec  2 11:38:47 worker4 kernel: ", dmesg --decode "kern  :warn  : ".
Lines without "NVRM: Xid" (continuation lines, RPC history tables, other drivers) are skipped.

/dev/kmsg (the kernel's Documentation/ABI/testing/dev-kmsg): one record per line,
"<level+facility>,<seq>,<usec since boot>,<flags>[,more];<message>", followed by dictionary
lines that begin with a space (" SUBSYSTEM=pci", skipped). The sequence number only grows within
a boot: it is what tells the records of one check from the next. A record whose header cannot be
read is a ParseError.
"""

from __future__ import annotations

import re

_MARK = "NVRM: Xid"
# number: digits not followed by a letter, digit or dot (so "79abc" or "7.9" are not an Xid number)
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([^()\s]+)\):\s*(\d+)(?![\w.])\s*,?\s*(.*)$")
_PID = re.compile(r"pid=('<unknown>'|<unknown>|\d+)\s*(?:,\s*|$)")
_NAME = re.compile(r"name=([^,]*?)\s*(?:,\s*|$)")
_UNKNOWN = ("<unknown>", "'<unknown>'", "")
_KMSG = re.compile(r"^(\d+),(\d+),(\d+),[^;]*;(.*)$")


class ParseError(ValueError):
    """Raised when the input is not text, or an Xid line cannot be read."""


def _xid_line(line):
    m = _XID.search(line)
    if not m:
        raise ParseError("kernel log: cannot read the Xid line %r" % line.strip())
    pci, xid, rest = m.group(1), int(m.group(2)), m.group(3)
    pid = name = None
    if rest.startswith("pid="):
        p = _PID.match(rest)
        if not p:
            raise ParseError("kernel log: cannot read the pid of the Xid line %r" % line.strip())
        pid = None if p.group(1) in _UNKNOWN else int(p.group(1))
        rest = rest[p.end() :]
    if rest.startswith("name="):
        n = _NAME.match(rest)
        name = None if n.group(1) in _UNKNOWN else n.group(1)
        rest = rest[n.end() :]
    return {"pci": pci, "xid": xid, "pid": pid, "name": name, "detail": rest.strip()}


def parse_xid(text):
    """Every NVRM Xid event in `text` (dmesg, dmesg -T, journalctl -k, syslog), in order."""
    if not isinstance(text, str):
        raise ParseError("kernel log: expected text, got %s" % type(text).__name__)
    return [_xid_line(line) for line in text.splitlines() if _MARK in line]


def parse_kmsg(text):
    """The records of /dev/kmsg text, in order (dictionary lines skipped)."""
    if not isinstance(text, str):
        raise ParseError("kmsg: expected text, got %s" % type(text).__name__)
    out = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line or line.startswith(" "):
            continue
        m = _KMSG.match(line)
        if not m:
            raise ParseError("kmsg: line %d is not a record (<prio>,<seq>,<usec>,<flags>;<message>): %r" % (lineno, line[:120]))
        out.append({"seq": int(m.group(2)), "usec": int(m.group(3)), "message": m.group(4)})
    return out
