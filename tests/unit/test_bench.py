"""The pieces the bench and the no-op target rest on: the probe module and the
task_census callback's classification (run on a real local playbook), the files module and
the fleet-size rule. The bench harness itself (bench/*.py): test_bench_harness.py."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import rackforge_probe
from ansible.module_utils.testing import patch_module_args
from module_helper import call_module

ROOT = Path(__file__).resolve().parents[2]


def run_probe(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit):
        rackforge_probe.main()
    return json.loads(capsys.readouterr().out)


def test_probe_reads_paths_files_modules_and_commands(tmp_path, capsys):
    (tmp_path / "module" / "overlay").mkdir(parents=True)
    conf = tmp_path / "a.conf"
    conf.write_text("swap line\n")
    res = run_probe(
        {
            "paths": [str(conf), str(tmp_path / "missing"), str(tmp_path)],
            "files": [str(conf), str(tmp_path / "missing")],
            "modules": ["overlay", "br_netfilter"],
            "sysfs_root": str(tmp_path),
            "commands": {"echo": ["echo", "hi"], "false": ["false"], "nope": ["rackforge-no-such-tool"]},
        },
        capsys,
    )
    assert not res["changed"]
    assert res["paths"][str(conf)]["exists"] and len(res["paths"][str(conf)]["sha256"]) == 64
    assert res["paths"][str(tmp_path / "missing")] == {"exists": False, "isdir": False, "sha256": None}
    assert res["paths"][str(tmp_path)]["isdir"]
    assert res["files"] == {str(conf): "swap line\n", str(tmp_path / "missing"): None}
    assert res["modules"] == {"overlay": True, "br_netfilter": False}
    assert res["commands"]["echo"] == {"rc": 0, "stdout": "hi\n", "stderr": ""}
    assert res["commands"]["false"]["rc"] == 1
    assert res["commands"]["nope"]["rc"] is None and "not installed" in res["commands"]["nope"]["stderr"]


def test_probe_refuses_a_command_that_is_not_an_argv_list(capsys):
    res = run_probe({"commands": {"bad": "ls -l | wc"}}, capsys)
    assert res["failed"] and "commands.bad must be a non-empty argv list" in res["msg"]


CENSUS_PLAY = """
- hosts: target
  gather_facts: false
  tasks:
    - ansible.builtin.assert: {that: [true], quiet: true}
    - ansible.builtin.set_fact: {x: 1}
    - ansible.builtin.stat: {path: /}
    - ansible.builtin.stat: {path: /}
      when: false
    - ansible.builtin.command: {argv: ["true"]}
      loop: [1, 2, 3]
      changed_when: false
    - ansible.builtin.command: {argv: ["true"]}
      loop: [1, 2]
      when: item > 5
    - ansible.builtin.stat: {path: /}
      delegate_to: localhost
    - ansible.builtin.file: {path: "{{ out }}", state: touch, mode: "0644"}
"""


def test_census_counts_remote_controller_skipped_and_items(tmp_path):
    (tmp_path / "play.yml").write_text(CENSUS_PLAY)
    (tmp_path / "hosts").write_text("target ansible_connection=local ansible_python_interpreter=%s\n" % sys.executable)
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_CALLBACK_PLUGINS=str(ROOT / "bench" / "callback_plugins"),
        ANSIBLE_CALLBACKS_ENABLED="task_census",
        RACKFORGE_CENSUS_OUT=str(tmp_path / "census.json"),
    )
    res = subprocess.run(
        ["ansible-playbook", "-i", str(tmp_path / "hosts"), "-e", "out=%s" % (tmp_path / "touched"), str(tmp_path / "play.yml")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    host = json.loads((tmp_path / "census.json").read_text())["hosts"]["target"]
    # remote: stat, command (3 items), file; controller: assert, set_fact; delegated: the stat on localhost
    assert [t["action"] for t in host["remote"]] == ["stat", "command", "file"]
    assert host["remote_tasks"] == 3 and host["remote_executions"] == 5
    assert host["controller_tasks"] == 2
    assert host["delegated_tasks"] == 1 and host["delegated"][0]["to"] == "localhost"
    assert host["skipped"] == 2
    assert host["changed"] == 1 and host["changed_tasks"][0].endswith("file")
    assert host["by_role"] == {"(play)": {"remote": 3, "controller": 2, "delegated": 1, "skipped": 2}}


def test_census_counts_rackforges_controller_only_action_plugins_as_controller():
    """An action plugin that never runs a module on the host costs no round trip to it."""
    spec = importlib.util.spec_from_file_location("task_census", ROOT / "bench" / "callback_plugins" / "task_census.py")
    census = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(census)
    plugins = sorted((ROOT / "action_plugins").glob("*.py"))
    # every way ActionBase reaches the host: a module, a raw command, a file transfer, a remote temp dir
    reach = ("_execute_module", "_low_level_execute_command", "_transfer_file", "_transfer_data", "_make_tmp_path", "self._connection")
    controller_only = {p.stem for p in plugins if not any(r in p.read_text() for r in reach)}
    assert controller_only and controller_only <= census.CONTROLLER_ACTIONS
    assert not ({p.stem for p in plugins} - controller_only) & census.CONTROLLER_ACTIONS


def run_files(args, capsys, check_mode=False):
    import rackforge_files

    return call_module(rackforge_files, args, capsys, check_mode=check_mode)


def test_files_writes_only_what_differs_and_reports_it(tmp_path, capsys):
    same, other = tmp_path / "same", tmp_path / "other"
    same.write_text("a\n")
    same.chmod(0o644)
    other.write_text("old\n")
    files = [
        {"dest": str(same), "content": "a\n", "mode": "0644"},
        {"dest": str(other), "content": "new\n", "mode": "0755"},
        {"dest": str(tmp_path / "created"), "content": "c\n"},
    ]
    preview = run_files({"files": files}, capsys, check_mode=True)
    assert preview["changed"] and preview["changed_files"] == [str(other), str(tmp_path / "created")]
    assert other.read_text() == "old\n" and not (tmp_path / "created").exists()  # check mode wrote nothing
    res = run_files({"files": files}, capsys)
    assert res["changed_files"] == [str(other), str(tmp_path / "created")]
    assert other.read_text() == "new\n" and (other.stat().st_mode & 0o777) == 0o755
    assert run_files({"files": files}, capsys)["changed"] is False
    # a mode that differs is a change too
    same.chmod(0o600)
    assert run_files({"files": files}, capsys)["changed_files"] == [str(same)]


def test_files_writes_nothing_when_one_validation_fails(tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text("old\n")
    files = [
        {"dest": str(first), "content": "new\n"},
        {"dest": str(second), "content": "bad\n", "validate": ["grep", "-q", "good", "%s"]},
    ]
    res = run_files({"files": files}, capsys)
    assert res["failed"] and "nothing written" in res["msg"]
    assert first.read_text() == "old\n" and not second.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".rackforge-")] == []


def test_no_task_costs_more_with_a_bigger_fleet():
    """No per-host loop over the fleet (groups, hostvars, play hosts): a task that walks the whole
    fleet runs once per run (run_once), never once per host, and templates that walk hostvars
    are rendered only by such tasks."""
    from test_security import ALL_TASKS

    fleet = re.compile(r"groups\[|groups\.|hostvars|ansible_play_hosts|play_hosts")
    fleet_templates = {
        p.name
        for p in ROOT.glob("roles/*/templates/*")
        if re.search(r"\{%-?\s*for [^%]*(hostvars|ansible_play_hosts|groups)", p.read_text())
    }
    assert fleet_templates == set()  # the fleet report is rendered by the rackforge_fleet_report action
    walking = []
    # the monitoring hosts are one or two whatever the fleet's size: a node writing its targets to
    # each is a constant cost per node
    bounded = "{{ groups['monitoring_hosts'] | default([]) }}"
    for path, task in ALL_TASKS:
        loop = str(task.get("loop", "")) + str(task.get("with_items", ""))
        if loop == bounded:
            continue
        if fleet.search(loop) or "rackforge_fleet_report" in task:
            walking.append(task.get("name"))
            assert task.get("run_once") is True, (str(path), task.get("name"))
    assert walking == ["Merge the verdicts into the fleet state and write the fleet report on the controller"]


SNAPSHOT_PLAY = """
- hosts: target
  gather_facts: false
  tasks:
    - rackforge_packages: {packages: [{name: dpkg}]}
    - rackforge_packages: {packages: [{name: dpkg}, {name: apt}]}
      register: second
    - ansible.builtin.assert: {that: [second.decided_on_controller, not second.changed], quiet: true}
"""


def test_census_counts_a_call_decided_from_the_runs_package_snapshot_as_controller(tmp_path):
    """rackforge_packages reads this machine's packages once (nothing is changed: both are installed);
    the second call of the run is answered on the controller and counted so."""
    if not shutil.which("dpkg-query"):
        pytest.skip("not a Debian-family machine")
    (tmp_path / "play.yml").write_text(SNAPSHOT_PLAY)
    (tmp_path / "hosts").write_text("target ansible_connection=local ansible_python_interpreter=%s\n" % sys.executable)
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_CALLBACK_PLUGINS=str(ROOT / "bench" / "callback_plugins"),
        ANSIBLE_CALLBACKS_ENABLED="task_census",
        ANSIBLE_CACHE_PLUGIN="memory",
        RACKFORGE_CENSUS_OUT=str(tmp_path / "census.json"),
    )
    res = subprocess.run(
        ["ansible-playbook", "-i", str(tmp_path / "hosts"), str(tmp_path / "play.yml")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    host = json.loads((tmp_path / "census.json").read_text())["hosts"]["target"]
    assert [t["action"] for t in host["remote"]] == ["rackforge_packages"]
    assert [t["action"] for t in host["controller"]] == ["rackforge_packages", "assert"]
