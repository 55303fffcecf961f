"""Action plugin: merge this run's health verdicts into the controller's fleet state and write the
fleet report (fleet.json, fleet.md, fleet.html) from it.

Why an action plugin and not a module delegated to localhost: it runs in the controller's own
process by construction (no connection, no interpreter discovery, no become of the play applied to
the controller), it reads every node's facts through hostvars in one call instead of having them
serialised into a module's arguments, and its lock lives exactly as long as the Ansible process
that holds it.

I/O only; what is decided lives in module_utils/rackforge/fleet.py and its parts (pure):
  - under an exclusive fcntl lock on <report_dir>/.fleet.lock (concurrent runs such as AWX slices
    wait for each other; the kernel drops the lock of a killed run), it reads
    <report_dir>/fleet-state.json, merges the nodes this run targeted, and writes the state and
    the three reports;
  - every file is written to a temporary file in the same directory, fsynced and renamed over the
    old one (a run killed at any moment leaves the previous file or the new one, never a part);
    temporary files a killed run left behind are removed under the lock.

Which nodes a run touched: those of the current batch (ansible_play_batch) and those that failed
or became unreachable earlier in this run (ansible_play_hosts_all minus ansible_play_hosts); a
node with rackforge_health gets its verdict, one without is recorded as not reached (its last
verdict is kept). Nodes of later serial batches, or outside a --limit, are left as they were.
Removed nodes: the inventory is groups.all, which --limit does not shrink; an AWX slice sees only
its slice of the inventory (AWX runs the slices of a job in a workflow, so awx_workflow_job_id is
set), so such a run confirms nodes but removes none.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import importlib.util
import json
import os
import socket
import time
from datetime import datetime, timezone

from ansible import context
from ansible.errors import AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATE_FILE = "fleet-state.json"
LOCK_FILE = ".fleet.lock"
TMP_PREFIX = ".fleet-tmp-"


# fleet.py and the files it imports, each after the ones it imports
FLEET_FILES = ("remedies", "fleet_state", "fleet_text", "fleet_html", "fleet")


def _loader():
    """module_utils/rackforge/controller.py, by path (it loads the rest)."""
    spec = importlib.util.spec_from_file_location("rackforge_controller", os.path.join(ROOT, "module_utils", "rackforge", "controller.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# fleet.py imports its parts as ansible.module_utils.rackforge.<part>, as a module on a node would:
# the loader loads each by path under that name, dependencies first (nothing of that name exists
# on the controller otherwise)
controller = _loader()
fleet = controller.load(FLEET_FILES)


class Lock:
    """An exclusive fcntl lock on a file, waited for at most `timeout` seconds."""

    def __init__(self, path, timeout):
        self.path, self.timeout, self.fd = path, timeout, None

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() > deadline:
                    os.close(self.fd)
                    raise AnsibleError(
                        "rackforge_fleet_report: another run has held %s for more than %d s; the fleet report was not written "
                        "(find the ansible-playbook that holds it with `fuser %s`)" % (self.path, self.timeout, self.path)
                    ) from None
                time.sleep(0.05)

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def fsync_dir(directory):
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_state(report_dir):
    """The stored state; rebuilt from fleet.json when there is no state file (a report of this
    version or one of the template era); empty when neither exists."""
    path = os.path.join(report_dir, STATE_FILE)
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as fh:
                return fleet.check_state(json.load(fh), path)
        except ValueError as exc:  # JSON errors and FleetError
            raise AnsibleError(
                "rackforge_fleet_report: %s cannot be read (%s); nothing was written: move it aside to start a new fleet state"
                % (path, exc)
            ) from None
    report = os.path.join(report_dir, "fleet.json")
    if os.path.exists(report):
        try:
            with open(report, encoding="utf-8") as fh:
                data = json.load(fh)
        except ValueError:
            return fleet.empty_state()  # an unreadable old report holds nothing to keep
        at = fleet.timestamp(datetime.fromtimestamp(os.stat(report).st_mtime, timezone.utc))
        return fleet.state_from_report(data, at)
    return fleet.empty_state()


def playbook_names():
    names = []
    for path in context.CLIARGS.get("args") or ():
        full = os.path.abspath(path)
        names.append(os.path.relpath(full, ROOT) if full.startswith(ROOT + os.sep) else full)
    return " ".join(names) or None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        report_dir = args.get("report_dir")
        if not report_dir or not isinstance(report_dir, str):
            raise AnsibleError("rackforge_fleet_report: report_dir must name the controller directory for the fleet report")
        try:
            stale = float(args.get("stale_after_hours"))
        except (TypeError, ValueError):
            raise AnsibleError(
                "rackforge_fleet_report: stale_after_hours must be a number of hours, got %r" % args.get("stale_after_hours")
            ) from None
        stale = int(stale) if stale.is_integer() else stale
        check_mode = boolean(args.get("check_mode", task_vars.get("ansible_check_mode", False)), strict=False)
        lock_timeout = int(args.get("lock_timeout", 300))

        hostvars = task_vars["hostvars"]
        everyone = list(task_vars.get("ansible_play_hosts_all") or [])
        active = set(task_vars.get("ansible_play_hosts") or [])
        batch = set(task_vars.get("ansible_play_batch") or [])
        results = {}
        for host in everyone:
            if host not in batch and host in active:
                continue  # a later serial batch, or not part of this run
            facts = hostvars[host]
            health = controller.plain(facts.get("rackforge_health"))
            reason = None
            if health is None:
                reason = (
                    "it failed or was unreachable before the health checks"
                    if host not in active
                    else "the health checks were skipped on it"
                )
            results[host] = {
                "health": health,
                "profile": controller.plain(facts.get("rackforge_hw_profile")),
                "acceptance": controller.plain(facts.get("rackforge_acceptance")),
                "reason": reason,
            }
        inventory = list((task_vars.get("groups") or {}).get("all") or [])
        partial = task_vars.get("awx_workflow_job_id") is not None
        run = {
            "playbook": playbook_names(),
            "play": controller.plain(task_vars.get("ansible_play_name")),
            "check_mode": check_mode,
            "limit": controller.plain(context.CLIARGS.get("subset")),
            "controller": socket.gethostname(),
            "awx_job_id": controller.plain(task_vars.get("awx_job_id")),
        }

        try:
            os.makedirs(report_dir, mode=0o755, exist_ok=True)
            with Lock(os.path.join(report_dir, LOCK_FILE), lock_timeout):
                for leftover in glob.glob(os.path.join(report_dir, TMP_PREFIX + "*")):
                    os.unlink(leftover)  # a killed writer's; no live writer has one while we hold the lock
                state = read_state(report_dir)
                now = fleet.timestamp(datetime.now(timezone.utc))
                state = fleet.merge(state, dict(run, at=now), results, inventory, partial_inventory=partial)
                report = fleet.build_report(state, now, stale)
                # the state first: a run killed after it leaves reports the next run renders again
                controller.write_atomic(os.path.join(report_dir, STATE_FILE), fleet.json_chunks(state, indent=None), TMP_PREFIX)
                for name, chunks in fleet.report_chunks(report).items():
                    controller.write_atomic(os.path.join(report_dir, name), chunks, TMP_PREFIX)
                fsync_dir(report_dir)
        except fleet.FleetError as exc:
            raise AnsibleError("rackforge_fleet_report: %s; nothing was written" % exc) from None
        except OSError as exc:
            raise AnsibleError("rackforge_fleet_report: cannot write the fleet report in %s: %s" % (report_dir, exc)) from None

        s = report["summary"]
        result.update(
            changed=False,
            report_dir=report_dir,
            summary=s,
            merged=sorted(results),
            msg="fleet report in %s: %d node(s), %d unhealthy, %d not checked, %d stale, %d removed, %d healthy (this run: %d node(s))"
            % (report_dir, s["total"], s["unhealthy"], s["not_checked"], s["stale"], s["removed"], s["healthy"], len(results)),
        )
        return result
