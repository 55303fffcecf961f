"""rackforge_packages run in-process on this Debian build host, which it must never change (a
wrapper lets only dpkg-query and apt-cache run; everything else in check mode): the no-op path's
single read, check mode on a node without the repository, the key checksum, a refused downgrade,
bad input and a host without apt. Its real changes are tested in a scratch container
(tests/integration/test_packages_module.py)."""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil
import subprocess

import pytest
import rackforge_packages
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

KEY = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEZ0test\n-----END PGP PUBLIC KEY BLOCK-----\n"
KEY_SHA = hashlib.sha256(KEY).hexdigest()


def repo(**kw):
    base = {"name": "rackforge-test", "url": "file:///srv/repo/deb", "suite": "bookworm", "components": ["main"]}
    base.update({"key_url": "file:///srv/repo/key.asc", "key_checksum": KEY_SHA}, **kw)
    return base


NAME = "rackforge-unit-test-h"


def run_module(args, monkeypatch, capsys, check=True):
    calls = []
    real = AnsibleModule.run_command

    def recording(self, argv, *a, **kw):
        calls.append(list(argv))
        # this machine is never changed: only the reads run (anything else fails the test, unrun)
        assert pathlib.PurePath(argv[0]).name in ("dpkg-query", "apt-cache"), "the module would run %s here" % argv
        return real(self, argv, *a, **kw)

    monkeypatch.setattr(AnsibleModule, "run_command", recording)
    with patch_module_args(dict(args, _ansible_check_mode=check)), pytest.raises(SystemExit):
        rackforge_packages.main()
    return json.loads(capsys.readouterr().out), calls


def needs_apt():
    if not (shutil.which("dpkg-query") and shutil.which("apt-get")):
        pytest.skip("not a Debian-family machine")


def test_module_no_op_runs_one_dpkg_query(monkeypatch, capsys):
    needs_apt()
    res, calls = run_module({"packages": [{"name": "dpkg"}, {"name": "apt"}]}, monkeypatch, capsys, check=False)
    assert res["changed"] is False and res["actions"] == [] and res["diff"] == []
    assert [c[:2] for c in calls] == [[shutil.which("dpkg-query"), "-W"]]
    assert res["packages"]["dpkg"]["before"] == res["packages"]["dpkg"]["after"]
    assert res["packages"]["dpkg"]["before"]["version"]


def test_module_check_mode_on_a_node_without_the_repository(tmp_path, monkeypatch, capsys):
    needs_apt()
    (tmp_path / "key.asc").write_bytes(KEY)
    repository = repo(name=NAME, url="file://%s/deb" % tmp_path, key_url="file://%s/key.asc" % tmp_path)
    packages = [{"name": "rackforge-never-installed", "version": "1.0.0", "hold": True}]
    res, calls = run_module({"repository": repository, "packages": packages}, monkeypatch, capsys)
    assert res["changed"] is True, res
    assert res["actions"] == [
        "key /etc/apt/keyrings/%s.asc" % NAME,
        "source /etc/apt/sources.list.d/%s.list" % NAME,
        "apt-get update",
        "would install rackforge-never-installed 1.0.0 from file://%s/deb" % tmp_path,
        "hold rackforge-never-installed",
    ]
    assert len(calls) == 1  # the dpkg-query; no madison: the repository is not added
    assert not pathlib.Path("/etc/apt/keyrings/%s.asc" % NAME).exists()
    assert not pathlib.Path("/etc/apt/sources.list.d/%s.list" % NAME).exists()
    assert res["packages"]["rackforge-never-installed"] == {
        "before": {"version": None, "held": False},
        "after": {"version": "1.0.0", "held": True},
    }
    headers = [d["before_header"] for d in res["diff"]]
    assert headers == ["packages", "/etc/apt/keyrings/%s.asc" % NAME, "/etc/apt/sources.list.d/%s.list" % NAME]
    assert res["diff"][2]["after"] == "deb [signed-by=/etc/apt/keyrings/%s.asc] file://%s/deb bookworm main\n" % (NAME, tmp_path)


def test_module_wrong_key_checksum_fails_in_check_mode_too(tmp_path, monkeypatch, capsys):
    needs_apt()
    (tmp_path / "key.asc").write_bytes(KEY)
    repository = repo(name=NAME, key_url="file://%s/key.asc" % tmp_path, key_checksum="e" * 64)
    res, _ = run_module({"repository": repository, "packages": []}, monkeypatch, capsys)
    assert res["failed"] and "file://%s/key.asc" % tmp_path in res["msg"] and KEY_SHA in res["msg"] and "e" * 64 in res["msg"]
    assert not pathlib.Path("/etc/apt/keyrings/%s.asc" % NAME).exists()


def test_module_refuses_a_downgrade_before_anything(monkeypatch, capsys):
    needs_apt()
    have = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "dpkg"], capture_output=True, text=True, check=True).stdout
    res, calls = run_module({"packages": [{"name": "dpkg", "version": "1.0"}]}, monkeypatch, capsys)
    want = "rackforge_packages: dpkg is installed at %s, newer than the wanted 1.0: refusing to downgrade" % have
    assert res["failed"] and res["msg"] == want + " (allow_downgrade: true allows it): nothing was changed"
    assert len(calls) == 1 and res["actions"] == []


def test_module_bad_input_names_what_is_wrong(monkeypatch, capsys):
    res, calls = run_module({"repository": repo(suite="/"), "packages": [{"name": "Bad_Name"}]}, monkeypatch, capsys)
    assert res["failed"] and "'Bad_Name' is not a Debian package name" in res["msg"] and "takes no components" in res["msg"]
    assert calls == []


def test_module_elsewhere_says_it_manages_apt_only(monkeypatch, capsys):
    monkeypatch.setattr(AnsibleModule, "get_bin_path", lambda self, name, *a, **kw: None)  # a host without apt
    res, calls = run_module({"packages": [{"name": "bash"}]}, monkeypatch, capsys)
    assert res["failed"] and res["msg"].startswith("rackforge_packages manages apt only; ")
    assert "apt-get, apt-cache, apt-mark, dpkg-query" in res["msg"] and "ansible.builtin.package" in res["msg"]
    assert calls == []
