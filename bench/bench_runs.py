"""bench: one ansible-playbook run measured (wall, CPU, peak memory, the task census, the module
executions the timing wrapper logged) and a table row from the runs of every repetition. Part of
bench/bench.py (make bench), which re-exports these names."""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import threading
import time

from bench_lab import HERE, INVENTORY, PREFIX, ROOT, TIMED_PYTHON, TIMES, gpu_hosts, log, node_container, read_node_file, sh
from bench_targets import LATER_ROLES, core_counts

FACTS = os.path.join(HERE, "playbooks", "facts.yml")
NO_FACT_CACHE = {"ANSIBLE_CACHE_PLUGIN": "memory"}  # so that every facts run really gathers
TIMED_INVENTORY = (
    """# bench/bench.py: the GPU nodes run modules through the timing wrapper
all:
  children:
    gpu_nodes:
      vars:
        ansible_python_interpreter: %s
"""
    % TIMED_PYTHON
)


def module_spans(text):
    """[(start, end)] (epoch seconds) from the wrapper's log lines "start end"."""
    spans = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            spans.append((float(parts[0]), float(parts[1])))
    return spans


def module_times(spans):
    """(executions, seconds) of a node's module_spans."""
    return len(spans), sum(end - start for start, end in spans)


def on_node_seconds(spans, start, end):
    """Seconds of the module executions a node logged inside the window start..end (a task's;
    the lab's nodes share the controller's clock)."""
    return sum(e - s for s, e in spans if start <= s and e <= end)


def first_use_split(run):
    """Overhead (a task's seconds minus the module time the node logged inside the task's window)
    of the first task in the run that used each module vs. the tasks that used one again, mean
    seconds over the GPU nodes' tasks: (first, repeat, first uses, repeats). ansible-playbook
    builds a module's payload once per run, at its first use."""
    first, repeat = [], []
    for host, spans in (run.get("module_spans") or {}).items():
        seen = set()
        for task in run["census"]["hosts"].get(host, {}).get("remote", []):
            if "start" not in task:
                return None
            on_node = on_node_seconds(spans, task["start"], task["end"])
            (repeat if task["action"] in seen else first).append(task["seconds"] - on_node)
            seen.add(task["action"])
    if not first:
        return None
    return {
        "first_use_s": round(statistics.mean(first), 3),
        "repeat_s": round(statistics.mean(repeat), 3) if repeat else None,
        "first_uses": len(first),
        "repeats": len(repeat),
    }


def tree_rss_mb(root_pid):
    """Resident memory of a process and all its descendants (ansible-playbook, its forks, ssh)."""
    children, rss = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / 1048576


def playbook(name, args, work, extra_env=None, timed=False, entry=("ansible-playbook",)):
    """One ansible-playbook run with a fresh SSH control path and fact cache; returns wall time,
    exit code, the recap per host (from the census) and the census itself. timed: the GPU nodes
    run modules through the timing wrapper, and the run returns each one's module executions
    as [(start, end)] (module_spans). entry: the command that stands for ansible-playbook
    (bench/breakdown.py runs it with timing hooks)."""
    run_dir = tempfile.mkdtemp(prefix="run-", dir=work)
    inventory = ["-i", INVENTORY]
    hosts = gpu_hosts() if timed else []
    if timed:
        overlay = os.path.join(run_dir, "timed.yml")
        with open(overlay, "w") as fh:
            fh.write(TIMED_INVENTORY)
        inventory += ["-i", overlay]
        for host in hosts:
            sh(["podman", "exec", node_container(host), "rm", "-f", TIMES])
    control = tempfile.mkdtemp(prefix="cp-", dir="/tmp")  # short path: the socket name must fit
    census = os.path.join(run_dir, "census.json")
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
        ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callback_plugins"),
        ANSIBLE_CALLBACKS_ENABLED="task_census",
        ANSIBLE_CACHE_PLUGIN_CONNECTION=os.path.join(run_dir, "facts"),
        RACKFORGE_CENSUS_OUT=census,
        ANSIBLE_NOCOLOR="1",
    )
    env.update(extra_env or {})
    cmd = [*entry, *inventory, "-e", "ansible_control_path_dir=%s" % control, *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = [0.0]
    started = time.monotonic()
    with open(os.path.join(run_dir, "output.log"), "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

        def sample():
            while proc.poll() is None:
                peak[0] = max(peak[0], tree_rss_mb(proc.pid))
                time.sleep(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        rc = proc.wait()
        sampler.join()
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    shutil.rmtree(control, ignore_errors=True)
    data = json.load(open(census)) if os.path.exists(census) else {"hosts": {}}
    log("%-8s rc=%d %.1fs (%s)" % (name, rc, wall, run_dir))
    result = {
        "wall": wall,
        "rc": rc,
        "cpu": cpu,
        "peak_rss_mb": peak[0],
        "census": data,
        "log": os.path.join(run_dir, "output.log"),
    }
    if timed:
        result["module_spans"] = {host: module_spans(read_node_file(host, TIMES)) for host in hosts}
    return result


def node_stats(run):
    """Per GPU node (lab-node*) figures of one run."""
    hosts = {h: v for h, v in run["census"]["hosts"].items() if h.startswith("lab-node")}
    # (executions, seconds) per node from the timing wrapper; {} for an untimed run
    timed = {h: module_times(spans) for h, spans in (run.get("module_spans") or {}).items() if h in hosts}
    cores = [core_counts(v) for v in hosts.values()]
    return {
        # issue 19's budget: the roles it measured (the later roles apart, each with its own budget)
        "core_remote_tasks_max": max((core[0] for core in cores), default=0),
        "core_evaluations_max": max((core[1] for core in cores), default=0),
        "later_roles": later_role_costs(hosts),
        "remote_tasks_max": max((v["remote_tasks"] for v in hosts.values()), default=0),
        "remote_executions_max": max((v["remote_executions"] for v in hosts.values()), default=0),
        "controller_tasks_max": max((v["controller_tasks"] for v in hosts.values()), default=0),
        "delegated_tasks_max": max((v["delegated_tasks"] for v in hosts.values()), default=0),
        "changed": sum(v["changed"] for v in hosts.values()),
        "failed": sum(v["failed"] + v["unreachable"] for v in hosts.values()),
        "changed_tasks": sorted({t for v in hosts.values() for t in v["changed_tasks"]}),
        "stat_task_s": statistics.mean(t["seconds"] for v in hosts.values() for t in v["remote"] if t["action"] == "stat")
        if any(t["action"] == "stat" for v in hosts.values() for t in v["remote"])
        else None,
        "per_remote_task_s": statistics.mean(v["remote_seconds"] / v["remote_tasks"] for v in hosts.values() if v["remote_tasks"])
        if hosts
        else 0.0,
        # of that, the modules' own run time on the node (timing wrapper), and the rest
        "module_per_task_s": statistics.mean(timed[h][1] / v["remote_tasks"] for h, v in hosts.items() if v["remote_tasks"] and h in timed)
        if timed
        else None,
        "module_executions_max": max(count for count, _seconds in timed.values()) if timed else None,
    }


def later_role_costs(hosts):
    """Each later role's no-op cost, the most any GPU node paid: {role: {remote, evaluations}}."""
    costs = {}
    for role in LATER_ROLES:
        counts = [v.get("by_role", {}).get(role) for v in hosts.values()]
        counts = [c for c in counts if c]
        if counts:
            costs[role] = {"remote": max(c.get("remote", 0) for c in counts), "evaluations": max(sum(c.values()) for c in counts)}
    return costs


def summary(values):
    values = [round(v, 3) for v in values]
    return {"median": round(statistics.median(values), 3), "min": min(values), "max": max(values), "runs": values}


def setup_seconds(run, host):
    return sum(t["seconds"] for t in run["census"]["hosts"].get(host, {}).get("remote", []) if t["action"] in ("setup", "gather_facts"))


def interfaces_experiment(work, reps):
    """Targeted vs. full fact gathering on lab-node1, with its 4 interfaces and with 404."""
    node = PREFIX + "-lab-node1"
    batch_add = "".join("link add rfb%d type veth peer name rfbp%d\n" % (i, i) for i in range(200))
    batch_del = "".join("link del rfb%d\n" % i for i in range(200))
    result = {}
    for label, batch in (("4_interfaces", None), ("404_interfaces", batch_add)):
        if batch:
            subprocess.run(["podman", "exec", "-i", node, "ip", "-batch", "-"], input=batch, text=True, check=True)
        count = int(sh(["podman", "exec", node, "sh", "-c", "ls /sys/class/net | wc -l"]).strip())
        for subset, args in (("targeted", []), ("full", ["-e", "rackforge_bench_subset=all"])):
            times, sizes = [], []
            for _ in range(reps):
                run = playbook("facts-%s-%s" % (label, subset), [*args, "-l", "lab-node1", FACTS], work, NO_FACT_CACHE)
                times.append(setup_seconds(run, "lab-node1"))
                sizes.append(json.load(open(os.path.join(ROOT, ".cache", "bench-facts", "lab-node1.json")))["bytes"])
            result["%s_%s" % (label, subset)] = {"interfaces": count, "seconds": summary(times), "fact_bytes": max(sizes)}
    subprocess.run(["podman", "exec", "-i", node, "ip", "-batch", "-"], input=batch_del, text=True, check=False)
    return result


def row_for(runs):
    """One row of the table (one node count) from the runs of every repetition."""
    noop = [node_stats(r) for r in runs["noop"]]
    floor = [node_stats(r) for r in runs["floor"]]
    per_noop = summary([s["per_remote_task_s"] for s in noop])
    per_floor = summary([s["per_remote_task_s"] for s in floor])
    return {
        "lab_rebuild_s": summary(runs["lab_s"]),
        "fresh_s": summary([r["wall"] for r in runs["fresh"]]),
        "fresh_rc": [r["rc"] for r in runs["fresh"]],
        "fresh_remote_tasks_max": max(node_stats(r)["remote_tasks_max"] for r in runs["fresh"]),
        "noop_s": summary([r["wall"] for r in runs["noop"]]),
        # controller cost: CPU seconds of ansible-playbook and everything it started (forks,
        # ssh), and the peak resident memory of that process tree (sampled every 0.5 s)
        "noop_controller_cpu_s": summary([r["cpu"] for r in runs["noop"]]),
        "noop_controller_peak_rss_mb": summary([r["peak_rss_mb"] for r in runs["noop"]]),
        "fresh_controller_cpu_s": summary([r["cpu"] for r in runs["fresh"]]),
        "fresh_controller_peak_rss_mb": summary([r["peak_rss_mb"] for r in runs["fresh"]]),
        "noop_rc": [r["rc"] for r in runs["noop"]],
        "noop_changed_max": max(s["changed"] for s in noop),
        "noop_changed_tasks": sorted({t for s in noop for t in s["changed_tasks"]}),
        "noop_remote_tasks_max": max(s["remote_tasks_max"] for s in noop),
        "noop_core_remote_tasks_max": max(s["core_remote_tasks_max"] for s in noop),
        "noop_core_evaluations_max": max(s["core_evaluations_max"] for s in noop),
        "noop_later_roles": {
            role: {k: max(s["later_roles"][role][k] for s in noop if role in s["later_roles"]) for k in ("remote", "evaluations")}
            for role in sorted({r for s in noop for r in s["later_roles"]})
        },
        "noop_remote_executions_max": max(s["remote_executions_max"] for s in noop),
        "noop_controller_tasks_max": max(s["controller_tasks_max"] for s in noop),
        "noop_delegated_tasks_max": max(s["delegated_tasks_max"] for s in noop),
        "noop_remote_tasks_by_node": {h: v["remote_tasks"] for h, v in runs["noop"][-1]["census"]["hosts"].items()},
        "noop_remote_task_list": [t["task"] for t in runs["noop"][-1]["census"]["hosts"].get("lab-node1", {}).get("remote", [])],
        "health_s": summary([r["wall"] for r in runs["health"]]),
        "health_rc": [r["rc"] for r in runs["health"]],
        "facts_s": summary([r["wall"] for r in runs["facts"]]),
        "facts_setup_s": summary([max(setup_seconds(r, h) for h in r["census"]["hosts"]) for r in runs["facts"]]),
        "floor_s": summary([r["wall"] for r in runs["floor"]]),
        "per_task_noop_s": per_noop,
        "per_task_floor_s": per_floor,
        "per_task_ratio": round(per_noop["median"] / per_floor["median"], 3) if per_floor["median"] else None,
        # the split: the modules' own run time on the node per remote task, and the overhead
        # (the rest: transport, controller, action plugins) per remote task
        "module_per_task_noop_s": split_summary(noop, "module"),
        "module_per_task_floor_s": split_summary(floor, "module"),
        "overhead_per_task_noop_s": split_summary(noop, "overhead"),
        "overhead_per_task_floor_s": split_summary(floor, "overhead"),
        "noop_module_executions_max": max((s["module_executions_max"] or 0 for s in noop), default=0),
        # the overhead of each module's first use in a run vs. its later uses
        "first_use_noop": first_use_summary(runs["noop"]),
        "first_use_floor": first_use_summary(runs["floor"]),
        # like for like: the same module (stat) inside the no-op site.yml vs. the floor playbook
        "stat_in_noop_s": summary([x["stat_task_s"] for x in noop if x["stat_task_s"] is not None] or [0]),
        "mitogen": {
            "noop_s": summary([r["wall"] for r in runs["noop_mitogen"]]),
            "noop_rc": [r["rc"] for r in runs["noop_mitogen"]],
            "noop_changed_max": max(node_stats(r)["changed"] for r in runs["noop_mitogen"]),
            "per_task_noop_s": summary([node_stats(r)["per_remote_task_s"] for r in runs["noop_mitogen"]]),
            "per_task_floor_s": summary([node_stats(r)["per_remote_task_s"] for r in runs["floor_mitogen"]]),
        }
        if runs["noop_mitogen"]
        else None,
        # the output of runs that failed (kept in the work directory, named at the end)
        "failed_logs": [r["log"] for k, v in runs.items() if k != "lab_s" for r in v if r["rc"] != 0],
    }


def split_summary(stats, part):
    """Median (min-max) of the module or overhead seconds per remote task, or None for runs
    without the timing wrapper (results of older versions of this harness)."""
    if not stats or any(s["module_per_task_s"] is None for s in stats):
        return None
    if part == "module":
        return summary([s["module_per_task_s"] for s in stats])
    return summary([s["per_remote_task_s"] - s["module_per_task_s"] for s in stats])


def first_use_summary(runs):
    """Median over the runs of first_use_split's first-use and repeat overheads; None without
    the timestamps (older results)."""
    splits = [first_use_split(r) for r in runs]
    if not splits or any(x is None or x["repeat_s"] is None for x in splits):
        return None
    return {
        "first_use_s": summary([x["first_use_s"] for x in splits]),
        "repeat_s": summary([x["repeat_s"] for x in splits]),
        "first_uses": splits[-1]["first_uses"],
        "repeats": splits[-1]["repeats"],
    }
