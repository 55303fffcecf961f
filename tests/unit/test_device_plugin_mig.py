"""The join gate with MIG (issue 20): what the NVIDIA device plugin advertises for a node's MIG
layout, by the plugin's own rules (NVIDIA/k8s-device-plugin internal/rm/device_map.go and rm.go
AddDefaultResourcesToConfig), on the real `nvidia-smi -L` capture of an H100 with four MIG
devices, and the gate (kubernetes_gpu_gate) counting them or refusing a layout the plugin refuses."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.rackforge import device_plugin as dp
from ansible.module_utils.rackforge.nvidia_smi import parse_gpu_list
from conftest import fixture
from test_gpu_gate import fake_node_kubectl, k8s_node, run_gate


def mig_layout():
    """The real H100 MIG layout of tests/fixtures/realworld/nvidia-smi-L (one GPU, 4 MIG devices)."""
    return [
        {"index": g["index"], "enabled": True, "devices": [d["profile"] for d in g["mig_devices"]]}
        for g in parse_gpu_list(fixture("nvidia-smi-L", "h100-hbm3-590-mig-devices"))
    ]


def test_expected_resources_follow_the_plugins_mig_strategies():
    layout = mig_layout()
    assert dp.expected_resources(1, 0, "none", layout) == ({"nvidia.com/gpu": 1}, None)  # none: the whole GPU, MIG or not
    assert dp.expected_resources(1, 0, "mixed", layout) == (
        {"nvidia.com/gpu": 0, "nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-2g.20gb": 1, "nvidia.com/mig-1g.10gb": 2},
        None,
    )
    expected, why = dp.expected_resources(1, 0, "single", layout)
    assert expected == {} and "more than one profile (1g.10gb, 2g.20gb, 3g.40gb)" in why
    uniform = [{"index": i, "enabled": True, "devices": ["1g.10gb"] * 7} for i in range(8)]
    assert dp.expected_resources(8, 0, "single", uniform) == ({"nvidia.com/gpu": 56}, None)
    assert dp.expected_resources(8, 2, "single", uniform) == ({"nvidia.com/gpu": 112}, None)  # time-slicing shares nvidia.com/gpu
    assert dp.expected_resources(8, 2, "mixed", uniform) == ({"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 56}, None)
    # MIG off everywhere: single and mixed advertise the whole GPUs
    off = [{"index": i, "enabled": False, "devices": []} for i in range(8)]
    assert dp.expected_resources(8, 0, "single", off) == ({"nvidia.com/gpu": 8}, None)
    assert dp.expected_resources(8, 0, "mixed", off) == ({"nvidia.com/gpu": 8}, None)
    assert dp.expected_resources(8, 0, "mixed", []) == ({"nvidia.com/gpu": 8}, None)


@pytest.mark.parametrize(
    "layout, strategy, why",
    [
        (
            [{"index": 0, "enabled": True, "devices": []}, {"index": 1, "enabled": True, "devices": ["3g.40gb"]}],
            "single",
            "GPU 0 has MIG enabled and no MIG devices",
        ),
        (
            [{"index": 0, "enabled": False, "devices": []}, {"index": 1, "enabled": True, "devices": ["3g.40gb"]}],
            "single",
            "1 GPU(s) have MIG off and 1 on",
        ),
        (
            [{"index": 0, "enabled": True, "devices": ["1c.3g.40gb"]}, {"index": 1, "enabled": False, "devices": []}],
            "mixed",
            "1c.3g.40gb is not a GPU-instance profile",
        ),
    ],
)
def test_mig_layouts_the_plugin_refuses(layout, strategy, why):
    expected, found = dp.expected_resources(2, 0, strategy, layout)
    assert expected == {} and why in found


def test_mig_profiles_with_attributes_are_named_as_the_plugin_names_them():
    layout = [{"index": 0, "enabled": True, "devices": ["1g.10gb+me", "1g.10gb"]}]
    assert dp.expected_resources(1, 0, "mixed", layout) == (
        {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb.me": 1, "nvidia.com/mig-1g.10gb": 1},
        None,
    )


def test_gate_counts_mig_devices_and_cordons_a_layout_the_plugin_refuses(tmp_path, monkeypatch, capsys):
    node = k8s_node(0)
    node["status"]["allocatable"].update({"nvidia.com/mig-3g.40gb": "1", "nvidia.com/mig-2g.20gb": "1", "nvidia.com/mig-1g.10gb": "2"})
    kubectl, state, _ = fake_node_kubectl(tmp_path, node)
    res = run_gate(monkeypatch, capsys, kubectl, gpus=1, mig_strategy="mixed", mig=mig_layout())
    assert not res.get("failed") and res["advertised"]["nvidia.com/mig-1g.10gb"] == 2 and res["allocatable"] == 4
    # a MIG device gone (a reconfigured GPU the plugin has not caught up with): kept cordoned
    node["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "1"
    state.write_text(json.dumps(node))
    res = run_gate(monkeypatch, capsys, kubectl, gpus=1, mig_strategy="mixed", mig=mig_layout())
    assert res["failed"] and res["cordoned"] and "advertises 1 nvidia.com/mig-1g.10gb, expected 2" in res["msg"]
    # single on this layout: the plugin refuses it, the gate says so at once (no wait) and cordons
    res = run_gate(monkeypatch, capsys, kubectl, gpus=1, mig_strategy="single", mig=mig_layout())
    assert res["failed"] and "refuses its MIG layout: its MIG devices are of more than one profile" in res["msg"]
    assert res["findings"][0]["expected"] == "Ready, a MIG layout the plugin accepts"
