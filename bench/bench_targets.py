"""bench: the targets, each met or not, from the table's rows. Part of bench/bench.py (make bench),
which re-exports these names."""

from __future__ import annotations

TARGET_REMOTE_TASKS = 60
TARGET_FLOOR_RATIO = 1.10


def overhead_ratio(row):
    noop, floor = row.get("overhead_per_task_noop_s"), row.get("overhead_per_task_floor_s")
    if not noop or not floor or floor["median"] <= 0:
        return None
    return round(noop["median"] / floor["median"], 3)


def targets_for(doc):
    """Issue 8's targets, each met or not, from the table's rows."""
    rows = list(doc["by_nodes"].values())
    targets = {
        "every run exit 0": all(rc == 0 for row in rows for k in ("fresh_rc", "noop_rc", "health_rc") for rc in row[k]),
        "no-op changed=0": all(row["noop_changed_max"] == 0 for row in rows),
        "no-op <= %d remote tasks per node" % TARGET_REMOTE_TASKS: all(row["noop_remote_tasks_max"] <= TARGET_REMOTE_TASKS for row in rows),
        "per-task cost (every remote task of the no-op) within 10% of the stat floor": all(
            (row["per_task_ratio"] or 99) <= TARGET_FLOOR_RATIO for row in rows
        ),
        "the same module (stat) inside site.yml within 10% of the stat floor": all(
            row["stat_in_noop_s"]["median"] <= row["per_task_floor_s"]["median"] * TARGET_FLOOR_RATIO for row in rows
        ),
    }
    if all(overhead_ratio(row) is not None for row in rows):
        targets["overhead per task (its cost minus the module's own run time on the node) within 10% of the stat floor's"] = all(
            overhead_ratio(row) <= TARGET_FLOOR_RATIO for row in rows
        )
    if doc.get("interfaces"):
        few, many = doc["interfaces"]["4_interfaces_targeted"], doc["interfaces"]["404_interfaces_targeted"]
        targets["facts with 404 interfaces cost no more than with 4 (+10%)"] = (
            many["fact_bytes"] <= few["fact_bytes"] * 1.1 and many["seconds"]["median"] <= few["seconds"]["median"] * 1.1 + 0.05
        )
    # the per-task cost relative to the transport's floor stays flat from the fewest to the most nodes
    if len(rows) > 1:
        first, last = rows[0]["per_task_ratio"] or 99, rows[-1]["per_task_ratio"] or 99
        targets["per-task cost relative to the floor does not grow with the node count (+10%)"] = last <= first * TARGET_FLOOR_RATIO
    return targets
