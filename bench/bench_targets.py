"""bench: the targets, each met or not, from the table's rows. Part of bench/bench.py (make bench),
which re-exports these names.

Issue 19's targets for a no-op site.yml, per GPU node: at most 20 remote-module tasks and 60 task
evaluations (remote, controller-only, delegated and skipped) for the roles it measured; each role
added later at most 2 remote tasks and 5 evaluations; controller CPU per extra node (c_node) at most
3 s; one node's no-op at most 12 s; the scale model's 1,000-node no-op on one 8-core controller at
most 6 min, and in 4 AWX slices at most 2 min. The per-task ratio to the `stat` floor is a
reference column, no longer a target (it compared unlike work)."""

from __future__ import annotations

import math

import scale

TARGET_REMOTE_TASKS = 20
TARGET_EVALUATIONS = 60
# roles added after issue 19 measured the no-op: each has its own budget
LATER_ROLES = ("monitoring_server", "nvidia_device_plugin", "model_storage")
ROLE_BUDGET = {"remote": 2, "evaluations": 5}
TARGET_C_NODE_S = 3.0
TARGET_ONE_NODE_NOOP_S = 12.0
TARGET_FLEET = 1000
TARGET_FLEET_S = 6 * 60
TARGET_SLICES = 4
TARGET_SLICED_S = 2 * 60
TARGET_FLOOR_RATIO = 1.10  # reference only (the stat inside site.yml against the floor: like for like)


def core_counts(host):
    """(remote tasks, task evaluations) of one host's census (bench/callback_plugins/task_census)
    without the later roles' tasks: an evaluation is any task the host met (remote,
    controller-only, delegated or skipped)."""
    later = [host.get("by_role", {}).get(role, {}) for role in LATER_ROLES]
    remote = host["remote_tasks"] - sum(c.get("remote", 0) for c in later)
    evaluations = host["remote_tasks"] + host["controller_tasks"] + host["delegated_tasks"] + host.get("skipped", 0)
    return remote, evaluations - sum(sum(c.values()) for c in later)


def overhead_ratio(row):
    noop, floor = row.get("overhead_per_task_noop_s"), row.get("overhead_per_task_floor_s")
    if not noop or not floor or floor["median"] <= 0:
        return None
    return round(noop["median"] / floor["median"], 3)


def fleet_model(doc):
    """The scale model's (docs/scale.md) no-op times: c_node, the 1,000-node fleet on one
    controller (its best fork count) and in TARGET_SLICES slices (forks as in its slice table).
    None when the result has a single node count (c_node needs two)."""
    if len(doc["by_nodes"]) < 2:
        return None
    p = scale.inputs(doc)["noop"]
    return {
        "c_node_s": round(p["c_node"], 2),
        "fleet_s": round(min(scale.wall(TARGET_FLEET, forks, scale.CORES, p) for forks in scale.FORKS), 1),
        "sliced_s": round(scale.wall(math.ceil(TARGET_FLEET / TARGET_SLICES), scale.FORKS[1], scale.CORES, p), 1),
    }


def targets_for(doc):
    """Issue 19's targets (and the run's own sanity: exit 0, changed=0), each met or not."""
    rows = list(doc["by_nodes"].values())
    one = doc["by_nodes"].get("1")
    targets = {
        "every run exit 0": all(rc == 0 for row in rows for k in ("fresh_rc", "noop_rc", "health_rc") for rc in row[k]),
        "no-op changed=0": all(row["noop_changed_max"] == 0 for row in rows),
        "no-op <= %d remote tasks per GPU node (issue 19's roles)" % TARGET_REMOTE_TASKS: all(
            row.get("noop_core_remote_tasks_max", row["noop_remote_tasks_max"]) <= TARGET_REMOTE_TASKS for row in rows
        ),
        "no-op <= %d task evaluations per GPU node (issue 19's roles)" % TARGET_EVALUATIONS: all(
            "noop_core_evaluations_max" in row and row["noop_core_evaluations_max"] <= TARGET_EVALUATIONS for row in rows
        ),
        "each later role's no-op <= %d remote tasks and %d evaluations" % (ROLE_BUDGET["remote"], ROLE_BUDGET["evaluations"]): all(
            cost["remote"] <= ROLE_BUDGET["remote"] and cost["evaluations"] <= ROLE_BUDGET["evaluations"]
            for row in rows
            for cost in row.get("noop_later_roles", {}).values()
        ),
    }
    # like for like, where site.yml still runs a stat (0: none ran, nothing to compare)
    if all(row["stat_in_noop_s"]["median"] > 0 for row in rows):
        targets["the same module (stat) inside site.yml within 10% of the stat floor"] = all(
            row["stat_in_noop_s"]["median"] <= row["per_task_floor_s"]["median"] * TARGET_FLOOR_RATIO for row in rows
        )
    if one is not None:
        targets["one-node no-op <= %.0f s" % TARGET_ONE_NODE_NOOP_S] = one["noop_s"]["median"] <= TARGET_ONE_NODE_NOOP_S
    model = fleet_model(doc)
    if model is not None:
        targets["c_node (controller CPU per extra node, no-op) <= %.0f s" % TARGET_C_NODE_S] = model["c_node_s"] <= TARGET_C_NODE_S
        targets["scale model: %d-node no-op on one %d-core controller <= %d min" % (TARGET_FLEET, scale.CORES, TARGET_FLEET_S // 60)] = (
            model["fleet_s"] <= TARGET_FLEET_S
        )
        targets["scale model: the same in %d AWX slices <= %d min" % (TARGET_SLICES, TARGET_SLICED_S // 60)] = (
            model["sliced_s"] <= TARGET_SLICED_S
        )
    if doc.get("interfaces"):
        few, many = doc["interfaces"]["4_interfaces_targeted"], doc["interfaces"]["404_interfaces_targeted"]
        targets["facts with 404 interfaces cost no more than with 4 (+10%)"] = (
            many["fact_bytes"] <= few["fact_bytes"] * 1.1 and many["seconds"]["median"] <= few["seconds"]["median"] * 1.1 + 0.05
        )
    return targets
