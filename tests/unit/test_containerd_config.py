"""containerd_config: merge, never clobber. Runs on the real containerd 1.6.20 files captured from
Debian 12 (tests/fixtures/captured/containerd-1.6.20*.toml, provenance in the .src.txt)."""

from __future__ import annotations

import json
import os

import containerd_config
import pytest
import tomllib
from ansible.module_utils.rackforge.tomlw import dumps
from ansible.module_utils.testing import patch_module_args
from conftest import ROOT

CAPTURED = ROOT / "tests" / "fixtures" / "captured"
CRI = "io.containerd.grpc.v1.cri"
NVIDIA = {"nvidia": {"binary_name": "/usr/bin/nvidia-container-runtime"}}


def runtimes(cfg, plugin=CRI):
    return cfg["plugins"][plugin]["containerd"]["runtimes"]


@pytest.mark.parametrize("name", ["containerd-1.6.20-config-default.toml", "containerd-1.6.20-debian12-config.toml"])
def test_writer_round_trips_real_containerd_configs(name):
    data = tomllib.loads((CAPTURED / name).read_text())
    assert tomllib.loads(dumps(data)) == data


def test_writer_handles_arrays_of_tables_quoting_and_empty_tables():
    data = {
        "version": 2,
        "a b": {"x": 'quote "me" \\ and\ttab', "empty": {}, "list": [1, 2], "mixed": [{"k": 1}, {"k": 2, "sub": {"z": True}}]},
        "f": 1.5,
    }
    assert tomllib.loads(dumps(data)) == data


def test_merge_sets_systemd_cgroup_and_nvidia_and_keeps_the_rest():
    cfg = tomllib.loads((CAPTURED / "containerd-1.6.20-config-default.toml").read_text())
    assert runtimes(cfg)["runc"]["options"]["SystemdCgroup"] is False  # the default that breaks kubelets
    runtimes(cfg)["kata"] = {"runtime_type": "io.containerd.kata.v2"}  # added by hand
    before = json.loads(json.dumps(cfg))
    changes = containerd_config.merge(cfg, True, NVIDIA, "nvidia")
    rts = runtimes(cfg)
    assert rts["runc"]["options"]["SystemdCgroup"] is True
    assert rts["nvidia"] == {
        "runtime_type": "io.containerd.runc.v2",
        "options": {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True},
    }
    assert rts["kata"] == {"runtime_type": "io.containerd.kata.v2"}
    assert cfg["plugins"][CRI]["containerd"]["default_runtime_name"] == "nvidia"
    # nothing else moved
    for key in before["plugins"]:
        if key != CRI:
            assert cfg["plugins"][key] == before["plugins"][key]
    assert "plugins.%s.containerd.runtimes.runc.options.SystemdCgroup" % CRI in changes
    assert containerd_config.merge(cfg, True, NVIDIA, "nvidia") == []  # idempotent


def test_merge_understands_containerd2_and_refuses_version1():
    cfg = {"version": 3, "plugins": {"io.containerd.cri.v1.runtime": {"containerd": {"runtimes": {"runc": {"options": {}}}}}}}
    containerd_config.merge(cfg, True, NVIDIA, "")
    assert runtimes(cfg, "io.containerd.cri.v1.runtime")["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    with pytest.raises(ValueError, match=r"version 1 is not supported.*containerd config migrate"):
        containerd_config.merge({"version": 1, "plugins": {"cri": {}}}, True, {}, "")


def run(args, capsys, check_mode=False):
    if check_mode:
        args = {**args, "_ansible_check_mode": True}
    with patch_module_args(args), pytest.raises(SystemExit):
        containerd_config.main()
    return json.loads(capsys.readouterr().out)


def fake_containerd(tmp_path, rc=0):
    tool = tmp_path / "containerd"
    default = CAPTURED / "containerd-1.6.20-config-default.toml"
    tool.write_text('#!/bin/sh\ncase "$*" in\n  "config default") cat %s;;\n  *"config dump") exit %d;;\nesac\n' % (default, rc))
    tool.chmod(0o755)
    return str(tool)


def test_module_merges_debian_file_and_keeps_a_hand_added_runtime(tmp_path, capsys):
    path = tmp_path / "config.toml"
    path.write_text((CAPTURED / "containerd-1.6.20-debian12-config.toml").read_text())
    args = {
        "path": str(path),
        "runtimes": NVIDIA,
        "default_runtime_name": "nvidia",
        "containerd": fake_containerd(tmp_path),
        "backup": False,
    }
    res = run(args, capsys)
    assert res["changed"] and res["runtimes"] == ["nvidia", "runc"]
    cfg = tomllib.loads(path.read_text())
    assert cfg["plugins"][CRI]["cni"]["bin_dir"] == "/usr/lib/cni"  # not asked to change it: kept
    # the GPU operator (or an operator by hand) adds a runtime; the next run keeps it
    runtimes(cfg)["nvidia-cdi"] = {
        "runtime_type": "io.containerd.runc.v2",
        "options": {"BinaryName": "/usr/bin/nvidia-container-runtime.cdi"},
    }
    path.write_text("# hand edit\n" + dumps(cfg))
    again = run(args, capsys)
    assert not again["changed"] and again["changes"] == []
    assert path.read_text().startswith("# hand edit")  # unchanged content: not rewritten, comments kept
    assert "nvidia-cdi" in tomllib.loads(path.read_text())["plugins"][CRI]["containerd"]["runtimes"]


def test_module_starts_from_containerd_defaults_when_the_file_is_missing(tmp_path, capsys):
    path = tmp_path / "etc" / "config.toml"
    res = run({"path": str(path), "containerd": fake_containerd(tmp_path)}, capsys)
    assert res["changed"] and res["changes"][0] == "(whole file from containerd config default)"
    cfg = tomllib.loads(path.read_text())
    assert runtimes(cfg)["runc"]["options"]["SystemdCgroup"] is True
    assert cfg["plugins"]["io.containerd.grpc.v1.cri"]["sandbox_image"]  # the defaults are all there


def test_containerd_io_s_shipped_file_without_cri_is_replaced_by_the_defaults(tmp_path, capsys):
    """Docker's containerd.io package ships a config.toml (docker/containerd-packaging, common/containerd.toml)
    that sets nothing but disabled_plugins = ["cri"] (no version: version 1), between commented-out
    defaults: containerd for Docker, without the CRI plugin the kubelet talks to. Written here from
    that fact, not copied."""
    path = tmp_path / "config.toml"
    path.write_text('# containerd for Docker (shipped by the package)\n\ndisabled_plugins = ["cri"]\n\n#root = "/var/lib/containerd"\n')
    res = run({"path": str(path), "containerd": fake_containerd(tmp_path), "backup": False}, capsys)
    assert (
        res["changes"][0]
        == "(whole file from containerd config default (the file only disabled the CRI plugin, as containerd.io ships it))"
    )
    cfg = tomllib.loads(path.read_text())
    assert "cri" not in cfg.get("disabled_plugins", []) and cfg["version"] == 2
    assert runtimes(cfg)["runc"]["options"]["SystemdCgroup"] is True


def test_merge_enables_a_disabled_cri_plugin_and_keeps_the_other_disabled_ones():
    cfg = {
        "version": 2,
        "disabled_plugins": ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.zfs"],
        "plugins": {CRI: {"containerd": {"runtimes": {"runc": {"options": {}}}}}},
    }
    changes = containerd_config.merge(cfg, True, NVIDIA, "nvidia")
    assert cfg["disabled_plugins"] == ["io.containerd.snapshotter.v1.zfs"] and "disabled_plugins" in changes
    assert "disabled_plugins" not in containerd_config.merge(cfg, True, NVIDIA, "nvidia")  # once


def test_module_writes_nothing_when_containerd_refuses_the_result(tmp_path, capsys):
    path = tmp_path / "config.toml"
    original = (CAPTURED / "containerd-1.6.20-debian12-config.toml").read_text()
    path.write_text(original)
    res = run({"path": str(path), "containerd": fake_containerd(tmp_path, rc=1), "backup": False}, capsys)
    assert res["failed"] and "refused the merged config (nothing written)" in res["msg"]
    assert path.read_text() == original
    assert [f for f in os.listdir(tmp_path) if f.startswith(".config.toml.")] == []


def test_module_check_mode_changes_nothing_and_shows_a_diff(tmp_path, capsys):
    path = tmp_path / "config.toml"
    original = (CAPTURED / "containerd-1.6.20-debian12-config.toml").read_text()
    path.write_text(original)
    res = run({"path": str(path), "runtimes": NVIDIA, "containerd": fake_containerd(tmp_path)}, capsys, check_mode=True)
    assert res["changed"] and "SystemdCgroup = true" in res["diff"][0]["after"]
    assert path.read_text() == original


def test_module_refuses_bad_input_before_reading(tmp_path, capsys):
    res = run({"path": str(tmp_path / "c.toml"), "runtimes": {"nvidia": {}}}, capsys)
    assert res["failed"] and "runtimes.nvidia: needs binary_name" in res["msg"]
    res = run({"path": str(tmp_path / "c.toml"), "default_runtime_name": "kata"}, capsys)
    assert res["failed"] and "default_runtime_name 'kata'" in res["msg"]
    bad = tmp_path / "bad.toml"
    bad.write_text("version = [\n")
    res = run({"path": str(bad), "containerd": fake_containerd(tmp_path)}, capsys)
    assert res["failed"] and "is not valid TOML" in res["msg"] and bad.read_text() == "version = [\n"


def test_merge_points_a_single_cni_dir_at_calicos_and_puts_it_first_in_a_list():
    # Debian 12's containerd searches only /usr/lib/cni; Calico installs into /opt/cni/bin
    cfg = tomllib.loads((CAPTURED / "containerd-1.6.20-debian12-config.toml").read_text())
    assert cfg["plugins"][CRI]["cni"]["bin_dir"] == "/usr/lib/cni"
    changes = containerd_config.merge(cfg, True, {}, "", "/opt/cni/bin")
    assert cfg["plugins"][CRI]["cni"] == {"bin_dir": "/opt/cni/bin", "conf_dir": "/etc/cni/net.d"}
    assert "plugins.%s.cni.bin_dir" % CRI in changes
    assert containerd_config.merge(cfg, True, {}, "", "/opt/cni/bin") == []
    # containerd 2.1+ reads bin_dirs (a list; bin_dir deprecated): the directory goes first, the rest stay
    v3 = {"version": 3, "plugins": {"io.containerd.cri.v1.runtime": {"cni": {"bin_dirs": ["/usr/lib/cni", "/opt/cni/bin"]}}}}
    containerd_config.merge(v3, True, {}, "", "/opt/cni/bin")
    assert v3["plugins"]["io.containerd.cri.v1.runtime"]["cni"] == {"bin_dirs": ["/opt/cni/bin", "/usr/lib/cni"]}
    assert "bin_dir" not in v3["plugins"]["io.containerd.cri.v1.runtime"]["cni"]


def test_module_links_the_distro_plugins_into_the_cni_dir_without_replacing_any(tmp_path, capsys):
    path = tmp_path / "config.toml"
    path.write_text((CAPTURED / "containerd-1.6.20-debian12-config.toml").read_text())
    distro, opt = tmp_path / "usr-lib-cni", tmp_path / "opt-cni-bin"
    distro.mkdir()
    for name in ("bridge", "loopback", "portmap"):
        (distro / name).write_text("#!/bin/sh\n")
        (distro / name).chmod(0o755)
    (distro / "README").write_text("not a plugin\n")  # not executable: not linked
    args = {
        "path": str(path),
        "containerd": fake_containerd(tmp_path),
        "backup": False,
        "cni_bin_dir": str(opt),
        "cni_link_from": [str(distro)],
    }
    check = run(args, capsys, check_mode=True)
    assert check["changed"] and len(check["cni_links"]) == 3 and not opt.exists()
    res = run(args, capsys)
    assert res["changed"] and tomllib.loads(path.read_text())["plugins"][CRI]["cni"]["bin_dir"] == str(opt)
    assert sorted(os.listdir(opt)) == ["bridge", "loopback", "portmap"]
    assert os.readlink(opt / "loopback") == str(distro / "loopback")
    # Calico installs its own portmap later: it is kept; a plugin the distro adds later is linked
    (opt / "portmap").unlink()
    (opt / "portmap").write_text("calico's\n")
    (distro / "tuning").write_text("#!/bin/sh\n")
    (distro / "tuning").chmod(0o755)
    again = run(args, capsys)
    assert again["changed"] and again["changes"] == [] and again["cni_links"] == ["%s -> %s" % (opt / "tuning", distro / "tuning")]
    assert (opt / "portmap").read_text() == "calico's\n"
    assert not run(args, capsys)["changed"]


def test_module_refuses_cni_links_without_a_cni_dir(tmp_path, capsys):
    res = run({"path": str(tmp_path / "c.toml"), "cni_link_from": ["/usr/lib/cni"]}, capsys)
    assert res["failed"] and "cni_link_from needs cni_bin_dir" in res["msg"]


def test_a_runtime_whose_binary_must_exist_is_refused_before_any_write_except_in_check_mode(tmp_path, capsys):
    path = tmp_path / "config.toml"
    original = (CAPTURED / "containerd-1.6.20-debian12-config.toml").read_text()
    path.write_text(original)
    gone = {"nvidia": {"binary_name": str(tmp_path / "nvidia-container-runtime"), "missing": "the NVIDIA runtime is not installed"}}
    args = {"path": str(path), "runtimes": gone, "containerd": fake_containerd(tmp_path), "backup": False}
    res = run(args, capsys)
    assert res["failed"] and res["msg"] == "the NVIDIA runtime is not installed. Nothing was changed." and path.read_text() == original
    # check mode: the binary comes with a package an earlier task of the same run would install
    res = run(args, capsys, check_mode=True)
    assert not res.get("failed") and res["changed"] and path.read_text() == original
    # installed: registered like any runtime (the `missing` text is not written)
    (tmp_path / "nvidia-container-runtime").write_text("")
    res = run(args, capsys)
    assert res["changed"] and "missing" not in path.read_text() and "nvidia-container-runtime" in path.read_text()
