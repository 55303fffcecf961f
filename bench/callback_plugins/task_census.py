"""task_census: count, per host, the tasks that ran a module on the host and those that did not.

Enabled by bench/bench.py and the no-op test (ANSIBLE_CALLBACKS_ENABLED=task_census); writes JSON
to $RACKFORGE_CENSUS_OUT when the playbook ends. Classes of a (host, task) result:

- remote:     a module ran over the host's connection (one per task; `remote_executions` counts
              every loop item that ran, as each is a module round trip of its own)
- controller: the action never leaves the controller (assert, set_fact, debug, include_*, ...), or
              an action plugin answered on the controller (`decided_on_controller: true`:
              rackforge_packages from the run's package snapshot)
- delegated:  the module ran on another host (delegate_to: the controller, the control plane,
              the Prometheus host), not on this node
- skipped:    `when` was false (no module ran)

`by_role` counts them per role (each evaluation of a role's task, whatever its class; "(play)" for
a play's own tasks), which is what the per-role no-op budget is measured on.

It also sums, per host, the seconds from a task's start to that host's result (`remote_seconds`
for remote tasks), so the cost of one remote task on this transport can be read off.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: task_census
type: aggregate
short_description: per-host counts of remote-module and controller-only tasks, as JSON
description: Writes the census to the file named by RACKFORGE_CENSUS_OUT at the end of the playbook.
requirements: [enable in the callbacks_enabled setting]
"""

# actions that run entirely on the controller: ansible-core's, and rackforge's own action plugins
# that never run a module on the host (tests/unit/test_bench.py holds this list to action_plugins/)
CONTROLLER_ACTIONS = {
    "rackforge_acceptance_report",
    "rackforge_fleet_report",
    "rackforge_settings",
    "add_host",
    "assert",
    "debug",
    "fail",
    "group_by",
    "import_role",
    "import_tasks",
    "include_role",
    "include_tasks",
    "include_vars",
    "meta",
    "pause",
    "set_fact",
    "set_stats",
    "validate_argument_spec",
}


def short_action(action):
    return (action or "").rsplit(".", 1)[-1]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_census"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.hosts = {}
        self.task_started = 0.0
        self.task_started_epoch = 0.0
        self.play = ""
        self.started = time.monotonic()

    def _host(self, name):
        return self.hosts.setdefault(
            name,
            {
                "remote_tasks": 0,
                "remote_executions": 0,
                "remote_seconds": 0.0,
                "controller_tasks": 0,
                "delegated_tasks": 0,
                "delegated": [],
                "controller": [],
                "skipped": 0,
                "skipped_tasks": [],
                "ok": 0,
                "changed": 0,
                "failed": 0,
                "unreachable": 0,
                "changed_tasks": [],
                "remote": [],
                "by_role": {},
            },
        )

    def v2_playbook_on_play_start(self, play):
        self.play = play.get_name()

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.task_started = time.monotonic()
        self.task_started_epoch = time.time()

    def v2_playbook_on_handler_task_start(self, task):
        self.task_started = time.monotonic()
        self.task_started_epoch = time.time()

    def _record(self, result, status):
        host = self._host(result.host.get_name())
        task = result.task
        res = result.result
        elapsed = time.monotonic() - self.task_started
        label = "%s | %s" % (self.play, task.get_name())
        if status == "unreachable":
            host["unreachable"] += 1
            return
        action = short_action(getattr(task, "resolved_action", None) or task.action)
        kind, target = self._kind(result, status, action)
        role = task._role.get_name() if getattr(task, "_role", None) else "(play)"
        host["by_role"].setdefault(role, {"remote": 0, "controller": 0, "delegated": 0, "skipped": 0})[kind] += 1
        if kind == "skipped":  # `when` was false, or a loop's every item was skipped
            host["skipped"] += 1
            host["skipped_tasks"].append(label)
            return
        host["failed" if status == "failed" else "ok"] += 1
        if res.get("changed"):
            host["changed"] += 1
            host["changed_tasks"].append(label)
        if kind == "controller":
            host["controller_tasks"] += 1
            host["controller"].append({"task": label, "action": action})
            return
        if kind == "delegated":
            # ran on another host (the controller, the control plane, the Prometheus host): not
            # a round trip to this node; counted apart so that nothing disappears
            host["delegated_tasks"] += 1
            host["delegated"].append({"task": label, "action": action, "to": str(target)})
            return
        items = res.get("results")
        ran = sum(1 for i in items if isinstance(i, dict) and not i.get("skipped")) if isinstance(items, list) else 1
        host["remote_tasks"] += 1
        host["remote_executions"] += ran
        host["remote_seconds"] += elapsed
        # start and end on the wall clock too: the lab's nodes share the controller's kernel clock,
        # so the bench can place each module execution the nodes logged inside its task
        host["remote"].append(
            {
                "task": label,
                "action": action,
                "items": ran,
                "seconds": round(elapsed, 3),
                "start": round(self.task_started_epoch, 4),
                "end": round(time.time(), 4),
            }
        )

    @staticmethod
    def _kind(result, status, action):
        """(remote, controller, delegated or skipped: what one evaluation of a task cost this host;
        the host a delegated task ran on)."""
        if status == "skipped":
            return "skipped", None
        res = result.result
        # an action plugin that answered on the controller (rackforge_packages from this run's snapshot)
        if action in CONTROLLER_ACTIONS or res.get("decided_on_controller") is True:
            return "controller", None
        delegated = res.get("_ansible_delegated_vars") or {}
        target = delegated.get("ansible_delegated_host") or getattr(result.task, "delegate_to", None)
        if target and target != result.host.get_name():
            return "delegated", target
        items = res.get("results")
        if isinstance(items, list) and not any(isinstance(i, dict) and not i.get("skipped") for i in items):
            return "skipped", None
        return "remote", None

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._record(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        out = os.environ.get("RACKFORGE_CENSUS_OUT")
        if not out:
            return
        data = {"wall_seconds": round(time.monotonic() - self.started, 3), "hosts": self.hosts}
        with open(out, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
