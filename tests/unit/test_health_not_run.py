"""A health check that cannot run is a finding with its evidence, never a pass."""

from __future__ import annotations

import json

import pytest
import rdma_health
from ansible.module_utils.testing import patch_module_args
from hwsim_helper import Sim

ARGS = {"expected_count": 8, "rate_gbps": 400, "exclude_netdevs": ["ens9f0np0"], "lossless_priority": 3}


def run(sim, monkeypatch, capsys):
    for key, value in sim.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(rdma_health.AnsibleModule, "get_bin_path", sim.get_bin_path())
    with patch_module_args(dict(ARGS, sysfs_root=str(sim.sysfs))), pytest.raises(SystemExit):
        rdma_health.main()
    return json.loads(capsys.readouterr().out)


def broken(sim, tool, script):
    path = sim.bin / tool
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


@pytest.mark.parametrize(
    ("tool", "script", "check"),
    [
        ("ibv_devinfo", "echo 'Failed to get IB devices list: Function not implemented' >&2; exit 1\n", "roce_mtu_not_run"),
        ("show_gids", "echo 'garbage that is not a GID table'\n", "roce_gid_not_run"),
        ("ethtool", "echo 'Cannot get stats strings information: Operation not supported' >&2; exit 94\n", "pfc_not_run"),
    ],
)
def test_a_failing_tool_is_a_finding_with_evidence(tmp_path, monkeypatch, capsys, tool, script, check):
    sim = Sim(tmp_path)
    broken(sim, tool, script)
    res = run(sim, monkeypatch, capsys)
    assert not res["healthy"]
    mine = [f for f in res["findings"] if f["check"] == check]
    assert mine and all(f["not_run"] for f in mine)
    evidence = mine[0]["evidence"]
    assert evidence["command"] and tool in evidence["command"]
    assert evidence["rc"] is not None and (evidence["stdout"] or evidence["stderr"])


@pytest.mark.parametrize(
    ("tool", "check"), [("ibv_devinfo", "roce_mtu_not_run"), ("show_gids", "roce_gid_not_run"), ("ethtool", "pfc_not_run")]
)
def test_a_missing_tool_is_a_finding(tmp_path, monkeypatch, capsys, tool, check):
    sim = Sim(tmp_path)
    (sim.bin / tool).unlink()
    res = run(sim, monkeypatch, capsys)
    assert not res["healthy"] and [f for f in res["findings"] if f["check"] == check and "not installed" in f["observed"]]


def test_no_ibstat_means_no_rdma_check_at_all(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path)
    (sim.bin / "ibstat").unlink()
    res = run(sim, monkeypatch, capsys)
    assert not res["healthy"] and [f["check"] for f in res["findings"]] == ["rdma_not_run"]


def test_healthy_when_every_tool_answers(tmp_path, monkeypatch, capsys):
    res = run(Sim(tmp_path), monkeypatch, capsys)
    # the simulator starts with PFC off: only the PFC finding, no check that did not run
    assert not [f for f in res["findings"] if f.get("not_run")]


def test_without_ib_uverbs_ibv_devinfo_fails_as_libibverbs_does_and_the_mtu_check_says_so(tmp_path, monkeypatch, capsys):
    """libibverbs needs the uverbs class (rdma-core libibverbs/init.c check_abi_version): with
    ib_uverbs unloaded ibv_devinfo fails with ENOSYS (examples/devinfo.c: perror, return -1)."""
    sim = Sim(tmp_path)
    sim.run("modprobe", "-r", "ib_uverbs")
    res = sim.run("ibv_devinfo", check=False)
    assert res.returncode == 255 and res.stderr == "Failed to get IB devices list: Function not implemented\n"
    found = run(sim, monkeypatch, capsys)
    mtu = [f for f in found["findings"] if f["check"] == "roce_mtu_not_run"]
    assert mtu and mtu[0]["evidence"]["rc"] == 255 and "Function not implemented" in mtu[0]["evidence"]["stderr"]
    sim.run("modprobe", "ib_uverbs")
    assert sim.run("ibv_devinfo").startswith("hca_id:")
    sim.run("hwsim", "fault", "add", "rdma_port_down", "ca=mlx5_1")  # a fault's re-render keeps the loaded module's tree
    assert sim.run("ibv_devinfo").startswith("hca_id:")
