"""The fleet report's pure logic (module_utils/rackforge/fleet.py): merging runs into the state,
stale and removed nodes, severity order, and the report data. Verdicts come from the real evaluators in
health.py. Remedies, rendering and the schema: test_fleet_reports.py (which uses the helpers here)."""

from __future__ import annotations

import json
import pathlib
import re

import jsonschema
import pytest
from ansible.module_utils.rackforge import fleet, health

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "docs" / "fleet-schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
H100 = "NVIDIA H100 80GB HBM3"
T0 = "2026-12-01T08:00:00Z"


def at(hours):
    """A report time `hours` after T0."""
    base = fleet.parse_time(T0)
    return fleet.timestamp(base.fromtimestamp(base.timestamp() + hours * 3600, base.tzinfo))


def nvlink_status(inactive=None):
    """nvidia-smi nvlink -s as parse_nvlink_status returns it: 8 H100s, 18 links each at 26.562."""
    inactive = inactive or {}
    return [
        {
            "index": i,
            "name": H100,
            "uuid": "GPU-%08d" % i,
            "links": {link: (None if link in inactive.get(i, ()) else 26.562) for link in range(18)},
            "all_inactive": False,
        }
        for i in range(8)
    ]


def gpus_summary(status):
    return [
        {
            "index": g["index"],
            "name": g["name"],
            "uuid": g["uuid"],
            "expected_links": 18,
            "active_links": len([s for s in g["links"].values() if s is not None]),
            "inactive_links": sorted(k for k, s in g["links"].items() if s is None),
            "all_inactive": False,
        }
        for g in status
    ]


def ibstat(down=()):
    return {
        "mlx5_%d" % i: {
            "ports": {
                1: {
                    "state": "Down" if i in down else "Active",
                    "physical_state": "Disabled" if i in down else "LinkUp",
                    "rate": 400,
                    "link_layer": "Ethernet",
                }
            }
        }
        for i in range(8)
    }


def verdict(inactive=None, down=(), pfc_off=(), not_run=None):
    """A rackforge_health fact as checks.yml builds it, from health.py's real evaluators."""
    status = nvlink_status(inactive)
    findings = health.evaluate_nvlink(status, 18, 26.562)
    stat = ibstat(down)
    netdev_of = {ca: "ens%dnp0" % i for i, ca in enumerate(sorted(stat))}
    devinfo = {ca: {"ports": {1: {"active_mtu": 4096}}} for ca in stat}
    pause = {netdev_of["mlx5_%d" % i]: ([] if i in pfc_off else [3]) for i in range(8)}
    rdma, ports = health.evaluate_rdma(stat, devinfo, netdev_of, {"count": 8, "rate": 400, "lossless_priority": 3}, pause_prios=pause)
    findings = (not_run or []) + findings + rdma
    return {
        "healthy": not findings,
        "findings": findings,
        "driver_version": "550.127.05",
        "gpus": gpus_summary(status),
        "fabric": health.fabric_summary(
            [{"state": "Completed", "status": "Success", "clique_id": 0, "cluster_uuid": "x", "health_summary": "Healthy"}] * 8
        )[0],
        "ports": ports,
    }


def show_gids_missing():
    evidence = {"command": "/usr/sbin/show_gids", "rc": 1, "stdout": "", "stderr": "show_gids: cannot read /sys/class/infiniband\n"}
    return health.not_run("roce_gid", "show_gids", "show_gids failed: exit status 1", evidence)


def run(hours, playbook="playbooks/health_check.yml", check_mode=False, limit=None):
    return {
        "at": at(hours),
        "playbook": playbook,
        "play": "Health checks only",
        "check_mode": check_mode,
        "limit": limit,
        "controller": "ctl",
    }


# a node's <state_dir>/acceptance.json as roles/fabric_acceptance writes it: its pairs, NVLink matrix
# and findings (GPU pair 1 -> 2 slow)
ACCEPTANCE = {
    "time": 1764633600,
    "findings": [
        {
            "check": "nvlink_bandwidth",
            "component": "GPU 1 -> GPU 2",
            "expected": ">= 300.00 GB/s",
            "observed": "150.00 GB/s",
            "message": "GPU pair 1/2 copies at 150.00 GB/s; the node's pairs have a median of 370.00 GB/s",
        }
    ],
    "rdma": [
        {"a": "node1", "b": "node2", "rail": 0, "bw_gbps": 392.1, "lat_us": 2.31, "cm_lat_us": 2.35, "ok": True},
        {"a": "node3", "b": "node1", "rail": 0, "bw_gbps": 180.4, "lat_us": 2.4, "ok": False},
    ],
    "nvlink": {
        "busbw_gbps": 478.2,
        "pairs": {"median_gbps": 370.0, "gbps": {"0-1": 370.0, "0-2": 371.0, "1-0": 369.0, "1-2": 150.0, "2-0": 370.5, "2-1": 370.2}},
    },
}


def result(health_=None, profile="hgx-h100-8gpu", reason=None, acceptance=None):
    return {"health": health_, "profile": profile, "reason": reason, "acceptance": acceptance}


HOSTS = ["node1", "node2", "node3"]


def first_state():
    """Three nodes checked at T0: node2 with NVLink 3 on GPU 5 inactive."""
    results = {"node1": result(verdict()), "node2": result(verdict(inactive={5: [3]})), "node3": result(verdict())}
    return fleet.merge(fleet.empty_state(), run(0), results, HOSTS)


def by_host(report):
    return {n["host"]: n for n in report["nodes"]}


def valid(report):
    errors = sorted(VALIDATOR.iter_errors(report), key=lambda e: list(e.path))
    assert not errors, ["%s at %s" % (e.message, list(e.path)) for e in errors[:5]]
    return report


def rich_state():
    """Every kind of node: faulted, a check that could not run, stale, removed, unreached, healthy, acceptance."""
    state = fleet.merge(
        fleet.empty_state(),
        run(0),
        {"old-node": result(verdict()), "gone-node": result(verdict())},
        ["old-node", "gone-node", "node1", "node2", "node3", "node4"],
    )
    results = {
        "node1": result(verdict(), acceptance=ACCEPTANCE),
        "node2": result(verdict(inactive={5: [3]}, down=[1])),
        "node3": result(verdict(not_run=[show_gids_missing()])),
        "node4": result(None, reason="it failed or was unreachable before the health checks"),
    }
    return fleet.merge(state, run(30, limit="node*"), results, ["old-node", "node1", "node2", "node3", "node4"])


# ----------------------------------------------------------------------------- merge
def test_a_limit_run_keeps_every_other_node_with_its_last_verdict_and_time():
    state = first_state()
    later = fleet.merge(state, run(2, limit="node1"), {"node1": result(verdict(down=[1]))}, HOSTS)
    report = valid(fleet.build_report(later, at(3), 24))
    nodes = by_host(report)
    assert set(nodes) == set(HOSTS)
    assert nodes["node1"]["checked_at"] == at(2) and nodes["node1"]["status"] == "unhealthy"
    assert nodes["node1"]["checked_by"]["limit"] == "node1"
    for host, status in (("node2", "unhealthy"), ("node3", "healthy")):
        assert nodes[host]["checked_at"] == T0 and nodes[host]["status"] == status
        assert nodes[host]["checked_by"]["at"] == T0 and nodes[host]["age_hours"] == 3
    assert report["last_run"]["checked"] == ["node1"] and report["last_run"]["limit"] == "node1"
    assert [r["at"] for r in report["recent_runs"]] == [at(2), T0]
    assert state["nodes"]["node1"]["checked"]["at"] == T0  # merge returned a new state


def test_a_fresh_node_joins_the_report_beside_the_fleet():
    state = fleet.merge(first_state(), run(1, limit="fresh1"), {"fresh1": result(verdict(), profile="pcie-a100-4gpu")}, [*HOSTS, "fresh1"])
    nodes = by_host(fleet.build_report(state, at(1), 24))
    assert set(nodes) == {*HOSTS, "fresh1"}
    assert nodes["fresh1"]["profile"] == "pcie-a100-4gpu" and nodes["node3"]["checked_at"] == T0


def test_a_node_that_failed_before_the_checks_is_not_checked_and_keeps_its_last_verdict():
    reason = "it failed or was unreachable before the health checks"
    state = fleet.merge(first_state(), run(1), {"node3": result(None, reason=reason), "node1": result(verdict())}, HOSTS)
    node = by_host(valid(fleet.build_report(state, at(1), 24)))["node3"]
    assert node["status"] == "not_checked"
    assert reason in node["status_reason"] and T0 in node["status_reason"]
    assert node["healthy"] is True and node["checked_at"] == T0  # the last verdict, kept and dated
    assert node["last_attempt"]["reached_checks"] is False and node["last_attempt"]["at"] == at(1)


def test_a_node_never_checked_is_not_checked_with_no_verdict():
    state = fleet.merge(fleet.empty_state(), run(0), {"node1": result(None, reason="the health checks were skipped on it")}, HOSTS)
    node = by_host(valid(fleet.build_report(state, at(0), 24)))["node1"]
    assert node["status"] == "not_checked" and node["healthy"] is None and node["checked_at"] is None
    assert "no verdict yet" in node["status_reason"]


@pytest.mark.parametrize(
    ("hours", "window", "status"), [(23.9, 24, "healthy"), (24.1, 24, "stale"), (2.5, 2, "stale"), (1.5, 2, "healthy")]
)
def test_a_node_no_run_reached_for_the_window_is_stale(hours, window, status):
    state = fleet.merge(first_state(), run(hours, limit="node1"), {"node1": result(verdict())}, HOSTS)
    nodes = by_host(valid(fleet.build_report(state, at(hours), window)))
    assert nodes["node3"]["status"] == status
    assert nodes["node1"]["status"] == "healthy"  # checked just now
    if status == "stale":
        assert "stale after %s h" % window in nodes["node3"]["status_reason"] and T0 in nodes["node3"]["status_reason"]
        assert nodes["node3"]["healthy"] is True  # its last verdict is still shown, not counted healthy
        assert fleet.build_report(state, at(hours), window)["summary"]["healthy"] == 1


def test_a_node_gone_from_the_inventory_is_removed_not_healthy_and_comes_back_when_listed():
    state = fleet.merge(first_state(), run(1), {"node1": result(verdict())}, ["node1", "node2"])
    report = valid(fleet.build_report(state, at(1), 24))
    node3 = by_host(report)["node3"]
    assert node3["status"] == "removed" and node3["removed_at"] == at(1) and node3["healthy"] is True
    assert report["summary"] == {"unhealthy": 1, "not_checked": 0, "stale": 0, "removed": 1, "healthy": 1, "total": 3}
    # still gone in a later run: removed since the first run that lacked it
    state = fleet.merge(state, run(2), {"node1": result(verdict())}, ["node1", "node2"])
    assert by_host(fleet.build_report(state, at(2), 24))["node3"]["removed_at"] == at(1)
    # back in the inventory (not checked by this run): listed again, with its old verdict
    state = fleet.merge(state, run(3, limit="node1"), {"node1": result(verdict())}, HOSTS)
    node3 = by_host(fleet.build_report(state, at(3), 24))["node3"]
    assert node3["status"] == "healthy" and node3["removed_at"] is None and node3["listed_at"] == at(3)


def test_a_slice_of_the_inventory_confirms_nodes_but_removes_none():
    # AWX slice 1 of 2 sees node1 and node3 only; node2 is in the other slice, not removed
    state = fleet.merge(
        first_state(), run(1), {"node1": result(verdict()), "node3": result(verdict())}, ["node1", "node3"], partial_inventory=True
    )
    assert by_host(fleet.build_report(state, at(1), 24))["node2"]["status"] == "unhealthy"
    state = fleet.merge(state, run(1), {"node2": result(verdict())}, ["node2"], partial_inventory=True)
    assert {n["host"]: n["status"] for n in fleet.build_report(state, at(1), 24)["nodes"]} == dict.fromkeys(HOSTS, "healthy")


def test_check_mode_verdicts_are_marked():
    state = fleet.merge(first_state(), run(1, check_mode=True), {"node1": result(verdict(down=[2]))}, HOSTS)
    node = by_host(fleet.build_report(state, at(1), 24))["node1"]
    assert node["checked_by"]["check_mode"] is True
    assert "(check mode)" in fleet.render_markdown(fleet.build_report(state, at(1), 24))


def test_only_the_last_runs_are_kept():
    state = first_state()
    for i in range(1, 30):
        state = fleet.merge(state, run(i), {"node1": result(verdict())}, HOSTS)
    report = fleet.build_report(state, at(30), 24)
    assert len(report["recent_runs"]) == fleet.RUNS_KEPT and report["recent_runs"][0]["at"] == at(29)
    assert report["recent_runs"][0]["checked"] == 1  # a count in the history, the names only in last_run


def test_evidence_is_kept_to_its_tail():
    finding = health.not_run(
        "pfc", "ethtool", "ethtool -S failed", {"command": "ethtool -S x", "rc": 94, "stdout": "x" * 10000, "stderr": ""}
    )
    state = fleet.merge(fleet.empty_state(), run(0), {"node1": result(verdict(not_run=[finding]))}, ["node1"])
    kept = state["nodes"]["node1"]["health"]["findings"][0]["evidence"]
    assert len(kept["stdout"]) == fleet.EVIDENCE_TAIL + 3 and kept["stdout"].startswith("...") and kept["rc"] == 94


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ({"healthy": "yes", "findings": []}, "node1: rackforge_health must be a mapping with healthy"),
        ({"healthy": False, "findings": [{"message": "x"}]}, "node1: every finding needs check and message"),
        ("UNHEALTHY", "node1: rackforge_health must be a mapping"),
    ],
)
def test_a_malformed_verdict_is_refused_naming_the_host(bad, words):
    with pytest.raises(fleet.FleetError, match=re.escape(words)):
        fleet.merge(fleet.empty_state(), run(0), {"node1": result(bad)}, ["node1"])


@pytest.mark.parametrize(
    ("state", "words"),
    [
        ([], "is not a JSON object"),
        ({"version": 99, "nodes": {}, "runs": []}, "has version 99; this rackforge reads version 1"),
        ({"version": 1, "nodes": [], "runs": []}, "lacks its nodes"),
        ({"version": 1, "nodes": {"a": {"host": "b"}}, "runs": []}, "node 'a' is malformed"),
    ],
)
def test_a_state_it_cannot_use_is_refused_with_its_problem(state, words):
    with pytest.raises(fleet.FleetError, match=re.escape(words)):
        fleet.check_state(state, "fleet-state.json")


def test_bad_stale_window_is_refused():
    for bad in (0, -1, "24", True):
        with pytest.raises(fleet.FleetError, match="stale_after_hours must be a positive number"):
            fleet.build_report(first_state(), at(0), bad)


# ----------------------------------------------------------------------------- the state from a report
def test_a_report_of_the_template_era_seeds_the_state():
    old = {
        "nodes": [
            {"host": "node1", "profile": "hgx-h100-8gpu", "checked": True, "health": verdict()},
            {"host": "node2", "profile": "hgx-h100-8gpu", "checked": False, "health": None},
        ]
    }
    state = fleet.state_from_report(old, T0)
    state = fleet.merge(state, run(1, limit="node3"), {"node3": result(verdict())}, HOSTS)
    nodes = by_host(valid(fleet.build_report(state, at(1), 24)))
    assert nodes["node1"]["status"] == "healthy" and nodes["node1"]["checked_at"] == T0
    assert nodes["node2"]["status"] == "not_checked" and nodes["node3"]["checked_at"] == at(1)


def test_a_report_of_this_version_rebuilds_the_state_it_came_from():
    state = fleet.merge(first_state(), run(1), {"node1": result(verdict(), acceptance={"passed": True})}, ["node1", "node2"])
    report = fleet.build_report(state, at(2), 24)
    rebuilt = fleet.state_from_report(json.loads(fleet.render_json(report)), at(5))
    assert fleet.build_report(rebuilt, at(2), 24) == report
    with pytest.raises(fleet.FleetError, match="report has version 7"):
        fleet.state_from_report(dict(report, version=7), at(5))


# ----------------------------------------------------------------------------- order and counts
def test_nodes_are_sorted_by_severity_and_counted_once():
    results = {
        "a-healthy": result(verdict()),
        "b-two-faults": result(verdict(inactive={1: [2]}, down=[4])),
        "c-one-fault": result(verdict(pfc_off=[0])),
        "d-unreached": result(None, reason="it failed or was unreachable before the health checks"),
        "e-old": result(verdict(inactive={0: [1]})),
        "f-gone": result(verdict()),
    }
    state = fleet.merge(fleet.empty_state(), run(0), {h: results[h] for h in ("e-old", "f-gone")}, list(results))
    state = fleet.merge(state, run(30), {h: r for h, r in results.items() if h not in ("e-old", "f-gone")}, list(results)[:-1])
    report = valid(fleet.build_report(state, at(30), 24))
    assert [(n["host"], n["status"]) for n in report["nodes"]] == [
        ("b-two-faults", "unhealthy"),
        ("c-one-fault", "unhealthy"),
        ("d-unreached", "not_checked"),
        ("e-old", "stale"),
        ("f-gone", "removed"),
        ("a-healthy", "healthy"),
    ]
    assert report["summary"] == {"unhealthy": 2, "not_checked": 1, "stale": 1, "removed": 1, "healthy": 1, "total": 6}
