"""Pure GPU hardware health evaluation (no I/O): the faults that take GPU nodes out most often.

Public, stable API:

- DRAIN_XIDS: the Xid numbers that drain a node by default.
- xid_findings(events, bus_ids, drain=DRAIN_XIDS) -> [finding]
- new_records(records, baseline, boot_id) -> (records since the baseline, the marker to keep)
- gpu_hw_findings(gpus) -> [finding]
- pci_key(address) -> (domain, bus, device)

Inputs: events from kernel_log.parse_xid (the kernel log since the last check), the GPUs'
"Bus Id" values, and the GPU sections of nvidia_smi.parse_query_text (`nvidia-smi -q`). Findings
have health.finding's shape, the evidence as printed in `observed`.

What is a finding, and why (NVIDIA's XID and "GPU memory error management" documents):
- an Xid in the drain list on a GPU of the node (48 double-bit ECC, 63/64 row remapping pending
  or failed, 74 NVLink, 79 fallen off the bus, 92 high single-bit rate, 94/95 contained /
  uncontained ECC, 119 GSP timeout). An event on a bus address no GPU has any more (79 often
  removes it) is named by the address. Other Xids (13, 31, 43: application faults) are not
  hardware findings.
- volatile uncorrectable ECC (the DRAM and SRAM uncorrectable counters since 535, "Double Bit /
  Total" before): the GPU needs a reset. Aggregate counts are history and not a finding by themselves.
- remapped rows: "Pending: Yes" needs a GPU reset to take effect; "Remapping Failure Occurred:
  Yes" means the GPU has no spare rows left: replace it. Retired pages (pre-A100): "Pending Page
  Blacklist: Yes" needs a reset.
- a PCIe link narrower than its maximum width or below the system's maximum generation, judged
  only while the GPU is busy (an idle GPU may lower both to save power: "Clocks Event Reasons /
  Idle: Active").
- an active hardware slowdown (HW Slowdown, HW Thermal Slowdown, HW Power Brake Slowdown, SW
  Thermal Slowdown): the GPU runs below its clocks because of temperature or the chassis' power
  brake. SW Power Cap is normal under load and not a finding.
"""

from __future__ import annotations

import re

from ansible.module_utils.rackforge.health import finding

DRAIN_XIDS = (48, 63, 64, 74, 79, 92, 94, 95, 119)
SLOWDOWNS = ("HW Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown", "SW Thermal Slowdown")
_PCI = re.compile(r"^(?:([0-9A-Fa-f]{4,8}):)?([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\.[0-7])?$")


def pci_key(address):
    """'0000:3b:00' (an Xid line), '00000000:3B:00.0' (nvidia-smi) -> (0, 0x3b, 0); ValueError otherwise."""
    m = _PCI.match(str(address).strip())
    if not m:
        raise ValueError("not a PCI address: %r" % (address,))
    return (int(m.group(1) or "0", 16), int(m.group(2), 16), int(m.group(3), 16))


def xid_findings(events, bus_ids, drain=DRAIN_XIDS):
    """One finding per (GPU, Xid) in the drain list, with the count and the last event's detail.
    bus_ids None: the GPUs are not known (nvidia-smi failed or is missing); events are named by address."""
    gpu_of = {pci_key(bus): (index, bus) for index, bus in enumerate(bus_ids or [])}
    seen = {}
    for event in events:
        if event["xid"] not in drain:
            continue
        key = (pci_key(event["pci"]), event["xid"])
        entry = seen.setdefault(key, {"count": 0, "event": event})
        entry["count"] += 1
        entry["event"] = event
    out = []
    for (pci, xid), entry in sorted(seen.items()):
        gpu = gpu_of.get(pci)
        if gpu:
            component = "GPU %d (%s)" % gpu
        elif bus_ids is None:
            component = "PCI %s" % entry["event"]["pci"]
        else:
            component = "PCI %s (no GPU at this address now)" % entry["event"]["pci"]
        detail = entry["event"]["detail"]
        out.append(
            finding(
                "gpu_xid",
                component,
                "no Xid in %s" % ", ".join(str(x) for x in drain),
                "Xid %d x%d: %s" % (xid, entry["count"], detail),
                "%s logged Xid %d (%d times): %s" % (component, xid, entry["count"], detail),
            )
        )
    return out


def new_records(records, baseline, boot_id):
    """The kmsg records (kernel_log.parse_kmsg) after the baseline {"boot_id", "seq"}, and the
    marker of this read. Another boot (boot_id changed, or sequence numbers below the baseline's:
    the ring buffer started again) makes every record new. An Xid after the baseline stays a
    finding on every check until the baseline is reset (health_checks_reset_baseline) or the node
    reboots, as the counters "rising since the baseline" do."""
    last = max((r["seq"] for r in records), default=None)
    same_boot = baseline.get("boot_id") == boot_id and baseline.get("seq") is not None and (last is None or last >= baseline["seq"])
    since = baseline["seq"] if same_boot else -1
    marker = {"boot_id": boot_id, "seq": last if last is not None else (since if same_boot else 0)}
    return [r for r in records if r["seq"] > since], marker


def _count(value):
    """A printed counter ('0', '1', 'N/A') as an int, None when not printed or N/A."""
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _section(node, *path):
    """node[path...] when every step is a dict section (a printed N/A is a string), else {}."""
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def _volatile_uncorrectable(ecc):
    """The sum of the volatile uncorrectable counters: DRAM and SRAM (parity, SEC-DED) since 535,
    "Double Bit / Total" before; None when none is printed as a number."""
    volatile = _section(ecc, "Volatile")
    counts = [_count(v) for k, v in volatile.items() if "Uncorrectable" in k]
    if not counts:
        counts = [_count(_section(volatile, "Double Bit").get("Total"))]
    counts = [c for c in counts if c is not None]
    return sum(counts) if counts else None


def _reasons(gpu):
    """The clock event reasons section (550+: "Clocks Event Reasons", before: "Clocks Throttle Reasons")."""
    return _section(gpu, "Clocks Event Reasons") or _section(gpu, "Clocks Throttle Reasons")


def _gpu_name(gpu, index):
    return "GPU %d (%s)" % (index, gpu.get("Bus Id Header", "?"))


def _pcie_findings(gpu, name):
    """Width and generation below their maximum, judged only while the GPU is busy: an idle GPU
    may lower both to save power (NVIDIA's nvidia-smi documentation of pcie.link.gen.current and
    pcie.link.width.current). The generation's maximum is "Max", the system's (the lower of the
    GPU's and the slot's); a driver that prints none there falls back to Device Max / Host Max."""
    link = _section(gpu, "PCI", "GPU Link Info")
    if not link or _reasons(gpu).get("Idle") == "Active":
        return []
    out = []
    width = _section(link, "Link Width")
    have, want = _count(str(width.get("Current", "")).rstrip("x")), _count(str(width.get("Max", "")).rstrip("x"))
    if have is not None and want is not None and have < want:
        out.append(
            finding(
                "gpu_pcie_width",
                name,
                "x%d" % want,
                "x%d while busy" % have,
                "%s: PCIe link runs at x%d of x%d while busy" % (name, have, want),
            )
        )
    gen = _section(link, "PCIe Generation")
    top = _count(gen.get("Max"))
    if top is None:
        top = min([m for m in (_count(gen.get("Device Max")), _count(gen.get("Host Max"))) if m is not None], default=None)
    current = _count(gen.get("Current"))
    if top is not None and current is not None and current < top:
        out.append(
            finding(
                "gpu_pcie_generation",
                name,
                "Gen%d" % top,
                "Gen%d while busy" % current,
                "%s: PCIe link runs at Gen%d while busy; the system allows Gen%d" % (name, current, top),
            )
        )
    return out


def gpu_hw_findings(gpus):
    """Findings for the GPU sections of `nvidia-smi -q` (parse_query_text(...)["gpus"])."""
    out = []
    for index, gpu in enumerate(gpus):
        name = _gpu_name(gpu, index)
        dbe = _volatile_uncorrectable(gpu.get("ECC Errors"))
        if dbe:
            out.append(
                finding(
                    "gpu_ecc_uncorrectable", name, "0", str(dbe), "%s: %d volatile uncorrectable ECC errors; reset the GPU" % (name, dbe)
                )
            )
        rows = gpu.get("Remapped Rows")
        if isinstance(rows, dict):
            if rows.get("Remapping Failure Occurred") == "Yes":
                out.append(finding("gpu_row_remap_failure", name, "No", "Yes", "%s: row remapping failed; replace the GPU" % name))
            if rows.get("Pending") == "Yes":
                out.append(finding("gpu_row_remap_pending", name, "No", "Yes", "%s: a row remap is pending; reset the GPU" % name))
        pages = gpu.get("Retired Pages")
        if isinstance(pages, dict) and pages.get("Pending Page Blacklist") == "Yes":
            out.append(finding("gpu_retired_pages_pending", name, "No", "Yes", "%s: a page retirement is pending; reset the GPU" % name))
        out.extend(_pcie_findings(gpu, name))
        reasons = _reasons(gpu)
        active = [r for r in SLOWDOWNS if reasons.get(r) == "Active"]
        if active:
            out.append(
                finding(
                    "gpu_slowdown",
                    name,
                    "no hardware slowdown",
                    ", ".join(active),
                    "%s: clocks held down by %s" % (name, ", ".join(active)),
                )
            )
    return out
