"""The fleet report as JSON and Markdown (pure functions, no I/O); re-exported by
ansible.module_utils.rackforge.fleet, the import path to use."""

from __future__ import annotations

import html
import json

from ansible.module_utils.rackforge.fleet_state import STATUS_WORDS, age_words


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
