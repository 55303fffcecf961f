"""The modules run for real against the lab on PATH: the REAL nvidia-smi over the lab NVML and the
simulator's GPUs, and the simulator's NIC tools (argv[0] names)."""

from __future__ import annotations

import json
import shutil

import nvidia_gpu_info
import nvlink_health
import pytest
import rackforge_preflight_facts
import rdma_health
from ansible.module_utils import _internal as module_utils_internal
from ansible.module_utils.common import warnings as ansible_warnings
from ansible.module_utils.testing import patch_module_args
from hwsim_helper import Sim


def run_module(mod, args, sim, monkeypatch, capsys):
    for key, value in sim.env.items():
        monkeypatch.setenv(key, value)
    # a real module runs in a process of its own, on the node: no warning of an earlier call in
    # this one, and its warnings are returned (an earlier test that loaded controller code would
    # have them displayed instead)
    monkeypatch.setattr(ansible_warnings, "_global_warnings", {})
    monkeypatch.setattr(module_utils_internal, "is_controller", False)
    with patch_module_args(args), pytest.raises(SystemExit):
        mod.main()
    return json.loads(capsys.readouterr().out)


def test_gpu_info_reads_simulated_h100(tmp_path, monkeypatch, capsys):
    res = run_module(nvidia_gpu_info, {}, Sim(tmp_path), monkeypatch, capsys)
    assert res["driver_loaded"] and res["driver_version"] == "535.261.03"
    assert len(res["gpus"]) == 8 and res["gpus"][0]["power"]["max_limit"] == 700.0
    assert res["fabric"][0]["state"] == "Completed"
    assert res["fabric_completed"] is True and all(f["completed"] for f in res["fabric"])
    assert res["findings"] == []  # healthy GPUs: no hardware finding


@pytest.mark.parametrize(
    ("fault", "check", "observed"),
    [
        (["gpu_ecc_uncorrectable", "gpu=3", "count=2"], "gpu_ecc_uncorrectable", "2"),
        (["gpu_row_remap_pending", "gpu=3"], "gpu_row_remap_pending", "Yes"),
        (["gpu_row_remap_failure", "gpu=3"], "gpu_row_remap_failure", "Yes"),
        (["gpu_pcie_downtrained", "gpu=3", "width=4"], "gpu_pcie_width", "x4 while busy"),
        (["gpu_hw_slowdown", "gpu=3"], "gpu_slowdown", "HW Slowdown, HW Power Brake Slowdown"),
    ],
)
def test_gpu_info_reports_gpu_hardware_faults_as_the_real_nvidia_smi_prints_them(tmp_path, monkeypatch, capsys, fault, check, observed):
    sim = Sim(tmp_path)
    sim.run("hwsim", "fault", "add", *fault)
    res = run_module(nvidia_gpu_info, {}, sim, monkeypatch, capsys)
    assert res["driver_loaded"] and not res.get("failed")
    assert [(f["check"], f["component"], f["observed"]) for f in res["findings"]] == [(check, "GPU 3 (00000000:5D:00.0)", observed)]


def test_gpu_info_fabric_in_progress_is_not_completed(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path)
    sim.run("hwsim", "fault", "add", "fabric_in_progress")
    res = run_module(nvidia_gpu_info, {}, sim, monkeypatch, capsys)
    assert res["fabric_completed"] is False and not any(f["completed"] for f in res["fabric"])


def test_gpu_info_without_driver_is_not_an_error(tmp_path, monkeypatch, capsys):
    res = run_module(nvidia_gpu_info, {}, Sim(tmp_path, driver=None), monkeypatch, capsys)
    assert res["present"] and not res["driver_loaded"] and not res.get("failed")
    assert "couldn't communicate" in res["error"]


def test_gpu_info_flags_version_mismatch_as_reboot(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path)
    (sim.tmp / "driver-version").write_text("535.247.01\n")
    res = run_module(nvidia_gpu_info, {}, sim, monkeypatch, capsys)
    assert res["reboot_required"] and not res["driver_loaded"]


H100 = {"expected_links": 18, "expected_speed_gbps": 26.562, "expected_gpus": 8, "nvswitch": True, "check_topology": False}


def test_nvlink_health_names_gpu_and_links(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path)
    sim.run("hwsim", "fault", "add", "nvlink_inactive", "gpu=3", "links=4,5")
    monkeypatch.setattr(nvlink_health.AnsibleModule, "get_bin_path", sim.get_bin_path())
    res = run_module(nvlink_health, H100, sim, monkeypatch, capsys)
    assert not res["healthy"]
    checks = sorted({f["check"] for f in res["findings"]})
    # fabric manager is not a systemd unit on the test machine: that is reported too
    assert "nvlink_inactive" in checks and "fabricmanager" in checks
    inactive = [f for f in res["findings"] if f["check"] == "nvlink_inactive"]
    assert len(inactive) == 1 and "GPU 3" in inactive[0]["message"] and "4,5" in inactive[0]["message"]


def test_nvlink_health_fabric_in_progress_and_link_errors(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path)
    sim.run("hwsim", "fault", "add", "fabric_in_progress")
    sim.run("hwsim", "fault", "add", "nvlink_errors", "gpu=1", "link=2", "count=5")
    monkeypatch.setattr(nvlink_health.AnsibleModule, "get_bin_path", sim.get_bin_path())
    res = run_module(nvlink_health, H100, sim, monkeypatch, capsys)
    fabric = [f for f in res["findings"] if f["check"] == "fabric"]
    assert len(fabric) == 8 and all(f["observed"] == "In Progress/N/A" for f in fabric)
    errors = sorted(f["component"] for f in res["findings"] if f["check"] == "nvlink_errors")
    assert errors == ["GPU 1 (%s) link 2" % res["gpus"][1]["uuid"]] * 2  # replay and CRC


def test_nvlink_health_topology_check_reads_the_nvlink_p2p_matrix(tmp_path, monkeypatch, capsys):
    """The topology check reads `topo -p2p n` (public NVML P2P status): every GPU pair OK on a
    healthy NVSwitch node; a GPU whose links are all down is NS to every peer. (`topo -m` needs
    NVML's private export table, which the lab NVML does not model.)"""
    sim = Sim(tmp_path)
    monkeypatch.setattr(nvlink_health.AnsibleModule, "get_bin_path", sim.get_bin_path())
    res = run_module(nvlink_health, dict(H100, check_topology=True), sim, monkeypatch, capsys)
    assert not [f for f in res["findings"] if f["check"].startswith("nvlink_p2p")], res["findings"]
    sim.run("hwsim", "fault", "add", "gpu_links_all_inactive", "gpu=2")
    res = run_module(nvlink_health, dict(H100, check_topology=True), sim, monkeypatch, capsys)
    p2p = sorted(f["component"] for f in res["findings"] if f["check"] == "nvlink_p2p")
    assert p2p == sorted(["GPU2-GPU%d" % j for j in range(8) if j != 2] + ["GPU%d-GPU2" % i for i in range(8) if i != 2])
    assert all(f["observed"] == "NS" for f in res["findings"] if f["check"] == "nvlink_p2p")


def test_nvlink_health_a_failing_query_is_a_finding_not_a_pass(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path, driver=None)  # installed nothing loaded: nvidia-smi exits 9 for every query
    monkeypatch.setattr(nvlink_health.AnsibleModule, "get_bin_path", sim.get_bin_path())
    res = run_module(nvlink_health, dict(H100, check_topology=True), sim, monkeypatch, capsys)
    assert not res["healthy"] and not res.get("failed")
    not_run = {f["check"]: f for f in res["findings"] if f.get("not_run")}
    assert set(not_run) == {"nvlink_not_run", "nvlink_errors_not_run", "nvlink_p2p_not_run", "fabric_not_run"}
    assert not_run["nvlink_not_run"]["evidence"]["rc"] == 9
    assert "couldn't communicate with the NVIDIA driver" in not_run["nvlink_not_run"]["evidence"]["stdout"]


def test_rdma_health_port_down(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path)
    sim.run("hwsim", "fault", "add", "rdma_port_down", "ca=mlx5_4")
    monkeypatch.setattr(rdma_health.AnsibleModule, "get_bin_path", sim.get_bin_path())
    args = {"expected_count": 8, "rate_gbps": 400, "exclude_netdevs": ["ens9f0np0"], "sysfs_root": str(sim.sysfs)}
    res = run_module(rdma_health, args, sim, monkeypatch, capsys)
    # the downed port also counts a link_down_events_phy against the empty baseline
    assert {f["component"] for f in res["findings"]} == {"mlx5_4/1 (ens5np0)"}
    assert sorted(f["check"] for f in res["findings"]) == ["rdma_errors", "rdma_port_state"]
    assert len(res["ports"]) == 8


def test_rdma_health_pause_storm_against_baseline(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path)
    monkeypatch.setattr(rdma_health.AnsibleModule, "get_bin_path", sim.get_bin_path())
    args = {"expected_count": 8, "rate_gbps": 400, "exclude_netdevs": ["ens9f0np0"], "sysfs_root": str(sim.sysfs)}
    healthy = run_module(rdma_health, args, sim, monkeypatch, capsys)
    assert healthy["healthy"] and healthy["counters"]["mlx5_2"]["tx_pause_storm_error_events"] == 0
    sim.run("hwsim", "fault", "add", "pause_storm", "ca=mlx5_2", "count=4")
    res = run_module(rdma_health, dict(args, baseline=healthy["counters"]), sim, monkeypatch, capsys)
    assert [(f["check"], f["component"], f["observed"]) for f in res["findings"]] == [("pause_storm", "mlx5_2/1 (ens3np0)", 4)]
    port = next(p for p in res["ports"] if p["ca"] == "mlx5_2")
    assert port["counters"]["tx_pause_storm_error_events"] == 4 and not port["healthy"]


def test_rdma_health_pfc_off(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path)
    for i in range(8):
        sim.run("mlnx_qos", "-i", "ens%dnp0" % (i + 1), "--pfc", "0,0,0,1,0,0,0,0")
    sim.run("hwsim", "fault", "add", "pfc_off", "ca=mlx5_6")
    monkeypatch.setattr(rdma_health.AnsibleModule, "get_bin_path", sim.get_bin_path())
    args = {"expected_count": 8, "rate_gbps": 400, "exclude_netdevs": ["ens9f0np0"], "lossless_priority": 3, "sysfs_root": str(sim.sysfs)}
    res = run_module(rdma_health, args, sim, monkeypatch, capsys)
    assert [(f["check"], f["component"]) for f in res["findings"]] == [("pfc", "mlx5_6/1 (ens7np0)")]


def test_preflight_info_missing_gpu(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path)
    sim.run("hwsim", "fault", "add", "gpu_missing", "gpu=5")
    args = {"sysfs_root": str(sim.sysfs), "expected": {"gpu_count": 8, "gpu_pci_ids": ["10de:2330"]}}
    res = run_module(rackforge_preflight_facts, args, sim, monkeypatch, capsys)
    assert [f["message"] for f in res["findings"]] == [
        "preflight_hardware.gpu_count: expected 8 GPUs (PCI ids 10de:2330), found 7 on the PCI bus"
    ]


def warnings(result):
    """The texts of a result's warnings (ansible-core 2.19 returns each as an event)."""
    return [w["event"]["msg"] if isinstance(w, dict) else w for w in result.get("warnings", [])]


def test_preflight_facts_set_the_public_fact_fail_on_findings_when_enforced_and_warn_otherwise(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path)
    sim.run("hwsim", "fault", "add", "gpu_missing", "gpu=5")
    args = {
        "sysfs_root": str(sim.sysfs),
        "expected": {"gpu_count": 8, "gpu_pci_ids": ["10de:2330"]},
        "os": "Debian-11",
        "service_mgr": "systemd",
        "supported_os": ["Debian-12", "Debian-13"],
        "host": "node9",
    }
    res = run_module(rackforge_preflight_facts, dict(args, enforce=True), sim, monkeypatch, capsys)
    want = [
        "preflight_supported_os: Debian-11 is not supported (supported: Debian-12, Debian-13)",
        "preflight_hardware.gpu_count: expected 8 GPUs (PCI ids 10de:2330), found 7 on the PCI bus",
    ]
    assert res["failed"] and res["msg"] == "node9: preflight failed: " + "; ".join(want)
    # not enforced: the same findings are warnings, and the fact says what later roles read
    res = run_module(rackforge_preflight_facts, dict(args, enforce=False), sim, monkeypatch, capsys)
    fact = res["ansible_facts"]["rackforge_preflight"]
    assert not res.get("failed") and not fact["passed"] and fact["messages"] == want
    assert fact["gpus_on_pci_bus"] == 7 and fact["nvswitches_on_pci_bus"] == 4 and fact["sysfs_root"] == str(sim.sysfs)
    assert ["node9: PREFLIGHT WARNING: " + m for m in want] == [w for w in warnings(res) if "PREFLIGHT" in w]
    # a supported OS with systemd and the GPUs all there: passed, nothing to say
    ok = run_module(
        rackforge_preflight_facts, dict(args, os="Debian-12", expected={"gpu_count": 7}, enforce=True), sim, monkeypatch, capsys
    )
    assert ok["ansible_facts"]["rackforge_preflight"]["passed"] and not [w for w in warnings(ok) if "PREFLIGHT" in w]
    bad = run_module(rackforge_preflight_facts, dict(args, os="Debian-12", service_mgr="sysvinit", expected={}), sim, monkeypatch, capsys)
    assert bad["ansible_facts"]["rackforge_preflight"]["messages"] == ["systemd: service manager is sysvinit, rackforge needs systemd"]


def test_preflight_facts_take_the_runs_package_snapshot_when_given_its_id(tmp_path, monkeypatch, capsys):
    """The preflight's one read also takes every package of this build host (the real dpkg), for the
    run's later package calls and repository checks; without the id (the module called by a task of
    one's own) it takes none."""
    if not shutil.which("dpkg-query"):
        pytest.skip("not a Debian-family machine")
    sim = Sim(tmp_path)
    args = {"sysfs_root": str(sim.sysfs), "packages_snapshot": "run-7"}
    snap = run_module(rackforge_preflight_facts, args, sim, monkeypatch, capsys)["ansible_facts"]["rackforge_packages_snapshot"]
    assert snap["run"] == "run-7" and snap["packages"]["dpkg"][0] and {"apt", "bash"} <= set(snap["packages"])
    assert set(snap) == {"run", "packages", "keys", "sources"}
    without = run_module(rackforge_preflight_facts, {"sysfs_root": str(sim.sysfs)}, sim, monkeypatch, capsys)
    assert set(without["ansible_facts"]) == {"rackforge_preflight"}


def test_run_concurrently_keeps_the_order_runs_at_once_and_reports_what_cannot_start():
    import time

    from ansible.module_utils.basic import AnsibleModule
    from ansible.module_utils.rackforge import C_ENV, run_concurrently

    with patch_module_args({}):
        module = AnsibleModule(argument_spec={})
    started = time.monotonic()
    argvs = [["sh", "-c", "sleep 0.4; echo %d; echo $LC_ALL >&2" % i] for i in range(4)]
    results = run_concurrently(module, argvs, environ_update=C_ENV)
    took = time.monotonic() - started
    assert [r[:2] for r in results] == [(0, "%d\n" % i) for i in range(4)]
    assert all(r[2] == "C\n" for r in results)
    assert took < 1.2, "four 0.4 s commands took %.2f s: not run at the same time" % took
    (rc, out, err), (rc_ok, _, _) = run_concurrently(module, [["/nonexistent/rackforge-tool"], ["true"]])
    assert rc is None and out == "" and "/nonexistent/rackforge-tool" in err and rc_ok == 0
    assert run_concurrently(module, []) == []


def test_gpu_info_reports_xids_the_kernel_logged_since_the_baseline(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path)
    kmsg = str(tmp_path / "run" / "kmsg")  # the simulated kernel's records, in /dev/kmsg's format
    first = run_module(nvidia_gpu_info, {"kmsg_path": kmsg}, sim, monkeypatch, capsys)
    assert first["findings"] == [] and first["kernel_log"]["seq"] >= 1
    sim.run("hwsim", "fault", "add", "gpu_xid", "gpu=1", "xid=79")
    sim.run("hwsim", "fault", "add", "gpu_xid", "gpu=2", "xid=13", "detail=Graphics Exception")  # an application fault
    res = run_module(nvidia_gpu_info, {"kmsg_path": kmsg, "xid_baseline": first["kernel_log"]}, sim, monkeypatch, capsys)
    (xid,) = res["findings"]
    assert xid["check"] == "gpu_xid" and xid["component"] == "GPU 1 (00000000:3B:00.0)" and "Xid 79 x1" in xid["observed"]
    # held on every check after the same baseline, and after a first baseline kept from this read
    # (the marker before the Xid); the acknowledging marker (a baseline reset keeps it) clears it
    assert res["kernel_log_unacknowledged"]["seq"] < res["kernel_log"]["seq"]
    for baseline in (first["kernel_log"], res["kernel_log_unacknowledged"]):
        again = run_module(nvidia_gpu_info, {"kmsg_path": kmsg, "xid_baseline": baseline}, sim, monkeypatch, capsys)
        assert [f["check"] for f in again["findings"]] == ["gpu_xid"]
    reset = run_module(nvidia_gpu_info, {"kmsg_path": kmsg, "xid_baseline": res["kernel_log"]}, sim, monkeypatch, capsys)
    assert reset["findings"] == []
    # Xid 13 is a finding only when the policy lists it
    strict = run_module(
        nvidia_gpu_info, {"kmsg_path": kmsg, "xid_baseline": first["kernel_log"], "drain_xids": [13, 79]}, sim, monkeypatch, capsys
    )
    assert sorted(f["observed"].split(":")[0] for f in strict["findings"]) == ["Xid 13 x1", "Xid 79 x1"]


def test_gpu_info_an_unreadable_kernel_log_is_not_run_never_a_pass(tmp_path, monkeypatch, capsys):
    res = run_module(nvidia_gpu_info, {"kmsg_path": str(tmp_path / "no-kmsg")}, Sim(tmp_path), monkeypatch, capsys)
    assert [f["check"] for f in res["findings"]] == ["gpu_xid_not_run"] and res["kernel_log"] is None


def test_rdma_health_reports_pause_and_congestion_traffic_without_judging_it(tmp_path, monkeypatch, capsys):
    """PFC pause frames per enabled priority (ethtool -S) and CNP/ECN counts (hw_counters) come
    back per port as traffic; a busy lossless fabric pauses and marks by design, so none of it
    is a finding."""
    sim = Sim(tmp_path)
    for i in range(8):
        sim.run("mlnx_qos", "-i", "ens%dnp0" % (i + 1), "--pfc", "0,0,0,1,0,0,0,0")
    monkeypatch.setattr(rdma_health.AnsibleModule, "get_bin_path", sim.get_bin_path())
    args = {"expected_count": 8, "rate_gbps": 400, "exclude_netdevs": ["ens9f0np0"], "lossless_priority": 3, "sysfs_root": str(sim.sysfs)}
    res = run_module(rdma_health, args, sim, monkeypatch, capsys)
    assert res["healthy"], res["findings"]
    port = next(p for p in res["ports"] if p["ca"] == "mlx5_0")
    assert {"rx_prio3_pause", "tx_prio3_pause"} <= set(port["traffic"])
    assert {"np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets"} <= set(port["traffic"])
    assert not set(port["traffic"]) & set(port["counters"])
    # traffic never enters the baseline the error check compares against
    assert not any("pause" in name and "storm" not in name for c in res["counters"].values() for name in c)


def test_gpu_info_lists_the_mig_devices_of_a_gpu_with_mig_enabled(tmp_path, monkeypatch, capsys):
    """nvidia-smi -L runs only where a GPU has MIG on; its MIG profiles are the device plugin's
    resources. A stand-in nvidia-smi prints real captures: -q -x of an A100 with MIG enabled, -q
    and -L of an H100 with MIG enabled and four MIG devices (two machines: each parser reads its
    own tool's real output; the module joins them by GPU index)."""
    from conftest import FIXTURES

    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        '  "-q -x") cat %s ;;\n'
        '  "-q") cat %s ;;\n'
        '  "-L") cat %s ;;\n'
        "  *) exit 9 ;;\n"
        "esac\n"
        % (
            FIXTURES / "nvidia-smi-q-x" / "a100-sxm4-40gb-510-mig-enabled.txt",
            FIXTURES / "nvidia-smi-q" / "h100-hbm3-590-mig-enabled.txt",
            FIXTURES / "nvidia-smi-L" / "h100-hbm3-590-mig-devices.txt",
        )
    )
    smi.chmod(0o755)
    with patch_module_args({"nvidia_smi": str(smi)}), pytest.raises(SystemExit):
        nvidia_gpu_info.main()
    res = json.loads(capsys.readouterr().out)
    assert not res.get("failed"), res.get("msg")
    assert res["mig"] == [{"index": 0, "enabled": True, "devices": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}]


def test_gpu_info_does_not_run_nvidia_smi_L_without_mig(tmp_path, monkeypatch, capsys):
    res = run_module(nvidia_gpu_info, {}, Sim(tmp_path), monkeypatch, capsys)
    assert res["mig"] == [{"index": i, "enabled": False, "devices": []} for i in range(8)]


@pytest.mark.parametrize(("profile", "nvswitches"), [("hgx-h100-8gpu", 4), ("pcie-a100-4gpu", 0)])
def test_preflight_info_counts_the_nvswitches_the_fabric_manager_decision_reads(tmp_path, monkeypatch, capsys, profile, nvswitches):
    sim = Sim(tmp_path, profile=profile)
    res = run_module(rackforge_preflight_facts, {"sysfs_root": str(sim.sysfs)}, sim, monkeypatch, capsys)
    assert res["hardware"]["nvswitches"] == nvswitches
