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
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LAB = [sys.executable, os.path.join(ROOT, "lab", "lab.py")]
INVENTORY = os.path.join(ROOT, "inventories", "lab", "hosts.yml")
RESULTS = os.path.join(HERE, "results")
PREFIX = "rackforge-lab"
TARGET_REMOTE_TASKS = 60
TARGET_FLOOR_RATIO = 1.10
MITOGEN = "mitogen==0.3.54"
MITOGEN_DIR = os.path.join(ROOT, ".cache", "mitogen")
FACTS = os.path.join(HERE, "playbooks", "facts.yml")
NO_FACT_CACHE = {"ANSIBLE_CACHE_PLUGIN": "memory"}  # so that every facts run really gathers
# the timing wrapper: each module execution on a node appends "start end" (seconds) to TIMES
TIMED_PYTHON = "/usr/local/libexec/rackforge-bench-python3"
TIMES = "/run/rackforge-bench-module-times"
WRAPPER = (
    """#!/bin/sh
# rackforge bench (bench/bench.py): times each Ansible module execution on this node
start=$(date +%%s.%%N)
/usr/bin/python3 "$@"
rc=$?
echo "$start $(date +%%s.%%N)" >> %s
exit $rc
"""
    % TIMES
)
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


def log(msg):
    sys.stderr.write("bench: %s\n" % msg)
    sys.stderr.flush()


def sh(cmd, **kw):
    res = subprocess.run(cmd, text=True, capture_output=True, check=False, **kw)
    if res.returncode != 0:
        sys.exit("bench: failed (%d): %s\n%s%s" % (res.returncode, " ".join(cmd), res.stdout[-3000:], res.stderr[-3000:]))
    return res.stdout


def lab_rebuild(nodes):
    """Remove the lab's node and control-plane containers (the mirror, network and image stay),
    then start N fresh nodes and the control plane."""
    names = sh(["podman", "ps", "-a", "--format", "{{.Names}}", "--filter", "label=io.rackforge.lab=1"]).split()
    for name in names:
        if name != PREFIX + "-mirror":
            subprocess.run(["podman", "rm", "-f", "-t", "2", name], capture_output=True, check=False)
    fresh = os.path.join(ROOT, "inventories", "lab", "fresh.yml")
    if os.path.exists(fresh):
        os.remove(fresh)
    started = time.monotonic()
    sh([*LAB, "up", "--nodes", str(nodes), "--profile", "hgx-h100-8gpu", "--control-plane", "1"])
    took = time.monotonic() - started
    install = "mkdir -p %s && cat > %s && chmod 0755 %s" % (os.path.dirname(TIMED_PYTHON), TIMED_PYTHON, TIMED_PYTHON)
    for i in range(1, nodes + 1):
        sh(["podman", "exec", "-i", node_container("lab-node%d" % i), "sh", "-c", install], input=WRAPPER)
    return took


def node_container(host):
    return "%s-%s" % (PREFIX, host)


def gpu_hosts():
    """The GPU nodes of the lab inventory (lab.py writes it)."""
    import yaml  # ansible's dependency: make bench runs in the venv

    with open(INVENTORY) as fh:
        inventory = yaml.safe_load(fh)
    return sorted((inventory["all"]["children"].get("gpu_nodes") or {}).get("hosts") or {})


def read_node_file(host, path):
    """A file's text in a lab node ("" when missing)."""
    return subprocess.run(["podman", "exec", node_container(host), "cat", path], text=True, capture_output=True, check=False).stdout


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
    return {
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


def mitogen_env():
    """The optional mitogen strategy, installed beside (not into) the venv; None when pip cannot."""
    if not os.path.isdir(os.path.join(MITOGEN_DIR, "ansible_mitogen")):
        res = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--target", MITOGEN_DIR, MITOGEN], capture_output=True, text=True, check=False
        )
        if res.returncode != 0:
            log("mitogen not installed (%s): its runs are skipped" % res.stderr.strip()[-300:])
            return None
    return {
        "PYTHONPATH": MITOGEN_DIR,
        "ANSIBLE_STRATEGY_PLUGINS": os.path.join(MITOGEN_DIR, "ansible_mitogen", "plugins", "strategy"),
        "ANSIBLE_STRATEGY": "mitogen_linear",
        # mitogen runs its own ssh and ignores the lab inventory's StrictHostKeyChecking=no: the
        # lab's throwaway containers get new host keys on every start (lab runs only)
        "ANSIBLE_HOST_KEY_CHECKING": "False",
    }


def pipelining():
    """The ssh connection's pipelining setting as ansible.cfg sets it (a connection-plugin option)."""
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "ansible.cfg"))
    return cfg.get("ssh_connection", "pipelining", fallback="False")


def environment():
    ver = subprocess.run(["ansible-playbook", "--version"], text=True, capture_output=True, check=False).stdout.splitlines()
    cfg = {}
    for line in subprocess.run(
        ["ansible-config", "dump", "--only-changed", "-t", "all"],
        text=True,
        capture_output=True,
        check=False,
        env=dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg")),
    ).stdout.splitlines():
        key, _, value = line.partition("=")
        cfg[key.split("(")[0].strip()] = value.strip()
    mem_kb = int(open("/proc/meminfo").read().split()[1])
    return {
        "ansible_core": ver[0] if ver else "?",
        "python": platform.python_version(),
        "forks": cfg.get("DEFAULT_FORKS", "5"),
        "strategy": cfg.get("DEFAULT_STRATEGY", "linear"),
        # what the roles gather (bench/playbooks/facts.yml gathers the same; a unit test keeps them equal)
        "gather_subset": "distribution,platform,service_mgr (the roles' setup tasks; plays gather_facts: false)",
        "pipelining": pipelining(),
        "controller_cpus": os.cpu_count(),
        "controller_mem_gib": round(mem_kb / 1048576, 1),
        "transport": "ssh to 127.0.0.1 ports (podman containers), ControlPersist",
    }


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
