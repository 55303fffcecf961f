"""roce_qos against the simulator: converges, is idempotent, honours check mode, refuses buffers
the mlx5 kernel would refuse before any change, orders its mlnx_qos calls the way the tool and
the kernel need, and reports ports that refuse a setting with the tool's rc and output.

Manual buffer mode reads each netdev's max_mtu with the real iproute2 (`ip -d -j link show`),
as on a node. The lab's nodes have veth links named as the profile's netdevs; here `ip` runs in
a private network namespace that holds such veth links (unshare, nsenter), so the module and the
simulated kernel both read the real veth's max_mtu (65535)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest
import roce_qos
from ansible.module_utils.rackforge import rdma as r
from hwsim_helper import Sim
from test_modules import run_module

VETH_MAX_MTU = 65535
# every RDMA netdev of the profiles the tests use
NETDEVS = ["ens%dnp0" % i for i in range(1, 9)] + ["ens9f0np0", "ens3f0np0", "ens3f1np1"]


@pytest.fixture(scope="module")
def netns():
    """A private network namespace with veth links named as the profiles' netdevs (MTU 9000), as
    the lab's nodes have them (lab/lab.py); `ip` for the tests runs in it (nsenter)."""
    root = os.geteuid() == 0
    proc = subprocess.Popen(["unshare", "-n" if root else "-rn", "sleep", "infinity"])
    enter = ["nsenter", "-t", str(proc.pid), "-n"] if root else ["nsenter", "-t", str(proc.pid), "-U", "-n", "--preserve-credentials"]
    try:
        for _ in range(100):
            if os.readlink("/proc/%d/ns/net" % proc.pid) != os.readlink("/proc/self/ns/net"):
                break
            time.sleep(0.05)
        for i, dev in enumerate(NETDEVS):
            subprocess.run([*enter, "ip", "link", "add", dev, "mtu", "9000", "type", "veth", "peer", "name", "rfpeer%d" % i], check=True)
        yield [*enter, shutil.which("ip")]  # the real ip by its path: the wrapper is "ip" on the Sim's PATH
    finally:
        proc.kill()
        proc.wait()


def _sim(tmp_path, monkeypatch, profile="hgx-h100-8gpu", ip=None):
    sim = Sim(tmp_path, profile=profile)
    sim.run("modprobe", "rdma_ucm")  # the role loads it first: rdma_cm's configfs appears
    if ip:
        wrapper = sim.bin / "ip"
        wrapper.write_text('#!/bin/sh\nexec %s "$@"\n' % " ".join(ip))
        wrapper.chmod(0o755)
        out = sim.run("ip", "-d", "-j", "link", "show", "dev", "ens1np0")
        assert '"max_mtu":%d' % VETH_MAX_MTU in out, out
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


def kmsg(sim):
    path = sim.tmp / "run" / "kmsg"
    return path.read_text() if path.exists() else ""


def port(res, netdev="ens1np0"):
    return next(i for i in res["interfaces"] if i["netdev"] == netdev)


PFC3 = "0,0,0,1,0,0,0,0"


def test_converges_every_roce_port_then_changes_nothing(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch)
    first = run_module(roce_qos, _args(sim), sim, monkeypatch, capsys)
    assert first["changed"] and first["rejected"] == []
    netdevs = [i["netdev"] for i in first["interfaces"]]
    assert netdevs == ["ens%dnp0" % i for i in range(1, 9)]  # the management port is excluded
    # one call; the cable length travels with --pfc (older mlnx_qos sent PFC off with it alone)
    assert port(first)["mlnx_qos_calls"] == [["--trust", "dscp", "--pfc", PFC3, "--cable_len", "7"]]
    assert port(first)["buffer_total"] == 262016
    now = qos(sim, "ens1np0")
    assert now["trust"] == "dscp" and now["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0] and now["cable_len"] == 7
    ecn = sim.sysfs / "class/net/ens1np0/ecn"
    assert (ecn / "roce_np/enable/3").read_text().strip() == "1" and (ecn / "roce_rp/enable/3").read_text().strip() == "1"
    assert (ecn / "roce_np/enable/0").read_text().strip() == "0"
    assert (sim.sysfs / "kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos").read_text().strip() == "106"
    # the per-priority pause counters now exist for priority 3 only (mlx5 behaviour)
    assert r.pfc_enabled_priorities(r.parse_ethtool_stats(sim.run("ethtool", "-S", "ens1np0"))) == [3]
    again = run_module(roce_qos, _args(sim), sim, monkeypatch, capsys)
    assert not again["changed"] and all(not i["changed"] and i["mlnx_qos_calls"] == [] for i in again["interfaces"])
    assert again["boot_commands"] == first["boot_commands"]


def test_a_changed_cable_length_is_sent_with_pfc(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch)
    sim.env["HWSIM_MLNX_QOS_VERSION"] = "24.10"  # a release where --cable_len alone also sends PFC off
    run_module(roce_qos, _args(sim), sim, monkeypatch, capsys)
    res = run_module(roce_qos, _args(sim, cable_len_m=30), sim, monkeypatch, capsys)
    assert port(res)["mlnx_qos_calls"] == [["--pfc", PFC3, "--cable_len", "30"]] and res["rejected"] == []
    now = qos(sim, "ens1np0")
    assert now["cable_len"] == 30 and now["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0]


def test_check_mode_reports_but_changes_nothing(tmp_path, monkeypatch, capsys, netns):
    sim = _sim(tmp_path, monkeypatch, ip=netns)
    before = qos(sim, "ens2np0")
    res = run_module(roce_qos, dict(_args(sim, buffer_mode="manual"), _ansible_check_mode=True), sim, monkeypatch, capsys)
    assert res["changed"]
    assert res["diff"]["before"]["ens2np0"]["trust"] == "pcp" and res["diff"]["after"]["ens2np0"]["trust"] == "dscp"
    assert res["diff"]["after"]["ens2np0"]["prio2buffer"] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert qos(sim, "ens2np0") == before


def test_manual_buffers_are_the_kernel_minimum_set_in_order(tmp_path, monkeypatch, capsys, netns):
    sim = _sim(tmp_path, monkeypatch, ip=netns)
    res = run_module(roce_qos, _args(sim, buffer_mode="manual", cable_len_m=30), sim, monkeypatch, capsys)
    p = port(res)
    # 400 Gb/s, 30 m, MTU 9000: xoff (301 + 64) * 400 + 24480 = 170480; + max(65535, 9216) + 128
    # = 236143 -> 615 x 384 = 236160
    assert p["headroom_bytes"] == 170480 and p["max_mtu"] == VETH_MAX_MTU and p["lossless_buffer_bytes"] == 236160
    sizes = "%d,236160,0,0,0,0,0,0" % (262016 - 236160)
    # sizes alone, then the priority map alone (never together), PFC with the cable length last
    assert p["mlnx_qos_calls"] == [
        ["--buffer_size", sizes],
        ["--prio2buffer", PFC3],
        ["--trust", "dscp", "--pfc", PFC3, "--cable_len", "30"],
    ]
    assert res["rejected"] == [] and "not enough" not in kmsg(sim)
    now = qos(sim, "ens1np0")
    assert now["buffer_size"] == [25856, 236160, 0, 0, 0, 0, 0, 0] and now["prio2buffer"] == [0, 0, 0, 1, 0, 0, 0, 0]
    again = run_module(roce_qos, _args(sim, buffer_mode="manual", cable_len_m=30), sim, monkeypatch, capsys)
    assert not again["changed"]


def test_the_module_minimum_is_the_one_the_simulated_kernel_enforces(tmp_path, monkeypatch, capsys, netns):
    sim = _sim(tmp_path, monkeypatch, ip=netns)
    run_module(roce_qos, _args(sim, buffer_mode="manual"), sim, monkeypatch, capsys)
    need = port(run_module(roce_qos, _args(sim, buffer_mode="manual"), sim, monkeypatch, capsys))["lossless_buffer_bytes"]
    assert need == 216576  # 150880 + 65535 + 128 = 216543 -> 564 x 384
    # one cell below the minimum (xoff + 65535 + 128 = 216543) the kernel refuses: ENOMEM
    res = sim.run("mlnx_qos", "-i", "ens1np0", "--buffer_size", "%d,%d" % (262016 - 216448, 216448), check=False)
    assert res.returncode == 1 and res.stdout == "Buffers commands error\n"
    assert "buffer_size[1]=216448 is not enough for lossless buffer" in kmsg(sim)
    # the old guidance (xoff + MTU + 128, 160128 bytes here) is far below it: refused before any change
    before = qos(sim, "ens1np0")
    res = run_module(roce_qos, _args(sim, buffer_mode="manual", lossless_buffer_bytes=160128), sim, monkeypatch, capsys)
    assert res["failed"] and "lossless_buffer_bytes 160128 cannot hold the PFC headroom" in res["msg"]
    assert "max(max_mtu 65535, 9216)" in res["msg"] and "use at least 216576" in res["msg"]
    assert qos(sim, "ens1np0") == before


def test_switching_from_auto_to_manual_turns_pfc_off_for_the_buffer_change(tmp_path, monkeypatch, capsys, netns):
    sim = _sim(tmp_path, monkeypatch, ip=netns)
    run_module(roce_qos, _args(sim), sim, monkeypatch, capsys)  # auto: PFC on priority 3 in buffer 0
    res = run_module(roce_qos, _args(sim, buffer_mode="manual"), sim, monkeypatch, capsys)
    # with PFC on, neither order works (buffer 0 or buffer 1 would be lossless and too small)
    assert port(res)["mlnx_qos_calls"] == [
        ["--pfc", "0,0,0,0,0,0,0,0"],
        ["--buffer_size", "45440,216576,0,0,0,0,0,0"],
        ["--prio2buffer", PFC3],
        ["--pfc", PFC3, "--cable_len", "7"],
    ]
    assert res["rejected"] == [] and "not enough" not in kmsg(sim)
    assert qos(sim, "ens1np0")["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0]


def test_a_shorter_cable_is_set_before_the_smaller_buffer(tmp_path, monkeypatch, capsys, netns):
    sim = _sim(tmp_path, monkeypatch, ip=netns)
    run_module(roce_qos, _args(sim, buffer_mode="manual", cable_len_m=30), sim, monkeypatch, capsys)
    res = run_module(roce_qos, _args(sim, buffer_mode="manual", cable_len_m=7), sim, monkeypatch, capsys)
    # the 7 m buffer is too small for 30 m: the cable length goes first
    assert port(res)["mlnx_qos_calls"] == [["--pfc", PFC3, "--cable_len", "7"], ["--buffer_size", "45440,216576,0,0,0,0,0,0"]]
    assert res["rejected"] == [] and "not enough" not in kmsg(sim)
    res = run_module(roce_qos, _args(sim, buffer_mode="manual", cable_len_m=30), sim, monkeypatch, capsys)
    # and a longer one after the larger buffer
    assert port(res)["mlnx_qos_calls"] == [["--buffer_size", "25856,236160,0,0,0,0,0,0"], ["--pfc", PFC3, "--cable_len", "30"]]
    assert res["rejected"] == [] and "not enough" not in kmsg(sim)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"buffer_mode": "manual", "lossless_buffer_bytes": 60000}, "cannot hold the PFC headroom"),
        ({"buffer_mode": "manual", "cable_len_m": 999}, "does not fit the port's 262016-byte receive buffer"),
        ({"cable_len_m": 1000}, "cable_len_m must be in 1..999, got 1000"),
        ({"lossless_priority": 8}, "lossless_priority must be in 0..7, got 8"),
        ({"interfaces": ["ens99np0"]}, "interfaces not found as RDMA netdevs: ens99np0"),
    ],
)
def test_impossible_requests_fail_before_any_change(tmp_path, monkeypatch, capsys, extra, needle, netns):
    sim = _sim(tmp_path, monkeypatch, ip=netns)
    before = [qos(sim, "ens%dnp0" % i) for i in range(1, 9)]
    res = run_module(roce_qos, _args(sim, **extra), sim, monkeypatch, capsys)
    assert res["failed"] and needle in res["msg"]
    assert [qos(sim, "ens%dnp0" % i) for i in range(1, 9)] == before


def test_manual_mode_without_iproute2_fails_naming_it(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch)
    res = run_module(roce_qos, _args(sim, buffer_mode="manual"), sim, monkeypatch, capsys)
    assert res["failed"] and "ip (iproute2) not found" in res["msg"]


def test_an_mlnx_qos_that_fails_to_read_fails_with_its_output(tmp_path, monkeypatch, capsys):
    sim = _sim(tmp_path, monkeypatch)
    sim.env["HWSIM_MLNX_QOS_VERSION"] = "1.0"  # not a modelled release: the simulator exits 2
    res = run_module(roce_qos, _args(sim), sim, monkeypatch, capsys)
    assert res["failed"] and res["rc"] == 2 and "HWSIM_MLNX_QOS_VERSION=1.0" in res["stderr"]
    assert res["msg"].startswith("mlnx_qos -i ens1np0 failed (rc 2)")


@pytest.mark.parametrize(
    ("version", "stdout", "stderr"),
    [
        # 24.04 on: print('mlnx_qos: Error setting pfc:' + e) dies with a TypeError
        ("25.07", "", 'TypeError: can only concatenate str (not "OSError") to str'),
        # before (and in 24.10) the OSError is printed
        ("24.10", "Netlink error: Bad value. see dmesg.\n", ""),
    ],
)
def test_a_port_that_refuses_pfc_is_reported_not_fatal(tmp_path, monkeypatch, capsys, version, stdout, stderr):
    sim = _sim(tmp_path, monkeypatch)
    sim.env["HWSIM_MLNX_QOS_VERSION"] = version
    sim.run("hwsim", "fault", "add", "pfc_off", "ca=mlx5_3")
    res = run_module(roce_qos, _args(sim), sim, monkeypatch, capsys)
    assert not res.get("failed")
    assert [x["netdev"] for x in res["rejected"]] == ["ens4np0"]
    bad = res["rejected"][0]
    assert bad["rc"] == 1 and bad["stdout"] == stdout and stderr in bad["stderr"]
    assert bad["command"][-4:] == ["--pfc", PFC3, "--cable_len", "7"]
    assert bad["problems"][0].startswith("mlnx_qos --trust dscp --pfc %s --cable_len 7: rc 1" % PFC3)
    # the tool stopped at PFC: nothing after it (trust) was applied either, and the read-back says so
    assert (
        "trust reads back pcp, set dscp" in bad["problems"]
        and "pfc reads back [0, 0, 0, 0, 0, 0, 0, 0], set %s" % [0, 0, 0, 1, 0, 0, 0, 0] in bad["problems"]
    )
    assert qos(sim, "ens5np0")["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0]
    # not fatal, and said: each note is a warning of the task
    assert res["notes"][0].startswith("ens4np0 (mlx5_3) refused: ") and [w["event"]["msg"] for w in res["warnings"]] == res["notes"]


def test_pcie_profile_100g_ports(tmp_path, monkeypatch, capsys, netns):
    sim = _sim(tmp_path, monkeypatch, profile="pcie-a100-4gpu", ip=netns)
    res = run_module(roce_qos, _args(sim, exclude_interfaces=[], buffer_mode="manual"), sim, monkeypatch, capsys)
    assert {i["speed_gbps"] for i in res["interfaces"]} == {100}
    assert {i["headroom_bytes"] for i in res["interfaces"]} == {56080}
    assert {i["lossless_buffer_bytes"] for i in res["interfaces"]} == {122112}  # 56080 + 65535 + 128 -> 318 x 384


def test_boot_commands_restore_the_state_after_a_reboot(tmp_path, monkeypatch, capsys, netns):
    sim = _sim(tmp_path, monkeypatch, ip=netns)
    res = run_module(roce_qos, _args(sim, buffer_mode="manual"), sim, monkeypatch, capsys)
    applied = {n: qos(sim, n) for n in ("ens1np0", "ens8np0")}
    first = [line for line in res["boot_commands"] if " -i ens1np0 " in line]
    # from a freshly booted port: sizes, then the priority map, then trust, PFC and cable together
    assert [line.split(" -i ens1np0 ")[1].split()[0] for line in first] == ["--buffer_size", "--prio2buffer", "--trust"]
    assert first[2].endswith("--pfc %s --cable_len 7" % PFC3)
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
