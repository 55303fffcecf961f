"""Pure decisions of the fabric acceptance (no I/O): which node pairs to test, and what the
perftest, nvbandwidth and nccl-tests results (parsed by perftest.py, nvbandwidth.py, nccl.py)
mean for each node and pair.

Public, stable API:

- pair_rounds(nodes, rack_of=None) -> [[(a, b), ...], ...]: rounds of disjoint pairs.
- rdma_pair_verdict(bw_runs, lat_runs, line_rate_gbps, min_fraction=0.9, max_latency_us=5.0, cm_runs=None) -> dict
- localize(pairs_ok) -> {"nodes": {node: [failed partners]}, "pairs": [(a, b)], "undecided": [(a, b)]}
- nvlink_pair_findings(result, min_gbps=None, min_fraction_of_median=0.9) -> [finding]
- nccl_findings(result, min_busbw_gbps=400.0) -> [finding]
- to_gbps(value, unit): a perftest bandwidth in Gb/s.

Findings have the shape of health.finding (check, component, expected, observed, message).

Pairing. The nodes are put on a ring ordered so that neighbours are in different racks where the
racks allow it (one rack after the other, round robin), and every ring edge is tested once: N
pairs for N nodes (O(N), never all pairs), in 2 rounds of disjoint pairs (3 when N is odd). Each
node is in two pairs, which is what tells a bad node from a bad path: a node whose two pairs both
fail is the finding; a pair that fails while both its nodes pass their other pair is the path's.

Thresholds, and why these numbers. Bandwidth: the largest message's average of each run, the
median over the repeated runs (one slow sample does not fail a pair), against a fraction of the
line rate. Latency: the smallest message's typical latency (t_typical, perftest's median; t_avg
where a layout has no typical), median over the runs, against the seeds' 5 us. NVLink: the seeds'
>= 400 GB/s is a bus bandwidth; real 8x H100 captures show nccl-tests all_reduce busbw 465-477
GB/s at 1-4 GiB messages, while nvbandwidth's per-pair device-to-device copies read 370-373 GB/s
on the same class of node (tests/fixtures/realworld): the 400 GB/s floor is held against the
nccl-tests busbw of the largest message; nvbandwidth pairs are held against the median of all
pairs of the node (one slow pair stands out) and, optionally, a profile's own per-pair minimum.
"""

from __future__ import annotations

import statistics

from ansible.module_utils.rackforge.health import finding


def to_gbps(value, unit):
    """perftest's bandwidth as Gb/s: "Gb/sec" as is; "MB/sec" is 2^20 bytes per second."""
    if unit == "Gb/sec":
        return float(value)
    if unit == "MB/sec":
        return float(value) * (1 << 20) * 8 / 1e9
    raise ValueError("unknown perftest bandwidth unit %r" % (unit,))


def _ring(nodes, rack_of):
    """The nodes ordered so that consecutive ones are in different racks where possible."""
    racks = {}
    for node in nodes:
        racks.setdefault((rack_of or {}).get(node, ""), []).append(node)
    queues = [list(members) for _, members in sorted(racks.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    order = []
    while any(queues):
        for queue in queues:
            if queue:
                order.append(queue.pop(0))
    return order


def pair_rounds(nodes, rack_of=None):
    """Rounds of disjoint (a, b) pairs covering every edge of a rack-interleaved ring once."""
    if len(set(nodes)) != len(nodes):
        raise ValueError("pair_rounds: a node is listed twice")
    ring = _ring(list(nodes), rack_of)
    n = len(ring)
    if n < 2:
        return []
    if n == 2:
        return [[(ring[0], ring[1])]]
    edges = [(ring[i], ring[(i + 1) % n]) for i in range(n)]
    rounds = [edges[0 : n - 1 : 2], edges[1 : n - 1 : 2]]
    if n % 2:
        rounds.append([edges[-1]])  # the closing edge shares a node with both other rounds
    else:
        rounds[1].append(edges[-1])
    return [r for r in rounds if r]


def _median(values):
    return statistics.median(values) if values else None


def _lat(run):
    row = run["rows"][0] if run["rows"] else {}
    return row.get("t_typical_us") if row.get("t_typical_us") is not None else row.get("t_avg_us")


def _above(value, runs, ceiling, what):
    """(expected, observed, message) of a median latency not below its ceiling."""
    return "< %s us" % ceiling, "%.2f us (median of %d runs)" % (value, len(runs)), "%s %.2f us is not below %s us" % (what, value, ceiling)


def rdma_pair_verdict(bw_runs, lat_runs, line_rate_gbps, min_fraction=0.9, max_latency_us=5.0, cm_runs=None):
    """{"bw_gbps", "lat_us", "cm_lat_us", "ok", "findings"} for one pair and rail, from
    parse_perftest results of the repeated runs (bw_runs of ib_write_bw, lat_runs of ib_write_lat).

    cm_runs: the ib_write_lat -R runs (QPs connected through RDMA-CM, to the partner's RoCE
    address), or None where none was due (InfiniBand, or turned off). When due, the pair needs
    one, below the same latency ceiling: a pair whose verbs work but whose addresses do not
    resolve (ARP, routes, a rail's address missing) fails every RDMA-CM user (UCX, NVMe-oF,
    storage) while perftest's default exchange would pass it."""
    bws = [to_gbps(run["rows"][-1]["bw_avg"], run["bw_unit"]) for run in bw_runs if run["rows"]]
    lats = [v for v in (_lat(run) for run in lat_runs) if v is not None]
    cms = [v for v in (_lat(run) for run in cm_runs or []) if v is not None]
    bw, lat, cm = _median(bws), _median(lats), _median(cms)
    findings = []
    floor = line_rate_gbps * min_fraction
    if bw is None:
        findings.append(finding("rdma_bandwidth", "pair", ">= %.1f Gb/s" % floor, "no result", "no bandwidth result from perftest"))
    elif bw < floor:
        findings.append(
            finding(
                "rdma_bandwidth",
                "pair",
                ">= %.1f Gb/s (%d %% of %s Gb/s)" % (floor, round(min_fraction * 100), line_rate_gbps),
                "%.2f Gb/s (median of %d runs)" % (bw, len(bws)),
                "RDMA write bandwidth %.2f Gb/s is below %d %% of the %s Gb/s line rate" % (bw, round(min_fraction * 100), line_rate_gbps),
            )
        )
    if lat is None:
        findings.append(finding("rdma_latency", "pair", "< %s us" % max_latency_us, "no result", "no latency result from perftest"))
    elif lat >= max_latency_us:
        findings.append(finding("rdma_latency", "pair", *_above(lat, lats, max_latency_us, "RDMA write latency")))
    if cm_runs is not None and cm is None:
        findings.append(
            finding(
                "rdma_cm", "pair", "an RDMA-CM connection to the partner's RoCE address", "no result", "no RDMA-CM result from perftest -R"
            )
        )
    elif cm is not None and cm >= max_latency_us:
        findings.append(finding("rdma_cm", "pair", *_above(cm, cms, max_latency_us, "RDMA write latency over RDMA-CM")))
    return {"bw_gbps": bw, "lat_us": lat, "cm_lat_us": cm, "ok": not findings, "findings": findings}


def localize(pairs_ok):
    """From {(a, b): ok} of one acceptance: the nodes to blame, the pairs to blame (a path that
    failed while both nodes passed another pair), and the failed pairs nothing can decide.

    A node is blamed when every pair of its (at least two) failed and at least one of the partners
    it failed with passed another pair: that partner is proven good, so the node is the common
    factor. When every pair around a node fails and no partner passed anywhere (a switch or a whole
    rail down, two bad nodes side by side, a two-node fleet), nothing tells the ends apart: those
    pairs are undecided (the report holds both nodes)."""
    partners = {}
    for (a, b), ok in pairs_ok.items():
        partners.setdefault(a, []).append((b, ok))
        partners.setdefault(b, []).append((a, ok))
    passed = {n for n, ps in partners.items() if any(ok for _, ok in ps)}
    bad = {
        n: [p for p, _ in ps]
        for n, ps in partners.items()
        if len(ps) >= 2 and not any(ok for _, ok in ps) and any(p in passed for p, _ in ps)
    }
    pairs, undecided = [], []
    for (a, b), ok in sorted(pairs_ok.items()):
        if ok or a in bad or b in bad:
            continue
        (pairs if a in passed and b in passed else undecided).append((a, b))
    return {"nodes": bad, "pairs": pairs, "undecided": undecided}


def nvlink_pair_findings(result, min_gbps=None, min_fraction_of_median=0.9):
    """Findings for GPU pairs of one nvbandwidth matrix (a parse_nvbandwidth test result) below
    min_gbps or below min_fraction_of_median x the median of all the node's pairs."""
    cells = result["matrix"]
    if not cells:
        return [finding("nvlink_bandwidth", "node", "a GPU pair matrix", "no pairs", "nvbandwidth measured no GPU pair")]
    median = statistics.median(cells.values())
    relative = median * min_fraction_of_median
    floor = max([relative] + ([min_gbps] if min_gbps else []))
    arrow = "<-" if "<-" in result.get("title", "") else "->"  # the title says which way the copy went
    out = []
    for (row, col), value in sorted(cells.items()):
        if value < floor:
            out.append(
                finding(
                    "nvlink_bandwidth",
                    "GPU %s %s GPU %s" % (row, arrow, col),
                    ">= %.2f GB/s" % floor,
                    "%.2f GB/s" % value,
                    "GPU pair %s/%s copies at %.2f GB/s; the node's pairs have a median of %.2f GB/s" % (row, col, value, median),
                )
            )
    return out


def _wrong_sizes(rows):
    """Message sizes whose row counts wrong elements (nccl-tests 2.13+: an int; older versions print
    a relative error, a float, which is not a count)."""
    return [
        row["size"]
        for row in rows
        if any(isinstance(row[k], int) and not isinstance(row[k], bool) and row[k] > 0 for k in ("oop_wrong", "ip_wrong"))
    ]


def nccl_findings(result, min_busbw_gbps=400.0):
    """Findings of one nccl-tests run (parse_nccl_tests): wrong results (the out-of-bounds count, or
    a row's #wrong), a run whose summary is missing (cut short: its data was not all checked), and
    the out-of-place bus bandwidth of the largest message below min_busbw_gbps."""
    out = []
    wrong = _wrong_sizes(result["rows"])
    if result["out_of_bounds"] or wrong:
        oob = result["out_of_bounds"]
        observed = "%s out of bounds" % oob if oob is not None else "no out-of-bounds summary"
        if wrong:
            observed += ", wrong elements at %s bytes" % ", ".join(str(size) for size in wrong)
        out.append(
            finding(
                "nccl_results",
                "node",
                "0 out-of-bounds values",
                observed,
                "nccl-tests found wrong results (%s): a GPU or link corrupts data" % observed,
            )
        )
    elif result["out_of_bounds"] is None:
        out.append(
            finding(
                "nccl_results",
                "node",
                "the out-of-bounds summary",
                "none printed",
                "all_reduce_perf printed no '# Out of bounds values' summary: the run was cut short and its results are unchecked",
            )
        )
    largest = max(result["rows"], key=lambda row: row["size"])
    if largest["oop_busbw"] < min_busbw_gbps:
        out.append(
            finding(
                "nccl_busbw",
                "node",
                ">= %.1f GB/s" % min_busbw_gbps,
                "%.2f GB/s at %d bytes" % (largest["oop_busbw"], largest["size"]),
                "all-reduce bus bandwidth %.2f GB/s at the largest message is below %.1f GB/s" % (largest["oop_busbw"], min_busbw_gbps),
            )
        )
    return out
