#!/usr/bin/env python3
"""The scale model of docs/scale.md, computed from a bench result (bench/results/latest.json).

    python3 bench/scale.py                    # print the tables
    python3 bench/scale.py --write docs/scale.md   # replace the generated block there

The model (assumptions in docs/scale.md):
  T1       one node's no-op (or fresh) site.yml wall time at N=1: the latency-bound run length
  c_node   controller CPU seconds each additional node adds to a run: (cpu(Nmax) - cpu(1)) / (Nmax - 1)
  m_node   controller memory each additional concurrently served node adds: (rss(Nmax) - rss(1)) / (Nmax - 1)
  wall(H, F, P) = max(ceil(H / F) * T1, H * c_node / P)   (linear strategy, F forks, P controller cores)
  forks a controller of P cores keeps busy: F* = P * T1 / c_node
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BEGIN, END = "<!-- BEGIN SCALE (bench/scale.py) -->", "<!-- END SCALE (bench/scale.py) -->"
FLEETS = (100, 1000, 5000)
FORKS = (25, 50, 100)
CORES = 8  # controller cores assumed for the tables (an AWX execution node or a jump host)
SLICES = (1, 4, 10)


def inputs(doc):
    rows = {int(n): r for n, r in doc["by_nodes"].items()}
    lo, hi = min(rows), max(rows)
    span = max(hi - lo, 1)
    out = {}
    for kind in ("noop", "fresh"):
        t1 = rows[lo]["%s_s" % kind]["median"]
        cpu_lo, cpu_hi = rows[lo]["%s_controller_cpu_s" % kind]["median"], rows[hi]["%s_controller_cpu_s" % kind]["median"]
        rss_lo, rss_hi = rows[lo]["%s_controller_peak_rss_mb" % kind]["median"], rows[hi]["%s_controller_peak_rss_mb" % kind]["median"]
        out[kind] = {
            "T1": t1,
            "c_node": max((cpu_hi - cpu_lo) / span, 1e-3),
            "m_node": max((rss_hi - rss_lo) / span, 0.0),
            "rss_base": rss_lo,
            "cpu_base": cpu_lo,
        }
    out["nodes_measured"] = (lo, hi)
    return out


def wall(h, forks, cores, p):
    return max(math.ceil(h / forks) * p["T1"], h * p["c_node"] / cores)


def fmt_time(seconds):
    if seconds < 120:
        return "%.0f s" % seconds
    if seconds < 7200:
        return "%.0f min" % (seconds / 60)
    return "%.1f h" % (seconds / 3600)


def tables(doc):
    p = inputs(doc)
    lo, hi = p["nodes_measured"]
    lines = [
        "Inputs, from `%s` (%s, %s; %d to %d lab nodes):" % (doc["command"], doc["finished"], doc["environment"]["ansible_core"], lo, hi),
        "",
        "| run | T1: one node, s | c_node: controller CPU s per extra node | m_node: MiB per extra concurrent node"
        " | F*: forks per controller core |",
        "|---|---|---|---|---|",
    ]
    for kind in ("noop", "fresh"):
        q = p[kind]
        lines.append(
            "| %s | %.1f | %.2f | %.0f | %.0f |"
            % ("no-op re-run" if kind == "noop" else "fresh converge", q["T1"], q["c_node"], q["m_node"], q["T1"] / q["c_node"])
        )
    for kind, title in (("noop", "no-op re-run (drift check)"), ("fresh", "fresh converge (lab packages; real ones add download time)")):
        q = p[kind]
        lines += [
            "",
            "Wall time of a %s, one controller of %d cores (memory: forks x m_node + %.0f MiB):" % (title, CORES, q["rss_base"]),
            "",
            "| nodes | " + " | ".join("forks %d" % f for f in FORKS) + " | controller memory at forks %d |" % FORKS[-1],
            "|---|" + "---|" * (len(FORKS) + 1),
        ]
        for h in FLEETS:
            mem = min(h, FORKS[-1]) * q["m_node"] + q["rss_base"]
            lines.append("| %d | %s | %.1f GiB |" % (h, " | ".join(fmt_time(wall(h, f, CORES, q)) for f in FORKS), mem / 1024))
    q = p["noop"]
    lines += [
        "",
        "Node preparation (`playbooks/prepare.yml`, the sliceable part) as an AWX job sliced across execution nodes"
        " of %d cores, forks %d each (no-op run; the join and control-plane plays are not sliced):" % (CORES, FORKS[1]),
        "",
        "| nodes | " + " | ".join("%d slice%s" % (s, "" if s == 1 else "s") for s in SLICES) + " |",
        "|---|" + "---|" * len(SLICES),
    ]
    for h in FLEETS:
        lines.append("| %d | %s |" % (h, " | ".join(fmt_time(wall(math.ceil(h / s), FORKS[1], CORES, q)) for s in SLICES)))
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--result", default=os.path.join(HERE, "results", "latest.json"))
    parser.add_argument("--write", help="a Markdown file whose generated block is replaced")
    opts = parser.parse_args()
    doc = json.load(open(opts.result))
    text = tables(doc)
    if not opts.write:
        sys.stdout.write(text)
        return 0
    current = open(opts.write).read()
    if BEGIN not in current or END not in current:
        sys.exit("scale: %s has no %s ... %s block" % (opts.write, BEGIN, END))
    head, rest = current.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(opts.write, "w") as fh:
        fh.write(head + BEGIN + "\n" + text + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
