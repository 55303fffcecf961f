"""nvidia_gpu_settings against the REAL nvidia-smi over the lab NVML and simulator, and the clock-pair
helpers on real captures."""

from __future__ import annotations

import json
import re

import nvidia_gpu_settings
import pytest
from ansible.module_utils.rackforge import nvidia_smi as n
from ansible.module_utils.rackforge.gpu import GpuSettingError, check_clock_pair, nearest_clock_pair
from conftest import fixture
from hwsim_helper import Sim
from test_modules import run_module

A100_XML = n.parse_query_xml(fixture("nvidia-smi-q-x", "a100-sxm4-80gb-535-xml"))["gpus"][0]


def test_nearest_pair_on_the_real_a100_capture():
    supported = A100_XML["supported_clocks"]
    assert list(supported) == [1593]  # A100 SXM4 80GB: one memory clock, graphics 1410..210
    # the deployment guides' "1500,1500" is not an A100 pair: the nearest not above it
    assert nearest_clock_pair(supported, 1593, 1500) == {"memory": 1593, "graphics": 1410}
    # 1000 MHz is between the 990 and 1005 steps: round down, never above the request
    assert nearest_clock_pair(supported, 1600, 1000) == {"memory": 1593, "graphics": 990}
    with pytest.raises(GpuSettingError, match=re.escape("no supported pair at or below (memory 1500, graphics 1500) MHz")):
        nearest_clock_pair(supported, 1500, 1500)


def test_strict_unsupported_pair_names_the_valid_pairs():
    with pytest.raises(GpuSettingError) as exc:
        check_clock_pair(A100_XML["supported_clocks"], 1500, 1500, "GPU 0 (NVIDIA A100-SXM4-80GB)")
    msg = str(exc.value)
    assert msg.startswith("application_clocks (memory 1500, graphics 1500) MHz is not a supported pair on GPU 0 (NVIDIA A100-SXM4-80GB)")
    assert "supported: memory 1593 MHz: graphics 1410, 1395," in msg


def _sim(tmp_path, monkeypatch, profile="hgx-h100-8gpu"):
    sim = Sim(tmp_path, profile=profile)

    monkeypatch.setattr(nvidia_gpu_settings.AnsibleModule, "get_bin_path", sim.get_bin_path())
    return sim


def gpus(sim):
    return n.parse_query_xml(sim.run("nvidia-smi", "-q", "-x"))["gpus"]


WANT = {"application_clocks": {"memory": 2619, "graphics": 1755}, "power_limit": 600, "locked_clocks": {"min": 1500, "max": 1755}}


def test_applies_then_changes_nothing_and_reboot_loses_it(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch)
    args = dict(WANT, state_dir=str(sim.tmp / "run" / "rackforge"))
    first = run_module(nvidia_gpu_settings, args, sim, monkeypatch, capsys)
    assert first["changed"]
    now = gpus(sim)
    assert {(g["applications_clocks"]["mem"], g["applications_clocks"]["graphics"], g["power"]["limit"]) for g in now} == {
        (2619, 1755, 600.0)
    }
    assert json.loads((sim.tmp / "run" / "rackforge" / "gpu-locked-clocks.json").read_text())[now[0]["uuid"]] == [1500, 1755]
    again = run_module(nvidia_gpu_settings, args, sim, monkeypatch, capsys)
    assert not again["changed"]
    assert [c[3:] for c in again["boot_commands"]] == [["-ac", "2619,1755"], ["-lgc", "1500,1755"], ["-pl", "600"]]
    # a reboot resets clocks and power (volatile GPU state); the boot commands restore them
    sim.run("hwsim", "boot")
    assert {g["power"]["limit"] for g in gpus(sim)} == {700.0}
    for argv in first["boot_commands"]:
        sim.run(*argv)
    assert {(g["applications_clocks"]["graphics"], g["power"]["limit"]) for g in gpus(sim)} == {(1755, 600.0)}


def test_check_mode_reports_without_changing(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch)
    res = run_module(nvidia_gpu_settings, dict(WANT, state_dir=str(sim.tmp / "rf"), _ansible_check_mode=True), sim, monkeypatch, capsys)
    assert res["changed"] and res["diff"]["before"]["0"]["power_limit"] == 700.0 and res["diff"]["after"]["0"]["power_limit"] == 600.0
    assert {g["power"]["limit"] for g in gpus(sim)} == {700.0}


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (
            {"application_clocks": {"memory": 1500, "graphics": 1500}},
            "application_clocks (memory 1500, graphics 1500) MHz is not a supported pair on GPU 0",
        ),
        ({"power_limit": 800}, "power_limit 800.0 W is outside 200..700 W on GPU 0 (NVIDIA H100 80GB HBM3)"),
        ({"power_limit": 100}, "power_limit 100.0 W is outside 200..700 W"),
        ({"locked_clocks": {"min": 1500, "max": 2500}}, "need 0 < min <= max <= 1980 MHz"),
        ({"gpus": [9]}, "gpus: no GPU with index [9]"),
    ],
)
def test_bad_requests_fail_before_any_change(tmp_path, monkeypatch, capsys, extra, needle):
    sim = _sim(tmp_path, monkeypatch)
    before = gpus(sim)
    res = run_module(nvidia_gpu_settings, dict(extra, state_dir=str(sim.tmp / "rf")), sim, monkeypatch, capsys)
    assert res["failed"] and needle in res["msg"], res["msg"]
    assert gpus(sim) == before


def test_pcie_a100_profile(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch, profile="pcie-a100-4gpu")
    supported = gpus(sim)[0]["supported_clocks"]
    pair = nearest_clock_pair(supported, 1215, 1500)
    res = run_module(nvidia_gpu_settings, {"application_clocks": pair, "state_dir": str(sim.tmp / "rf")}, sim, monkeypatch, capsys)
    assert res["changed"] and len(res["gpus"]) == 4


def test_every_call_makes_one_device_modification_and_the_real_binary_takes_it(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch)
    res = run_module(nvidia_gpu_settings, dict(WANT, persistence_mode=True, state_dir=str(sim.tmp / "rf")), sim, monkeypatch, capsys)
    modifications = {"-pm", "-ac", "-rac", "-lgc", "-rgc", "-pl"}
    for argv in res["boot_commands"]:
        assert len(modifications & set(argv)) == 1, argv  # nvidia-smi refuses two at a time (rc 2)
        out = sim.run(*argv)
        assert "Invalid combination" not in out and out.rstrip().endswith("All done."), argv


@pytest.mark.parametrize(
    ("fault_op", "wanted", "text"),
    [
        ("app-clocks", {"application_clocks": {"memory": 2619, "graphics": 1755}}, "Setting applications clocks is not supported for GPU"),
        ("power-limit", {"power_limit": 600}, "Changing power management limit is not supported for GPU"),
        ("locked-clocks", {"locked_clocks": {"min": 1410, "max": 1755}}, "Setting locked GPU clocks is not supported for GPU"),
        ("persistence", {"persistence_mode": True}, "Unable to set persistence mode for GPU 00000000:19:00.0: Not Supported"),
    ],
    ids=["app-clocks", "power-limit", "locked-clocks", "persistence"],
)
def test_a_setting_nvidia_smi_only_warns_about_fails_the_module(tmp_path, monkeypatch, capsys, fault_op, wanted, text):
    """The real binary exits 0 with "... Treating as warning and moving on." when NVML answers Not
    Supported: the module reads the text and fails with nvidia-smi's rc, stdout and stderr."""
    sim = _sim(tmp_path, monkeypatch)
    sim.run("hwsim", "fault", "add", "gpu_setting_unsupported", "gpu=0", "op=%s" % fault_op)
    res = run_module(nvidia_gpu_settings, dict(wanted, state_dir=str(sim.tmp / "rf")), sim, monkeypatch, capsys)
    assert res["failed"] and res["rc"] == 0, res
    assert text in res["msg"] and "Treating as warning and moving on." in res["stdout"]
    assert res["msg"].startswith("%s -i 0,1,2,3,4,5,6,7 " % sim.bin.joinpath("nvidia-smi"))


def test_gpus_are_selected_by_nvidia_smi_index_not_minor_number(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch)
    sim.run("hwsim", "fault", "add", "gpu_missing", "gpu=2")  # fell off the bus: indices shift, minor numbers stay
    xml = n.parse_query_xml(sim.run("nvidia-smi", "-q", "-x"))["gpus"]
    assert [g["minor_number"] for g in xml][2:4] == [3, 4]
    res = run_module(nvidia_gpu_settings, {"gpus": [2], "power_limit": 450, "state_dir": str(sim.tmp / "rf")}, sim, monkeypatch, capsys)
    assert res["changed"] and [g["uuid"] for g in res["gpus"]] == [xml[2]["uuid"]]
    assert res["boot_commands"][0][1:] == ["-i", "2", "-pl", "450"]
    limits = {g["minor_number"]: g["power"]["limit"] for g in n.parse_query_xml(sim.run("nvidia-smi", "-q", "-x"))["gpus"]}
    assert limits == {0: 700.0, 1: 700.0, 3: 450.0, 4: 700.0, 5: 700.0, 6: 700.0, 7: 700.0}
    res = run_module(nvidia_gpu_settings, {"gpus": [7], "power_limit": 450, "state_dir": str(sim.tmp / "rf")}, sim, monkeypatch, capsys)
    assert res["failed"] and "gpus: no GPU with index [7] (this node has [0, 1, 2, 3, 4, 5, 6])" in res["msg"]
