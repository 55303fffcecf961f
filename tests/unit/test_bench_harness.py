"""The bench harness (bench/bench.py and its parts, bench/breakdown.py, bench/scale.py,
bench/ansible_hooks.py): the timing wrapper's log, rows, targets and tables from runs, the scale
model, combined results, first-use overhead, the timing hooks on a real playbook."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def fake_run(wall, remote_tasks, seconds_per_task, changed=0, rc=0, action="template", module_s=None, controller_tasks=40):
    host = {
        "remote_tasks": remote_tasks,
        "remote_executions": remote_tasks + 2,
        "remote_seconds": remote_tasks * seconds_per_task,
        "controller_tasks": controller_tasks,
        "delegated_tasks": 3,
        "skipped": 5,
        # a later role (issue 19's budget: 2 remote tasks, 5 evaluations): 2 remote, 1 skipped
        "by_role": {"model_storage": {"remote": 2, "controller": 0, "delegated": 0, "skipped": 1}},
        "changed": changed,
        "failed": 0,
        "unreachable": 0,
        "changed_tasks": ["play | task"] if changed else [],
        "remote": [{"task": "t%d" % i, "action": action, "items": 1, "seconds": seconds_per_task} for i in range(remote_tasks)],
    }
    run = {
        "wall": wall,
        "rc": rc,
        "cpu": wall / 2,
        "peak_rss_mb": 300.0,
        "log": "x",
        "census": {"hosts": {"lab-node1": host, "lab-cp1": host}},
    }
    if module_s is not None:  # a timed run: module executions on the node, remote_tasks * module_s seconds in all
        each = remote_tasks * module_s / (remote_tasks + 2)
        run["module_spans"] = {"lab-node1": [(10.0 * i, 10.0 * i + each) for i in range(remote_tasks + 2)]}
    return run


def test_module_times_from_the_wrappers_log():
    sys.path.insert(0, str(ROOT / "bench"))
    import bench

    assert bench.module_times(bench.module_spans("")) == (0, 0)
    count, seconds = bench.module_times(bench.module_spans("100.25 100.5\n200.0 201.0\ntruncated\n"))
    assert count == 2 and seconds == pytest.approx(1.25)
    # the wrapper runs the node's real interpreter with the same arguments and exit status
    assert '/usr/bin/python3 "$@"' in bench.WRAPPER and "exit $rc" in bench.WRAPPER and bench.TIMES in bench.WRAPPER


def test_overhead_split_is_a_reference_not_a_target():
    sys.path.insert(0, str(ROOT / "bench"))
    import bench

    runs = {
        "lab_s": [10],
        "fresh": [fake_run(60, 200, 0.5)],
        "noop": [fake_run(30, 40, 0.40, module_s=0.28)],
        "health": [fake_run(5, 6, 0.3)],
        "facts": [fake_run(2, 1, 0.5, action="setup")],
        "floor": [fake_run(5, 20, 0.22, action="stat", module_s=0.11)],
        "noop_mitogen": [],
        "floor_mitogen": [],
    }
    row = bench.row_for(runs)
    assert row["overhead_per_task_noop_s"]["median"] == pytest.approx(0.12, abs=1e-3)
    assert row["overhead_per_task_floor_s"]["median"] == pytest.approx(0.11, abs=1e-3)
    assert bench.overhead_ratio(row) == pytest.approx(0.12 / 0.11, abs=1e-2)
    # issue 19 withdrew the ratios to the floor as targets: they stay columns of the table
    assert not [key for key in bench.targets_for({"by_nodes": {"1": row}}) if "overhead" in key or "per-task" in key]
    # results without the wrapper (older runs): no split
    runs["noop"] = [fake_run(30, 40, 0.40)]
    assert bench.row_for(runs)["overhead_per_task_noop_s"] is None


def test_bench_rows_targets_and_table_from_runs():
    sys.path.insert(0, str(ROOT / "bench"))
    import bench

    runs = {
        "lab_s": [10, 11, 12],
        "fresh": [fake_run(60, 200, 0.5) for _ in range(3)],
        "noop": [fake_run(w, 20, 0.24, controller_tasks=30) for w in (10, 11, 12)],
        "health": [fake_run(5, 6, 0.3) for _ in range(3)],
        "facts": [fake_run(2, 1, 0.5, action="setup") for _ in range(3)],
        "floor": [fake_run(5, 20, 0.22, action="stat") for _ in range(3)],
        "noop_mitogen": [],
        "floor_mitogen": [],
    }
    row = bench.row_for(runs)
    assert row["noop_s"] == {"median": 11, "min": 10, "max": 12, "runs": [10, 11, 12]}
    assert row["noop_remote_tasks_max"] == 20 and row["noop_changed_max"] == 0
    # issue 19's counts leave the later role out: 18 remote; 20 + 30 + 3 + 5 skipped - its 3 = 55
    assert row["noop_core_remote_tasks_max"] == 18 and row["noop_core_evaluations_max"] == 55
    assert row["noop_later_roles"] == {"model_storage": {"remote": 2, "evaluations": 3}}
    assert row["per_task_ratio"] == round(0.24 / 0.22, 3)
    doc = {"by_nodes": {"1": row}, "reps": 3}
    targets = bench.targets_for(doc)
    assert all(targets.values()) and "one-node no-op <= 12 s" in targets
    stat_key = "the same module (stat) inside site.yml within 10% of the stat floor"
    assert stat_key not in targets  # no stat in this no-op: nothing to compare, no target met by default
    runs_with_stat = dict(runs, noop=[fake_run(w, 20, 0.30, action="stat", controller_tasks=30) for w in (10, 11, 12)])
    assert not bench.targets_for({"by_nodes": {"1": bench.row_for(runs_with_stat)}})[stat_key]  # 0.30 s against 0.22 s
    assert not [key for key in targets if key.startswith("c_node")]  # one node count: no c_node
    # 4 nodes: 2 s more controller CPU (the fake's cpu is half its wall) for 3 more nodes
    runs["noop"] = [fake_run(15, 20, 0.24, controller_tasks=30) for _ in range(3)]
    doc["by_nodes"]["4"] = bench.row_for(runs)
    assert bench.fleet_model(doc) == {"c_node_s": 0.67, "fleet_s": 110.0, "sliced_s": 55.0}
    assert all(bench.targets_for(doc).values())
    # one more node count whose no-op changed something, ran too many tasks and cost the controller too much
    runs["noop"] = [fake_run(80, 70, 0.5, changed=1) for _ in range(3)]
    doc["by_nodes"]["8"] = bench.row_for(runs)
    targets = bench.targets_for(doc)
    assert not targets["no-op changed=0"] and not targets["no-op <= 20 remote tasks per GPU node (issue 19's roles)"]
    assert not targets["no-op <= 60 task evaluations per GPU node (issue 19's roles)"]
    assert not targets["c_node (controller CPU per extra node, no-op) <= 3 s"]  # (40 - 5.5) / 7 = 4.9 s
    doc.update(finished="2026-11-30T00:00:00Z", command="make bench", targets=targets, environment=bench.environment())
    table = bench.markdown(doc)
    assert "| 1 | 60.0 (60.0-60.0) | 11.0 (10.0-12.0) | 0 | 20 (22) | 30 / 3 |" in table
    assert "| 8 | 68 | 115 | model_storage 2 / 3 |" in table
    assert "no-op changed=0: NOT met" in table


def test_scale_model_from_a_bench_result():
    sys.path.insert(0, str(ROOT / "bench"))
    import scale

    def row(n, noop_wall, cpu, rss):
        return {
            "noop_s": {"median": noop_wall},
            "fresh_s": {"median": noop_wall * 3},
            "noop_controller_cpu_s": {"median": cpu},
            "fresh_controller_cpu_s": {"median": cpu * 3},
            "noop_controller_peak_rss_mb": {"median": rss},
            "fresh_controller_peak_rss_mb": {"median": rss},
        }

    doc = {
        "by_nodes": {"1": row(1, 30.0, 10.0, 300.0), "8": row(8, 45.0, 24.0, 440.0)},
        "command": "make bench",
        "finished": "2026-11-30T00:00:00Z",
        "environment": {"ansible_core": "ansible-playbook [core 2.19.14]"},
    }
    p = scale.inputs(doc)["noop"]
    assert p["T1"] == 30.0 and p["c_node"] == 2.0 and p["m_node"] == 20.0
    # latency bound: 20 batches of 50 x 30 s; CPU bound would be 1000 x 2 s / 8 cores = 250 s
    assert scale.wall(1000, 50, 8, p) == 600
    # CPU bound: 5000 nodes x 2 s / 8 cores = 1250 s > 50 batches x 30 s? no: 1500 s
    assert scale.wall(5000, 100, 8, p) == 1500
    assert scale.wall(5000, 1000, 8, p) == 1250
    text = scale.tables(doc)
    assert "| 1000 | 20 min | 10 min | 5 min |" in text


def test_the_bench_gathers_the_facts_the_roles_gather():
    import yaml

    wanted = set()
    for path in ROOT.glob("roles/*/tasks/*.yml"):
        for task in yaml.safe_load(path.read_text()) or []:
            if isinstance(task, dict) and "ansible.builtin.setup" in task:
                wanted |= set(task["ansible.builtin.setup"]["gather_subset"])
    play = yaml.safe_load((ROOT / "bench" / "playbooks" / "facts.yml").read_text())[0]
    assert set(play["vars"]["rackforge_bench_roles_subset"]) == wanted
    assert not {"all", "network", "hardware"} & wanted
    # no play gathers the default (full) set
    for path in [*ROOT.glob("playbooks/*.yml"), ROOT / "site.yml"]:
        for item in yaml.safe_load(path.read_text()) or []:
            if "hosts" in item:
                assert item.get("gather_facts") is False, (str(path), item.get("name"))


def test_bench_combines_two_runs_and_names_what_it_borrowed(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "bench"))
    import bench

    monkeypatch.setattr(bench, "RESULTS", str(tmp_path))
    runs = {
        "lab_s": [1, 1, 1],
        "fresh": [fake_run(60, 200, 0.5)] * 3,
        "noop": [fake_run(30, 46, 0.24)] * 3,
        "health": [fake_run(5, 6, 0.3)] * 3,
        "facts": [fake_run(2, 1, 0.5, action="setup")] * 3,
        "floor": [fake_run(5, 20, 0.22, action="stat")] * 3,
        "noop_mitogen": [fake_run(20, 46, 0.12)] * 3,
        "floor_mitogen": [fake_run(3, 20, 0.1, action="stat")] * 3,
    }
    env = {"controller_cpus": 2, "controller_mem_gib": 24, "ansible_core": "core", "python": "3.11", "forks": "25"}
    env.update(strategy="linear", pipelining="True", gather_subset="x")
    base = {"reps": 3, "environment": env, "mitogen": "mitogen==0.3.54"}
    old = dict(base, finished="2026-11-30T07:00:00Z", command="make bench", by_nodes={"1": bench.row_for(runs), "8": bench.row_for(runs)})
    runs["noop_mitogen"], runs["floor_mitogen"] = [], []
    new = dict(base, finished="2026-11-30T08:00:00Z", command="bench.py --nodes 8", by_nodes={"8": bench.row_for(runs)}, mitogen=None)
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    rc = bench.combine(str(tmp_path / "old.json"), str(tmp_path / "new.json"))
    doc = json.loads((tmp_path / "latest.json").read_text())
    assert rc == (0 if all(doc["targets"].values()) else 1) and doc["targets"]
    assert list(doc["by_nodes"]) == ["1", "8"] and doc["by_nodes"]["8"]["mitogen"]["noop_s"]["median"] == 20
    assert doc["combined"].startswith("1 nodes, mitogen runs for 8 nodes from the run finished 2026-11-30T07:00:00Z")
    assert "Combined from two runs" in (tmp_path / "latest.md").read_text()


def test_first_use_split_places_module_time_inside_each_tasks_window():
    sys.path.insert(0, str(ROOT / "bench"))
    import bench

    def task(action, start, end):
        return {"task": action, "action": action, "items": 1, "seconds": end - start, "start": start, "end": end}

    census = {"hosts": {"lab-node1": {"remote": [task("stat", 0, 1.0), task("stat", 1.0, 1.5), task("probe", 1.5, 2.5)]}}}
    # the node logged 0.8 s inside the first task, 0.4 s in the second, 0.5 s in the third
    spans = {"lab-node1": [(0.1, 0.9), (1.05, 1.45), (1.6, 2.1)]}
    split = bench.first_use_split({"census": census, "module_spans": spans})
    assert split["first_uses"] == 2 and split["repeats"] == 1
    assert split["first_use_s"] == pytest.approx((0.2 + 0.5) / 2, abs=1e-3)
    assert split["repeat_s"] == pytest.approx(0.1, abs=1e-3)
    # a census without timestamps (older results): no split
    del census["hosts"]["lab-node1"]["remote"][0]["start"]
    assert bench.first_use_split({"census": census, "module_spans": spans}) is None


HOOKS_PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.stat: {path: /}
      when: inventory_hostname == 'target'
    - ansible.builtin.stat: {path: /}
    - ansible.builtin.set_fact: {x: 1}
"""


@pytest.mark.parametrize("share_build", [False, True])
def test_the_timing_hooks_time_a_real_playbook(tmp_path, share_build):
    """bench/ansible_hooks.py stands in for ansible-playbook: one line per worker, with the payload
    build in the first stat's worker only and the conditions timed; the shared-build experiment
    changes the timings, not the run."""
    (tmp_path / "play.yml").write_text(HOOKS_PLAY)
    (tmp_path / "hosts").write_text("target ansible_connection=local ansible_python_interpreter=%s\n" % sys.executable)
    out = tmp_path / "hooks.jsonl"
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), RACKFORGE_HOOKS_OUT=str(out))
    if share_build:
        env["RACKFORGE_HOOKS_SHARE_BUILD"] = "1"
    res = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ansible_hooks.py"), "-i", str(tmp_path / "hosts"), str(tmp_path / "play.yml")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(h["host"], h["action"]) for h in lines] == [("target", "ansible.builtin.stat")] * 2 + [("target", "ansible.builtin.set_fact")]
    first, second, set_fact = lines
    assert first["built"] and not second["built"] and not set_fact["built"]
    assert first["build"] > second["build"] > 0 and set_fact["build"] == 0
    assert first["execute"] > 0 and set_fact["execute"] == 0
    assert first["conditions"] > 0
    for h in lines:
        assert h["start"] < h["end"] and h["cpu"] >= 0  # os.times() ticks are 10 ms
        assert h["build"] + h["execute"] + h["conditions"] <= h["end"] - h["start"]


def test_breakdown_splits_each_remote_task_and_accounts_for_the_gap(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "bench"))
    import breakdown

    def task(action, start, end):
        return {"task": action, "action": action, "seconds": end - start, "start": start, "end": end}

    census = {"hosts": {"lab-node1": {"remote": [task("probe", 0.0, 1.0), task("probe", 1.0, 1.5)]}}}

    def hook(host, start, end, built, build, execute, conditions):
        keys = ("host", "start", "end", "built", "build", "execute", "conditions")
        return dict(zip(keys, (host, start, end, built, build, execute, conditions)), action="probe", cpu=0.1)

    hooks = [
        # the first task's worker built the payload (0.3 s) and spent 0.5 s in the round trip
        hook("lab-node1", 0.05, 0.95, True, 0.3, 0.5, 0.02),
        hook("lab-node1", 1.02, 1.48, False, 0.01, 0.4, 0.0),
        hook("lab-node2", 0.1, 0.9, True, 0.3, 0.4, 0.0),  # another node's worker: not lab-node1's
    ]
    spans = [(0.5, 0.9), (1.1, 1.4)]
    rows = breakdown.task_parts(census, hooks, spans)
    first, second = rows
    assert first["workers"] == 1 and first["built"] and not second["built"]
    assert first["on_node"] == pytest.approx(0.4) and first["transport"] == pytest.approx(0.1)
    assert first["worker_rest"] == pytest.approx(0.9 - 0.3 - 0.5 - 0.02)
    assert first["outside_worker"] == pytest.approx(0.1)
    for row in rows:  # the parts add up to the window
        assert sum(row[p] for p in breakdown.PARTS) == pytest.approx(row["window"])
    noop = breakdown.run_summary(rows)
    assert noop["tasks"] == 2 and noop["builds"] == 1 and noop["build_when_built"] == pytest.approx(0.3)
    assert noop["window"] == pytest.approx(0.75) and noop["unmatched"] == 0
    floor = dict(noop, window=0.5, build=0.01, on_node=0.3, builds=1, build_when_built=0.1)
    result = breakdown.variant_result([noop], [floor])
    assert result["ratio"] == pytest.approx(1.5)
    doc = {
        "finished": "2026-11-30T00:00:00Z",
        "command": "python3 bench/breakdown.py",
        "reps": 1,
        "environment": {
            "controller_cpus": 2,
            "ansible_core": "ansible-playbook [core 2.19.14]",
            "python": "3.11.7",
            "pipelining": "True",
        },
        "variants": {"as_is": result},
    }
    text = breakdown.markdown(doc)
    # written beside make bench's results, under their own prefix
    monkeypatch.setattr(breakdown.bench, "RESULTS", str(tmp_path))
    breakdown.bench.write_results(doc, prefix="breakdown-", render=breakdown.markdown)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "breakdown-2026-11-30T000000Z.json",
        "breakdown-2026-11-30T000000Z.md",
        "breakdown-latest.json",
        "breakdown-latest.md",
    ]
    assert (tmp_path / "breakdown-latest.md").read_text() == text
    assert "ratio 1.50" in text and "| payload build (module lookup, AnsiballZ) |" in text
    # the node's share per module: two probe tasks, 0.4 s and 0.3 s on the node
    assert noop["on_node_by_action"] == {"probe": (2, pytest.approx(0.35))}
    assert result["noop"]["on_node_by_action"] == {"probe": {"tasks": 2, "seconds": 0.35}}
    assert "| probe | 2 | 0.350 |" in text
    # a task with no worker line (a hook that did not run) shows as unmatched, not as a zero
    assert breakdown.run_summary(breakdown.task_parts(census, [], spans))["unmatched"] == 2
