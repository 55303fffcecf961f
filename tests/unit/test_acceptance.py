"""acceptance.py: the pair plan and the verdicts, on parsed real captures
(tests/fixtures/realworld/{perftest,nvbandwidth,nccl-tests}, provenance in each .src.txt)."""

from __future__ import annotations

import copy

import pytest
from ansible.module_utils.rackforge import acceptance as A
from ansible.module_utils.rackforge import nccl, nvbandwidth, perftest
from conftest import FIXTURES

REAL = FIXTURES


def capture(tool, name):
    return (REAL / tool / (name + ".txt")).read_text()


def perf(name):
    return perftest.parse_perftest(capture("perftest", name))


ROCE_BW = perf("hpe-slingshot-roce-write-bw-duration-gbits")  # 98.03 Gb/sec on a 100G RoCE NIC
EDR_BW = perf("azure-hc44rs-cx5vf-edr-send-bw-all-sizes-mbsec")  # 11511.92 MB/sec at 8 MiB, EDR 100G
LAT_FAST = perf("dgx-spark-cx7-write-lat-rdmacm-forced-ib")  # t_typical 1.47 us
LAT_SLOW = perf("spiderpool-cx5-roce-read-lat-gid12-indented")  # t_typical 7.04 us
LAT_OLD = perf("azure-hc44rs-cx5vf-edr-send-lat-all-sizes-old-layout")  # no t_avg column; t_typical 2.66
H100_PAIRS = nvbandwidth.parse_nvbandwidth(capture("nvbandwidth", "h100-azure-ndv5-8gpu-nvlink-d2d-read-ce-v0.4"))["tests"][
    "device_to_device_memcpy_read_ce"
]
H100_NCCL = nccl.parse_nccl_tests(capture("nccl-tests", "h100-8gpu-nvls-allreduce-single-node"))


def test_a_64_node_fleet_is_tested_in_64_cross_rack_pairs_in_two_rounds():
    nodes = ["n%02d" % i for i in range(64)]
    rack = {n: "rack%d" % (i // 8) for i, n in enumerate(nodes)}
    rounds = A.pair_rounds(nodes, rack)
    pairs = [p for r in rounds for p in r]
    assert len(rounds) == 2 and len(pairs) == 64  # O(N), not the 2016 of all pairs
    for r in rounds:  # a node runs one test at a time
        members = [n for p in r for n in p]
        assert len(members) == len(set(members))
    assert all(rack[a] != rack[b] for a, b in pairs)  # every pair crosses racks
    assert all(sum(n in p for p in pairs) == 2 for n in nodes)  # each node in two pairs
    assert len({frozenset(p) for p in pairs}) == 64


@pytest.mark.parametrize(("count", "rounds", "pairs"), [(0, 0, 0), (1, 0, 0), (2, 1, 1), (3, 3, 3), (5, 3, 5), (6, 2, 6)])
def test_small_and_odd_fleets(count, rounds, pairs):
    plan = A.pair_rounds(["n%d" % i for i in range(count)])
    assert len(plan) == rounds and sum(len(r) for r in plan) == pairs
    for r in plan:
        members = [n for p in r for n in p]
        assert len(members) == len(set(members))


def test_one_big_rack_still_pairs_across_racks_where_it_can():
    rack = {"a1": "A", "a2": "A", "a3": "A", "b1": "B"}
    pairs = [p for r in A.pair_rounds(sorted(rack), rack) for p in r]
    assert sum(rack[a] != rack[b] for a, b in pairs) == 2  # b1's two pairs; A's other pair cannot cross


def test_a_node_listed_twice_is_refused():
    with pytest.raises(ValueError, match="listed twice"):
        A.pair_rounds(["a", "b", "a"])


def test_perftest_units_convert_to_gbps():
    assert A.to_gbps(98.03, "Gb/sec") == 98.03
    assert A.to_gbps(11511.92, "MB/sec") == pytest.approx(96.57, abs=0.01)  # 2^20 bytes per MB
    with pytest.raises(ValueError):
        A.to_gbps(1, "Kb/sec")


def test_rdma_verdict_on_real_runs():
    ok = A.rdma_pair_verdict([ROCE_BW], [LAT_FAST], line_rate_gbps=100)
    assert ok["ok"] and ok["bw_gbps"] == 98.03 and ok["lat_us"] == 1.47 and ok["findings"] == []
    # the same 98 Gb/s on a 200G port is a finding naming the numbers
    slow = A.rdma_pair_verdict([ROCE_BW], [LAT_FAST], line_rate_gbps=200)
    assert not slow["ok"] and [f["check"] for f in slow["findings"]] == ["rdma_bandwidth"]
    assert slow["findings"][0]["observed"] == "98.03 Gb/s (median of 1 runs)" and "180.0" in slow["findings"][0]["expected"]
    # 7.04 us is not below the seeds' 5 us
    high = A.rdma_pair_verdict([EDR_BW], [LAT_SLOW], line_rate_gbps=100)
    assert [f["check"] for f in high["findings"]] == ["rdma_latency"] and high["findings"][0]["observed"].startswith("7.04 us")
    # an old layout without t_avg: its t_typical is used
    assert A.rdma_pair_verdict([EDR_BW], [LAT_OLD], line_rate_gbps=100)["lat_us"] == 2.66


def test_rdma_cm_is_held_only_where_it_is_due():
    # not due (None): no finding, whatever else; due: a run is needed, below the same ceiling
    assert A.rdma_pair_verdict([ROCE_BW], [LAT_FAST], 100)["cm_lat_us"] is None
    ok = A.rdma_pair_verdict([ROCE_BW], [LAT_FAST], 100, cm_runs=[LAT_FAST])
    assert ok["ok"] and ok["cm_lat_us"] == 1.47
    missing = A.rdma_pair_verdict([ROCE_BW], [LAT_FAST], 100, cm_runs=[])
    assert [f["check"] for f in missing["findings"]] == ["rdma_cm"] and missing["findings"][0]["observed"] == "no result"
    slow = A.rdma_pair_verdict([ROCE_BW], [LAT_FAST], 100, cm_runs=[LAT_SLOW])
    assert [f["check"] for f in slow["findings"]] == ["rdma_cm"] and "over RDMA-CM 7.04 us" in slow["findings"][0]["message"]


def test_one_slow_sample_does_not_fail_a_pair_but_a_slow_majority_does():
    slow_run = copy.deepcopy(ROCE_BW)
    slow_run["rows"][-1]["bw_avg"] = 41.0  # built from the real run: one interval of contention
    assert A.rdma_pair_verdict([ROCE_BW, slow_run, ROCE_BW], [LAT_FAST] * 3, line_rate_gbps=100)["ok"]
    assert not A.rdma_pair_verdict([slow_run, slow_run, ROCE_BW], [LAT_FAST] * 3, line_rate_gbps=100)["ok"]


def test_missing_results_are_findings_not_passes():
    res = A.rdma_pair_verdict([], [], line_rate_gbps=100)
    assert not res["ok"] and {f["observed"] for f in res["findings"]} == {"no result"}


def test_localize_blames_the_node_whose_pairs_all_fail_and_a_path_that_fails_alone():
    ring = {("a", "b"): True, ("b", "c"): False, ("c", "d"): False, ("d", "a"): True}
    assert A.localize(ring) == {"nodes": {"c": ["b", "d"]}, "pairs": [], "undecided": []}
    path = {("a", "b"): False, ("b", "c"): True, ("c", "d"): True, ("d", "a"): True}
    assert A.localize(path) == {"nodes": {}, "pairs": [("a", "b")], "undecided": []}
    # two nodes: a failing pair cannot say which node is at fault
    assert A.localize({("a", "b"): False}) == {"nodes": {}, "pairs": [], "undecided": [("a", "b")]}
    # every pair of a rail fails (a switch down, two racks alternating on the ring): no node is
    # proven good, so none is blamed as "its NIC"; every pair is undecided
    down = {("a", "b"): False, ("b", "c"): False, ("c", "d"): False, ("d", "a"): False}
    assert A.localize(down) == {"nodes": {}, "pairs": [], "undecided": sorted(down)}
    # two bad nodes with a good one between (r0, r2 on a 6-ring): r1 is not blamed, its pairs undecided
    ring6 = {("r%d" % i, "r%d" % ((i + 1) % 6)): True for i in range(6)}
    ring6.update({("r5", "r0"): False, ("r0", "r1"): False, ("r1", "r2"): False, ("r2", "r3"): False})
    got = A.localize(ring6)
    assert sorted(got["nodes"]) == ["r0", "r2"] and got["undecided"] == [] and got["pairs"] == []


def test_nvlink_pairs_of_a_real_h100_node_pass_and_one_slowed_pair_is_named():
    assert A.nvlink_pair_findings(H100_PAIRS) == []
    slowed = copy.deepcopy(H100_PAIRS)
    slowed["matrix"][(2, 5)] = 180.0  # built from the real matrix: one link pair degraded
    [found] = A.nvlink_pair_findings(slowed)
    assert found["component"] == "GPU 2 -> GPU 5" and found["observed"] == "180.00 GB/s"


def test_the_400_gbps_floor_is_a_bus_bandwidth_not_a_pair_copy():
    # the same class of node copies 370-373 GB/s per pair with nvbandwidth, while nccl-tests'
    # all-reduce reaches 473.60 GB/s busbw at 4 GiB: the seeds' floor fits the second
    assert len(A.nvlink_pair_findings(H100_PAIRS, min_gbps=400)) == 56
    assert A.nccl_findings(H100_NCCL) == []
    [low] = A.nccl_findings(H100_NCCL, min_busbw_gbps=500)
    assert low["check"] == "nccl_busbw" and low["observed"] == "473.60 GB/s at 4294967296 bytes"


def test_wrong_nccl_results_are_a_finding():
    bad = dict(H100_NCCL, out_of_bounds=12)
    assert [f["check"] for f in A.nccl_findings(bad)] == ["nccl_results"]


def test_a_row_with_wrong_elements_is_a_finding_even_when_the_summary_says_0():
    rows = [dict(row) for row in H100_NCCL["rows"]]
    rows[2]["ip_wrong"] = 3
    [found] = A.nccl_findings(dict(H100_NCCL, rows=rows))
    assert found["check"] == "nccl_results" and found["observed"] == "0 out of bounds, wrong elements at %d bytes" % rows[2]["size"]
    rows[2]["ip_wrong"] = 2e-07  # before 2.13 the column is the largest relative error: normal for float sums
    assert A.nccl_findings(dict(H100_NCCL, rows=rows)) == []


def test_an_nccl_run_without_its_summary_is_a_finding_never_a_pass():
    [found] = A.nccl_findings(dict(H100_NCCL, out_of_bounds=None, avg_busbw=None))
    assert found["check"] == "nccl_results" and found["observed"] == "none printed"
    rows = [dict(row) for row in H100_NCCL["rows"]]
    rows[0]["oop_wrong"] = 1  # wrong elements in a run cut short: said as such, not as "0 out of bounds"
    [found] = A.nccl_findings(dict(H100_NCCL, rows=rows, out_of_bounds=None, avg_busbw=None))
    assert found["observed"] == "no out-of-bounds summary, wrong elements at %d bytes" % rows[0]["size"]
