from __future__ import annotations

import pytest
from ansible.module_utils.rackforge.hardware import parse_meminfo, pci_id, preflight_findings, version_tuple

H100_PCI = [{"address": "0000:%02x:00.0" % i, "id": "10de:2330", "class": "0x0302"} for i in range(8)] + [
    {"address": "0000:%02x:00.0" % (0x80 + i), "id": "15b3:1021", "class": "0x0200"} for i in range(8)
]
HW = {"cpus": 224, "memory_mb": 2063000, "swap_mb": 0, "root_free_gb": 800, "kernel": "6.1.0-18-amd64", "pci_devices": H100_PCI}
EXPECT = {
    "gpu_count": 8,
    "gpu_pci_ids": ["10de:2330"],
    "rdma_nic_count": 8,
    "rdma_nic_pci_ids": ["15b3:1021"],
    "min_cpus": 64,
    "min_memory_gb": 512,
    "min_root_free_gb": 100,
    "min_kernel": "5.4",
}

CASES = [
    ("healthy", {}, []),
    ("gpu missing", {"pci_devices": H100_PCI[1:]}, ["preflight_hardware.gpu_count"]),
    ("nic missing", {"pci_devices": H100_PCI[:-1]}, ["preflight_hardware.rdma_nic_count"]),
    ("few cpus", {"cpus": 32}, ["preflight_min_cpus"]),
    ("little memory", {"memory_mb": 257000}, ["preflight_min_memory_gb"]),
    ("full disk", {"root_free_gb": 20}, ["preflight_min_root_free_gb"]),
    ("old kernel", {"kernel": "4.15.0-213-generic"}, ["preflight_min_kernel"]),
]


@pytest.mark.parametrize(("name", "change", "variables"), CASES, ids=[c[0] for c in CASES])
def test_preflight_table(name, change, variables):
    findings = preflight_findings(dict(HW, **change), EXPECT)
    assert [f["variable"] for f in findings] == variables


def test_gpu_message_names_expected_and_found():
    (finding,) = preflight_findings(dict(HW, pci_devices=H100_PCI[2:]), {"gpu_count": 8, "gpu_pci_ids": ["10de:2330"]})
    assert finding["message"] == "preflight_hardware.gpu_count: expected 8 GPUs (PCI ids 10de:2330), found 6 on the PCI bus"
    assert (finding["expected"], finding["observed"]) == (8, 6)


def test_helpers():
    assert parse_meminfo("MemTotal:       2113024000 kB\nSwapTotal:  1048576 kB\n") == {"memory_mb": 2063500, "swap_mb": 1024}
    assert version_tuple("6.1.0-18-amd64") == (6, 1, 0) and version_tuple("5.4") == (5, 4, 0)
    assert pci_id("0x10DE", "0x2330\n") == "10de:2330"
