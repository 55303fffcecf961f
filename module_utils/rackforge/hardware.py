"""Pure helpers for host hardware facts and preflight evaluation (no I/O)."""

from __future__ import annotations

import re

PCI_CLASS_NAMES = {"0x0302": "3d_controller", "0x0300": "vga", "0x0680": "bridge_other", "0x0200": "ethernet", "0x0207": "infiniband"}

# NVIDIA NVSwitch PCI ids (vendor:device): 0x22a3 Hopper (HGX H100/H200), 0x1af1 Ampere (HGX A100).
# A node with any of them needs the fabric manager (nvidia_driver_fabricmanager: auto).
NVSWITCH_PCI_IDS = ("10de:22a3", "10de:1af1")


def parse_meminfo(text):
    """/proc/meminfo -> {"memory_mb": int, "swap_mb": int}."""
    values = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+):\s+(\d+) kB", line)
        if m:
            values[m.group(1)] = int(m.group(2))
    return {"memory_mb": values.get("MemTotal", 0) // 1024, "swap_mb": values.get("SwapTotal", 0) // 1024}


def version_tuple(release):
    """'6.1.0-18-amd64' -> (6, 1, 0)."""
    nums = re.findall(r"\d+", release.split("-")[0])
    return tuple(int(n) for n in nums[:3]) + (0,) * (3 - len(nums[:3]))


def pci_id(vendor, device):
    """('0x10de', '0x2330') -> '10de:2330'."""
    return "%s:%s" % (vendor.strip().lower().replace("0x", ""), device.strip().lower().replace("0x", ""))


def count_pci(devices, ids):
    wanted = {i.lower() for i in ids}
    return len([d for d in devices if d["id"] in wanted])


def finding(check, variable, expected, observed, message):
    """One preflight finding (the shape the fleet report and the fact's messages read)."""
    return {"check": check, "variable": variable, "expected": expected, "observed": observed, "message": message}


def preflight_findings(hw, expected):
    """Compare observed hardware with the inventory's expectations.

    hw: {"cpus", "memory_mb", "swap_mb", "root_free_gb", "kernel", "pci_devices": [{"address","id","class"}]}
    expected: {"gpu_count", "gpu_pci_ids", "rdma_nic_count", "rdma_nic_pci_ids", "min_cpus",
               "min_memory_gb", "min_root_free_gb", "min_kernel"}; a missing or None key is not checked.
    Returns [{"check", "variable", "expected", "observed", "message"}].
    """
    findings = []

    def add(check, variable, exp, obs, text):
        findings.append(finding(check, variable, exp, obs, "%s: %s" % (variable, text)))

    if expected.get("gpu_count") is not None:
        ids = expected.get("gpu_pci_ids") or []
        found = (
            count_pci(hw["pci_devices"], ids)
            if ids
            else len([d for d in hw["pci_devices"] if d["id"].startswith("10de:") and d["class"].startswith("0x03")])
        )
        if found != expected["gpu_count"]:
            add(
                "gpu_count",
                "preflight_hardware.gpu_count",
                expected["gpu_count"],
                found,
                "expected %d GPUs (PCI ids %s), found %d on the PCI bus"
                % (expected["gpu_count"], ", ".join(ids) or "any NVIDIA display/3D", found),
            )
    if expected.get("rdma_nic_count") is not None:
        ids = expected.get("rdma_nic_pci_ids") or []
        found = count_pci(hw["pci_devices"], ids)
        if found < expected["rdma_nic_count"]:
            add(
                "rdma_nic_count",
                "preflight_hardware.rdma_nic_count",
                expected["rdma_nic_count"],
                found,
                "expected at least %d RDMA NICs (PCI ids %s), found %d" % (expected["rdma_nic_count"], ", ".join(ids), found),
            )
    if expected.get("min_cpus") and hw["cpus"] < expected["min_cpus"]:
        add(
            "cpus",
            "preflight_min_cpus",
            expected["min_cpus"],
            hw["cpus"],
            "expected at least %d CPUs, found %d" % (expected["min_cpus"], hw["cpus"]),
        )
    if expected.get("min_memory_gb") and hw["memory_mb"] < expected["min_memory_gb"] * 1000:
        add(
            "memory",
            "preflight_min_memory_gb",
            expected["min_memory_gb"],
            hw["memory_mb"] // 1024,
            "expected at least %d GB RAM, found %d MiB" % (expected["min_memory_gb"], hw["memory_mb"]),
        )
    if expected.get("min_root_free_gb") and hw["root_free_gb"] < expected["min_root_free_gb"]:
        add(
            "disk",
            "preflight_min_root_free_gb",
            expected["min_root_free_gb"],
            hw["root_free_gb"],
            "expected at least %d GB free on /, found %d GB" % (expected["min_root_free_gb"], hw["root_free_gb"]),
        )
    if expected.get("min_kernel") and version_tuple(hw["kernel"]) < version_tuple(expected["min_kernel"]):
        add(
            "kernel",
            "preflight_min_kernel",
            expected["min_kernel"],
            hw["kernel"],
            "kernel %s is older than the supported minimum %s" % (hw["kernel"], expected["min_kernel"]),
        )
    return findings


def os_findings(os_name, service_mgr, supported):
    """The OS against the supported list ('' or [] = not checked) and systemd as the service
    manager, as findings like preflight_findings'."""
    findings = []
    if supported and os_name and os_name not in supported:
        message = "preflight_supported_os: %s is not supported (supported: %s)" % (os_name, ", ".join(supported))
        findings.append(finding("os", "preflight_supported_os", supported, os_name, message))
    if service_mgr and service_mgr != "systemd":
        message = "systemd: service manager is %s, rackforge needs systemd" % service_mgr
        findings.append(finding("service_mgr", "service_mgr", "systemd", service_mgr, message))
    return findings


def preflight_warnings(hw, messages, enforce, warn_swap):
    """What the run should say without failing: Secure Boot on, swap on, and the findings
    themselves when they are not enforced."""
    out = []
    if hw.get("secure_boot") == "enabled":
        out.append("Secure Boot is enabled; the driver's DKMS modules must be signed (MOK) or loading fails.")
    if warn_swap and hw.get("swap_mb", 0) > 0:
        out.append("swap is on (%d MiB); the kubernetes roles turn it off." % hw["swap_mb"])
    if not enforce:
        out += ["PREFLIGHT WARNING: %s" % m for m in messages]
    return out
