#!/usr/bin/env python3
"""rackforge bench: what site.yml costs on the lab, per node count, measured (make bench).

For each N in --nodes (default 1,4,8) and each repetition (--reps, default 3), on a lab rebuilt
from the cached image (N simulated HGX H100 nodes and the control plane):

  fresh     site.yml on never-converged nodes
  noop      site.yml again (the target: changed=0, <= 60 remote-module tasks per node)
  health    playbooks/health_check.yml
  facts     fact gathering with ansible.cfg's subset (fact cache off, so it really gathers)
  floor     a playbook of 20 trivial `stat` tasks: the per-task floor of this transport

Then, on one node, the fact-gathering cost with 4 and with 404 interfaces (200 veth pairs
added in the node's own network namespace and removed again), targeted subset vs. full.

The no-op and floor runs use a timing wrapper as the nodes' Python interpreter (written
into each node by the bench: it logs each module execution's start and end on the node), so a
task's cost splits into the module's own run time on the node and the rest: transport,
controller and the action plugin's own round trips (the overhead).

Every run gets a fresh SSH control path and an empty fact cache. The task_census callback
(bench/callback_plugins) counts per host the tasks that ran a module on the node and those
that stayed on the controller. Results: bench/results/<stamp>.json and .md, copied to
latest.json and latest.md. It replaces the lab's nodes: run `make test` after, not during.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

# the harness is split by concern; every name is re-exported here (bench/breakdown.py and the unit
# tests use them as bench.<name>)
from bench_lab import (
    HERE,
    INVENTORY,
    LAB,
    MITOGEN,
    MITOGEN_DIR,
    PREFIX,
    ROOT,
    TIMED_PYTHON,
    TIMES,
    WRAPPER,
    environment,
    gpu_hosts,
    lab_rebuild,
    log,
    mitogen_env,
    node_container,
    pipelining,
    read_node_file,
    sh,
)
from bench_runs import (
    FACTS,
    NO_FACT_CACHE,
    TIMED_INVENTORY,
    first_use_split,
    first_use_summary,
    interfaces_experiment,
    module_spans,
    module_times,
    node_stats,
    on_node_seconds,
    playbook,
    row_for,
    setup_seconds,
    split_summary,
    summary,
    tree_rss_mb,
)
from bench_tables import markdown, section
from bench_targets import TARGET_EVALUATIONS, TARGET_FLOOR_RATIO, TARGET_REMOTE_TASKS, fleet_model, overhead_ratio, targets_for

__all__ = [
    "FACTS",
    "HERE",
    "INVENTORY",
    "LAB",
    "MITOGEN",
    "MITOGEN_DIR",
    "NO_FACT_CACHE",
    "PREFIX",
    "RESULTS",
    "ROOT",
    "TARGET_EVALUATIONS",
    "TARGET_FLOOR_RATIO",
    "TARGET_REMOTE_TASKS",
    "TIMED_INVENTORY",
    "TIMED_PYTHON",
    "TIMES",
    "WRAPPER",
    "combine",
    "environment",
    "first_use_split",
    "first_use_summary",
    "fleet_model",
    "gpu_hosts",
    "interfaces_experiment",
    "lab_rebuild",
    "log",
    "main",
    "markdown",
    "mitogen_env",
    "module_spans",
    "module_times",
    "node_container",
    "node_stats",
    "on_node_seconds",
    "overhead_ratio",
    "pipelining",
    "playbook",
    "read_node_file",
    "row_for",
    "section",
    "setup_seconds",
    "sh",
    "split_summary",
    "summary",
    "targets_for",
    "tree_rss_mb",
    "write_results",
]

RESULTS = os.path.join(HERE, "results")  # write_results and combine read it here (tests point it elsewhere)


def write_results(doc, latest=True, prefix="", render=markdown):
    """<prefix><stamp>.{json,md} under bench/results, and <prefix>latest.{json,md} unless not latest."""
    stamp = doc["finished"].replace(":", "")
    for suffix, text in ((".json", json.dumps(doc, indent=1, sort_keys=True) + "\n"), (".md", render(doc))):
        for name in (prefix + stamp + suffix, prefix + "latest" + suffix) if latest else (prefix + stamp + suffix,):
            with open(os.path.join(RESULTS, name), "w") as fh:
                fh.write(text)


def combine(old_path, new_path):
    """One table from two runs of this harness on the same machine: the new run's node counts and
    interface runs, the old run's other node counts, and the old mitogen runs where the new run
    had none. Every borrowed part is named in doc["combined"]."""
    old, new = json.load(open(old_path)), json.load(open(new_path))
    doc = dict(new)
    doc["by_nodes"] = {}
    borrowed = []
    for n in sorted({*old["by_nodes"], *new["by_nodes"]}, key=int):
        if n in new["by_nodes"]:
            row = dict(new["by_nodes"][n])
            if not row.get("mitogen") and (old["by_nodes"].get(n) or {}).get("mitogen"):
                row["mitogen"] = old["by_nodes"][n]["mitogen"]
                borrowed.append("mitogen runs for %s nodes" % n)
        else:
            row = old["by_nodes"][n]
            borrowed.append("%s nodes" % n)
        doc["by_nodes"][n] = row
    if not doc.get("interfaces") and old.get("interfaces"):
        doc["interfaces"] = old["interfaces"]
        borrowed.append("the interface runs")
    if not doc.get("mitogen") and old.get("mitogen"):
        doc["mitogen"] = old["mitogen"]
    doc["combined"] = "%s from the run finished %s (%s); the rest from the run finished %s (%s)" % (
        ", ".join(borrowed) or "nothing",
        old["finished"],
        old["command"],
        new["finished"],
        new["command"],
    )
    doc["command"] = "%s, then %s" % (old["command"], new["command"])
    doc["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc["targets"] = targets_for(doc)
    write_results(doc)
    sys.stdout.write(markdown(doc))
    return 0 if all(doc["targets"].values()) else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="1,4,8")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-interfaces", action="store_true", help="skip the 404-interface fact experiment")
    parser.add_argument("--no-mitogen", action="store_true", help="skip the no-op and floor runs with the mitogen strategy")
    parser.add_argument("--no-latest", action="store_true", help="write only the stamped result files, not latest.*")
    parser.add_argument("--combine", nargs=2, metavar=("OLD", "NEW"), help="one table from two result files (no runs)")
    opts = parser.parse_args()
    if opts.combine:
        return combine(*opts.combine)
    counts = [int(n) for n in opts.nodes.split(",")]
    os.makedirs(RESULTS, exist_ok=True)
    os.makedirs(os.path.join(ROOT, ".cache", "bench-facts"), exist_ok=True)
    work = tempfile.mkdtemp(prefix="rackforge-bench-")
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc = {
        "started": started,
        "command": "make bench"
        if (opts.nodes, opts.reps, opts.no_interfaces, opts.no_mitogen, opts.no_latest) == ("1,4,8", 3, False, False, False)
        else "python3 bench/bench.py --nodes %s --reps %d%s%s%s"
        % (
            opts.nodes,
            opts.reps,
            " --no-interfaces" if opts.no_interfaces else "",
            " --no-mitogen" if opts.no_mitogen else "",
            " --no-latest" if opts.no_latest else "",
        ),
        "reps": opts.reps,
        "environment": environment(),
        "by_nodes": {},
    }
    site = os.path.join(ROOT, "site.yml")
    mitogen = None if opts.no_mitogen else mitogen_env()
    doc["mitogen"] = MITOGEN if mitogen else None
    for n in counts:
        runs = {k: [] for k in ("lab_s", "fresh", "noop", "health", "facts", "floor", "noop_mitogen", "floor_mitogen")}
        for rep in range(opts.reps):
            log("N=%d repetition %d/%d" % (n, rep + 1, opts.reps))
            runs["lab_s"].append(lab_rebuild(n))
            runs["fresh"].append(playbook("fresh", [site], work))
            runs["noop"].append(playbook("noop", [site], work, timed=True))
            runs["health"].append(playbook("health", [os.path.join(ROOT, "playbooks", "health_check.yml")], work))
            runs["facts"].append(playbook("facts", ["-l", "gpu_nodes", FACTS], work, NO_FACT_CACHE))
            runs["floor"].append(playbook("floor", [os.path.join(HERE, "playbooks", "floor.yml")], work, timed=True))
            if mitogen:
                runs["noop_mitogen"].append(playbook("noop-mitogen", [site], work, mitogen))
                runs["floor_mitogen"].append(playbook("floor-mitogen", [os.path.join(HERE, "playbooks", "floor.yml")], work, mitogen))
        doc["by_nodes"][str(n)] = row_for(runs)
    if not opts.no_interfaces:
        log("fact gathering with 4 and 404 interfaces")
        doc["interfaces"] = interfaces_experiment(work, opts.reps)
    doc["targets"] = targets_for(doc)
    rows = doc["by_nodes"].values()
    doc["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_results(doc, latest=not opts.no_latest)
    sys.stdout.write(markdown(doc))
    if any(row["failed_logs"] for row in rows):
        log("some runs failed: their output is kept in %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(doc["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
