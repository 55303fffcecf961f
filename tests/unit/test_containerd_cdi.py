"""containerd_config's CDI switch on the real configs of Debian 12's containerd 1.6.20 (no CDI)
and Debian 13's 1.7.24 (CDI; provenance in tests/fixtures/captured/containerd-1.7.24.src.txt)."""

from __future__ import annotations

import json

import containerd_config
import pytest
import tomllib
from ansible.module_utils.testing import patch_module_args
from conftest import ROOT

CAPTURED = ROOT / "tests" / "fixtures" / "captured"
CRI = "io.containerd.grpc.v1.cri"


# `containerd --version` of the real Debian binaries (run on the lab's nodes, 2026-12-05; see
# containerd-1.7.24.src.txt), and upstream's release format for 1.7.1 (v prefix, then the commit)
VERSIONS = {
    "1.6.20": "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3",
    "1.7.24": "containerd github.com/containerd/containerd 1.7.24~ds1 1.7.24~ds1-6+deb13u1",
    "1.7.1": "containerd github.com/containerd/containerd v1.7.1 1677a17964311325ed1c31e2c0a3589ce6d5c30d",
}


def containerd(tmp_path, version, defaults_of=None):
    """A stand-in containerd that prints the real `config default` of that version (or of defaults_of)
    and its version line, and accepts any config."""
    tool = tmp_path / "containerd"
    default = CAPTURED / ("containerd-%s-config-default.toml" % (defaults_of or version))
    tool.write_text(
        '#!/bin/sh\ncase "$*" in\n  "config default") cat %s;;\n  "--version") echo "%s";;\n  *"config dump") exit 0;;\nesac\n'
        % (default, VERSIONS[version])
    )
    tool.chmod(0o755)
    return str(tool)


def run(tmp_path, capsys, version, shipped, defaults_of=None, **args):
    path = tmp_path / "config.toml"
    if not path.exists():
        path.write_text((CAPTURED / shipped).read_text())
    args = {"path": str(path), "containerd": containerd(tmp_path, version, defaults_of), "backup": False, **args}
    with patch_module_args(args), pytest.raises(SystemExit):
        containerd_config.main()
    return json.loads(capsys.readouterr().out), tomllib.loads(path.read_text())


def test_the_defaults_tell_which_containerd_has_cdi():
    def load(name):
        return tomllib.loads((CAPTURED / name).read_text())

    assert containerd_config.cdi_supported(load("containerd-1.7.24-config-default.toml"))
    assert not containerd_config.cdi_supported(load("containerd-1.6.20-config-default.toml"))
    v3 = {"version": 3, "plugins": {"io.containerd.cri.v1.runtime": {"enable_cdi": True}}}
    assert containerd_config.cdi_supported(v3)


def test_auto_turns_cdi_on_in_containerd_1_7_once(tmp_path, capsys):
    res, cfg = run(tmp_path, capsys, "1.7.24", "containerd-1.7.24-debian13-config.toml")
    assert res["changed"] and res["cdi"] is True
    assert cfg["plugins"][CRI]["enable_cdi"] is True and cfg["plugins"][CRI]["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    again, _cfg = run(tmp_path, capsys, "1.7.24", "containerd-1.7.24-debian13-config.toml")
    assert not again["changed"] and again["cdi"] is True


def test_auto_leaves_containerd_1_6_alone_and_true_refuses_it(tmp_path, capsys):
    res, cfg = run(tmp_path, capsys, "1.6.20", "containerd-1.6.20-debian12-config.toml")
    assert res["cdi"] is False and "enable_cdi" not in cfg["plugins"][CRI]
    refused, after = run(tmp_path, capsys, "1.6.20", "containerd-1.6.20-debian12-config.toml", cdi="true")
    assert refused["failed"] and "cdi: true" in refused["msg"] and "1.7 or later" in refused["msg"]
    assert after == cfg  # nothing written


def test_false_leaves_an_operators_cdi_setting(tmp_path, capsys):
    (tmp_path / "config.toml").write_text(
        (CAPTURED / "containerd-1.7.24-debian13-config.toml")
        .read_text()
        .replace('[plugins."io.containerd.grpc.v1.cri"]\n', '[plugins."io.containerd.grpc.v1.cri"]\n    enable_cdi = false\n')
    )
    res, cfg = run(tmp_path, capsys, "1.7.24", "containerd-1.7.24-debian13-config.toml", cdi="false")
    assert cfg["plugins"][CRI]["enable_cdi"] is False and res["cdi"] is False


def test_true_refuses_a_1_7_before_1_7_2_whose_cri_drops_cdi_devices(tmp_path, capsys):
    """1.7.0 and 1.7.1 already print enable_cdi (1.7.24's defaults stand in for theirs); their CRI does
    not read the CDIDevices a device plugin allocates, so cdi-cri pods would start without GPUs."""
    shipped = "containerd-1.7.24-debian13-config.toml"
    before = (CAPTURED / shipped).read_text()
    refused, _ = run(tmp_path, capsys, "1.7.1", shipped, defaults_of="1.7.24", cdi="true")
    assert refused["failed"] and "this containerd is 1.7.1: its CRI reads a pod's CDI devices only from 1.7.2 on" in refused["msg"]
    assert (tmp_path / "config.toml").read_text() == before  # nothing written
    ok, after = run(tmp_path, capsys, "1.7.24", shipped, cdi="true")
    assert not ok.get("failed") and after["plugins"][CRI]["enable_cdi"] is True
