"""nvidia_gpu_settings' node plan (the gpu_tuning role's one call): one request per GPU model, every
model and timed profile checked (and the calendars) before any change, against the REAL nvidia-smi
over the lab NVML and simulator."""

from __future__ import annotations

import os

import nvidia_gpu_settings
import pytest
from ansible.module_utils.rackforge import nvidia_smi as n
from hwsim_helper import Sim
from test_modules import run_module

H100 = "NVIDIA H100 80GB HBM3"
NIGHT = {"name": "night", "on_calendar": "*-*-* 22:00:00", "settings": {"power_limit": 400}}


@pytest.fixture
def sim(tmp_path, monkeypatch):
    sim = Sim(tmp_path)
    os.symlink("/usr/bin/systemd-analyze", sim.bin / "systemd-analyze")  # the real one checks the calendars
    monkeypatch.setattr(nvidia_gpu_settings.AnsibleModule, "get_bin_path", sim.get_bin_path())
    return sim


def plan(sim, **more):
    return dict({"settings": {"power_limit": 600}, "models": {}, "schedules": [NIGHT], "state_dir": str(sim.tmp / "rf")}, **more)


def limits(sim):
    return [g["power"]["limit"] for g in n.parse_query_xml(sim.run("nvidia-smi", "-q", "-x"))["gpus"]]


def test_one_call_applies_per_model_and_returns_the_boot_and_profile_commands(sim, monkeypatch, capsys):
    res = run_module(nvidia_gpu_settings, plan(sim, models={H100: {"power_limit": 650}}), sim, monkeypatch, capsys)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] and res["driver_loaded"] and limits(sim) == [650.0] * 8
    assert [c[1:] for c in res["boot_commands"]] == [["-i", "0,1,2,3,4,5,6,7", "-pl", "650"]]
    assert [(s["name"], [c[3:] for c in s["boot_commands"]]) for s in res["schedules"]] == [("night", [["-pl", "400"]])]
    assert limits(sim) == [650.0] * 8  # the profile is checked, never applied
    again = run_module(nvidia_gpu_settings, plan(sim, models={H100: {"power_limit": 650}}), sim, monkeypatch, capsys)
    assert not again["changed"]


def test_check_mode_changes_nothing(sim, monkeypatch, capsys):
    res = run_module(nvidia_gpu_settings, plan(sim, _ansible_check_mode=True), sim, monkeypatch, capsys)
    assert res["changed"] and res["diff"]["after"]["0"]["power_limit"] == 600.0 and limits(sim) == [700.0] * 8


@pytest.mark.parametrize(
    ("more", "needle"),
    [
        (
            {"schedules": [dict(NIGHT, settings={"power_limit": 5000})]},
            "gpu_tuning_schedules[night].settings: power_limit 5000.0 W is outside",
        ),
        (
            {"schedules": [dict(NIGHT, on_calendar="at ten")]},
            "gpu_tuning_schedules[night].on_calendar = 'at ten': systemd-analyze calendar",
        ),
        ({"models": {H100: {"power_limit": 900}}}, "gpu_tuning_models['%s']: power_limit 900.0 W is outside" % H100),
        ({"settings": {"application_clocks": {"memory": 1500, "graphics": 1500}}}, "gpu_tuning_settings: application_clocks (memory 1500"),
    ],
)
def test_a_bad_model_profile_or_calendar_fails_before_any_change(sim, monkeypatch, capsys, more, needle):
    res = run_module(nvidia_gpu_settings, plan(sim, **more), sim, monkeypatch, capsys)
    assert res["failed"] and needle in res["msg"] and "nothing was changed" in res["msg"], res["msg"]
    assert limits(sim) == [700.0] * 8


def test_the_nearest_policy_resolves_the_pair_per_model(sim, monkeypatch, capsys):
    asked = {"application_clocks": {"memory": 2619, "graphics": 1760}}
    strict = run_module(nvidia_gpu_settings, plan(sim, settings=asked, schedules=[]), sim, monkeypatch, capsys)
    assert strict["failed"] and "gpu_tuning_settings: application_clocks (memory 2619, graphics 1760)" in strict["msg"]
    res = run_module(nvidia_gpu_settings, plan(sim, settings=asked, schedules=[], clock_policy="nearest"), sim, monkeypatch, capsys)
    assert res["changed"] and res["gpus"][0]["after"]["application_clocks"]["memory"] == 2619
    assert res["gpus"][0]["after"]["application_clocks"]["graphics"] <= 1760


def test_a_node_without_a_usable_driver_is_reported_not_failed(sim, monkeypatch, capsys):
    (sim.bin / "nvidia-smi").unlink()
    res = run_module(nvidia_gpu_settings, plan(sim), sim, monkeypatch, capsys)
    assert not res.get("failed") and res["driver_loaded"] is False and res["error"] == "nvidia-smi not installed"


def test_require_driver_fails_without_one_and_only_warns_in_check_mode(sim, monkeypatch, capsys):
    """gpu_tuning's run (require_driver): a node whose driver is not usable stops there; check mode,
    which runs before the driver would be installed, says so and goes on."""
    (sim.bin / "nvidia-smi").unlink()
    res = run_module(nvidia_gpu_settings, plan(sim, require_driver=True), sim, monkeypatch, capsys)
    assert res["failed"] and res["msg"] == "gpu_tuning needs a loaded NVIDIA driver: nvidia-smi not installed"
    assert res["driver_loaded"] is False
    res = run_module(nvidia_gpu_settings, plan(sim, require_driver=True, _ansible_check_mode=True), sim, monkeypatch, capsys)
    assert not res.get("failed") and res["driver_loaded"] is False
    assert [w["event"]["msg"] for w in res["warnings"]] == [
        "no loaded driver in check mode (it would be installed first): GPU settings are validated and applied on the real run"
    ]


def test_require_driver_with_the_driver_loaded_applies_as_before(sim, monkeypatch, capsys):
    res = run_module(nvidia_gpu_settings, plan(sim, require_driver=True), sim, monkeypatch, capsys)
    assert not res.get("failed") and res["changed"] and res["driver_loaded"] and limits(sim) == [600.0] * 8
