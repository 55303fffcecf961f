"""containerd_config's toolkit keys (nvidia_toolkit_settings): the toolkit's GPU-isolation keys set in place on the config.toml the toolkit
writes itself (tests/fixtures/captured/nvidia-container-toolkit-1.17.3-config.toml, provenance in
the .src.txt), read back with tomllib."""

from __future__ import annotations

import containerd_config
import pytest
import tomllib
from ansible.module_utils.rackforge.ctkconfig import set_top_level
from conftest import ROOT
from module_helper import call_module

CAPTURED = ROOT / "tests" / "fixtures" / "captured"

DEFAULT = (ROOT / "tests" / "fixtures" / "captured" / "nvidia-container-toolkit-1.17.3-config.toml").read_text()
ENVVAR = "accept-nvidia-visible-devices-envvar-when-unprivileged"
MOUNTS = "accept-nvidia-visible-devices-as-volume-mounts"
ISOLATED = {ENVVAR: False, MOUNTS: True}


def test_defaults_are_commented_so_unprivileged_pods_may_ask_by_env_var():
    cfg = tomllib.loads(DEFAULT)
    assert ENVVAR not in cfg and MOUNTS not in cfg  # the toolkit then uses true / false: open


def test_isolation_replaces_the_commented_defaults_in_place_and_keeps_every_other_line():
    after, changes = set_top_level(DEFAULT, ISOLATED)
    assert sorted(changes) == [MOUNTS, ENVVAR]
    cfg = tomllib.loads(after)
    assert cfg[ENVVAR] is False and cfg[MOUNTS] is True
    before = tomllib.loads(DEFAULT)
    assert {k: v for k, v in cfg.items() if k not in ISOLATED} == before
    lines = after.splitlines()
    assert lines[:2] == [
        "accept-nvidia-visible-devices-as-volume-mounts = true",
        "accept-nvidia-visible-devices-envvar-when-unprivileged = false",
    ]
    assert lines[2:] == DEFAULT.splitlines()[2:]  # comments and layout kept
    assert set_top_level(after, ISOLATED) == (after, [])  # idempotent


def test_an_active_value_is_replaced_and_a_key_only_under_a_table_is_added_at_the_top():
    text = 'accept-nvidia-visible-devices-envvar-when-unprivileged = true\n\n[nvidia-ctk]\n#accept-nvidia-visible-devices-as-volume-mounts = false\npath = "nvidia-ctk"\n'
    after, _ = set_top_level(text, ISOLATED)
    cfg = tomllib.loads(after)
    assert cfg[ENVVAR] is False and cfg[MOUNTS] is True and cfg["nvidia-ctk"] == {"path": "nvidia-ctk"}
    assert "#accept-nvidia-visible-devices-as-volume-mounts = false" in after  # the table's comment is not the top-level key


def test_a_missing_file_gets_the_keys_alone():
    after, changes = set_top_level("", ISOLATED)
    assert tomllib.loads(after) == ISOLATED and len(changes) == 2


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"accept-nvidia-visible-devices-envvar-when-unpriviledged": False}, "not a key rackforge sets"),
        ({ENVVAR: "false"}, "must be a bool"),
    ],
)
def test_unknown_keys_and_wrong_types_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        set_top_level(DEFAULT, settings)


def settled_containerd(tmp_path, capsys):
    """A containerd config already merged (the real 1.6.20 default, merged once), and the args that
    leave it as it is; CDI left alone so no containerd binary is asked."""
    path = tmp_path / "containerd.toml"
    path.write_text((CAPTURED / "containerd-1.6.20-config-default.toml").read_text())
    base = {"path": str(path), "cdi": "false", "backup": False, "containerd": "/nonexistent/containerd"}
    call_module(containerd_config, base, capsys)
    return base


def test_module_check_mode_diff_then_write_then_no_op(tmp_path, capsys):
    path = tmp_path / "config.toml"
    path.write_text(DEFAULT)
    args = {**settled_containerd(tmp_path, capsys), "nvidia_toolkit_config": str(path), "nvidia_toolkit_settings": ISOLATED}
    out = call_module(containerd_config, args, capsys, check_mode=True)
    assert out["changed"] and path.read_text() == DEFAULT and out["changes"] == []
    assert [d["after_header"] for d in out["diff"]] == [str(path)]
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false" in out["diff"][0]["after"]
    out = call_module(containerd_config, args, capsys)
    assert out["changed"] and tomllib.loads(path.read_text())[ENVVAR] is False
    assert out["diff"][0]["after"] == path.read_text() and sorted(out["toolkit_changes"]) == [MOUNTS, ENVVAR]
    out = call_module(containerd_config, args, capsys)
    assert not out["changed"] and out["toolkit_changes"] == [] and out["diff"] == []


def test_module_refuses_unreadable_toml_and_unknown_keys_without_writing(tmp_path, capsys):
    base = settled_containerd(tmp_path, capsys)
    containerd_before = (tmp_path / "containerd.toml").read_text()
    path = tmp_path / "config.toml"
    path.write_text("[broken\n")
    out = call_module(containerd_config, {**base, "nvidia_toolkit_config": str(path), "nvidia_toolkit_settings": ISOLATED}, capsys)
    assert out["failed"] and "is not valid TOML" in out["msg"] and path.read_text() == "[broken\n"
    path.write_text(DEFAULT)
    # refused before containerd's own config is read or written
    out = call_module(
        containerd_config,
        {**base, "systemd_cgroup": False, "nvidia_toolkit_config": str(path), "nvidia_toolkit_settings": {"swarm-resource": "x"}},
        capsys,
    )
    assert out["failed"] and "nvidia_toolkit_settings: swarm-resource is not a key rackforge sets" in out["msg"]
    assert path.read_text() == DEFAULT and (tmp_path / "containerd.toml").read_text() == containerd_before
