"""The fleet report's state and report data (pure functions, no I/O): every node's last health verdict,
merged run by run, and the public report built from it. Import these names from
ansible.module_utils.rackforge.fleet (which re-exports them); the renderers are fleet_text (JSON,
Markdown) and fleet_html.

State (fleet-state.json, internal, STATE_VERSION): {"version", "last_run", "runs": [...],
"nodes": {host: node}} where a node holds the last verdict (`health`, the rackforge_health fact as
the node reported it), the run that produced it (`checked`), the last run that targeted it
(`attempt`: did it reach the checks, and why not), when an inventory last listed it (`listed_at`)
and when it disappeared from one (`removed_at`). Runs merge only the nodes they touched: a
`--limit` run, one AWX slice or a fresh node's run never drops the others.

Report (fleet.json, public, REPORT_VERSION, docs/fleet-schema.json): the state as of one moment,
with each node's status (STATUSES), nodes sorted by severity, summary counts, and each finding's
remedy (REMEDIES).
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone

# what the operator does about each finding, by check name (re-exported by fleet.py)
from ansible.module_utils.rackforge.remedies import NOT_RUN_REMEDY, REMEDIES, UNKNOWN_REMEDY

STATE_VERSION = 1
REPORT_VERSION = 1
REPORT_KIND = "rackforge-fleet-report"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
RUNS_KEPT = 20
EVIDENCE_TAIL = 2000  # characters of a failed command's stdout / stderr kept in the report

# most severe first; a node has exactly one
STATUSES = ("unhealthy", "not_checked", "stale", "removed", "healthy")
STATUS_WORDS = {
    "unhealthy": "UNHEALTHY",
    "not_checked": "NOT CHECKED",
    "stale": "STALE",
    "removed": "REMOVED",
    "healthy": "healthy",
}


class FleetError(ValueError):
    """State or input the fleet report cannot use (names the file's problem)."""


# ----------------------------------------------------------------------------- time
def timestamp(moment):
    """A datetime as the report writes it: UTC, seconds, ISO 8601 with Z."""
    return moment.astimezone(timezone.utc).strftime(TIME_FORMAT)


def parse_time(text):
    try:
        return datetime.strptime(text, TIME_FORMAT).replace(tzinfo=timezone.utc)
    except (TypeError, ValueError):
        raise FleetError("not a report time (%s): %r" % (TIME_FORMAT, text)) from None


def hours_between(earlier, later):
    """Hours from one report time to a later one (0 when a clock put them the other way round)."""
    return max(0.0, round((parse_time(later) - parse_time(earlier)).total_seconds() / 3600.0, 2))


def age_words(hours):
    if hours is None:
        return "never"
    if hours < 1:
        return "%d min ago" % max(0, round(hours * 60))
    if hours < 48:
        return "%.1f h ago" % hours
    return "%.1f d ago" % (hours / 24.0)


# ----------------------------------------------------------------------------- remedies
def remedy(finding):
    """The remedy for one finding: REMEDIES by check name; a check that could not run and has no
    entry gets the generic one naming the tool from its evidence."""
    check = finding.get("check") or ""
    if check in REMEDIES:
        return REMEDIES[check]
    if check.endswith("_not_run") or finding.get("not_run"):
        command = ((finding.get("evidence") or {}).get("command") or "").split()
        tool = command[0].rsplit("/", 1)[-1] if command else finding.get("component") or "the tool it needs"
        return NOT_RUN_REMEDY % tool
    return UNKNOWN_REMEDY % (check or "(none)")


# ----------------------------------------------------------------------------- state
def empty_state():
    return {"version": STATE_VERSION, "last_run": None, "runs": [], "nodes": {}}


def check_state(state, where="fleet state"):
    """The state as read from disk, or FleetError naming what is wrong with it."""
    if not isinstance(state, dict):
        raise FleetError("%s is not a JSON object" % where)
    if state.get("version") != STATE_VERSION:
        raise FleetError("%s has version %r; this rackforge reads version %d" % (where, state.get("version"), STATE_VERSION))
    if not isinstance(state.get("nodes"), dict) or not isinstance(state.get("runs"), list):
        raise FleetError("%s lacks its nodes (an object) or runs (a list)" % where)
    for host, node in state["nodes"].items():
        if not isinstance(node, dict) or node.get("host") != host:
            raise FleetError("%s: node %r is malformed" % (where, host))
    return state


def state_from_report(report, at):
    """Rebuild the state from a fleet.json when the state file is missing: from a report of this
    version everything it holds; from a report of the template era ({"nodes": [{host, profile,
    checked, health}]}, no times) its nodes with `at` (the file's time) as their check time, so
    the first run after an upgrade keeps the fleet it reported."""
    state = empty_state()
    if not isinstance(report, dict):
        return state
    if report.get("kind") == REPORT_KIND:
        if report.get("version") != REPORT_VERSION:
            raise FleetError("the report has version %r; this rackforge reads version %d" % (report.get("version"), REPORT_VERSION))
        for entry in report.get("nodes") or []:
            health = copy.deepcopy(entry.get("health"))
            for finding in (health or {}).get("findings") or []:
                finding.pop("remedy", None)
            state["nodes"][entry["host"]] = {
                "host": entry["host"],
                "profile": entry.get("profile"),
                "health": health,
                "checked": entry.get("checked_by"),
                "attempt": entry.get("last_attempt"),
                "acceptance": entry.get("acceptance"),
                "listed_at": entry.get("listed_at"),
                "removed_at": entry.get("removed_at"),
            }
        state["runs"] = list(reversed(report.get("recent_runs") or []))
        state["last_run"] = report.get("last_run")
        return state
    run = {"at": at, "playbook": None, "play": None, "check_mode": False, "limit": None}
    for entry in report.get("nodes") or []:
        if not isinstance(entry, dict) or not entry.get("host"):
            continue
        health = entry.get("health") if isinstance(entry.get("health"), dict) else None
        state["nodes"][entry["host"]] = {
            "host": entry["host"],
            "profile": entry.get("profile"),
            "health": health,
            "checked": dict(run) if health else None,
            "attempt": dict(run, reached_checks=health is not None, reason=None if health else "not checked (failed earlier)"),
            "acceptance": None,
            "listed_at": at,
            "removed_at": None,
        }
    return state


def _tail(text):
    text = "" if text is None else str(text)
    return text if len(text) <= EVIDENCE_TAIL else "..." + text[-EVIDENCE_TAIL:]


def _clean_health(health):
    """The verdict as stored: the fact itself, with evidence output cut to its tail."""
    health = copy.deepcopy(health)
    for finding in health.get("findings") or []:
        evidence = finding.get("evidence")
        if isinstance(evidence, dict):
            for key in ("stdout", "stderr"):
                if key in evidence:
                    evidence[key] = _tail(evidence[key])
    return health


def check_health(host, health):
    """A rackforge_health fact as the report needs it, or FleetError naming the host."""
    if not isinstance(health, dict) or not isinstance(health.get("healthy"), bool) or not isinstance(health.get("findings"), list):
        raise FleetError("%s: rackforge_health must be a mapping with healthy (true/false) and findings (a list), got %r" % (host, health))
    for finding in health["findings"]:
        if not isinstance(finding, dict) or not finding.get("check") or "message" not in finding:
            raise FleetError("%s: every finding needs check and message, got %r" % (host, finding))
    return health


def merge(state, run, results, inventory, partial_inventory=False):
    """The state after one run (a new dict; `state` is left as it was).

    run: {"at", "playbook", "play", "check_mode", "limit", "controller", "awx_job_id"} of this run.
    results: {host: {"health": rackforge_health or None, "profile", "acceptance", "reason"}} for
      the nodes this run targeted; health None = it did not reach the checks (reason says why),
      and the node keeps its previous verdict, shown as not checked.
    inventory: every host name this run's inventory holds (a --limit does not shrink it). A node
      of the state that it lacks is removed (kept, with its last verdict, as removed); back in an
      inventory, it is listed again.
    partial_inventory: the run sees only part of the inventory (an AWX slice): its listing
      confirms nodes but removes none.
    """
    state = copy.deepcopy(check_state(state))
    at = run["at"]
    nodes = state["nodes"]
    for host in sorted(results):
        result = results[host]
        node = nodes.setdefault(
            host,
            {"host": host, "profile": None, "health": None, "checked": None, "attempt": None, "acceptance": None},
        )
        health = result.get("health")
        if result.get("profile") is not None:
            node["profile"] = result["profile"]
        if health is not None:
            node["health"] = _clean_health(check_health(host, health))
            node["checked"] = dict(run)
        node["attempt"] = dict(run, reached_checks=health is not None, reason=None if health is not None else result.get("reason"))
        if result.get("acceptance") is not None:
            node["acceptance"] = {"at": at, "result": copy.deepcopy(result["acceptance"])}
        node["listed_at"] = at
        node["removed_at"] = None
    listed = set(inventory) | set(results)
    for host, node in nodes.items():
        if host in listed:
            node["listed_at"] = at
            node["removed_at"] = None
        elif not partial_inventory and not node.get("removed_at"):
            node["removed_at"] = at
    checked = sorted(h for h, r in results.items() if r.get("health") is not None)
    not_reached = sorted(h for h, r in results.items() if r.get("health") is None)
    state["last_run"] = dict(run, checked=checked, not_reached=not_reached)
    state["runs"] = [*state["runs"], dict(run, checked=len(checked), not_reached=len(not_reached))][-RUNS_KEPT:]
    return state


# ----------------------------------------------------------------------------- report
def node_status(node, now, stale_after_hours):
    """(status, reason) of one state node at time `now` (a report time string)."""
    attempt = node.get("attempt") or node.get("checked")
    health = node.get("health")
    if node.get("removed_at"):
        return "removed", "not in the inventory of the run at %s; its last verdict is kept for reference" % node["removed_at"]
    if attempt is None:
        return "not_checked", "no run has reached this node"
    seen_hours = hours_between(attempt["at"], now)
    if seen_hours > stale_after_hours:
        return "stale", "no run has reached this node for %s (last at %s; stale after %s h)" % (
            age_words(seen_hours).replace(" ago", ""),
            attempt["at"],
            stale_after_hours,
        )
    if not attempt.get("reached_checks", True) or health is None:
        why = attempt.get("reason") or "it failed before the health checks"
        if health is None:
            return "not_checked", "not checked in the run at %s: %s; no verdict yet" % (attempt["at"], why)
        return "not_checked", "not checked in the run at %s: %s; last verdict from %s" % (attempt["at"], why, node["checked"]["at"])
    if health["healthy"]:
        return "healthy", "healthy in the run at %s" % node["checked"]["at"]
    return "unhealthy", "%d finding(s) in the run at %s" % (len(health["findings"]), node["checked"]["at"])


def _report_health(health):
    if health is None:
        return None
    health = copy.deepcopy(health)
    for key in ("gpus", "fabric", "ports"):
        health.setdefault(key, [])
    health.setdefault("driver_version", None)
    for finding in health["findings"]:
        finding["not_run"] = bool(finding.get("not_run"))
        finding["remedy"] = remedy(finding)
    return health


def _severity(node):
    health = node["health"]
    verdict = 2 if health is None else (1 if health["healthy"] else 0)
    return (STATUSES.index(node["status"]), verdict, -len(health["findings"]) if health else 0, node["host"])


def build_report(state, now, stale_after_hours):
    """The public report (fleet.json, docs/fleet-schema.json) of the state as of `now`."""
    check_state(state)
    if not isinstance(stale_after_hours, (int, float)) or isinstance(stale_after_hours, bool) or stale_after_hours <= 0:
        raise FleetError("stale_after_hours must be a positive number of hours, got %r" % (stale_after_hours,))
    nodes = []
    for host, node in state["nodes"].items():
        status, reason = node_status(node, now, stale_after_hours)
        checked = node.get("checked")
        attempt = node.get("attempt")
        health = _report_health(node.get("health"))
        nodes.append(
            {
                "host": host,
                "status": status,
                "status_reason": reason,
                "profile": node.get("profile"),
                "healthy": None if health is None else health["healthy"],
                "driver_version": None if health is None else health["driver_version"],
                "checked_at": checked["at"] if checked else None,
                "age_hours": hours_between(checked["at"], now) if checked else None,
                "checked_by": checked,
                "last_attempt": attempt,
                "listed_at": node.get("listed_at"),
                "removed_at": node.get("removed_at"),
                "health": health,
                "acceptance": node.get("acceptance"),
            }
        )
    nodes.sort(key=_severity)
    summary = dict.fromkeys(STATUSES, 0)
    for node in nodes:
        summary[node["status"]] += 1
    summary["total"] = len(nodes)
    return {
        "kind": REPORT_KIND,
        "version": REPORT_VERSION,
        "generated_at": now,
        "stale_after_hours": stale_after_hours,
        "last_run": state.get("last_run"),
        "recent_runs": list(reversed(state.get("runs") or [])),
        "summary": summary,
        "nodes": nodes,
    }
