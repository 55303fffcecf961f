#!/usr/bin/env python3
"""Print the fleet summary from reports/fleet.json (written by the health_checks role)."""

from __future__ import annotations

import json
import sys


def main(path):
    with open(path) as fh:
        nodes = json.load(fh)["nodes"]
    rows = [("node", "profile", "GPUs", "NVLinks up/expected", "NICs up", "verdict")]
    findings = []
    for n in nodes:
        h = n["health"]
        if not h:
            rows.append((n["host"], n["profile"] or "-", "-", "-", "-", "not checked (failed earlier)"))
            continue
        links = "%d/%d" % (sum(g["active_links"] for g in h["gpus"]), sum(g["expected_links"] for g in h["gpus"]))
        nics = "%d/%d" % (len([p for p in h["ports"] if p["state"] == "Active"]), len(h["ports"]))
        rows.append((n["host"], n["profile"] or "-", str(len(h["gpus"])), links, nics, "healthy" if h["healthy"] else "UNHEALTHY"))
        findings += ["  %s: %s" % (n["host"], f["message"]) for f in h["findings"]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print("\nrackforge fleet summary (%s)" % path)
    for r in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)))
    if findings:
        print("findings:")
        print("\n".join(findings))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "reports/fleet.json"))
