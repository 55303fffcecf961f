"""bench: the Markdown tables of a result. Part of bench/bench.py (make bench), which re-exports
these names."""

from __future__ import annotations

from bench_targets import fleet_model, overhead_ratio


def section(title, header):
    """A titled Markdown table's first lines: title, header row, separator."""
    return ["", title, "", header, "|" + "---|" * (header.count(" | ") + 1)]


def markdown(doc):
    env = doc["environment"]
    lines = [
        "# rackforge bench, %s" % doc["finished"],
        "",
        "`%s` on %d CPUs, %s GiB; %s, Python %s, forks %s, strategy %s, pipelining %s, gather_subset `%s`; %d repetitions."
        % (
            doc["command"],
            env["controller_cpus"],
            env["controller_mem_gib"],
            env["ansible_core"],
            env["python"],
            env["forks"],
            env["strategy"],
            env["pipelining"],
            env["gather_subset"],
            doc["reps"],
        ),
        "",
        "Seconds are median (min-max). Remote tasks: tasks that ran a module on the node (max over nodes); controller-only"
        " tasks (assert, set_fact, include_*) are counted apart. Per-task cost: seconds from a task's start to the node's"
        " result, per remote task; floor: the same for a playbook of 20 `stat` tasks in the same run.",
        "",
        "| nodes | fresh converge s | no-op s | no-op changed | no-op remote tasks/node (items) | controller / delegated tasks/node"
        " | health check s | facts s | per-task s no-op | floor s | ratio | stat in site.yml s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def fmt(s):
        return "%.1f (%.1f-%.1f)" % (s["median"], s["min"], s["max"])

    for n, row in doc["by_nodes"].items():
        lines.append(
            "| %s | %s | %s | %d | %d (%d) | %d / %d | %s | %s | %.3f | %.3f | %.2f | %.3f |"
            % (
                n,
                fmt(row["fresh_s"]),
                fmt(row["noop_s"]),
                row["noop_changed_max"],
                row["noop_remote_tasks_max"],
                row["noop_remote_executions_max"],
                row["noop_controller_tasks_max"],
                row["noop_delegated_tasks_max"],
                fmt(row["health_s"]),
                fmt(row["facts_s"]),
                row["per_task_noop_s"]["median"],
                row["per_task_floor_s"]["median"],
                row["per_task_ratio"],
                row["stat_in_noop_s"]["median"],
            )
        )
    if all(overhead_ratio(row) is not None for row in doc["by_nodes"].values()):
        lines += section(
            "Where a remote task's time goes (medians, seconds per remote task): the module's own run time on the node, from"
            " the timing wrapper (start to end of each module execution there), and the overhead, the rest of the task's"
            " cost (ssh, the controller, action plugins' extra round trips):",
            "| nodes | no-op per task | no-op on the node | no-op overhead | floor per task | floor on the node | floor overhead"
            " | overhead ratio | module executions/node |",
        )
        for n, row in doc["by_nodes"].items():
            lines.append(
                "| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f | %d |"
                % (
                    n,
                    row["per_task_noop_s"]["median"],
                    row["module_per_task_noop_s"]["median"],
                    row["overhead_per_task_noop_s"]["median"],
                    row["per_task_floor_s"]["median"],
                    row["module_per_task_floor_s"]["median"],
                    row["overhead_per_task_floor_s"]["median"],
                    overhead_ratio(row),
                    row["noop_module_executions_max"],
                )
            )
    if all(row.get("first_use_noop") and row.get("first_use_floor") for row in doc["by_nodes"].values()):
        lines += section(
            "Overhead by first use (medians, seconds per task): a module's first task in the run vs. the tasks that use it"
            " again (the module time a node logged inside each task's window taken off; the floor's first task also opens"
            " the SSH connection):",
            "| nodes | no-op first uses | no-op overhead, first use | no-op repeats | no-op overhead, repeat"
            " | floor overhead, first use | floor overhead, repeat | repeat ratio |",
        )
        for n, row in doc["by_nodes"].items():
            f, fl = row["first_use_noop"], row["first_use_floor"]
            lines.append(
                "| %s | %d | %.3f | %d | %.3f | %.3f | %.3f | %.2f |"
                % (
                    n,
                    f["first_uses"],
                    f["first_use_s"]["median"],
                    f["repeats"],
                    f["repeat_s"]["median"],
                    fl["first_use_s"]["median"],
                    fl["repeat_s"]["median"],
                    f["repeat_s"]["median"] / fl["repeat_s"]["median"] if fl["repeat_s"]["median"] > 0 else 0,
                )
            )
    if all("noop_core_evaluations_max" in row for row in doc["by_nodes"].values()):
        lines += section(
            "Issue 19's census of the no-op (per GPU node, the most any node had): remote-module tasks and task evaluations"
            " (remote, controller-only, delegated, skipped) of the roles issue 19 measured, and each later role's own cost:",
            "| nodes | remote tasks | evaluations | later roles (remote / evaluations) |",
        )
        for n, row in doc["by_nodes"].items():
            later = ", ".join("%s %d / %d" % (r, c["remote"], c["evaluations"]) for r, c in row["noop_later_roles"].items())
            lines.append(
                "| %s | %d | %d | %s |" % (n, row["noop_core_remote_tasks_max"], row["noop_core_evaluations_max"], later or "none")
            )
    model = fleet_model(doc)
    if model is not None:
        lines += [
            "",
            "The scale model (bench/scale.py, docs/scale.md) from these rows: c_node %.2f s of controller CPU per extra node;"
            " a 1,000-node no-op on one 8-core controller %.1f min; in 4 AWX slices %.1f min."
            % (model["c_node_s"], model["fleet_s"] / 60, model["sliced_s"] / 60),
        ]
    lines += section(
        "Controller cost (ansible-playbook with its forks and ssh clients; the nodes' own work is not in it):",
        "| nodes | no-op CPU s | CPU ms per node-task | no-op peak RSS MiB | fresh CPU s | fresh peak RSS MiB |",
    )
    for n, row in doc["by_nodes"].items():
        tasks = int(n) * (row["noop_remote_tasks_max"] + row["noop_controller_tasks_max"] + row["noop_delegated_tasks_max"])
        lines.append(
            "| %s | %s | %.0f | %s | %s | %s |"
            % (
                n,
                fmt(row["noop_controller_cpu_s"]),
                1000 * row["noop_controller_cpu_s"]["median"] / max(tasks, 1),
                fmt(row["noop_controller_peak_rss_mb"]),
                fmt(row["fresh_controller_cpu_s"]),
                fmt(row["fresh_controller_peak_rss_mb"]),
            )
        )
    if doc.get("interfaces"):
        lines += section(
            "Fact gathering on one node (setup module seconds, median of %d; bytes of facts):" % doc["reps"],
            "| interfaces | targeted subset s | targeted bytes | full s | full bytes |",
        )
        for label in ("4_interfaces", "404_interfaces"):
            t, f = doc["interfaces"][label + "_targeted"], doc["interfaces"][label + "_full"]
            lines.append(
                "| %d | %.2f | %d | %.2f | %d |"
                % (t["interfaces"], t["seconds"]["median"], t["fact_bytes"], f["seconds"]["median"], f["fact_bytes"])
            )
    if doc.get("mitogen"):
        lines += section(
            "The optional mitogen strategy (%s, mitogen_linear; a third-party strategy, deprecated by ansible-core 2.19):" % doc["mitogen"],
            "| nodes | no-op s (linear) | no-op s (mitogen) | speedup | changed (mitogen) | per-task s (mitogen) | floor s (mitogen) |",
        )
        for n, row in doc["by_nodes"].items():
            m = row.get("mitogen")
            if m:
                lines.append(
                    "| %s | %s | %s | %.2fx | %d | %.3f | %.3f |"
                    % (
                        n,
                        fmt(row["noop_s"]),
                        fmt(m["noop_s"]),
                        row["noop_s"]["median"] / m["noop_s"]["median"],
                        m["noop_changed_max"],
                        m["per_task_noop_s"]["median"],
                        m["per_task_floor_s"]["median"],
                    )
                )
    if doc.get("combined"):
        lines += ["", "Combined from two runs: %s." % doc["combined"]]
    lines += ["", "Targets: %s" % ("; ".join("%s: %s" % (k, "met" if v else "NOT met") for k, v in doc["targets"].items()))]
    return "\n".join(lines) + "\n"
