"""Security rules every role and playbook keeps, checked on the task files themselves (so a new
role is held to them without anyone remembering): every download has a checksum, TLS checks stay
on, no `curl | sh`, every file-writing task names owner, group and mode, secrets are `no_log`,
kubeconfigs and keys are 0600, SSH host-key checking stays on outside the lab."""

from __future__ import annotations

import configparser
import re

import pytest
import yaml
from conftest import ROOT

FILE_MODULES = ("ansible.builtin.copy", "ansible.builtin.template", "ansible.builtin.get_url")
DIR_MODULE = "ansible.builtin.file"


def tasks_in(node):
    """Every task dict in a tasks/handlers/playbook structure, blocks included."""
    if isinstance(node, list):
        for item in node:
            yield from tasks_in(item)
    elif isinstance(node, dict):
        if any(k in node for k in ("block", "rescue", "always")):
            for key in ("block", "rescue", "always"):
                yield from tasks_in(node.get(key, []))
        elif "tasks" in node or "pre_tasks" in node or "handlers" in node or "post_tasks" in node:
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from tasks_in(node.get(key, []))
        elif "name" in node or any("." in k for k in node):
            yield node


def task_files():
    files = sorted(ROOT.glob("roles/*/tasks/*.yml")) + sorted(ROOT.glob("roles/*/handlers/*.yml"))
    files += [*sorted(ROOT.glob("playbooks/*.yml")), ROOT / "site.yml"]
    return files


ALL_TASKS = [(path.relative_to(ROOT), task) for path in task_files() for task in tasks_in(yaml.safe_load(path.read_text()) or [])]


def test_the_walker_sees_the_tasks():
    # every task file yields tasks (blocks and plays are walked into), not a fixed count that
    # drifts as roles shrink
    assert {path for path, _ in ALL_TASKS} == {path.relative_to(ROOT) for path in task_files() if yaml.safe_load(path.read_text())}
    assert len(ALL_TASKS) > 200
    assert any("ansible.builtin.get_url" in t for _, t in ALL_TASKS)


@pytest.mark.parametrize(("path", "task"), [(p, t) for p, t in ALL_TASKS if "ansible.builtin.get_url" in t], ids=str)
def test_every_download_is_checksummed(path, task):
    args = task["ansible.builtin.get_url"]
    assert str(args.get("checksum", "")).startswith("sha256:"), (path, task["name"])


def test_no_tls_check_is_turned_off_and_nothing_is_piped_to_a_shell():
    for path in task_files() + sorted(ROOT.glob("roles/*/defaults/*.yml")) + sorted(ROOT.glob("roles/*/templates/*")):
        text = path.read_text()
        assert not re.search(r"validate_certs:\s*(false|no)", text, re.I), path
        assert not re.search(r"(curl|wget)[^\n|]*\|\s*(sudo\s+)?(ba)?sh\b", text), path


@pytest.mark.parametrize(
    ("path", "task"),
    [(p, t) for p, t in ALL_TASKS if any(m in t for m in FILE_MODULES) or (DIR_MODULE in t and t[DIR_MODULE].get("state") == "directory")],
    ids=str,
)
def test_every_file_task_names_owner_group_and_mode(path, task):
    module = next(m for m in (*FILE_MODULES, DIR_MODULE) if m in task)
    args = task[module]
    if task.get("delegate_to") in ("localhost", "{{ monitoring_prometheus_host }}"):
        assert "mode" in args, (path, task["name"])  # a file of the user running ansible, on the controller
        return
    assert {"owner", "group", "mode"} <= set(args), (path, task["name"])


MULTI_FILE_MODULES = ("rackforge_files", "rackforge_units")  # many files in one call
FILES_TASKS = [(p, t) for p, t in ALL_TASKS for m in MULTI_FILE_MODULES if m in t and (t[m] or {}).get("files")]


def test_the_multi_file_modules_are_used_and_their_owner_defaults_to_root():
    """rackforge_files and rackforge_units write root:root unless told otherwise (the modules'
    defaults, checked here in their source), so their entries need only name the mode."""
    assert len(FILES_TASKS) >= 8
    assert {m for _, t in FILES_TASKS for m in MULTI_FILE_MODULES if m in t} == set(MULTI_FILE_MODULES)
    source = (ROOT / "library" / "rackforge_files.py").read_text()
    assert 'item.get("owner") or "root"' in source and 'item.get("group") or "root"' in source
    source = (ROOT / "library" / "rackforge_units.py").read_text()
    assert '"owner": {"type": "str", "default": "root"}' in source and '"group": {"type": "str", "default": "root"}' in source


@pytest.mark.parametrize(("path", "task"), FILES_TASKS, ids=str)
def test_every_multi_file_entry_names_its_mode(path, task):
    files = next(task[m] for m in MULTI_FILE_MODULES if m in task)["files"]
    if isinstance(files, str):  # built by a template: every entry there names its mode too
        entries = re.findall(r'\{"dest":[^{}]*?"mode": "0[0-7]{3}"', files) or re.findall(r"'dest':[^{}]*?'mode': '0[0-7]{3}'", files)
        template = re.search(r"lookup\('ansible.builtin.template', '([^']+\.json\.j2)'\)", files)
        listed = [v for v in task.get("vars", {}).values() if isinstance(v, dict) and "dest" in v]
        if template:
            text = (ROOT / path.parts[0] / path.parts[1] / "templates" / template.group(1)).read_text()
            assert text.count('"dest":') == text.count('"mode": "0'), (path, task["name"])
        elif listed:  # a list of the task's own vars, each one entry
            for entry in listed:
                assert re.match(r"^0[0-7]{3}$", str(entry.get("mode", ""))), (path, task["name"], entry["dest"])
        else:
            assert entries and len(entries) == files.count("'dest':"), (path, task["name"])
        return
    for entry in files:
        assert re.match(r"^0[0-7]{3}$", str(entry.get("mode", ""))), (path, task["name"], entry.get("dest"))


def test_kubeconfigs_and_keys_are_private():
    for path, task in ALL_TASKS:
        for module in FILE_MODULES:
            dest = str(task.get(module, {}).get("dest", ""))
            if re.search(r"kube/config|\.kubeconfig|admin\.conf|kubelet\.conf|\.key$|join\.yaml", dest):
                assert task[module]["mode"] == "0600", (path, task["name"])


def handles_a_secret(task):
    """Tasks whose arguments or result carry a token, a key or a kubeconfig's content."""
    if "ansible.builtin.slurp" in task:
        return bool(re.search(r"admin\.conf|kubelet\.conf|\.key\b", str(task["ansible.builtin.slurp"].get("src"))))
    for module in ("ansible.builtin.command", "ansible.builtin.shell"):
        if module in task:
            args = task[module]
            line = " ".join(map(str, args.get("argv", []))) + " " + str(args.get("cmd", "")) if isinstance(args, dict) else str(args)
            return "token create" in line
    for module in ("ansible.builtin.template", "ansible.builtin.copy"):
        if module in task:
            args = task[module]
            return "join.yaml" in str(args.get("dest")) or "admin_conf" in str(args.get("content", ""))
    return "awx.awx.credential" in task


def test_tasks_that_handle_tokens_or_keys_are_no_log():
    found = [(p, t) for p, t in ALL_TASKS if handles_a_secret(t)]
    assert len(found) >= 5  # token create, join config, admin.conf slurp and copy, the AWX credential
    for path, task in found:
        assert task.get("no_log") is True or _in_no_log_block(path, task), (path, task.get("name"))


def _in_no_log_block(path, task):
    def walk(node, inherited):
        if isinstance(node, list):
            return any(walk(n, inherited) for n in node)
        if isinstance(node, dict):
            if node == task:
                return inherited
            nl = inherited or node.get("no_log") is True
            return any(walk(node.get(k, []), nl) for k in ("block", "rescue", "always", "tasks", "pre_tasks"))
        return False

    return walk(yaml.safe_load((ROOT / path).read_text()), False)


def test_lint_keeps_no_log_password_and_host_key_checking_stays_on():
    lint = yaml.safe_load((ROOT / ".ansible-lint").read_text())
    assert lint["profile"] == "production" and "no-log-password" in lint["enable_list"]
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "ansible.cfg")
    assert cfg["defaults"]["host_key_checking"] == "True"
    for path in ROOT.glob("inventories/example/**/*.yml"):
        assert "StrictHostKeyChecking=no" not in path.read_text(), path
