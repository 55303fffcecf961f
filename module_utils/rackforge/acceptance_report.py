"""Pure: one fabric acceptance's results, from every node, into verdicts per node, the report and
the textfile metrics (no I/O; action_plugins/rackforge_acceptance_report.py writes them).

Public, stable API:

- fleet_verdict(results, dropped=()) -> {"nodes": {node: {"findings", "rdma", "nvlink"}}, "paths": [...],
  "undecided": [...], "dropped": [...]}
  results: {node: {"rdma": rdma_acceptance's return, "nvlink": nvlink_acceptance's return or None}};
  dropped: the nodes that left the run before their results (their node file says "incomplete")
- render_markdown(report) -> str: the pair matrix per rail and the findings.
- metrics(node, report) -> str: rackforge_acceptance_* in the Prometheus text format.

Blame (acceptance.localize, per rail): a node whose every pair on a rail failed gets the
finding; a pair that failed while both nodes passed their other pair is a path finding (a cable,
a switch port), reported but not held against either node; a failed pair that cannot be decided
(a node in only one pair, as in a two-node acceptance) is held against both nodes (fail closed).
"""

from __future__ import annotations

from ansible.module_utils.rackforge.acceptance import localize
from ansible.module_utils.rackforge.health import finding


def _why(pair):
    parts = [f["message"] for f in pair.get("findings", [])] + list(pair.get("problems", []))
    return "; ".join(parts) or "failed"


def fleet_verdict(results, dropped=()):
    pairs = [p for node in sorted(results) for p in (results[node].get("rdma") or {}).get("pairs", [])]
    nodes = {n: {"findings": [], "rdma": [], "nvlink": results[n].get("nvlink")} for n in results}
    for pair in pairs:
        for n in (pair["a"], pair["b"]):
            if n in nodes:
                nodes[n]["rdma"].append(pair)
    paths, undecided = [], []
    # a pair with a node that left the run says nothing about its partner: that node's own failure
    # (and its node file, left "incomplete") is the finding
    judged = [p for p in pairs if p["a"] not in dropped and p["b"] not in dropped]
    for rail in sorted({p["rail"] for p in judged}):
        on_rail = {(p["a"], p["b"]): p for p in judged if p["rail"] == rail}
        blame = localize({k: p["ok"] for k, p in on_rail.items()})
        for node, partners in sorted(blame["nodes"].items()):
            if node not in nodes:  # dropped out of the run: its node file already says incomplete
                continue
            whys = ["%s: %s" % (pa, _why(on_rail.get((node, pa)) or on_rail.get((pa, node)))) for pa in sorted(partners)]
            nodes[node]["findings"].append(
                finding(
                    "rdma_acceptance",
                    "rail %d" % rail,
                    "pairs pass",
                    "failed with %s" % ", ".join(sorted(partners)),
                    "rail %d fails with every partner (%s): the node's NIC or its link" % (rail, "; ".join(whys)),
                )
            )
        for a, b in blame["pairs"]:
            paths.append({"a": a, "b": b, "rail": rail, "why": _why(on_rail[(a, b)])})
        for a, b in blame["undecided"]:
            undecided.append({"a": a, "b": b, "rail": rail, "why": _why(on_rail[(a, b)])})
            for n in (a, b):
                if n not in nodes:  # dropped out of the run: its own failure says why
                    continue
                nodes[n]["findings"].append(
                    finding(
                        "rdma_acceptance",
                        "rail %d" % rail,
                        "pair passes",
                        "failed with %s" % (b if n == a else a),
                        "rail %d fails between %s and %s, and no other pair tells which end is at fault: %s"
                        % (rail, a, b, _why(on_rail[(a, b)])),
                    )
                )
    for data in nodes.values():
        data["findings"] += (data["nvlink"] or {}).get("findings", [])
    return {"nodes": nodes, "paths": paths, "undecided": undecided, "dropped": sorted(dropped)}


def _cell(pair):
    if pair is None:
        return "-"
    bw = "%.1f Gb/s" % pair["bw_gbps"] if pair.get("bw_gbps") is not None else "no bw"
    lat = "%.2f us" % pair["lat_us"] if pair.get("lat_us") is not None else "no lat"
    cm = " / RDMA-CM %.2f us" % pair["cm_lat_us"] if pair.get("cm_lat_us") is not None else ""
    return "%s %s / %s%s" % ("ok" if pair["ok"] else "FAIL", bw, lat, cm)


def render_markdown(report):
    out = ["# Fabric acceptance", ""]
    nodes = report["nodes"]
    bad = sorted(n for n, d in nodes.items() if d["findings"])
    out.append("%d nodes, %d pass, %d fail%s." % (len(nodes), len(nodes) - len(bad), len(bad), (": " + ", ".join(bad)) if bad else ""))
    pairs = {}
    for d in nodes.values():
        for p in d["rdma"]:
            pairs[(p["a"], p["b"], p["rail"])] = p
    for rail in sorted({k[2] for k in pairs}):
        out += ["", "## RDMA rail %d (client -> server: bandwidth / latency)" % rail, "", "| pair | result |", "|---|---|"]
        for (a, b, r), p in sorted(pairs.items()):
            if r == rail:
                out.append("| %s -> %s | %s |" % (a, b, _cell(p)))
    out += ["", "## NVLink inside each node", "", "| node | all-reduce busbw (GB/s) | median GPU pair (GB/s) |", "|---|---|---|"]
    for n, d in sorted(nodes.items()):
        nv = d["nvlink"] or {}
        busbw = "%.1f" % nv["busbw_gbps"] if nv.get("busbw_gbps") is not None else "-"
        median = "%.1f" % nv["pairs"]["median_gbps"] if (nv.get("pairs") or {}).get("median_gbps") is not None else "-"
        out.append("| %s | %s | %s |" % (n, busbw, median))
    if report.get("dropped"):
        out += ["", "Did not finish (their last acceptance stays incomplete): %s." % ", ".join(report["dropped"])]
    if report["paths"] or report["undecided"]:
        out += ["", "## Paths", ""]
        out += [
            "- rail %d %s <-> %s: path at fault (both nodes pass with other partners): %s" % (p["rail"], p["a"], p["b"], p["why"])
            for p in report["paths"]
        ]
        out += [
            "- rail %d %s <-> %s: undecided, held against both: %s" % (p["rail"], p["a"], p["b"], p["why"]) for p in report["undecided"]
        ]
    out += ["", "## Findings", ""]
    for n in bad:
        out += ["- **%s** %s: %s" % (n, f["component"], f["message"]) for f in nodes[n]["findings"]]
    if not bad:
        out.append("none")
    return "\n".join(out) + "\n"


def _esc(value):
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def metrics(node, report):
    data = report["nodes"][node]
    out = [
        "# HELP rackforge_acceptance_healthy 1 when the node passed the last fabric acceptance.",
        "# TYPE rackforge_acceptance_healthy gauge",
        "rackforge_acceptance_healthy %d" % (0 if data["findings"] else 1),
        "# HELP rackforge_acceptance_findings Findings of the last fabric acceptance.",
        "# TYPE rackforge_acceptance_findings gauge",
        "rackforge_acceptance_findings %d" % len(data["findings"]),
        "# HELP rackforge_acceptance_rdma_bandwidth_gbps RDMA write bandwidth to a partner (median of the runs), Gb/s.",
        "# TYPE rackforge_acceptance_rdma_bandwidth_gbps gauge",
    ]
    lat = [
        "# HELP rackforge_acceptance_rdma_latency_us RDMA write latency to a partner (median of the runs).",
        "# TYPE rackforge_acceptance_rdma_latency_us gauge",
    ]
    cm = [
        "# HELP rackforge_acceptance_rdma_cm_latency_us RDMA write latency to a partner over QPs connected through RDMA-CM.",
        "# TYPE rackforge_acceptance_rdma_cm_latency_us gauge",
    ]
    for p in data["rdma"]:
        peer = p["b"] if p["a"] == node else p["a"]
        labels = 'peer="%s",rail="%d"' % (_esc(peer), p["rail"])
        if p.get("bw_gbps") is not None:
            out.append("rackforge_acceptance_rdma_bandwidth_gbps{%s} %.3f" % (labels, p["bw_gbps"]))
        if p.get("lat_us") is not None:
            lat.append("rackforge_acceptance_rdma_latency_us{%s} %.3f" % (labels, p["lat_us"]))
        if p.get("cm_lat_us") is not None:
            cm.append("rackforge_acceptance_rdma_cm_latency_us{%s} %.3f" % (labels, p["cm_lat_us"]))
    out += lat + (cm if len(cm) > 2 else [])
    nv = data["nvlink"] or {}
    if nv.get("busbw_gbps") is not None:
        out += [
            "# HELP rackforge_acceptance_nccl_busbw_gbps all_reduce_perf bus bandwidth of the largest message, GB/s.",
            "# TYPE rackforge_acceptance_nccl_busbw_gbps gauge",
            "rackforge_acceptance_nccl_busbw_gbps %.3f" % nv["busbw_gbps"],
        ]
    if (nv.get("pairs") or {}).get("gbps"):
        out += [
            "# HELP rackforge_acceptance_nvlink_pair_gbps nvbandwidth copy bandwidth of a GPU pair, GB/s.",
            "# TYPE rackforge_acceptance_nvlink_pair_gbps gauge",
        ]
        for key, value in sorted(nv["pairs"]["gbps"].items()):
            src, dst = key.split("-")
            out.append('rackforge_acceptance_nvlink_pair_gbps{src="%s",dst="%s"} %.3f' % (src, dst, value))
    return "\n".join(out) + "\n"
