"""gpu_health.py on parsed real captures: `nvidia-smi -q` (tests/fixtures/realworld/nvidia-smi-q)
and kernel logs with Xid lines (tests/fixtures/realworld/kernel-log-xid); provenance in each .src.txt."""

from __future__ import annotations

import pytest
from ansible.module_utils.rackforge import gpu_health as G
from ansible.module_utils.rackforge import kernel_log
from ansible.module_utils.rackforge import nvidia_smi as n
from conftest import FIXTURES

Q = FIXTURES / "nvidia-smi-q"
XID = FIXTURES / "kernel-log-xid"


def gpus(name, edit=None):
    text = (Q / (name + ".txt")).read_text()
    if edit:
        old, new = edit
        assert old in text
        text = text.replace(old, new, 1)
    return n.parse_query_text(text)["gpus"]


def xids(name):
    return kernel_log.parse_xid((XID / (name + ".txt")).read_text())


def test_healthy_real_gpus_have_no_findings():
    for name in ("h200-550-fabric-completed-clique0", "h100-hbm3-590-fabric-completed-health-na", "v100-sxm2-16gb-8gpu-550"):
        assert G.gpu_hw_findings(gpus(name)) == [], name


def test_the_power_brake_on_a_real_hgx_h100_is_a_finding_on_every_gpu():
    found = G.gpu_hw_findings(gpus("h100-8gpu-hgx-535-fabric-completed-powerbrake"))
    assert len(found) == 8 and {f["check"] for f in found} == {"gpu_slowdown"}
    assert found[0]["component"] == "GPU 0 (00000000:19:00.0)"
    assert found[0]["observed"] == "HW Slowdown, HW Power Brake Slowdown"


def test_aggregate_ecc_history_is_not_a_finding_but_a_volatile_one_is():
    # the real GH200 has 1 aggregate DRAM uncorrectable error and a remapped row: history, remapped
    assert G.gpu_hw_findings(gpus("gh200-550-remapped-row-uncorrectable-powercap")) == []
    # built from the same capture: the first (Volatile) DRAM Uncorrectable counter set to 2
    live = gpus("gh200-550-remapped-row-uncorrectable-powercap", ("DRAM Uncorrectable            : 0", "DRAM Uncorrectable            : 2"))
    [f] = G.gpu_hw_findings(live)
    assert f["check"] == "gpu_ecc_uncorrectable" and f["observed"] == "2"


def test_the_pre_550_double_bit_layout_is_read():
    # built from the real V100 capture: the volatile double-bit total set to 3 (device memory,
    # register file, L1, L2 all count)
    v100 = gpus("v100-sxm2-16gb-8gpu-550")
    v100[0]["ECC Errors"]["Volatile"]["Double Bit"]["Total"] = "3"
    [f] = G.gpu_hw_findings(v100)
    assert f["check"] == "gpu_ecc_uncorrectable" and f["component"].startswith("GPU 0 ")


@pytest.mark.parametrize(
    ("old", "new", "check"),
    [
        ("Pending                           : No", "Pending                           : Yes", "gpu_row_remap_pending"),
        ("Remapping Failure Occurred        : No", "Remapping Failure Occurred        : Yes", "gpu_row_remap_failure"),
    ],
)
def test_row_remapping_pending_and_failure(old, new, check):
    # built from the real H200 capture, one field flipped
    [f] = G.gpu_hw_findings(gpus("h200-550-fabric-completed-clique0", (old, new)))
    assert f["check"] == check and f["observed"] == "Yes"


def test_pcie_width_and_generation_below_the_maximum():
    h100 = "h100-8gpu-hgx-535-fabric-completed-powerbrake"  # busy (Idle: Not Active), Gen5 x16
    narrow = [
        f
        for f in G.gpu_hw_findings(gpus(h100, ("Current                   : 16x", "Current                   : 8x")))
        if f["check"] != "gpu_slowdown"
    ]
    assert [(f["check"], f["expected"], f["observed"]) for f in narrow] == [("gpu_pcie_width", "x16", "x8 while busy")]
    slow = gpus(h100, ("Current                   : 5\n", "Current                   : 3\n"))
    gen = [f for f in G.gpu_hw_findings(slow) if f["check"] == "gpu_pcie_generation"]
    assert [(f["expected"], f["observed"]) for f in gen] == [("Gen5", "Gen3 while busy")]
    # an idle GPU may lower its generation and width to save power: not a finding
    idle = gpus(h100, ("Current                   : 5\n", "Current                   : 3\n"))
    idle[0]["Clocks Event Reasons"]["Idle"] = "Active"
    idle[0]["PCI"]["GPU Link Info"]["Link Width"]["Current"] = "8x"
    assert [f for f in G.gpu_hw_findings(idle) if f["check"].startswith("gpu_pcie")] == []


def test_the_generation_is_held_to_the_systems_maximum_not_the_devices():
    # built from the real busy H100: a Gen5 GPU in a Gen4 slot whose driver prints Host Max N/A
    h100 = gpus("h100-8gpu-hgx-535-fabric-completed-powerbrake")
    h100[0]["PCI"]["GPU Link Info"]["PCIe Generation"].update({"Max": "4", "Current": "4", "Device Max": "5", "Host Max": "N/A"})
    assert [f for f in G.gpu_hw_findings(h100[:1]) if f["check"].startswith("gpu_pcie")] == []


def test_sections_printed_as_na_do_not_break_the_evaluation():
    # drivers print some sections as one "N/A" value (470: "Clocks Throttle Reasons : N/A")
    h100 = gpus("h100-8gpu-hgx-535-fabric-completed-powerbrake")[:1]
    h100[0].pop("Clocks Event Reasons")
    h100[0]["Clocks Throttle Reasons"] = "N/A"
    h100[0]["PCI"]["GPU Link Info"]["Link Width"] = "N/A"
    h100[0]["PCI"]["GPU Link Info"]["PCIe Generation"] = "N/A"
    h100[0]["ECC Errors"] = "N/A"
    h100[0]["Remapped Rows"] = "N/A"
    assert G.gpu_hw_findings(h100) == []


def test_every_volatile_uncorrectable_counter_counts():
    # built from the real H200: SRAM parity and SEC-DED errors need a GPU reset as DRAM ones do
    h200 = gpus("h200-550-fabric-completed-clique0")
    h200[0]["ECC Errors"]["Volatile"].update({"SRAM Uncorrectable Parity": "1", "SRAM Uncorrectable SEC-DED": "2"})
    [f] = G.gpu_hw_findings(h200)
    assert f["check"] == "gpu_ecc_uncorrectable" and f["observed"] == "3"


def test_drain_xids_on_real_logs_are_findings_per_gpu_with_count_and_detail():
    found = G.xid_findings(xids("xe9680-xid119-gsp-timeout-dmesg-T"), ["00000000:9B:00.0"])
    assert len(found) == 1 and found[0]["component"] == "GPU 0 (00000000:9B:00.0)"
    assert found[0]["observed"].startswith("Xid 119 x5: Timeout after 6s of waiting for RPC response from GPU")
    dbe = G.xid_findings(xids("gpu-operator-xid48-dbe-64-syslog"), ["00000000:07:00.0"])
    assert [f["observed"].split(":")[0] for f in dbe] == ["Xid 48 x1", "Xid 64 x1"]


def test_a_gpu_that_fell_off_the_bus_is_named_by_its_address():
    [f] = G.xid_findings(xids("akash-node1-xid79-fallen-off-bus-dmesg-T"), ["00000000:81:00.0"])
    assert f["component"] == "PCI 0000:a1:00 (no GPU at this address now)" and "fallen off the bus" in f["observed"]


def test_application_xids_are_not_hardware_findings_and_the_policy_is_a_parameter():
    events = xids("akash-xid43-31-94-contained-dmesg-T")  # 43, 43, 31 (application faults), 94
    bus = ["00000000:00:05.0", "00000000:00:07.0", "00000000:00:08.0"]
    assert [f["observed"].split(":")[0] for f in G.xid_findings(events, bus)] == ["Xid 94 x1"]
    assert len(G.xid_findings(events, bus, drain=(31, 43, 94))) == 3
    assert G.xid_findings(xids("optimus-laptop-2015-xid32-31-no-pid-dmesg"), ["00000000:01:00.0"]) == []


def test_pci_keys_match_across_the_two_spellings():
    assert G.pci_key("0000:3b:00") == G.pci_key("00000000:3B:00.0") == (0, 0x3B, 0)
    with pytest.raises(ValueError):
        G.pci_key("GPU-3b")
