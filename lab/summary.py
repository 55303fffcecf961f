#!/usr/bin/env python3
"""Print the fleet summary from reports/fleet.json (written by the health_checks role; format:
docs/fleet-schema.json): counts per status, one row per node (most severe first), and every
finding of an unhealthy node with its remedy."""

from __future__ import annotations

import json
import sys

WORDS = {"unhealthy": "UNHEALTHY", "not_checked": "NOT CHECKED", "stale": "STALE", "removed": "REMOVED", "healthy": "healthy"}


def main(path):
    with open(path) as fh:
        report = json.load(fh)
    if report.get("kind") != "rackforge-fleet-report" or report.get("version") != 1:
        print("%s is not a rackforge fleet report of version 1 (kind %r, version %r)" % (path, report.get("kind"), report.get("version")))
        return 1
    rows = [("node", "profile", "GPUs", "NVLinks up/expected", "NICs up", "checked", "status")]
    findings = []
    for n in report["nodes"]:
        h = n["health"]
        checked = n["checked_at"] or "never"
        if not h:
            rows.append((n["host"], n["profile"] or "-", "-", "-", "-", checked, WORDS[n["status"]]))
        else:
            links = "%d/%d" % (sum(g["active_links"] for g in h["gpus"]), sum(g["expected_links"] for g in h["gpus"]))
            nics = "%d/%d" % (len([p for p in h["ports"] if p["state"] == "Active"]), len(h["ports"]))
            rows.append((n["host"], n["profile"] or "-", str(len(h["gpus"])), links, nics, checked, WORDS[n["status"]]))
            if n["status"] == "unhealthy":
                findings += ["  %s: %s\n    remedy: %s" % (n["host"], f["message"], f["remedy"]) for f in h["findings"]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    s = report["summary"]
    print("\nrackforge fleet summary (%s, %s)" % (path, report["generated_at"]))
    print(
        "  %d unhealthy, %d not checked, %d stale, %d removed, %d healthy (%d nodes)"
        % (s["unhealthy"], s["not_checked"], s["stale"], s["removed"], s["healthy"], s["total"])
    )
    for r in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    if findings:
        print("findings:")
        print("\n".join(findings))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "reports/fleet.json"))
