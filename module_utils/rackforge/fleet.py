"""The fleet report: a controller-side state of every node's last health verdict, merged run by run,
and the JSON / Markdown / HTML reports rendered from it (pure functions, no I/O; the
rackforge_fleet_report action plugin reads and writes the files).

The state (fleet-state.json) and the public report (fleet.json, docs/fleet-schema.json) are
described in fleet_state.

The code is split by concern: fleet_state (state, merge, report data), fleet_text (JSON, Markdown)
and fleet_html (the HTML page); this module re-exports every public name, so import from here.
"""

from __future__ import annotations

from ansible.module_utils.rackforge.fleet_html import CSP, CSS, html_chunks, render_html
from ansible.module_utils.rackforge.fleet_state import (
    EVIDENCE_TAIL,
    NOT_RUN_REMEDY,
    REMEDIES,
    REPORT_KIND,
    REPORT_VERSION,
    RUNS_KEPT,
    STATE_VERSION,
    STATUS_WORDS,
    STATUSES,
    TIME_FORMAT,
    UNKNOWN_REMEDY,
    FleetError,
    age_words,
    build_report,
    check_health,
    check_state,
    empty_state,
    hours_between,
    merge,
    node_status,
    parse_time,
    remedy,
    state_from_report,
    timestamp,
)
from ansible.module_utils.rackforge.fleet_text import json_chunks, render_json, render_markdown

__all__ = [
    "CSP",
    "CSS",
    "EVIDENCE_TAIL",
    "NOT_RUN_REMEDY",
    "REMEDIES",
    "REPORT_KIND",
    "REPORT_VERSION",
    "RUNS_KEPT",
    "STATE_VERSION",
    "STATUSES",
    "STATUS_WORDS",
    "TIME_FORMAT",
    "UNKNOWN_REMEDY",
    "FleetError",
    "age_words",
    "build_report",
    "check_health",
    "check_state",
    "empty_state",
    "hours_between",
    "html_chunks",
    "json_chunks",
    "merge",
    "node_status",
    "parse_time",
    "remedy",
    "render_all",
    "render_html",
    "render_json",
    "render_markdown",
    "report_chunks",
    "state_from_report",
    "timestamp",
]


def report_chunks(report):
    """{file name: pieces of its text} of the three reports, in the order the plugin writes them."""
    return {"fleet.json": json_chunks(report), "fleet.md": iter([render_markdown(report)]), "fleet.html": html_chunks(report)}


def render_all(report):
    """{file name: text} of the three reports."""
    return {name: "".join(chunks) for name, chunks in report_chunks(report).items()}
