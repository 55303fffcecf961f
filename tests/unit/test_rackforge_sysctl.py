"""rackforge_sysctl on a fake /proc/sys: host scope applies everything that differs; in a
container only per-namespace net.* keys, and nothing when the host netns is shared."""

from __future__ import annotations

import errno
import json

import pytest
import rackforge_sysctl
from ansible.module_utils.testing import patch_module_args

SETTINGS = {
    "net.core.rmem_max": 16777216,
    "net.ipv4.tcp_rmem": "4096 87380 16777216",
    "net.ipv4.tcp_congestion_control": "bbr",
    "vm.swappiness": 10,
}


def proc(tmp_path, keys):
    for key, value in keys.items():
        path = tmp_path.joinpath(*key.split("."))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("%s\n" % value)
    return tmp_path


def run(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit):
        rackforge_sysctl.main()
    return json.loads(capsys.readouterr().out)


def test_host_scope_applies_what_differs(tmp_path, capsys):
    root = proc(
        tmp_path, {"net.core.rmem_max": 212992, "net.ipv4.tcp_rmem": "4096\t131072\t6291456", "net.ipv4.tcp_congestion_control": "bbr"}
    )
    res = run({"settings": SETTINGS, "scope": "host", "proc_root": str(root)}, capsys)
    assert res["changed"] and res["applied"] == ["net.core.rmem_max", "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem"]
    assert res["not_applied"] == [{"key": "vm.swappiness", "reason": "not present in this kernel"}]
    assert (root / "net/ipv4/tcp_rmem").read_text() == "4096 87380 16777216\n"
    again = run({"settings": SETTINGS, "scope": "host", "proc_root": str(root)}, capsys)
    assert not again["changed"]


def test_netns_scope_never_touches_host_wide_keys(tmp_path, capsys):
    # a container netns on an older kernel: net.core.rmem_max is host-wide, so not visible
    root = proc(tmp_path, {"net.ipv4.tcp_rmem": "4096 131072 6291456", "vm.swappiness": 60})
    res = run({"settings": SETTINGS, "scope": "netns", "proc_root": str(root)}, capsys)
    assert res["applied"] == ["net.ipv4.tcp_rmem"]
    reasons = {s["key"]: s["reason"] for s in res["not_applied"]}
    assert reasons["vm.swappiness"].startswith("host-wide key") and (root / "vm/swappiness").read_text() == "60\n"
    assert reasons["net.core.rmem_max"] == "not in this network namespace (host-wide key)"


def test_container_on_the_host_netns_applies_nothing(tmp_path, capsys):
    root = proc(tmp_path, {"net.core.netdev_max_backlog": 1000, "net.ipv4.tcp_rmem": "4096 131072 6291456"})
    res = run({"settings": SETTINGS, "scope": "netns", "proc_root": str(root)}, capsys)
    assert res["applied"] == [] and not res["changed"]
    assert (root / "net/ipv4/tcp_rmem").read_text() == "4096 131072 6291456\n"


def test_read_only_proc_is_reported(tmp_path, capsys, monkeypatch):
    root = proc(tmp_path, {"net.ipv4.tcp_rmem": "4096 131072 6291456"})
    real_open = open

    def read_only_open(path, mode="r", *args, **kwargs):  # podman mounts /proc/sys read-only
        if "w" in mode:
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(rackforge_sysctl, "open", read_only_open, raising=False)
    res = run({"settings": {"net.ipv4.tcp_rmem": "4096 87380 16777216"}, "scope": "netns", "proc_root": str(root)}, capsys)
    assert not res["changed"] and res["applied"] == []
    assert res["not_applied"] == [
        {"key": "net.ipv4.tcp_rmem", "reason": "/proc/sys is read-only here (Read-only file system): persisted for boot"}
    ]


def test_check_mode_writes_nothing(tmp_path, capsys):
    root = proc(tmp_path, {"net.ipv4.tcp_rmem": "4096 131072 6291456"})
    res = run(
        {"settings": {"net.ipv4.tcp_rmem": "4096 87380 16777216"}, "scope": "host", "proc_root": str(root), "_ansible_check_mode": True},
        capsys,
    )
    assert res["changed"] and (root / "net/ipv4/tcp_rmem").read_text() == "4096 131072 6291456\n"


def test_check_mode_predicts_a_read_only_proc_as_not_applied(tmp_path, capsys, monkeypatch):
    root = proc(tmp_path, {"net.ipv4.tcp_rmem": "4096 131072 6291456"})
    monkeypatch.setattr(rackforge_sysctl.os, "access", lambda path, how: False)  # what access(2) says on a read-only /proc/sys
    args = {"settings": {"net.ipv4.tcp_rmem": "4096 87380 16777216"}, "scope": "netns", "proc_root": str(root), "_ansible_check_mode": True}
    res = run(args, capsys)
    assert not res["changed"] and res["applied"] == []
    assert res["not_applied"] == [{"key": "net.ipv4.tcp_rmem", "reason": "/proc/sys is read-only here: persisted for boot"}]


def test_the_file_is_written_once_and_shown_in_check_mode(tmp_path, capsys):
    root = proc(tmp_path / "proc", {"net.ipv4.tcp_rmem": "4096 87380 16777216"})
    conf = tmp_path / "90-test.conf"
    args = {
        "settings": {"net.ipv4.tcp_rmem": "4096  87380 16777216"},
        "scope": "host",
        "proc_root": str(root),
        "file": str(conf),
        "header": "one\ntwo",
    }
    preview = run(dict(args, _ansible_check_mode=True), capsys)
    assert preview["changed"] and preview["file_changed"] and not conf.exists()
    assert preview["diff"][0]["after"] == "# one\n# two\nnet.ipv4.tcp_rmem = 4096 87380 16777216\n"
    first = run(args, capsys)
    assert first["changed"] and conf.read_text() == preview["diff"][0]["after"] and oct(conf.stat().st_mode & 0o777) == "0o644"
    again = run(args, capsys)
    assert not again["changed"] and not again["file_changed"]


def test_congestion_control_auto_is_bbr_where_the_kernel_has_it_else_cubic_and_a_missing_one_is_refused():
    pick = rackforge_sysctl.choose_congestion_control
    assert pick("auto", ["reno", "bbr", "cubic"], lambda m: False, "v") == ("bbr", None)
    assert pick("auto", ["reno", "cubic"], lambda m: m == "tcp_bbr", "v") == ("bbr", "tcp_bbr")
    assert pick("auto", ["reno", "cubic"], lambda m: False, "v") == ("cubic", None)
    assert pick("htcp", ["reno", "cubic"], lambda m: m == "tcp_htcp", "v") == ("htcp", "tcp_htcp")
    with pytest.raises(
        ValueError, match="network_tuning_congestion_control = 'dctcp': this kernel offers reno, cubic and has no module tcp_dctcp"
    ):
        pick("dctcp", ["reno", "cubic"], lambda m: False, "network_tuning_congestion_control")


def simulated_kernel(tmp_path, monkeypatch):
    """hwsim's modinfo, modprobe and /sys/module, as the module finds them on a node."""
    from ansible.module_utils.basic import AnsibleModule
    from hwsim_helper import Sim

    (tmp_path / "sim").mkdir()
    sim = Sim(tmp_path / "sim", driver=None)
    for key, value in sim.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(AnsibleModule, "get_bin_path", sim.get_bin_path())
    return sim


def test_a_congestion_control_module_is_loaded_and_listed_for_boot_with_the_sysctl_file(tmp_path, capsys, monkeypatch):
    """tcp_bbr as a module (hwsim's modinfo/modprobe): loaded now, listed in modules-load.d and the
    algorithm persisted, in one call; a second run changes nothing; an unknown one changes nothing."""
    sim = simulated_kernel(tmp_path, monkeypatch)
    root = proc(tmp_path / "proc", {"net.ipv4.tcp_available_congestion_control": "reno cubic", "net.ipv4.tcp_congestion_control": "cubic"})
    etc = tmp_path / "etc"
    etc.mkdir()
    args = {
        "settings": {"net.core.default_qdisc": "fq"},
        "congestion_control": "auto",
        "congestion_control_var": "network_tuning_congestion_control",
        "module_load_file": str(etc / "modules.conf"),
        "owner": "roles/network_tuning",
        "file": str(etc / "sysctl.conf"),
        "scope": "host",
        "proc_root": str(root),
        "sysfs_root": str(sim.sysfs),
    }
    res = run(args, capsys)
    assert res["changed"] and res["congestion_control"] == "bbr" and res["loaded"] == ["tcp_bbr"], res
    assert "tcp_bbr" in json.loads((sim.tmp / "run" / "modules.json").read_text())
    assert (etc / "modules.conf").read_text().splitlines()[1:] == ["tcp_bbr"]
    assert "net.ipv4.tcp_congestion_control = bbr" in (etc / "sysctl.conf").read_text()
    assert (root / "net/ipv4/tcp_congestion_control").read_text() == "bbr\n"
    again = run(args, capsys)
    assert not again["changed"] and again["loaded"] == [], again
    before = {p.name: p.read_text() for p in etc.iterdir()}
    with patch_module_args(dict(args, congestion_control="dctcp")), pytest.raises(SystemExit):
        rackforge_sysctl.main()
    out = json.loads(capsys.readouterr().out)
    assert out["failed"] and "network_tuning_congestion_control = 'dctcp'" in out["msg"] and "Nothing was changed" in out["msg"]
    assert {p.name: p.read_text() for p in etc.iterdir()} == before


def test_the_modules_asked_for_load_before_the_settings_and_a_missing_one_changes_nothing(tmp_path, capsys, monkeypatch):
    """container_runtime's call: overlay and br_netfilter loaded (hwsim's modprobe) and listed for boot
    with the sysctl file, in one call; the re-run loads nothing; a module this kernel lacks fails
    the call naming the variable, with no file written and nothing loaded."""
    sim = simulated_kernel(tmp_path, monkeypatch)
    root = proc(tmp_path / "proc", {"net.ipv4.ip_forward": "0"})
    etc = tmp_path / "etc"
    etc.mkdir()
    args = {
        "settings": {"net.ipv4.ip_forward": 1},
        "modules": ["overlay", "br_netfilter"],
        "modules_var": "container_runtime_kernel_modules",
        "module_load_file": str(etc / "modules.conf"),
        "owner": "roles/container_runtime",
        "file": str(etc / "sysctl.conf"),
        "scope": "host",
        "proc_root": str(root),
        "sysfs_root": str(sim.sysfs),
    }
    modules_json = sim.tmp / "run" / "modules.json"
    missing = run(dict(args, modules=["overlay", "br_netfiltr"]), capsys)
    assert missing["failed"] and "container_runtime_kernel_modules: this kernel has no module br_netfiltr" in missing["msg"], missing
    assert "Nothing was changed" in missing["msg"] and list(etc.iterdir()) == []
    assert not modules_json.exists() or "overlay" not in json.loads(modules_json.read_text())
    res = run(args, capsys)
    assert res["changed"] and res["loaded"] == ["overlay", "br_netfilter"], res
    assert {"overlay", "br_netfilter"} <= set(json.loads(modules_json.read_text()))
    assert (etc / "modules.conf").read_text().splitlines()[1:] == ["overlay", "br_netfilter"]
    assert (root / "net/ipv4/ip_forward").read_text() == "1\n"
    again = run(args, capsys)
    assert not again["changed"] and again["loaded"] == [], again
