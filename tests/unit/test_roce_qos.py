"""roce_qos against the simulator: converges, is idempotent, honours check mode, refuses
impossible buffers before any change, and reports ports that refuse a setting."""

from __future__ import annotations

import pytest
import roce_qos
from ansible.module_utils.rackforge import rdma as r
from hwsim_helper import Sim
from test_modules import run_module


def _sim(tmp_path, monkeypatch, profile="hgx-h100-8gpu"):
    sim = Sim(tmp_path, profile=profile)
    sim.run("modprobe", "rdma_ucm")  # the role loads it first: rdma_cm's configfs appears

    monkeypatch.setattr(roce_qos.AnsibleModule, "get_bin_path", sim.get_bin_path())
    return sim


def _args(sim, **extra):
    args = {
        "exclude_interfaces": ["ens9f0np0"],
        "sysfs_root": str(sim.sysfs),
        "configfs_root": str(sim.sysfs / "kernel" / "config"),
        "rdma_cm_tos": 106,
        "traffic_class": 106,
    }
    args.update(extra)
    return args


def qos(sim, netdev):
    return r.parse_mlnx_qos(sim.run("mlnx_qos", "-i", netdev))


def test_converges_every_roce_port_then_changes_nothing(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch)
    first = run_module(roce_qos, _args(sim), sim, monkeypatch, capsys)
    assert first["changed"] and first["rejected"] == []
    netdevs = [i["netdev"] for i in first["interfaces"]]
    assert netdevs == ["ens%dnp0" % i for i in range(1, 9)]  # the management port is excluded
    port = qos(sim, "ens1np0")
    assert port["trust"] == "dscp" and port["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0] and port["cable_len"] == 7
    ecn = sim.sysfs / "class/net/ens1np0/ecn"
    assert (ecn / "roce_np/enable/3").read_text().strip() == "1" and (ecn / "roce_rp/enable/3").read_text().strip() == "1"
    assert (ecn / "roce_np/enable/0").read_text().strip() == "0"
    assert (sim.sysfs / "kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos").read_text().strip() == "106"
    # the per-priority pause counters now exist for priority 3 only (mlx5 behaviour)
    assert r.pfc_enabled_priorities(r.parse_ethtool_stats(sim.run("ethtool", "-S", "ens1np0"))) == [3]
    again = run_module(roce_qos, _args(sim), sim, monkeypatch, capsys)
    assert not again["changed"] and all(not i["changed"] for i in again["interfaces"])
    assert again["boot_commands"] == first["boot_commands"]


def test_check_mode_reports_but_changes_nothing(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch)
    before = qos(sim, "ens2np0")
    res = run_module(roce_qos, dict(_args(sim), _ansible_check_mode=True), sim, monkeypatch, capsys)
    assert res["changed"]
    assert res["diff"]["before"]["ens2np0"]["trust"] == "pcp" and res["diff"]["after"]["ens2np0"]["trust"] == "dscp"
    assert qos(sim, "ens2np0") == before


def test_manual_buffers_hold_the_headroom(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch)
    res = run_module(roce_qos, _args(sim, buffer_mode="manual", cable_len_m=30), sim, monkeypatch, capsys)
    port = next(i for i in res["interfaces"] if i["netdev"] == "ens1np0")
    # 400 Gb/s, 30 m, MTU 9000: xoff 170800; + 9000 + 128 = 179928 -> 1406 cells = 179968
    assert port["headroom_bytes"] == 170800 and port["lossless_buffer_bytes"] == 179968
    now = qos(sim, "ens1np0")
    assert now["buffer_size"] == [262016 - 179968, 179968, 0, 0, 0, 0, 0, 0]
    assert now["prio2buffer"] == [0, 0, 0, 1, 0, 0, 0, 0]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"buffer_mode": "manual", "lossless_buffer_bytes": 60000}, "cannot hold the PFC headroom"),
        ({"buffer_mode": "manual", "cable_len_m": 1000}, "does not fit the port's 262016-byte receive buffer"),
        ({"lossless_priority": 8}, "lossless_priority must be in 0..7, got 8"),
        ({"interfaces": ["ens99np0"]}, "interfaces not found as RDMA netdevs: ens99np0"),
    ],
)
def test_impossible_requests_fail_before_any_change(tmp_path, monkeypatch, capsys, extra, needle):
    sim = _sim(tmp_path, monkeypatch)
    before = [qos(sim, "ens%dnp0" % i) for i in range(1, 9)]
    res = run_module(roce_qos, _args(sim, **extra), sim, monkeypatch, capsys)
    assert res["failed"] and needle in res["msg"]
    assert [qos(sim, "ens%dnp0" % i) for i in range(1, 9)] == before


def test_a_port_that_refuses_pfc_is_reported_not_fatal(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch)
    sim.run("hwsim", "fault", "add", "pfc_off", "ca=mlx5_3")
    res = run_module(roce_qos, _args(sim), sim, monkeypatch, capsys)
    assert not res.get("failed")
    assert [x["netdev"] for x in res["rejected"]] == ["ens4np0"]
    assert "pfc reads back [0, 0, 0, 0, 0, 0, 0, 0]" in res["rejected"][0]["problems"][0]
    assert qos(sim, "ens5np0")["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0]


def test_pcie_profile_100g_ports(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch, profile="pcie-a100-4gpu")
    res = run_module(roce_qos, _args(sim, exclude_interfaces=[]), sim, monkeypatch, capsys)
    assert {i["speed_gbps"] for i in res["interfaces"]} == {100}
    assert {i["headroom_bytes"] for i in res["interfaces"]} == {56092}


def test_boot_commands_restore_the_state_after_a_reboot(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch)
    res = run_module(roce_qos, _args(sim, buffer_mode="manual"), sim, monkeypatch, capsys)
    applied = {n: qos(sim, n) for n in ("ens1np0", "ens8np0")}
    sim.run("hwsim", "boot")  # a reboot: NIC QoS, ECN and configfs back to defaults
    sim.run("modprobe", "rdma_ucm")  # modules-load.d at boot
    assert qos(sim, "ens1np0")["trust"] == "pcp"
    script = 'run() { "$@" >/dev/null || exit 1; }\nput() { echo "$1" > "$2" || exit 1; }\n' + "\n".join(res["boot_commands"])
    assert "mkdir -p %s" % (sim.sysfs / "kernel/config/rdma_cm/mlx5_0") in script
    sim.run("sh", "-c", script)
    assert {n: qos(sim, n) for n in applied} == applied
    assert (sim.sysfs / "class/net/ens8np0/ecn/roce_rp/enable/3").read_text().strip() == "1"
    again = run_module(roce_qos, _args(sim, buffer_mode="manual"), sim, monkeypatch, capsys)
    assert not again["changed"]
