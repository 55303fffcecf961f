"""The nccl-tests output parser (module_utils/rackforge/nccl.py) on real captures under
tests/fixtures/realworld/nccl-tests; layouts no capture shows are built from a capture in this file."""

from __future__ import annotations

import pytest
from ansible.module_utils.rackforge import nccl
from conftest import fixture

H100_1NODE = "h100-8gpu-nvls-allreduce-single-node"


def parse(name):
    return nccl.parse_nccl_tests(fixture("nccl-tests", name))


def row(size, count, type_, redop, oop, ip):
    keys = ("time_us", "algbw", "busbw", "wrong")
    out = {"size": size, "count": count, "type": type_, "redop": redop}
    out.update({"oop_" + k: v for k, v in zip(keys, oop)})
    out.update({"ip_" + k: v for k, v in zip(keys, ip)})
    return out


# --- real captures ---------------------------------------------------------------------------------------


def test_h100_single_node_8gpu_nvls():
    r = parse(H100_1NODE)
    assert r["devices"][0] == {"rank": 0, "host": "node005", "device": 0, "name": "NVIDIA H100 80GB HBM3"}
    assert [(d["rank"], d["device"]) for d in r["devices"]] == [(i, i) for i in range(8)]
    assert {d["host"] for d in r["devices"]} == {"node005"}
    assert len(r["rows"]) == 6
    assert r["rows"][0] == row(134217728, 33554432, "float", "sum", (613.3, 218.85, 382.99, 0), (614.3, 218.48, 382.34, 0))
    assert r["rows"][-1] == row(4294967296, 1073741824, "float", "sum", (15870.0, 270.63, 473.60, 0), (15773.0, 272.30, 476.53, 0))
    assert max(x["ip_busbw"] for x in r["rows"]) == 476.53
    assert (r["avg_busbw"], r["out_of_bounds"]) == (439.369, 0)


def test_h100_two_nodes_srun_labels_and_na():
    r = parse("h100-2node-16gpu-srun-label-no-validation")
    assert [d["host"] for d in r["devices"]] == ["node005"] * 8 + ["node007"] * 8
    assert r["devices"][8] == {"rank": 8, "host": "node007", "device": 0, "name": "NVIDIA H100 80GB HBM3"}
    assert r["devices"][15]["device"] == 7
    assert len(r["rows"]) == 11
    assert r["rows"][0] == row(8388608, 2097152, "float", "sum", (215.3, 38.96, 73.04, None), (180.0, 46.60, 87.38, None))
    assert r["rows"][-1] == row(8589934592, 2147483648, "float", "sum", (103530.0, 82.97, 155.57, None), (103538.0, 82.96, 155.56, None))
    assert {x["oop_wrong"] for x in r["rows"]} == {None} and {x["ip_wrong"] for x in r["rows"]} == {None}
    assert (r["avg_busbw"], r["out_of_bounds"]) == (142.735, 0)


def test_h100_a3mega_two_nodes_pci_domain_bracket():
    r = parse("h100-a3mega-2node-16gpu-mpirun-bdf")
    assert len(r["devices"]) == 16
    assert r["devices"][7] == {"rank": 7, "host": "ztan-mig-235z", "device": 7, "name": "NVIDIA H100 80GB HBM3"}
    assert r["devices"][8] == {"rank": 8, "host": "ztan-mig-gq73", "device": 0, "name": "NVIDIA H100 80GB HBM3"}
    assert [x["size"] for x in r["rows"]] == [2**i for i in range(3, 34)]
    assert r["rows"][0] == row(8, 2, "float", "sum", (135.8, 0.0, 0.0, 0), (123.5, 0.0, 0.0, 0))
    assert r["rows"][-1] == row(8589934592, 2147483648, "float", "sum", (47535.0, 180.71, 338.82, 0), (47743.0, 179.92, 337.35, 0))
    assert (r["avg_busbw"], r["out_of_bounds"]) == (70.742, 0)


def test_a100_p4d_mpi_tagged_output_with_nccl_info_and_error_column():
    r = parse("a100-p4d-2node-efa-mpi-tagged-ncclinfo")
    assert len(r["devices"]) == 16 and {d["name"] for d in r["devices"]} == {"A100-SXM4-40GB"}
    assert r["devices"][9] == {"rank": 9, "host": "nccl-tests-efa-16-worker-1", "device": 1, "name": "A100-SXM4-40GB"}
    assert len(r["rows"]) == 30
    # before 2.13 the column is "error", the largest relative error: a float, not a count
    assert r["rows"][0] == row(8, 2, "float", "sum", (179.1, 0.0, 0.0, 2e-07), (176.3, 0.0, 0.0, 1e-07))
    assert r["rows"][-1] == row(4294967296, 1073741824, "float", "sum", (183834.0, 23.36, 43.81, 5e-07), (184216.0, 23.31, 43.72, 5e-07))
    assert (r["avg_busbw"], r["out_of_bounds"]) == (11.2432, 0)


def test_a100_old_layout_validation_off():
    r = parse("a100-8gpu-allreduce-old-layout-no-validation")
    assert r["devices"][3] == {"rank": 3, "host": "localhost", "device": 3, "name": "A100-SXM4-40GB"}
    assert len(r["devices"]) == 8 and len(r["rows"]) == 34
    assert r["rows"][0] == row(0, 0, "float", "sum", (35.20, 0.0, 0.0, None), (34.05, 0.0, 0.0, None))
    assert r["rows"][-1] == row(8589934592, 2147483648, "float", "sum", (63896.0, 134.44, 235.26, None), (63959.0, 134.30, 235.03, None))
    assert (r["avg_busbw"], r["out_of_bounds"]) == (68.4048, 0)


def test_a100_old_all_gather_has_no_redop_column():
    r = parse("a100-8gpu-allgather-old-layout-no-redop")
    assert {x["redop"] for x in r["rows"]} == {None}
    assert r["rows"][5] == row(32, 1, "float", None, (35.03, 0.0, 0.0, None), (34.15, 0.0, 0.0, None))
    assert r["rows"][-1] == row(8589934592, 268435456, "float", None, (33646.0, 255.31, 223.39, None), (32669.0, 262.94, 230.07, None))
    assert (r["avg_busbw"], r["out_of_bounds"]) == (58.2651, 0)


def test_a100_old_broadcast_root_but_no_redop():
    r = parse("a100-8gpu-broadcast-old-layout-root")
    assert "root" not in r["rows"][0]
    assert r["rows"][-1] == row(8589934592, 2147483648, "float", None, (36896.0, 232.81, 232.81, None), (36599.0, 234.70, 234.70, None))
    assert all(x["oop_algbw"] == x["oop_busbw"] for x in r["rows"])
    assert (r["avg_busbw"], r["out_of_bounds"]) == (64.8653, 0)


# --- layouts built from a real capture --------------------------------------------------------------------
# No capture of nccl-tests 2.18+ (version lines, wider "#wrong" header), of the per-iteration columns
# (2.19.2) or of the timestamp column was found: these take the H100 single-node capture and change only
# the lines those versions print differently (per nccl-tests' src/util.cu). The i_* values are copied from
# the time column and the timestamp is invented; only the layout is under test.

V218_HEAD = "# nccl-tests version 2.18.3 nccl-headers=23004 nccl-library=23004\n# Collective test starting: all_reduce_perf\n"
V218_COLUMNS = "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong \n"
OLD_COLUMNS = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"


def _h100_lines():
    return fixture("nccl-tests", H100_1NODE).splitlines(keepends=True)


def test_v218_version_lines_and_concluded_footer():
    text = V218_HEAD + fixture("nccl-tests", H100_1NODE).replace(OLD_COLUMNS, V218_COLUMNS)
    text += "# Collective test concluded: all_reduce_perf\n#\n"
    assert V218_COLUMNS in text
    assert nccl.parse_nccl_tests(text) == parse(H100_1NODE)


def test_per_iteration_columns_and_timestamp_are_skipped():
    lines = _h100_lines()
    extra = "i_min i_max i_p99 i_cv%"
    header = "# size count type redop root time algbw busbw #wrong %s time algbw busbw #wrong %s timestamp\n" % (extra, extra)
    out = []
    for line in lines:
        if line == OLD_COLUMNS:
            line = header
        elif line.startswith("  ") and line.split()[0].isdigit():
            f = line.split()
            line = "  ".join([*f[:9], f[5], f[5], f[5], "1.25", *f[9:13], f[9], f[9], f[9], "0.50", "2026-06-08", "10:00:00"]) + "\n"
        out.append(line)
    r = nccl.parse_nccl_tests("".join(out))
    assert r["rows"] == parse(H100_1NODE)["rows"]


def test_cputime_column_reads_as_time():
    text = fixture("nccl-tests", H100_1NODE).replace(OLD_COLUMNS, OLD_COLUMNS.replace("    time", " cputime"))
    assert "cputime" in text
    assert nccl.parse_nccl_tests(text)["rows"][0]["oop_time_us"] == 613.3


def test_v213_blank_redop_of_ops_without_a_reduction():
    # nccl-tests 2.13.0-2.13.3 print the redop column but leave it blank for all_gather, broadcast, sendrecv...
    text = fixture("nccl-tests", H100_1NODE).replace("     sum      -1", "              -1")
    r = nccl.parse_nccl_tests(text)
    assert {x["redop"] for x in r["rows"]} == {None}
    assert r["rows"][0]["oop_busbw"] == 382.99 and r["rows"][0]["ip_wrong"] == 0


def test_wrong_counts_and_failed_footer():
    lines = _h100_lines()
    lines[15] = lines[15].replace("382.99      0", "382.99      3")
    lines[16] = lines[16].replace("413.97      0", "413.97 1.67772e+07")  # %g prints large counts in e-notation
    text = "".join(lines).replace("Out of bounds values : 0 OK", "Out of bounds values : 2 FAILED")
    r = nccl.parse_nccl_tests(text)
    assert (r["rows"][0]["oop_wrong"], r["rows"][1]["ip_wrong"]) == (3, 16777200)
    assert r["out_of_bounds"] == 2


def test_footer_missing_when_the_run_is_cut_short():
    text = "".join(_h100_lines()[:18])  # header and three rows, then the run died
    r = nccl.parse_nccl_tests(text)
    assert len(r["rows"]) == 3 and r["avg_busbw"] is None and r["out_of_bounds"] is None


# --- not nccl-tests output -------------------------------------------------------------------------------


def _replace(old, new):
    text = fixture("nccl-tests", H100_1NODE)
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param(" \n\t\n", id="whitespace"),
        pytest.param(fixture("ibstat", "h100-roce-cx7-400g-two-ports-down"), id="ibstat output"),
        pytest.param("".join(_h100_lines()[:15]), id="header without rows"),
        pytest.param(_replace("382.99", "38x.99"), id="busbw not a number"),
        pytest.param(_replace("  613.3", "  N/A"), id="time N/A"),
        pytest.param(_replace("      0    614.3", "    614.3"), id="row missing a field"),
        pytest.param(_replace("float", "fl@at"), id="type not a name"),
        pytest.param(_replace("     0    614.3", "   0.5    614.3"), id="#wrong not a count"),
        pytest.param(_replace("bandwidth    : 439.369", "bandwidth    : N/A"), id="footer not a number"),
        pytest.param(_replace("   algbw   busbw #wrong     time", "   busbw #wrong     time"), id="header group without algbw"),
    ],
)
def test_parse_error(text):
    with pytest.raises(nccl.ParseError):
        nccl.parse_nccl_tests(text)


@pytest.mark.parametrize("value", [None, b"# Avg bus bandwidth    : 1\n", 42, ["   8  2  float"]])
def test_parse_error_on_non_text(value):
    with pytest.raises(nccl.ParseError):
        nccl.parse_nccl_tests(value)


def test_parse_error_is_a_value_error():
    assert issubclass(nccl.ParseError, ValueError)
