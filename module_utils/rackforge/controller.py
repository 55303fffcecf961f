"""Helpers of the controller-side plugins (action plugins): load the project's module_utils, turn
hostvars into plain JSON types, write a report file atomically, the run's id and the decisions
made from the run's package snapshot.

On the controller the project's module_utils are not importable under ansible.module_utils (that
package is Ansible's own there). load(parts) loads each module_utils/rackforge/<part>.py by path
under the name a module on a node would import it by (ansible.module_utils.rackforge.<part>),
dependencies first, so their own imports of each other resolve; a part already loaded is reused.
Plugins load this file itself by path (see action_plugins/rackforge_fleet_report.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import types
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))


def load(parts):
    """The last of `parts` (after loading every one of them in order)."""
    mod = None
    for part in parts:
        name = "ansible.module_utils.rackforge." + part
        mod = sys.modules.get(name)
        if mod is None:
            spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, part + ".py"))
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
    return mod


RUN_REGISTRY = "_rackforge_run"


def run_id():
    """This ansible-playbook run's id, the same for every plugin and worker of the run. The first
    plugin that asks makes it and keeps it in sys.modules; the plugins ask when they are imported,
    which the linear and free strategies do in the main process for each task's action before they
    fork its workers, so the workers inherit it. An earlier run's id (a snapshot in the fact cache)
    never matches; where a strategy imports the plugins in each worker instead, each gets its own id
    and the plugins' snapshots are never used (every call then runs its module)."""
    run = sys.modules.get(RUN_REGISTRY)
    if run is None:
        run = types.ModuleType(RUN_REGISTRY)
        run.id = uuid.uuid4().hex
        sys.modules[RUN_REGISTRY] = run
    return run.id


def decided_from_snapshot(task_vars, wanted):
    """The answer of packages_snapshot.decide(wanted, <this run's package snapshot of the node>):
    the module's result when the snapshot shows nothing to do for `wanted` (rackforge_packages'
    arguments, or reachable_info's needed_for), None otherwise (no snapshot, one from another
    run, something to change). Shared by the rackforge_packages and rackforge_reachable_info
    action plugins."""
    snapshots = load(["packages", "packages_snapshot"])
    facts = task_vars.get("ansible_facts") or {}
    snap = plain(facts.get(snapshots.FACT)) if snapshots.FACT in facts else None
    return snapshots.decide(plain(wanted), snap, run_id())


def not_needed_result():
    """reachable_info's answer where the snapshot shows its packages need nothing from the repository."""
    msg = load(["packages", "packages_snapshot"]).NOT_NEEDED
    return dict(changed=False, results=[], not_needed=True, msg=msg, decided_on_controller=True)


def plain(value):
    """A variable's value as plain JSON types (hostvars hand out tagged and lazy containers)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def write_atomic(path, chunks, prefix):
    """Write the pieces of a text to path through a temporary file in the same directory (named
    <prefix><name>.*): fsync, rename. A run killed at any moment leaves the old file or the new one."""
    fd, tmp = tempfile.mkstemp(prefix=prefix + os.path.basename(path) + ".", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
