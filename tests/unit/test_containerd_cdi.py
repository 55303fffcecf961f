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


def containerd(tmp_path, version):
    """A stand-in containerd that prints the real `config default` of that version and accepts any config."""
    tool = tmp_path / "containerd"
    default = CAPTURED / ("containerd-%s-config-default.toml" % version)
    tool.write_text('#!/bin/sh\ncase "$*" in\n  "config default") cat %s;;\n  *"config dump") exit 0;;\nesac\n' % default)
    tool.chmod(0o755)
    return str(tool)


def run(tmp_path, capsys, version, shipped, **args):
    path = tmp_path / "config.toml"
    if not path.exists():
        path.write_text((CAPTURED / shipped).read_text())
    args = {"path": str(path), "containerd": containerd(tmp_path, version), "backup": False, **args}
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
