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
from ansible.module_utils.rackforge import packages as P
from ansible.module_utils.rackforge import packages_snapshot as S
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


# ------------------------------------------------------- the run's snapshot (action plugin's decisions)


def snapshot_of(res):
    return res["ansible_facts"][S.FACT]


def test_module_with_snapshot_reads_every_package_in_the_one_dpkg_query(monkeypatch, capsys):
    needs_apt()
    res, calls = run_module({"packages": [{"name": "dpkg"}], "snapshot": "run-1"}, monkeypatch, capsys, check=False)
    assert res["changed"] is False and [c[:2] for c in calls] == [[shutil.which("dpkg-query"), "-W"]]
    assert calls[0][-1] == P.DPKG_FORMAT  # no names: every package dpkg knows
    snap = snapshot_of(res)
    every = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\\n"], capture_output=True, text=True, check=True).stdout.split()
    assert snap["run"] == "run-1" and set(snap["packages"]) <= set(every) and {"dpkg", "apt", "bash"} <= set(snap["packages"])
    assert snap["packages"]["dpkg"] == [res["packages"]["dpkg"]["before"]["version"], False]
    keys = {p.name[:-4] for p in pathlib.Path(P.KEYRING_DIR).glob("*.asc")} if pathlib.Path(P.KEYRING_DIR).is_dir() else set()
    assert set(snap["keys"]) == keys and all(len(v) == 64 for v in snap["keys"].values())


def test_the_controllers_answer_is_the_modules_own_answer(monkeypatch, capsys):
    """decide() from the module's snapshot gives, for another call with nothing to do, exactly what the
    module gives for that call (plus decided_on_controller)."""
    needs_apt()
    first, _ = run_module({"packages": [{"name": "apt"}], "snapshot": "run-1"}, monkeypatch, capsys, check=False)
    args = {"packages": [{"name": "dpkg"}, {"name": "bash", "version": ""}], "allow_downgrade": False}
    module_answer, _ = run_module(args, monkeypatch, capsys, check=False)
    decided = S.decide(args, snapshot_of(first), "run-1")
    assert decided.pop("decided_on_controller") is True
    for key in ("invocation", "ansible_facts"):
        module_answer.pop(key, None)
    assert decided == module_answer


def test_the_controller_sends_to_the_node_what_it_cannot_answer(monkeypatch, capsys):
    needs_apt()
    first, _ = run_module({"packages": [{"name": "dpkg"}], "snapshot": "run-1"}, monkeypatch, capsys, check=False)
    snap = snapshot_of(first)
    have = snap["packages"]["dpkg"][0]
    assert S.decide({"packages": [{"name": "dpkg"}]}, snap, "run-2") is None  # another run's snapshot
    assert S.decide({"packages": [{"name": "dpkg"}]}, None, "run-1") is None
    assert S.decide({"packages": [{"name": "dpkg", "hold": True}]}, snap, "run-1") is None  # a hold to put
    assert S.decide({"packages": [{"name": "rackforge-never-installed"}]}, snap, "run-1") is None
    assert S.decide({"packages": [{"name": "dpkg", "version": "1.0"}]}, snap, "run-1") is None  # refused downgrade: the module says so
    assert S.decide({"packages": [{"name": "Bad_Name"}]}, snap, "run-1") is None  # bad input: the module says so
    assert S.decide({"packages": [{"name": "dpkg"}], "unknown": 1}, snap, "run-1") is None
    assert S.decide({"packages": [{"name": "dpkg", "version": have.split("-")[0]}]}, snap, "run-1")["changed"] is False


def test_a_repository_is_answered_only_when_its_key_and_source_are_as_wanted():
    repository = repo()
    line = P.source_line(dict(repository, components=["main"])) + "\n"
    snap = S.snapshot("r", {"dpkg": {"version": "1.21.22", "held": False}}, {"rackforge-test": KEY_SHA}, {"rackforge-test": line})
    args = {"repository": repository, "packages": [{"name": "dpkg"}]}
    decided = S.decide(args, snap, "r")
    assert decided["repository"] == {"key": P.key_path("rackforge-test"), "source": P.source_path("rackforge-test"), "line": line.strip()}
    assert S.decide(args, dict(snap, keys={"rackforge-test": "0" * 64}), "r") is None
    assert S.decide(args, dict(snap, keys={}), "r") is None
    assert S.decide(args, dict(snap, sources={"rackforge-test": line + "deb http://other/ x main\n"}), "r") is None
    assert S.decide(dict(args, repository=dict(repository, key_checksum="sha256:" + KEY_SHA)), snap, "r") is not None
