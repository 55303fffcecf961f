"""The fleet report: a controller-side state of every node's last health verdict, merged run by run,
and the JSON / Markdown / HTML reports rendered from it (pure functions, no I/O; the
rackforge_fleet_report action plugin reads and writes the files).

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
import html
import json
import re
from datetime import datetime, timezone

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

# What the operator does about each finding, by its check name (every check the health modules,
# module_utils/rackforge/health.py and roles/health_checks/tasks/checks.yml can report:
# tests/unit/test_fleet.py greps them and fails on one without an entry). "<check>_not_run" is a
# check that could not run; its evidence names the tool and what it printed.
REMEDIES = {
    "driver": "Install the pinned NVIDIA driver (playbooks/gpu.yml, role nvidia_driver); after a driver change "
    "nvidia-smi reports a driver/library version mismatch until the node reboots (nvidia_driver_reboot_ok).",
    "gpu_count": "A GPU is missing from nvidia-smi: look for Xid 79 (fallen off the bus) in the kernel log and at lspci; "
    "reseat the GPU or RMA the baseboard. The health gate keeps the node out of the cluster until it passes.",
    "nvlink_inactive": "NVLink down: reseat / RMA the GPU baseboard (check the kernel log for Xid 74 first). "
    "The health gate keeps the node out of the cluster (cordoned during an upgrade) until it passes.",
    "nvlink_all_inactive": "Every NVLink of this GPU is down: check nvidia-fabricmanager and that the GPU is not in reset, "
    "then reseat / RMA the GPU baseboard. The node stays out of the cluster until it passes.",
    "nvlink_unavailable": "nvidia-smi shows no NVLink state for this GPU (MIG enabled, or a model without NVLink): "
    "disable MIG (nvidia-smi -mig 0, then reset the GPU) or correct the node's hardware profile.",
    "nvlink_speed": "A link trained below its speed: reseat the GPU / baseboard; RMA it when the link stays slow after a "
    "reset. Check that the hardware profile's nvlink_speed_gbps is this model's.",
    "nvlink_errors": "NVLink error counters are rising: watch nvidia-smi nvlink -e; reseat / RMA the GPU baseboard if they "
    "keep rising; after the repair take a new baseline (health_checks_reset_baseline=true).",
    "nvlink_p2p": "nvidia-smi topo -p2p n does not show NVLink P2P between these GPUs: check the NVSwitch fabric and "
    "nvidia-fabricmanager, then reseat / RMA the baseboard.",
    "fabricmanager": "Start nvidia-fabricmanager (systemctl status / journalctl -u nvidia-fabricmanager); its version must "
    "equal the driver's (role nvidia_driver pins and holds both).",
    "fabric": "NVSwitch fabric not trained: restart nvidia-fabricmanager and read its log; a fabric still not "
    "Completed/Success after that needs a node reboot, then an RMA of the baseboard.",
    "rdma_port_state": "RDMA port down: check the cable / transceiver and the switch port (admin state, errors); ibstat "
    "shows the physical state. The node stays out of the cluster until the port is Active/LinkUp.",
    "rdma_rate": "The port trained below its rate: check the cable / transceiver type and the switch port's speed setting.",
    "rdma_port_count": "Fewer RDMA ports than the hardware profile expects: check that every NIC is seated and listed "
    "(lspci, ibstat), its firmware and the mlx5 driver; correct the profile if this node differs.",
    "roce_mtu": "RoCE active MTU below 4096: set the netdev MTU to at least 4200 and check the switch port's MTU.",
    "roce_gid": "No RoCE v2 GID with an IPv4 address: give the RDMA netdev its fabric address and check that the link is up "
    "(RDMA-CM cannot use the port without one).",
    "pfc": "PFC off on the lossless priority: rerun role rdma_roce (playbooks/network.yml) and check the switch port's "
    "DCB / PFC configuration for the same priority.",
    "pause_storm": "The NIC's pause-storm watchdog fired: find the receiver or switch port flooding PFC pause frames "
    "(a stuck host, the switch's PFC watchdog); take a new baseline after the fix (health_checks_reset_baseline=true).",
    "rdma_errors": "Port error counters are rising: check the cable / transceiver and the switch port's counters; replace "
    "the optic if symbol / CRC errors keep rising; take a new baseline after the repair (health_checks_reset_baseline=true).",
    "rdma_not_run": "The RDMA checks could not run: install infiniband-diags (ibstat) and rdma-core, load the RDMA driver "
    "(mlx5_ib), and read the command's output below.",
    "roce_mtu_not_run": "The RoCE MTU check could not run: install ibverbs-utils (ibv_devinfo) and read the command's output "
    "below; ibv_devinfo needs the RDMA driver loaded.",
    "roce_gid_not_run": "The RoCE GID check could not run: install show_gids (MLNX_OFED / DOCA) or fix what its output below says.",
    "nvlink_not_run": "The NVLink checks could not run: nvidia-smi is missing or failed (its output is below). Install the "
    "pinned driver's nvidia-smi (role nvidia_driver); rc 9 means the driver is installed but not loaded: load it or reboot.",
    "nvlink_errors_not_run": "The NVLink error counters could not be read (nvidia-smi nvlink -e failed, output below): fix "
    "what it printed; on a driver branch without error counters, this check cannot run.",
    "nvlink_p2p_not_run": "The NVLink P2P check could not run (nvidia-smi topo -p2p n failed, output below): fix what it "
    "printed, or set health_checks_check_topology=false on a system without the topology query.",
    "fabric_not_run": "The NVSwitch fabric state could not be read (nvidia-smi -q failed, output below): fix what it printed; "
    "the fabric is unknown until it runs.",
    "pfc_not_run": "The PFC and port counter checks could not run: install ethtool or fix what `ethtool -S` printed below.",
}
NOT_RUN_REMEDY = "The check could not run: install or fix %s (the command and its output are below), then rerun playbooks/health_check.yml."
UNKNOWN_REMEDY = "No remedy is recorded for check %s: read its message; add one to REMEDIES in module_utils/rackforge/fleet.py."


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


def json_chunks(value, indent=2):
    """A JSON document in pieces, as json.dump would write them (the plugin streams the files it
    writes: a report is never held twice in memory, and the write takes as long as the encoding)."""
    yield from json.JSONEncoder(indent=indent, separators=(",", ": ") if indent else (",", ":")).iterencode(value)
    yield "\n"


def render_json(report):
    return "".join(json_chunks(report))


def _links(health):
    gpus = health["gpus"] if health else []
    return sum(g.get("active_links", 0) for g in gpus), sum(g.get("expected_links", 0) for g in gpus)


def _ports_up(health):
    ports = health["ports"] if health else []
    return len([p for p in ports if p.get("state") == "Active" and p.get("physical_state", "LinkUp") == "LinkUp"]), len(ports)


def _run_words(run):
    if not run:
        return "-"
    words = run.get("playbook") or "a run"
    if run.get("limit"):
        words += " --limit %s" % run["limit"]
    if run.get("check_mode"):
        words += " (check mode)"
    return words


def _not_run(report):
    return [(node, f) for node in report["nodes"] for f in ((node["health"] or {}).get("findings") or []) if f["not_run"]]


def _shown(value):
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


# ----------------------------------------------------------------------------- Markdown
def _md(value):
    """A Markdown table cell: no line breaks, pipes escaped, HTML neutralised."""
    text = " ".join(_shown(value).split())
    return html.escape(text, quote=False).replace("|", "\\|").replace("`", "'")


def render_markdown(report):
    s = report["summary"]
    lines = [
        "# rackforge fleet report",
        "",
        "Generated %s; last run: %s at %s. Nodes no run has reached for %s h are stale."
        % (
            report["generated_at"],
            _md(_run_words(report["last_run"])),
            (report["last_run"] or {}).get("at", "-"),
            report["stale_after_hours"],
        ),
        "",
        "**%d unhealthy, %d not checked, %d stale, %d removed, %d healthy** (%d nodes)"
        % (s["unhealthy"], s["not_checked"], s["stale"], s["removed"], s["healthy"], s["total"]),
        "",
        "| node | status | profile | driver | GPUs | NVLinks active/expected | RDMA ports up | checked | by |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n in report["nodes"]:
        h = n["health"]
        links, ports = _links(h), _ports_up(h)
        lines.append(
            "| %s | %s | %s | %s | %s | %s | %s | %s | %s |"
            % (
                _md(n["host"]),
                STATUS_WORDS[n["status"]],
                _md(n["profile"]),
                _md(n["driver_version"]),
                len(h["gpus"]) if h else "-",
                "%d/%d" % links if h else "-",
                "%d/%d" % ports if h else "-",
                _md("%s (%s)" % (n["checked_at"], age_words(n["age_hours"])) if n["checked_at"] else "never"),
                _md(_run_words(n["checked_by"])),
            )
        )
    lines += ["", "## Findings and remedies", ""]
    any_finding = False
    for n in report["nodes"]:
        for f in (n["health"] or {}).get("findings") or []:
            any_finding = True
            stale = "" if n["status"] == "unhealthy" else " (%s, from %s)" % (STATUS_WORDS[n["status"]], n["checked_at"])
            lines.append(
                "- **%s**%s `%s` %s  \n  remedy: %s" % (_md(n["host"]), stale, _md(f["check"]), _md(f["message"]), _md(f["remedy"]))
            )
    if not any_finding:
        lines.append("None.")
    lines += ["", "## Checks that could not run", ""]
    rows = _not_run(report)
    for n, f in rows:
        ev = f.get("evidence") or {}
        cmd = " (`%s` rc %s)" % (_md(ev["command"]), _md(ev.get("rc"))) if ev.get("command") else ""
        lines.append("- **%s** `%s` %s%s" % (_md(n["host"]), _md(f["check"]), _md(f.get("observed")), cmd))
    if not rows:
        lines.append("None.")
    lines += ["", "## Not checked, stale and removed nodes", ""]
    others = [n for n in report["nodes"] if n["status"] in ("not_checked", "stale", "removed")]
    for n in others:
        lines.append("- **%s** %s: %s" % (_md(n["host"]), STATUS_WORDS[n["status"]], _md(n["status_reason"])))
    if not others:
        lines.append("None.")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- HTML
CSS = """
body{font-family:system-ui,-apple-system,"DejaVu Sans",sans-serif;margin:1.5em 2em;color:#1b1b1b;line-height:1.35}
h1{margin:0 0 .2em}h2{margin:1.6em 0 .4em;border-bottom:1px solid #ccc}h3{margin:1.1em 0 .3em}
table{border-collapse:collapse;margin:.4em 0 1em}td,th{border:1px solid #bbb;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f0f0f0}pre{margin:0;white-space:pre-wrap;max-width:70em;font-size:85%}
.counts{display:flex;flex-wrap:wrap;gap:.6em;list-style:none;padding:0}
.counts li{padding:.5em 1em;border-radius:4px;border:1px solid #999;font-size:110%}
.counts .n{font-size:180%;font-weight:bold;display:block}
.s-unhealthy{background:#b00020;color:#fff}.s-not_checked{background:#e65100;color:#fff}
.s-stale{background:#ffd54f;color:#000}.s-removed{background:#9e9e9e;color:#000}.s-healthy{background:#2e7d32;color:#fff}
.s-total{background:#fff}
.badge{padding:1px 8px;border-radius:3px;font-size:80%;vertical-align:middle}
.ok{background:#d9f2d9}.bad{background:#f8d0d0}.na{background:#eee}
.grid td{width:1.6em;height:1.4em;padding:0;text-align:center;font-size:70%}
.grid td.words{width:auto;text-align:left;padding:0 .5em;white-space:nowrap;font-size:85%}
.wrong{min-width:20em}.by{overflow-wrap:anywhere;min-width:11em}.wrong ul{margin:0;padding-left:1.1em}.wrong li{margin-bottom:.3em}
.wrong .remedy{display:block;padding:1px 4px;font-size:90%}
.remedy{background:#fff8e1}.meta{color:#444}.nowrap{white-space:nowrap}
"""


CSP = "default-src 'none'; style-src 'unsafe-inline'"


def _e(value):
    return html.escape(_shown(value), quote=True)


def _anchor(host):
    return "node-" + re.sub(r"[^A-Za-z0-9_.-]", "-", host)


def _badge(status):
    return '<span class="badge s-%s">%s</span>' % (status, STATUS_WORDS[status])


def _evidence_html(evidence):
    if not evidence:
        return "-"
    out = (evidence.get("stderr") or "") + (evidence.get("stdout") or "")
    return "<b>command</b> <code>%s</code> <b>rc</b> %s<pre>%s</pre>" % (
        _e(evidence.get("command")),
        _e(evidence.get("rc")),
        html.escape(out.strip() or "(no output)"),
    )


def _value_html(value, depth=0):
    """Any JSON value as nested tables (acceptance results have no fixed shape yet)."""
    if isinstance(value, dict) and value and depth < 4:
        rows = "".join("<tr><th>%s</th><td>%s</td></tr>" % (_e(k), _value_html(v, depth + 1)) for k, v in value.items())
        return "<table>%s</table>" % rows
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) and depth < 4:
        keys = []
        for v in value:
            keys += [k for k in v if k not in keys]
        head = "".join("<th>%s</th>" % _e(k) for k in keys)
        body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % _value_html(v.get(k), depth + 1) for k in keys) for v in value)
        return "<table><tr>%s</tr>%s</table>" % (head, body)
    if isinstance(value, bool):
        return '<span class="%s">%s</span>' % ("ok" if value else "bad", "yes" if value else "NO")
    return _e(value)


def _findings_html(node):
    findings = (node["health"] or {}).get("findings") or []
    if not findings:
        return "<p>No findings.</p>" if node["health"] else ""
    rows = [
        "<table class='findings'><tr><th>check</th><th>component</th><th>what is wrong</th><th>expected</th>"
        "<th>observed</th><th>remedy</th></tr>"
    ]
    for f in findings:
        rows.append(
            '<tr class="finding" data-check="%s"><td><code>%s</code>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>'
            '<td class="remedy">%s</td></tr>'
            % (
                _e(f["check"]),
                _e(f["check"]),
                " (could not run)" if f["not_run"] else "",
                _e(f.get("component")),
                _e(f["message"]),
                _e(f.get("expected")),
                _e(f.get("observed")),
                _e(f["remedy"]),
            )
        )
        if f.get("evidence"):
            rows.append('<tr class="evidence"><td>evidence</td><td colspan="5">%s</td></tr>' % _evidence_html(f["evidence"]))
    rows.append("</table>")
    return "".join(rows)


def _nvlink_html(health):
    gpus = health["gpus"] if health else []
    if not gpus:
        return ""
    rows = ["<h3>NVLink (one cell per link: green active, red inactive)</h3><table class='grid'>"]
    for g in gpus:
        inactive = list(g.get("inactive_links") or [])
        width = max(int(g.get("expected_links") or 0), int(g.get("active_links") or 0) + len(inactive))
        cells = "".join(
            '<td class="%s" title="link %d%s">%d</td>'
            % ("bad" if (link in inactive or g.get("all_inactive")) else "ok", link, " inactive" if link in inactive else "", link)
            for link in range(width)
        )
        words = "%s/%s active" % (g.get("active_links"), g.get("expected_links"))
        if inactive:
            words += ", inactive: %s" % ",".join(str(x) for x in inactive)
        rows.append("<tr><th>GPU %s</th>%s<td class='words'>%s</td></tr>" % (_e(g.get("index")), cells, _e(words)))
    rows.append("</table>")
    return "".join(rows)


def _ports_html(health):
    ports = health["ports"] if health else []
    if not ports:
        return ""
    rows = [
        "<h3>RDMA ports</h3><table class='ports'><tr><th>CA/port</th><th>netdev</th><th>state</th><th>rate</th>"
        "<th>active MTU</th><th>PFC priorities</th><th>counters</th><th>verdict</th></tr>"
    ]
    for p in ports:
        counters = ", ".join("%s=%s" % (k, v) for k, v in sorted((p.get("counters") or {}).items()) if v)
        healthy = p.get("healthy", True)
        rows.append(
            '<tr class="%s"><td>%s/%s</td><td>%s</td><td>%s/%s</td><td>%s Gb/s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>'
            % (
                "ok" if healthy else "bad",
                _e(p.get("ca")),
                _e(p.get("port")),
                _e(p.get("netdev")),
                _e(p.get("state")),
                _e(p.get("physical_state")),
                _e(p.get("rate")),
                _e(p.get("active_mtu")),
                _e(p.get("pfc_priorities")),
                _e(counters or "-"),
                "ok" if healthy else "FAULT",
            )
        )
    rows.append("</table>")
    return "".join(rows)


def _wrong_html(n, shown=3):
    """The node table's summary: an unhealthy node's first findings, else why it has its status."""
    if n["status"] == "healthy":
        return "-"
    if n["status"] != "unhealthy":
        return _e(n["status_reason"])
    findings = n["health"]["findings"]
    items = "".join(
        '<li><span class="msg">%s</span> <span class="remedy">%s</span></li>' % (_e(f["message"]), _e(f["remedy"]))
        for f in findings[:shown]
    )
    more = "<li>and %d more</li>" % (len(findings) - shown) if len(findings) > shown else ""
    return "<ul>%s%s</ul>" % (items, more)


def _node_html(n):
    h = n["health"]
    meta = "profile %s, driver %s; checked %s by %s" % (
        _e(n["profile"]),
        _e(n["driver_version"]),
        _e("%s (%s)" % (n["checked_at"], age_words(n["age_hours"])) if n["checked_at"] else "never"),
        _e(_run_words(n["checked_by"])),
    )
    parts = [
        '<section class="node" id="%s"><h2>%s %s</h2>' % (_e(_anchor(n["host"])), _e(n["host"]), _badge(n["status"])),
        '<p class="meta">%s.<br>%s</p>' % (meta, _e(n["status_reason"])),
    ]
    if h is not None and n["status"] != "unhealthy" and not h["healthy"]:
        parts.append("<p><b>Last verdict UNHEALTHY</b> (as of %s):</p>" % _e(n["checked_at"]))
    parts += [_findings_html(n), _nvlink_html(h), _ports_html(h)]
    if n.get("acceptance"):
        parts.append("<h3>Acceptance results (%s)</h3>%s" % (_e(n["acceptance"].get("at")), _value_html(n["acceptance"].get("result"))))
    parts.append("</section>")
    return "".join(parts)


def render_html(report):
    return "".join(html_chunks(report))


def html_chunks(report):
    """The HTML report in pieces: the front page, then one piece per node."""
    s = report["summary"]
    last = report["last_run"] or {}
    out = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        # no script, no fetch: the page is static, and a value that slipped past escaping could not run
        '<meta http-equiv="Content-Security-Policy" content="%s">' % CSP,
        "<title>rackforge fleet report</title>",
        "<style>%s</style></head><body>" % CSS,
        "<header><h1>rackforge fleet report</h1>",
        '<p class="meta">Generated %s. Last run: %s at %s. A node no run has reached for %s h is stale. '
        "Unhealthy nodes: the health gate of site.yml keeps them out of the cluster (no join; a driver upgrade leaves them "
        "cordoned); playbooks/health_check.yml only reports.</p></header>"
        % (_e(report["generated_at"]), _e(_run_words(last)), _e(last.get("at")), _e(report["stale_after_hours"])),
        '<section id="summary"><h2>Summary</h2><ul class="counts">',
    ]
    for status in STATUSES:
        label = STATUS_WORDS[status] if status != "healthy" else "healthy"
        out.append('<li class="s-%s" id="count-%s"><span class="n">%d</span>%s</li>' % (status, status, s[status], label.lower()))
    out.append('<li class="s-total" id="count-total"><span class="n">%d</span>nodes</li></ul></section>' % s["total"])
    out.append(
        '<section id="nodes"><h2>Nodes, most severe first</h2><table><tr><th>node</th><th>status</th><th>profile</th>'
        "<th>driver</th><th>GPUs</th><th>NVLinks active/expected</th><th>RDMA ports up</th><th>what is wrong</th>"
        "<th>checked, by</th></tr>"
    )
    for n in report["nodes"]:
        h = n["health"]
        out.append(
            '<tr class="row-%s" data-host="%s"><td class="nowrap"><a href="#%s">%s</a></td><td class="s-%s">%s</td>'
            '<td class="nowrap">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class="wrong">%s</td>'
            '<td class="by">%s<br>%s</td></tr>'
            % (
                _e(n["status"]),
                _e(n["host"]),
                _e(_anchor(n["host"])),
                _e(n["host"]),
                _e(n["status"]),
                STATUS_WORDS[n["status"]],
                _e(n["profile"]),
                _e(n["driver_version"]),
                len(h["gpus"]) if h else "-",
                "%d/%d" % _links(h) if h else "-",
                "%d/%d" % _ports_up(h) if h else "-",
                _wrong_html(n),
                _e("%s (%s)" % (n["checked_at"], age_words(n["age_hours"])) if n["checked_at"] else "never"),
                _e(_run_words(n["checked_by"])),
            )
        )
    out.append("</table></section>")
    rows = _not_run(report)
    out.append('<section id="not-run"><h2>Checks that could not run</h2>')
    if rows:
        out.append("<table><tr><th>node</th><th>check</th><th>why</th><th>evidence</th><th>remedy</th></tr>")
        for n, f in rows:
            out.append(
                '<tr class="bad"><td><a href="#%s">%s</a></td><td><code>%s</code></td><td>%s</td><td>%s</td><td class="remedy">%s</td></tr>'
                % (
                    _e(_anchor(n["host"])),
                    _e(n["host"]),
                    _e(f["check"]),
                    _e(f.get("observed")),
                    _evidence_html(f.get("evidence")),
                    _e(f["remedy"]),
                )
            )
        out.append("</table>")
    else:
        out.append("<p>None: every check ran.</p>")
    out.append("</section>")
    others = [n for n in report["nodes"] if n["status"] in ("not_checked", "stale", "removed")]
    out.append('<section id="stale"><h2>Not checked, stale and removed nodes</h2>')
    if others:
        out.append("<table><tr><th>node</th><th>status</th><th>why</th><th>last verdict</th></tr>")
        for n in others:
            verdict = "none" if n["healthy"] is None else ("healthy" if n["healthy"] else "UNHEALTHY")
            if n["checked_at"]:
                verdict += " (%s, %s)" % (n["checked_at"], age_words(n["age_hours"]))
            out.append(
                '<tr><td><a href="#%s">%s</a></td><td>%s</td><td>%s</td><td>%s</td></tr>'
                % (_e(_anchor(n["host"])), _e(n["host"]), _badge(n["status"]), _e(n["status_reason"]), _e(verdict))
            )
        out.append("</table>")
    else:
        out.append("<p>None.</p>")
    out.append("</section>")
    accepted = [n for n in report["nodes"] if n.get("acceptance")]
    if accepted:
        out.append('<section id="acceptance"><h2>Acceptance results</h2><ul>')
        out += [
            '<li><a href="#%s">%s</a> (%s)</li>' % (_e(_anchor(n["host"])), _e(n["host"]), _e(n["acceptance"].get("at"))) for n in accepted
        ]
        out.append("</ul></section>")
    out.append('<section id="details"><h2>Nodes in detail</h2></section>')
    yield "".join(out)
    for n in report["nodes"]:
        yield _node_html(n)
    yield "</body></html>\n"


def report_chunks(report):
    """{file name: pieces of its text} of the three reports, in the order the plugin writes them."""
    return {"fleet.json": json_chunks(report), "fleet.md": iter([render_markdown(report)]), "fleet.html": html_chunks(report)}


def render_all(report):
    """{file name: text} of the three reports."""
    return {name: "".join(chunks) for name, chunks in report_chunks(report).items()}
