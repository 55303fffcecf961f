"""Pure parser for `lspci -vv` output (no I/O).

Public, stable API:

- parse_lspci_vv(text) -> dict[str, dict], keyed by the bdf as printed, in output order:
  {bdf: {"name": str,
         "acs_ctl": {flag: bool} | None,
         "lnk_cap": {"speed_gts": float | None, "width": int} | None,
         "lnk_sta": {"speed_gts": float | None, "width": int} | None}}
- ParseError(ValueError): not text; text with no device line (empty text is no devices: {}); a
  LnkCap/LnkSta/ACSCtl line before any device line; a Speed or Width value that is not one lspci
  prints; an ACSCtl flag without its +/-; a bdf printed twice.

Accepts `lspci -vv` and `-vvv` (the same lines for these fields), with or without -D (bdf
"0000:3b:00.0" or "3b:00.0", kept as printed) and -nn. Tabs or spaces (Markdown copies turn lspci's
tabs into spaces). Everything but the device lines and the three fields is skipped, LnkCap2 /
LnkSta2 / LnkCtl included.

Formats, from pciutils' ls-caps.c (cap_express_link) and ls-ecaps.c (cap_acs):

- Device line: "<bdf> <class>: <vendor> <device> (rev xx)"; -vv may add " (prog-if xx [...])".
  "name" is the text after the bdf, class prefix included ("PCI bridge: Broadcom / LSI PEX890xx
  PCIe Gen 5 Switch (rev b0)"), without that trailing prog-if part.
- "LnkCap:\tPort #N, Speed 32GT/s, Width x16, ASPM ..." -> lnk_cap.
- "LnkSta:\tSpeed 16GT/s (downgraded), Width x16" since pciutils 3.8 (a note only where the value
  differs from LnkCap, never on root or downstream ports); "Speed 8GT/s (ok), Width x16 (ok)" in
  3.6-3.7; "Speed 8GT/s, Width x16, TrErr- Train- ..." on one line before 3.6 -> lnk_sta.
  Speeds are "2.5GT/s" ... "128GT/s" (speed_gts 2.5 ... 128.0) or "unknown" (None); Width "x<N>".
  A device with two links (a CXL 1.1 RCD prints its own) keeps the first LnkCap / LnkSta.
- "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
  (the ACS control register; ACSCap, the capability register, is not read) -> acs_ctl, None for a
  device with no ACS capability.
Without root, lspci prints "Capabilities: <access denied>": every field is then None.
"""

from __future__ import annotations

import re

_DEVICE = re.compile(r"^\s*((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(\S.*?)\s*$")
_PROG_IF = re.compile(r"\s*\(prog-if [0-9a-fA-F]{2}(?: \[[^\]]*\])?\)$")
_FIELD = re.compile(r"^\s*(LnkCap|LnkSta|ACSCtl):\s*(.*?)\s*$")
_SPEED = re.compile(r"\bSpeed\s+([^\s,]+)")
_WIDTH = re.compile(r"\bWidth\s+([^\s,]+)")
_GTS = re.compile(r"^(\d+(?:\.\d+)?)GT/s$")
_LANES = re.compile(r"^x(\d+)$")
_FLAG = re.compile(r"^([A-Za-z][A-Za-z0-9]*)([+-])$")
_KEYS = {"LnkCap": "lnk_cap", "LnkSta": "lnk_sta", "ACSCtl": "acs_ctl"}


class ParseError(ValueError):
    """Raised when text is not the `lspci -vv` output the parser expects."""


def _link(bdf, field, value):
    speed = _SPEED.search(value)
    width = _WIDTH.search(value)
    if not speed or not width:
        raise ParseError("lspci %s: %s without Speed and Width: %r" % (bdf, field, value))
    if speed.group(1) == "unknown":
        gts = None
    else:
        m = _GTS.match(speed.group(1))
        if not m:
            raise ParseError("lspci %s: %s Speed %r is not <N>GT/s or unknown" % (bdf, field, speed.group(1)))
        gts = float(m.group(1))
    lanes = _LANES.match(width.group(1))
    if not lanes:
        raise ParseError("lspci %s: %s Width %r is not x<N>" % (bdf, field, width.group(1)))
    return {"speed_gts": gts, "width": int(lanes.group(1))}


def _acs(bdf, value):
    flags = {}
    for token in value.split():
        m = _FLAG.match(token)
        if not m:
            raise ParseError("lspci %s: ACSCtl flag %r is not <Name>+ or <Name>-" % (bdf, token))
        flags[m.group(1)] = m.group(2) == "+"
    if not flags:
        raise ParseError("lspci %s: ACSCtl line without flags" % bdf)
    return flags


def parse_lspci_vv(text):
    """{bdf: {"name", "acs_ctl", "lnk_cap", "lnk_sta"}} from `lspci -vv` / `-vvv` text."""
    if not isinstance(text, str):
        raise ParseError("lspci: expected text, got %s" % type(text).__name__)
    devices = {}
    bdf = dev = None
    for line in text.splitlines():
        m = _DEVICE.match(line)
        if m:
            bdf = m.group(1)
            if bdf in devices:
                raise ParseError("lspci: device %s printed twice" % bdf)
            dev = {"name": _PROG_IF.sub("", m.group(2)), "acs_ctl": None, "lnk_cap": None, "lnk_sta": None}
            devices[bdf] = dev
            continue
        m = _FIELD.match(line)
        if not m:
            continue
        field, value = m.group(1), m.group(2)
        if dev is None:
            raise ParseError("lspci: %s line before any device line: %r" % (field, line.strip()))
        key = _KEYS[field]
        if dev[key] is not None:
            continue
        dev[key] = _acs(bdf, value) if field == "ACSCtl" else _link(bdf, field, value)
    if not devices and text.strip():
        raise ParseError("lspci: no device line in %r" % text.strip()[:120])
    return devices
