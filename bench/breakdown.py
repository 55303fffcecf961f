#!/usr/bin/env python3
"""rackforge bench: where a remote task's time goes, the no-op site.yml vs. the stat floor, on one lab node.

    python3 bench/breakdown.py [--reps 3]    (about 5 minutes here; replaces the lab's nodes: not during make test)

make bench's per-task target compares the mean cost of site.yml's remote tasks in a no-op run with
that of a playbook of 20 `stat` tasks. This splits both into parts, per remote task, so that the
gap between them is accounted for part by part:

  on the node      the module's own run (the timing wrapper on the node, as make bench uses)
  transport        the SSH round trip around it (ActionBase._low_level_execute_command minus
                   the module's run)
  payload build    finding the module and building its AnsiballZ payload (ansible-core builds
                   each module's payload once per run, in the worker of its first task; later
                   tasks read it from the run's cache)
  conditions       evaluating when / changed_when / failed_when (Jinja compiled in each worker)
  rest of worker   the rest of the forked worker's task: templating the arguments, the action
                   plugin, the result
  outside worker   the rest of the task's window: the fork, the strategy's queue, the result's
                   way back to the parent and the callbacks

The parts inside the worker come from bench/ansible_hooks.py (ansible-playbook with timers
around four ansible-core functions); the window and the remote/controller classes from the
task_census callback, as in make bench. Each variant runs --reps times:

  as is            what ansible-core 2.19 does
  shared build     an experiment: the parse trees that payload builds compile are made once in
                   the parent before the workers fork (RACKFORGE_HOOKS_SHARE_BUILD, see
                   bench/ansible_hooks.py): what the no-op would cost per task if ansible-core
                   shared that work between its workers. rackforge does not do this outside the bench.

Results: bench/results/breakdown-<stamp>.{json,md} and breakdown-latest.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import bench

HOOKS = os.path.join(bench.HERE, "ansible_hooks.py")
HOST = "lab-node1"
SITE = os.path.join(bench.ROOT, "site.yml")
FLOOR = os.path.join(bench.HERE, "playbooks", "floor.yml")
PARTS = ("on_node", "transport", "build", "conditions", "worker_rest", "outside_worker")
PART_NAMES = {
    "on_node": "on the node (the module's run)",
    "transport": "transport (SSH round trip around it)",
    "build": "payload build (module lookup, AnsiballZ)",
    "conditions": "conditions (when, changed_when, ...)",
    "worker_rest": "rest of the worker (arguments, action plugin, result)",
    "outside_worker": "outside the worker (fork, queue, result, callbacks)",
}
VARIANTS = {"as_is": {}, "shared_build": {"RACKFORGE_HOOKS_SHARE_BUILD": "1"}}


def read_hooks(path):
    """The hook lines of one run (bench/ansible_hooks.py), [] when there are none."""
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def task_parts(census, hooks, spans, host=HOST):
    """Per remote task of `host` (census order): its window and its parts, in seconds. A worker
    line and a module span belong to the task whose window holds them (the lab nodes share the
    controller's clock). The parts add up to the window."""
    rows = []
    lines = [h for h in hooks if h["host"] == host]
    for task in census["hosts"].get(host, {}).get("remote", []):
        start, end = task["start"], task["end"]
        mine = [h for h in lines if start <= h["start"] and h["end"] <= end]
        on_node = bench.on_node_seconds(spans, start, end)
        worker = sum(h["end"] - h["start"] for h in mine)
        build = sum(h["build"] for h in mine)
        execute = sum(h["execute"] for h in mine)
        conditions = sum(h["conditions"] for h in mine)
        rows.append(
            {
                "task": task["task"],
                "action": task["action"],
                "window": task["seconds"],
                "workers": len(mine),
                "built": any(h["built"] for h in mine),
                "worker_cpu": sum(h["cpu"] for h in mine),
                "on_node": on_node,
                "transport": max(execute - on_node, 0.0),
                "build": build,
                "conditions": conditions,
                "worker_rest": max(worker - build - execute - conditions, 0.0),
                "outside_worker": max(task["seconds"] - worker, 0.0),
            }
        )
    return rows


def run_summary(rows):
    """Means per remote task of one run: the window, each part, and the payload builds."""
    if not rows:
        return None
    out = {"tasks": len(rows), "window": statistics.mean(r["window"] for r in rows)}
    for part in PARTS:
        out[part] = statistics.mean(r[part] for r in rows)
    built = [r["build"] for r in rows if r["built"]]
    out["builds"] = len(built)
    out["build_when_built"] = statistics.mean(built) if built else 0.0
    out["worker_cpu"] = statistics.mean(r["worker_cpu"] for r in rows)
    out["unmatched"] = sum(1 for r in rows if r["workers"] != 1)
    by_action = {}
    for r in rows:
        by_action.setdefault(r["action"], []).append(r["on_node"])
    # the module's run on the node, per module: (tasks, mean seconds)
    out["on_node_by_action"] = {action: (len(v), statistics.mean(v)) for action, v in by_action.items()}
    return out


def median_of(summaries, key):
    return round(statistics.median(s[key] for s in summaries), 4)


def variant_result(noop, floor):
    """Medians over the repetitions of one variant: no-op and floor per part, and the ratio."""
    result = {"noop": {}, "floor": {}}
    for side, runs in (("noop", noop), ("floor", floor)):
        for key in ("tasks", "window", *PARTS, "builds", "build_when_built", "worker_cpu", "unmatched"):
            result[side][key] = median_of(runs, key)
        result[side]["windows"] = [round(s["window"], 4) for s in runs]
        actions = sorted({a for s in runs for a in s["on_node_by_action"]})
        result[side]["on_node_by_action"] = {
            a: {
                "tasks": max(s["on_node_by_action"][a][0] for s in runs if a in s["on_node_by_action"]),
                "seconds": round(statistics.median(s["on_node_by_action"][a][1] for s in runs if a in s["on_node_by_action"]), 4),
            }
            for a in actions
        }
    result["ratio"] = round(result["noop"]["window"] / result["floor"]["window"], 3)
    return result


def markdown(doc):
    lines = [
        "# rackforge bench: where a remote task's time goes, %s" % doc["finished"],
        "",
        "`%s` at %s on %d CPUs; %s, Python %s, pipelining %s; one lab node (%s), %d repetitions per variant."
        % (
            doc["command"],
            doc.get("commit", "?"),
            doc["environment"]["controller_cpus"],
            doc["environment"]["ansible_core"],
            doc["environment"]["python"],
            doc["environment"]["pipelining"],
            HOST,
            doc["reps"],
        ),
        "",
        "Seconds per remote task, medians over the repetitions (no-op: site.yml again on a converged node;"
        " floor: bench/playbooks/floor.yml, 20 `stat` tasks). The parts add up to the task's window; gap: no-op minus floor.",
    ]
    for variant, title in (
        ("as_is", "As ansible-core 2.19 runs it"),
        ("shared_build", "Experiment: payload builds' parse trees shared between workers (not done outside the bench)"),
    ):
        v = doc["variants"].get(variant)
        if not v:
            continue
        n, f = v["noop"], v["floor"]
        gap = n["window"] - f["window"]
        lines += [
            "",
            "%s: no-op %.3f s per task (%d remote tasks, %d payload builds at %.3f s each), floor %.3f s; ratio %.2f."
            % (title, n["window"], n["tasks"], n["builds"], n["build_when_built"], f["window"], v["ratio"]),
            "",
            "| part | no-op | floor | gap | share of the gap |",
            "|---|---|---|---|---|",
        ]
        for part in PARTS:
            d = n[part] - f[part]
            lines.append(
                "| %s | %.3f | %.3f | %+.3f | %s |"
                % (PART_NAMES[part], n[part], f[part], d, "%.0f%%" % (100 * d / gap) if gap > 0 else "-")
            )
        lines.append("| the task's window | %.3f | %.3f | %+.3f | |" % (n["window"], f["window"], gap))
    as_is = doc["variants"]["as_is"]
    lines += [
        "",
        "The module's run on the node, per module (as is; seconds per task, median over the repetitions; floor: stat):",
        "",
        "| module | no-op tasks | seconds per task |",
        "|---|---|---|",
    ]
    by_action = as_is["noop"].get("on_node_by_action", {})
    for action, v in sorted(by_action.items(), key=lambda kv: -kv[1]["seconds"]):
        lines.append("| %s | %d | %.3f |" % (action, v["tasks"], v["seconds"]))
    for action, v in as_is["floor"].get("on_node_by_action", {}).items():
        lines.append("| %s (floor) | %d | %.3f |" % (action, v["tasks"], v["seconds"]))
    lines += [
        "",
        "Worker CPU seconds per remote task (no-op / floor, as is): %.3f / %.3f."
        % (as_is["noop"]["worker_cpu"], as_is["floor"]["worker_cpu"]),
    ]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    opts = parser.parse_args()
    os.makedirs(bench.RESULTS, exist_ok=True)
    work = tempfile.mkdtemp(prefix="rackforge-breakdown-")
    doc = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python3 bench/breakdown.py" + ("" if opts.reps == 3 else " --reps %d" % opts.reps),
        "reps": opts.reps,
        # the code measured: the commit, "-dirty" when the tree has changes on top of it
        "commit": subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=bench.ROOT, text=True, capture_output=True, check=False
        ).stdout.strip()
        or "?",
        "environment": bench.environment(),
        "variants": {},
    }
    bench.log("one-node lab and a fresh converge")
    bench.lab_rebuild(1)
    fresh = bench.playbook("fresh", [SITE], work)
    if fresh["rc"] != 0:
        sys.exit("the fresh converge failed: %s" % fresh["log"])
    entry = (sys.executable, HOOKS)
    summaries = {v: {"noop": [], "floor": []} for v in VARIANTS}
    failed = []
    for rep in range(opts.reps):
        for variant, env in VARIANTS.items():
            for side, path in (("noop", SITE), ("floor", FLOOR)):
                hooks = os.path.join(work, "hooks-%s-%s-%d.jsonl" % (variant, side, rep))
                run = bench.playbook("%s-%s" % (side, variant), [path], work, dict(env, RACKFORGE_HOOKS_OUT=hooks), timed=True, entry=entry)
                if run["rc"] != 0:
                    failed.append(run["log"])
                    continue
                rows = task_parts(run["census"], read_hooks(hooks), run["module_spans"].get(HOST, []))
                summaries[variant][side].append(run_summary(rows))
    if failed:
        sys.exit("runs failed (%s): nothing written" % ", ".join(failed))
    for variant in VARIANTS:
        doc["variants"][variant] = variant_result(summaries[variant]["noop"], summaries[variant]["floor"])
    doc["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    bench.write_results(doc, prefix="breakdown-", render=markdown)
    sys.stdout.write(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
