"""Shared pieces of the nvidia-smi parsers (no I/O): the one ParseError class and the text helpers.

ParseError is defined here only; nvidia_smi, nvidia_smi_xml and nvidia_smi_topo raise this same
class, and ansible.module_utils.rackforge.nvidia_smi re-exports it (the public import path).
"""

from __future__ import annotations

import re

# ESC [ ... final byte: colours and underline (590+ underlines the topo -m header), cursor codes
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")
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
