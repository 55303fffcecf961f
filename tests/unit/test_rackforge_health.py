"""rackforge_health: the whole verdict in one call, the same findings the separate checks give,
and what it keeps (baseline, textfile metrics) written once, shown in check mode, never half."""

from __future__ import annotations

import json

import nvidia_gpu_info
import nvlink_health
import pytest
import rackforge_health
import rdma_health
from hwsim_helper import Sim
from module_helper import call_module

HARDWARE = {"gpu_count": 8, "nvswitch": True, "rdma_nic_count": 8, "rdma_rate_gbps": 400, "management_interfaces": ["ens9f0np0"]}


@pytest.fixture
def sim(tmp_path, monkeypatch):
    sim = Sim(tmp_path)
    for i in range(8):  # the simulator starts with PFC off; a converged node has it on priority 3
        sim.run("mlnx_qos", "-i", "ens%dnp0" % (i + 1), "--pfc", "0,0,0,1,0,0,0,0")
    # the fabric manager's unit: the simulated node has no systemd; `is-active` answers active
    (sim.bin / "systemctl").write_text("#!/bin/sh\nexit 0\n")
    (sim.bin / "systemctl").chmod(0o755)
    for key, value in sim.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(rackforge_health.AnsibleModule, "get_bin_path", sim.get_bin_path())
    return sim


def args(sim, **more):
    return dict(
        {
            "state_dir": str(sim.tmp / "state"),
            "textfile_dir": str(sim.tmp / "textfile"),
            "hardware": HARDWARE,
            "lossless_priority": 3,
            "sysfs_root": str(sim.sysfs),
            "check_topology": False,
        },
        **more,
    )


def test_one_call_keeps_the_baseline_and_metrics_and_a_second_changes_nothing(sim, capsys):
    first = call_module(rackforge_health, args(sim), capsys)
    assert not first.get("failed"), first.get("msg")
    assert first["changed"] and first["health"]["healthy"], first["health"]["findings"]
    state, textfile = sim.tmp / "state", sim.tmp / "textfile"
    assert sorted(first["written"]) == sorted(
        [str(state), str(textfile), str(state / "health-baseline.json"), str(textfile / "rackforge.prom")]
    )
    baseline = json.loads((state / "health-baseline.json").read_text())
    assert set(baseline) == {"nvlink", "rdma", "kernel_log"} and len(baseline["rdma"]) == 9  # the management NIC is a CA too
    prom = (textfile / "rackforge.prom").read_text()
    assert "rackforge_node_healthy 1\n" in prom and prom.count("rackforge_rdma_port_up{") == len(first["health"]["ports"]) >= 8
    assert prom.count("rackforge_nvlink_active_links{") == 8 and prom.count("rackforge_fabric_completed{") == 8
    again = call_module(rackforge_health, args(sim), capsys)
    assert not again["changed"] and again["written"] == [] and again["health"] == first["health"]


def test_check_mode_shows_the_writes_and_makes_none(sim, capsys):
    res = call_module(rackforge_health, args(sim), capsys, check_mode=True)
    assert res["changed"] and res["health"]["healthy"]
    assert [d["after_header"] for d in res["diff"]] == [
        str(sim.tmp / "state" / "health-baseline.json"),
        str(sim.tmp / "textfile" / "rackforge.prom"),
    ]
    assert not (sim.tmp / "state").exists() and not (sim.tmp / "textfile").exists()


def test_the_verdict_is_exactly_the_separate_checks_findings(sim, monkeypatch, capsys):
    """One home for each rule: the verdict is the modules' own findings, nothing added or lost."""
    sim.run("hwsim", "fault", "add", "rdma_port_down", "ca=mlx5_3")
    sim.run("hwsim", "fault", "add", "nvlink_inactive", "gpu=2", "links=5")
    res = call_module(rackforge_health, args(sim), capsys)
    assert not res["health"]["healthy"]
    gpu = call_module(nvidia_gpu_info, {}, capsys)
    monkeypatch.setattr(nvlink_health.AnsibleModule, "get_bin_path", sim.get_bin_path())
    nvlink = call_module(nvlink_health, {"expected_gpus": 8, "nvswitch": True}, capsys)
    monkeypatch.setattr(rdma_health.AnsibleModule, "get_bin_path", sim.get_bin_path())
    rdma = call_module(
        rdma_health,
        {"expected_count": 8, "rate_gbps": 400, "exclude_netdevs": ["ens9f0np0"], "lossless_priority": 3, "sysfs_root": str(sim.sysfs)},
        capsys,
    )
    separate = gpu["findings"] + nvlink["findings"] + rdma["findings"]
    assert res["health"]["findings"] == separate
    assert len({f["check"] for f in separate}) >= 2, separate
    prom = (sim.tmp / "textfile" / "rackforge.prom").read_text()
    assert "rackforge_node_healthy 0\n" in prom
    assert 'rackforge_rdma_port_up{ca="mlx5_3",port="1",netdev="ens4np0"} 0' in prom


def test_the_last_acceptance_counts_only_when_asked(sim, capsys):
    state = sim.tmp / "state"
    state.mkdir()
    finding = {"check": "rdma_latency", "component": "mlx5_0", "expected": "< 5", "observed": 9.1, "message": "slow"}
    (state / "acceptance.json").write_text(json.dumps({"time": "2026-12-05T12:00:00Z", "findings": [finding]}))
    res = call_module(rackforge_health, args(sim), capsys)
    assert res["health"]["findings"] == [finding] and res["acceptance"]["time"] == "2026-12-05T12:00:00Z"
    off = call_module(rackforge_health, args(sim, acceptance=False), capsys)
    assert off["health"]["healthy"]


def test_a_baseline_that_is_not_json_fails_naming_it_and_writes_nothing(sim, capsys):
    state = sim.tmp / "state"
    state.mkdir()
    (state / "health-baseline.json").write_text("{not json")
    res = call_module(rackforge_health, args(sim), capsys)
    assert res["failed"] and str(state / "health-baseline.json") in res["msg"]
    assert not (sim.tmp / "textfile").exists() and (state / "health-baseline.json").read_text() == "{not json"


def test_reset_baseline_rewrites_it_with_the_counters_now(sim, capsys):
    call_module(rackforge_health, args(sim), capsys)
    sim.run("hwsim", "fault", "add", "nvlink_errors", "gpu=1", "link=2", "count=40")
    rising = call_module(rackforge_health, args(sim), capsys)
    # the finding changes the metrics; the baseline stays as the first healthy run kept it
    assert not rising["health"]["healthy"] and rising["written"] == [str(sim.tmp / "textfile" / "rackforge.prom")]
    reset = call_module(rackforge_health, args(sim, reset_baseline=True), capsys)
    # this run still reports the rise (it compared with the old baseline); the next one does not
    assert reset["changed"] and reset["written"] == [str(sim.tmp / "state" / "health-baseline.json")]
    assert not reset["health"]["healthy"]
    assert call_module(rackforge_health, args(sim), capsys)["health"]["healthy"]


def test_a_verdict_changed_after_the_checks_gets_its_metrics_and_nothing_else(sim, capsys):
    """The GPU join gate adds its finding to the verdict: only the textfile is written again."""
    first = call_module(rackforge_health, args(sim), capsys)
    baseline = (sim.tmp / "state" / "health-baseline.json").read_text()
    gate = {"check": "kubernetes_gpu_gate", "component": "node", "expected": 8, "observed": 0, "message": "no GPUs advertised"}
    verdict = dict(first["health"], healthy=False, findings=[gate])
    res = call_module(rackforge_health, {"textfile_dir": str(sim.tmp / "textfile"), "verdict": verdict}, capsys)
    assert res["changed"] and res["written"] == [str(sim.tmp / "textfile" / "rackforge.prom")] and res["health"] == verdict
    prom = (sim.tmp / "textfile" / "rackforge.prom").read_text()
    assert "rackforge_node_healthy 0\n" in prom and "rackforge_health_findings 1\n" in prom
    assert prom.count("rackforge_nvlink_active_links{") == 8  # the checks' GPUs and ports are kept
    assert (sim.tmp / "state" / "health-baseline.json").read_text() == baseline
    bad = call_module(rackforge_health, {"textfile_dir": str(sim.tmp / "textfile"), "verdict": {"gpus": []}}, capsys)
    assert bad["failed"] and "verdict needs healthy and findings" in bad["msg"]
