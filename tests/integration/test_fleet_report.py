"""The fleet report on the shared lab remembers the fleet: a --limit run and a new node's run leave
every other node with its last verdict and time, two runs at once both land, and a run killed
while it writes the report leaves the last good one. Every test writes into its own report
directory (conftest.playbook(report_dir=...)), never into reports/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from conftest import INVENTORY, ROOT, playbook

sys.path.insert(0, str(ROOT / "tests" / "unit"))
from fleet_helper import Created, kill_run, leftovers

HEALTH = "playbooks/health_check.yml"
REPORTS = ("fleet-state.json", "fleet.json", "fleet.md", "fleet.html")


def nodes_of(report_dir):
    report = json.loads((report_dir / "fleet.json").read_text())
    assert report["kind"] == "rackforge-fleet-report" and report["version"] == 1
    return report, {n["host"]: n for n in report["nodes"]}


def next_second():
    """Report times have seconds: the next run's time differs from the last one's."""
    time.sleep(1.05 - (time.time() % 1))


def test_a_limit_run_keeps_the_other_nodes_with_their_last_verdict_and_time(converged, gpu_nodes, faulted, tmp_path):
    first = playbook(HEALTH, report_dir=tmp_path)
    assert first.returncode == 0, first.stdout[-3000:]
    _, before = nodes_of(tmp_path)
    assert sorted(before) == gpu_nodes and all(n["status"] == "healthy" for n in before.values())
    victim, others = gpu_nodes[0], gpu_nodes[1:]
    faulted(victim, "nvlink_inactive", "gpu=3", "links=4")
    next_second()
    res = playbook(HEALTH, "--limit", victim, report_dir=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:]  # health_check.yml warns, it does not fail
    report, after = nodes_of(tmp_path)
    assert sorted(after) == gpu_nodes
    assert after[victim]["status"] == "unhealthy" and after[victim]["checked_at"] > before[victim]["checked_at"]
    assert after[victim]["checked_by"]["limit"] == victim and after[victim]["checked_by"]["playbook"] == HEALTH
    assert any(f["check"] == "nvlink_inactive" and f["remedy"] for f in after[victim]["health"]["findings"])
    for node in others:
        assert after[node]["status"] == "healthy"
        assert after[node]["checked_at"] == before[node]["checked_at"] and after[node]["checked_by"] == before[node]["checked_by"]
    assert report["last_run"]["checked"] == [victim]
    md, html = (tmp_path / "fleet.md").read_text(), (tmp_path / "fleet.html").read_text()
    assert all("| %s | healthy |" % node in md for node in others)
    assert all('id="node-%s"' % node in html for node in gpu_nodes)


def test_a_new_nodes_run_keeps_the_fleet(converged, gpu_nodes, fresh_node, tmp_path):
    first = playbook(HEALTH, report_dir=tmp_path)
    assert first.returncode == 0, first.stdout[-3000:]
    _, before = nodes_of(tmp_path)
    next_second()
    # the new node added to the inventory (the lab keeps it in its own file) and run alone
    res = playbook(HEALTH, "-i", str(ROOT / "inventories" / "lab" / "fresh.yml"), "--limit", fresh_node, report_dir=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:]
    _, after = nodes_of(tmp_path)
    assert sorted(after) == sorted([*gpu_nodes, fresh_node])
    assert after[fresh_node]["status"] == "unhealthy"  # never converged: no driver yet
    assert any(f["check"] == "driver" for f in after[fresh_node]["health"]["findings"])
    for node in gpu_nodes:
        assert after[node]["status"] == "healthy" and after[node]["checked_at"] == before[node]["checked_at"]


def test_two_runs_at_once_both_land(converged, gpu_nodes, tmp_path):
    pair = gpu_nodes[:2]
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda node: playbook(HEALTH, "--limit", node, report_dir=tmp_path), pair))
    for res in runs:
        assert res.returncode == 0, res.stdout[-3000:]
    report, nodes = nodes_of(tmp_path)
    assert sorted(nodes) == pair and all(nodes[n]["checked_by"]["limit"] == n for n in pair)
    assert sorted(r["limit"] for r in report["recent_runs"]) == pair


def start(report_dir, *args):
    """ansible-playbook against the lab, not waited for (conftest.playbook's environment)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    env["RACKFORGE_REPORT_DIR"] = str(report_dir)
    return subprocess.Popen(
        ["ansible-playbook", "-i", str(INVENTORY), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def test_a_run_killed_while_it_writes_the_report_leaves_the_last_good_one(converged, gpu_nodes, tmp_path):
    good = playbook(HEALTH, report_dir=tmp_path)
    assert good.returncode == 0, good.stdout[-3000:]
    _, verdicts = nodes_of(tmp_path)
    # a fleet of 300 more nodes in the state (they are not in the lab's inventory: the runs list
    # them as removed), so that each file takes long enough to write for a kill to land in it
    state_file = tmp_path / "fleet-state.json"
    state = json.loads(state_file.read_text())
    model = state["nodes"][gpu_nodes[0]]
    state["nodes"].update({"seed-%03d" % i: dict(model, host="seed-%03d" % i) for i in range(300)})
    state_file.write_text(json.dumps(state))
    killed_mid_write = []
    for target in ("fleet-state.json", "fleet.json", "fleet.html"):
        before = {name: (tmp_path / name).read_bytes() for name in REPORTS}
        created = Created(tmp_path)
        try:
            proc = start(tmp_path, HEALTH)
            seen = created.wait_for(".fleet-tmp-%s." % target, timeout=600)
            kill_run(proc)  # SIGKILL the run and its workers, as a crashed controller
        finally:
            created.close()
        proc.wait(timeout=60)
        assert seen, "the run never wrote %s" % target
        if seen in leftovers(tmp_path):
            killed_mid_write.append(target)
            assert (tmp_path / target).read_bytes() == before[target]  # the last good file, untouched
        assert len(json.loads(state_file.read_text())["nodes"]) == len(gpu_nodes) + 300
        _, nodes = nodes_of(tmp_path)  # whole and readable, whichever run wrote it last
        assert set(gpu_nodes) <= set(nodes) and all(nodes[h]["health"] == verdicts[h]["health"] for h in gpu_nodes)
        assert (tmp_path / "fleet.html").read_text().endswith("</body></html>\n")
    assert killed_mid_write, "no kill landed between a temporary file and its rename"
    again = playbook(HEALTH, report_dir=tmp_path)
    assert again.returncode == 0, again.stdout[-3000:]
    assert leftovers(tmp_path) == []
    report, nodes = nodes_of(tmp_path)
    assert all(nodes[h]["status"] == "healthy" for h in gpu_nodes) and report["summary"]["removed"] == 300
