"""The rackforge_fleet_report action end to end, through the health_checks role's publish tasks, in
real ansible-playbook runs on local hosts with verdicts the test sets (no node is touched): a
--limit or check-mode run keeps the rest of the fleet, a node gone from the inventory is removed,
an AWX slice removes none, concurrent runs wait for the lock and all land, a run killed while it
writes leaves whole files, and a state it cannot read stops it before it writes anything."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ansible.module_utils.rackforge import fleet
from fleet_helper import Created, kill_run, leftovers
from test_fleet import VALIDATOR, result, run, verdict

ROOT = Path(__file__).resolve().parents[2]
PUBLISH = ROOT / "tests" / "unit" / "playbooks" / "fleet_publish.yml"
HOSTS = ["node-a", "node-b", "node-c"]
PROFILES = {"node-a": "hgx-h100-8gpu", "node-b": "hgx-h100-8gpu", "node-c": "pcie-a100-4gpu"}
REPORTS = ("fleet-state.json", "fleet.json", "fleet.md", "fleet.html")
# the action alone, in a loop (the kill test) or with a short lock timeout
LOOP = """---
- name: Write the fleet report again and again
  hosts: all
  gather_facts: false
  tasks:
    - name: The verdict the test wrote for this host
      ansible.builtin.set_fact:
        rackforge_health: "{{ verdicts[inventory_hostname] }}"
    - name: Write the report
      rackforge_fleet_report:
        report_dir: "{{ report_dir }}"
        stale_after_hours: 24
        lock_timeout: "{{ lock_timeout | default(300) }}"
      loop: "{{ range(iterations | int) | list }}"
      run_once: true
"""


def env_for(report_dir):
    return dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        RACKFORGE_REPORT_DIR=str(report_dir),
    )


def write_inventory(tmp, hosts):
    path = tmp / ("hosts-%s.ini" % "-".join(hosts))
    lines = ["[gpu_nodes]"] + ["%s rackforge_hw_profile=%s" % (h, PROFILES.get(h, "hgx-h100-8gpu")) for h in hosts]
    lines += ["[gpu_nodes:vars]", "ansible_connection=local", "ansible_python_interpreter=%s" % sys.executable]
    path.write_text("\n".join(lines) + "\n")
    return path


def start(tmp, report_dir, verdicts, *args, hosts=HOSTS, fail=(), playbook=PUBLISH, extra=None):
    """ansible-playbook (not waited for) publishing `verdicts` ({host: fact or None})."""
    (tmp / "tf").mkdir(exist_ok=True)
    for host in hosts:
        (tmp / "tf" / host).mkdir(exist_ok=True)
    data = dict(extra or {}, verdicts=verdicts, fail_hosts=list(fail), textfile_root=str(tmp / "tf"), report_dir=str(report_dir))
    varfile = tmp / ("vars-%d.json" % time.monotonic_ns())
    varfile.write_text(json.dumps(data))
    cmd = ["ansible-playbook", "-i", str(write_inventory(tmp, hosts)), "-e", "@%s" % varfile, *args, str(playbook)]
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env_for(report_dir), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def publish(tmp, report_dir, verdicts, *args, **kw):
    proc = start(tmp, report_dir, verdicts, *args, **kw)
    out, _ = proc.communicate(timeout=300)
    proc.stdout_text = out
    return proc


def report_of(report_dir):
    report = json.loads((report_dir / "fleet.json").read_text())
    errors = list(VALIDATOR.iter_errors(report))
    assert not errors, [e.message for e in errors[:3]]
    return report, {n["host"]: n for n in report["nodes"]}


def next_second():
    """Report times have seconds: let the next run's time differ from this one's."""
    time.sleep(1.05 - (time.time() % 1))


GOOD = {"node-a": verdict(), "node-b": verdict(inactive={5: [3]}), "node-c": verdict()}


def test_a_limit_run_keeps_every_other_node_and_a_check_mode_run_is_marked(tmp_path):
    reports = tmp_path / "reports"
    first = publish(tmp_path, reports, GOOD)
    assert first.returncode == 0, first.stdout_text[-3000:]
    _, before = report_of(reports)
    assert {h: n["status"] for h, n in before.items()} == {"node-a": "healthy", "node-b": "unhealthy", "node-c": "healthy"}
    assert before["node-c"]["profile"] == "pcie-a100-4gpu"
    assert before["node-b"]["checked_by"]["playbook"] == "tests/unit/playbooks/fleet_publish.yml"
    next_second()
    again = publish(tmp_path, reports, dict(GOOD, **{"node-a": verdict(down=[2])}), "--limit", "node-a")
    assert again.returncode == 0, again.stdout_text[-3000:]
    report, after = report_of(reports)
    assert after["node-a"]["status"] == "unhealthy" and after["node-a"]["checked_at"] > before["node-a"]["checked_at"]
    for host in ("node-b", "node-c"):
        assert after[host]["checked_at"] == before[host]["checked_at"] and after[host]["status"] == before[host]["status"]
        assert after[host]["health"] == before[host]["health"]
    assert report["last_run"]["limit"] == "node-a" and report["last_run"]["checked"] == ["node-a"]
    assert 'id="node-node-b"' in (reports / "fleet.html").read_text() and "| node-c | healthy |" in (reports / "fleet.md").read_text()
    # a check-mode run in which node-c fails before the checks (as an unreachable node would)
    next_second()
    res = publish(tmp_path, reports, GOOD, "--check", fail=["node-c"])
    assert res.returncode != 0
    report, last = report_of(reports)
    assert last["node-a"]["checked_by"]["check_mode"] is True and report["last_run"]["check_mode"] is True
    assert (
        last["node-c"]["status"] == "not_checked"
        and "failed or was unreachable before the health checks" in last["node-c"]["status_reason"]
    )
    assert last["node-c"]["healthy"] is True and last["node-c"]["checked_at"] == before["node-c"]["checked_at"]
    assert report["last_run"]["not_reached"] == ["node-c"]


def test_a_node_gone_from_the_inventory_is_removed_but_an_awx_slice_removes_none(tmp_path):
    reports = tmp_path / "reports"
    assert publish(tmp_path, reports, GOOD).returncode == 0
    # an AWX slice: its inventory holds node-a only (awx_workflow_job_id is set in sliced jobs)
    res = publish(tmp_path, reports, GOOD, hosts=["node-a"], extra={"awx_workflow_job_id": 41, "awx_job_id": 42})
    assert res.returncode == 0, res.stdout_text[-3000:]
    report, nodes = report_of(reports)
    assert {h: n["status"] for h, n in nodes.items()} == {"node-a": "healthy", "node-b": "unhealthy", "node-c": "healthy"}
    assert report["last_run"]["awx_job_id"] == 42
    # the whole inventory without node-c: removed, its last verdict kept, not counted healthy
    res = publish(tmp_path, reports, GOOD, hosts=["node-a", "node-b"])
    assert res.returncode == 0, res.stdout_text[-3000:]
    report, nodes = report_of(reports)
    assert nodes["node-c"]["status"] == "removed" and nodes["node-c"]["healthy"] is True
    assert report["summary"]["healthy"] == 1 and report["summary"]["removed"] == 1


def hold_lock(reports):
    reports.mkdir(parents=True, exist_ok=True)
    fd = os.open(reports / ".fleet.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def read_until(proc, marker, timeout=120):
    deadline, seen = time.time() + timeout, []
    for line in proc.stdout:
        seen.append(line)
        if marker in line:
            return "".join(seen)
        assert time.time() < deadline, "no %r in %s" % (marker, "".join(seen)[-2000:])
    raise AssertionError("the run ended before %r: %s" % (marker, "".join(seen)[-3000:]))


def test_a_run_waits_for_the_lock_another_run_holds(tmp_path):
    reports = tmp_path / "reports"
    assert publish(tmp_path, reports, GOOD).returncode == 0
    before = (reports / "fleet.json").read_text()
    fd = hold_lock(reports)
    try:
        next_second()
        proc = start(tmp_path, reports, dict(GOOD, **{"node-a": verdict(down=[0])}), "--limit", "node-a")
        read_until(proc, "TASK [health_checks : Merge the verdicts")
        time.sleep(1.5)
        assert proc.poll() is None and (reports / "fleet.json").read_text() == before  # waiting, nothing written
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out[-3000:]
    assert report_of(reports)[1]["node-a"]["status"] == "unhealthy"


def test_a_lock_held_too_long_fails_naming_the_lock_and_writes_nothing(tmp_path):
    reports = tmp_path / "reports"
    loop = tmp_path / "loop.yml"
    loop.write_text(LOOP)
    fd = hold_lock(reports)
    try:
        res = publish(tmp_path, reports, GOOD, playbook=loop, extra={"iterations": 1, "lock_timeout": 1})
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    assert res.returncode != 0
    text = " ".join(res.stdout_text.split())
    assert "another run has held %s for more than 1 s; the fleet report was not written" % (reports / ".fleet.lock") in text
    assert not (reports / "fleet.json").exists()


def test_concurrent_runs_all_land(tmp_path):
    reports = tmp_path / "reports"
    verdicts = {h: verdict(down=[i]) for i, h in enumerate(HOSTS)}
    procs = [start(tmp_path, reports, verdicts, "--limit", host) for host in HOSTS]
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out[-3000:]
    report, nodes = report_of(reports)
    assert set(nodes) == set(HOSTS) and all(n["status"] == "unhealthy" for n in nodes.values())
    assert sorted(r["limit"] for r in report["recent_runs"]) == HOSTS
    for i, host in enumerate(HOSTS):
        assert nodes[host]["health"]["ports"][i]["state"] == "Down"


def big_state(count):
    """A fleet of `count` nodes besides the test's three, so that each write takes a while."""
    results = {"big-%04d" % i: result(verdict(inactive={1: [2]})) for i in range(count)}
    return fleet.merge(fleet.empty_state(), run(0), results, list(results))


def whole(reports):
    """Every report file parses completely; fleet.json matches the schema."""
    state = json.loads((reports / "fleet-state.json").read_text())
    fleet.check_state(state)
    report_of(reports)
    md = (reports / "fleet.md").read_text()
    assert md.startswith("# rackforge fleet report\n") and "## Not checked, stale and removed nodes" in md and md.endswith("\n")
    assert (reports / "fleet.html").read_text().endswith("</body></html>\n")


def test_a_run_killed_while_it_writes_leaves_the_last_good_files(tmp_path):
    """Runs killed (SIGKILL, as a crashed controller) the moment their temporary file of the state,
    fleet.json or fleet.html appears, that is between that write and its rename: every file stays
    whole, the one being written is the last good one, and the next run cleans up."""
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "fleet-state.json").write_text(json.dumps(big_state(150)))
    loop = tmp_path / "loop.yml"
    loop.write_text(LOOP)
    first = publish(tmp_path, reports, GOOD, playbook=loop, extra={"iterations": 1})
    assert first.returncode == 0, first.stdout_text[-3000:]
    whole(reports)
    mid_write = []
    for target in ("fleet-state.json", "fleet.json", "fleet.html"):
        before = {name: (reports / name).read_bytes() for name in REPORTS}
        created = Created(reports)
        try:
            proc = start(tmp_path, reports, GOOD, playbook=loop, extra={"iterations": 20})
            seen = created.wait_for(".fleet-tmp-%s." % target, timeout=120)
            kill_run(proc)  # SIGKILL, as a crashed controller: no cleanup runs
        finally:
            created.close()
        proc.communicate(timeout=60)
        assert seen, "the run never wrote %s" % target
        if seen in leftovers(reports):
            mid_write.append(target)
            # killed between its temporary file and the rename: the file is the last good one
            assert (reports / target).read_bytes() == before[target]
        whole(reports)
    assert len(mid_write) >= 2, "kills that landed while the file was being written: %s" % mid_write
    # the next run removes what the killed ones left and writes a whole report (the kernel dropped their lock)
    res = publish(tmp_path, reports, GOOD, playbook=loop, extra={"iterations": 1})
    assert res.returncode == 0, res.stdout_text[-3000:]
    assert leftovers(reports) == []
    whole(reports)


def test_a_state_it_cannot_read_stops_the_run_before_it_writes(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "fleet-state.json").write_text('{"version": 1, "nodes": {')  # as a disk-full hand edit would leave it
    res = publish(tmp_path, reports, GOOD)
    assert res.returncode != 0
    text = " ".join(res.stdout_text.split())
    assert "rackforge_fleet_report: %s cannot be read" % (reports / "fleet-state.json") in text
    assert "nothing was written: move it aside to start a new fleet state" in text
    assert not (reports / "fleet.json").exists()


def test_a_report_of_the_template_era_is_kept_by_the_first_run(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    old = {"nodes": [{"host": "node-z", "profile": "hgx-h100-8gpu", "checked": True, "health": verdict()}]}
    (reports / "fleet.json").write_text(json.dumps(old))
    res = publish(tmp_path, reports, GOOD, "--limit", "node-a", hosts=[*HOSTS, "node-z"])
    assert res.returncode == 0, res.stdout_text[-3000:]
    _, nodes = report_of(reports)
    assert set(nodes) == {"node-a", "node-z"} and nodes["node-z"]["status"] == "healthy"
