"""Swap as the kubelet needs it (off now and at boot), decided from what the node shows.

Pure functions (no I/O): the module `swap_off` reads /proc/swaps and /etc/fstab and asks whether it
runs in a container; these decide. A container's /proc/swaps lists the host's swap, which a
container must never switch off: it is reported, never touched. The fstab entries are commented
out, not deleted, so an operator sees what was there."""

from __future__ import annotations

import re

# an fstab line whose third field (the type) is swap; comments and blank lines never match
FSTAB_SWAP = re.compile(r"^([^#\s]\S*\s+\S+\s+swap\s.*)$", re.M)
MARK = "  # disabled by rackforge (kubelet)"


def active(proc_swaps):
    """The swap areas /proc/swaps lists (its first line is the header): [filename]."""
    return [line.split()[0] for line in proc_swaps.splitlines()[1:] if line.strip()]


def fstab_without_swap(text):
    """(the fstab with every active swap line commented out and marked, the lines changed)."""
    lines = FSTAB_SWAP.findall(text)
    return FSTAB_SWAP.sub(lambda m: "# " + m.group(1) + MARK, text), lines
