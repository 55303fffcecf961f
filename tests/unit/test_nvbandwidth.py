from __future__ import annotations

import re

import pytest
from ansible.module_utils.rackforge import nvbandwidth as nvb
from conftest import FIXTURES, captures, fixture

H100 = "h100-azure-ndv5-8gpu-nvlink-d2d-read-ce-v0.4"
H800 = "h800-8gpu-nvlink-full-run-v0.2"
A6000 = "a6000-6gpu-pcie-d2d-read-ce-v0.8"
A100 = "a100-40gb-1gpu-h2d-sm-v0.8"
README = "readme-8gpu-d2d-write-ce-v0.1"
CRASH = "a100-8gpu-d2d-read-ce-assert-crash-v0.7"
ALL_PARSED = [H100, H800, A6000, A100, README]


def parse(name):
    return nvb.parse_nvbandwidth(fixture("nvbandwidth", name))["tests"]


def test_every_capture_has_provenance():
    names = [p.stem for p in captures("nvbandwidth")]
    assert names == sorted([*ALL_PARSED, CRASH])
    for name in names:
        src = (FIXTURES / "nvbandwidth" / (name + ".src.txt")).read_text()
        assert src.startswith("source: https://github.com/") and "\nverbatim: " in src


def test_h100_nvlink_read_ce():
    tests = parse(H100)
    assert list(tests) == ["device_to_device_memcpy_read_ce"]
    t = tests["device_to_device_memcpy_read_ce"]
    assert t["sum"] == 20785.58
    assert t["testcase"] == "device_to_device_memcpy_read_ce"
    assert t["title"] == "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)" and t["unit"] == "GB/s"
    assert t["matrix"][(0, 1)] == 370.90 and t["matrix"][(2, 4)] == 372.96 and t["matrix"][(7, 6)] == 370.90
    assert t["matrix"][(0, 7)] == 371.67 and t["matrix"][(6, 0)] == 371.41
    assert set(t["matrix"]) == {(r, c) for r in range(8) for c in range(8) if r != c}  # N/A diagonal absent
    assert min(t["matrix"].values()) == 370.26 and max(t["matrix"].values()) == 372.96


def test_h800_full_run_host_and_device_tests():
    tests = parse(H800)
    assert len(tests) == 30
    assert all(t["testcase"] == key and t["unit"] == "GB/s" for key, t in tests.items())
    h2d = tests["host_to_device_memcpy_ce"]
    assert h2d["title"] == "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)"
    assert set(h2d["matrix"]) == {(0, c) for c in range(8)}  # host tests: the single CPU row 0
    assert h2d["matrix"][(0, 0)] == 55.28 and h2d["matrix"][(0, 7)] == 55.34 and h2d["sum"] == 442.52
    d2h_bidir = tests["device_to_host_bidirectional_memcpy_ce"]
    assert d2h_bidir["matrix"][(0, 1)] == 50.50 and d2h_bidir["matrix"][(0, 4)] == 34.29 and d2h_bidir["sum"] == 291.85
    read = tests["device_to_device_memcpy_read_ce"]
    assert read["matrix"][(5, 6)] == 172.32 and read["matrix"][(7, 5)] == 172.57 and read["sum"] == 9643.22
    assert (3, 3) not in read["matrix"] and len(read["matrix"]) == 56
    assert tests["device_to_device_bidirectional_memcpy_write_sm"]["matrix"][(6, 5)] == 326.82
    assert tests["all_to_one_write_ce"]["title"] == "memcpy CE All Gpus -> GPU(column) total bandwidth (GB/s)"
    assert tests["one_to_all_read_sm"]["matrix"][(0, 3)] == 165.89 and tests["one_to_all_read_sm"]["sum"] == 1222.39
    # v0.2 mislabels this SM test "memcpy CE" (NVIDIA/nvbandwidth#14); the title is kept as printed
    assert tests["device_to_device_memcpy_read_sm"]["title"].startswith("memcpy CE GPU(row)")


def test_a6000_pcie_without_running_line():
    tests = parse(A6000)
    t = tests["device_to_device_memcpy_read_ce"]
    assert t["testcase"] is None  # the reporter elided the Running line; the SUM line names the result
    assert t["sum"] == 715.53
    assert t["matrix"][(0, 1)] == 26.34 and t["matrix"][(0, 3)] == 21.95 and t["matrix"][(5, 1)] == 22.67
    assert len(t["matrix"]) == 30 and all((g, g) not in t["matrix"] for g in range(6))
    assert max(t["matrix"].values()) < 27  # PCIe only: no NVLink pair


def test_a100_single_gpu_host_to_device_sm():
    t = parse(A100)["host_to_device_memcpy_sm"]
    assert t == {
        "matrix": {(0, 0): 25.13},
        "sum": 25.13,
        "testcase": "host_to_device_memcpy_sm",
        "title": "memcpy SM CPU(row) -> GPU(column) bandwidth (GB/s)",
        "unit": "GB/s",
    }


def test_readme_sample_v01_zero_diagonal_no_sum():
    t = parse(README)["device_to_device_memcpy_write_ce"]
    assert t["sum"] is None
    assert t["matrix"][(0, 0)] == 0.0 and len(t["matrix"]) == 64  # v0.1 printed 0.00, not N/A
    assert t["matrix"][(6, 0)] == 274.89 and t["matrix"][(4, 3)] == 276.76


@pytest.mark.parametrize("name", ALL_PARSED)
def test_sum_matches_the_printed_cells(name):
    for t in parse(name).values():
        if t["sum"] is not None:  # cells are rounded to 2 decimals, the sum is of the unrounded values
            assert abs(sum(t["matrix"].values()) - t["sum"]) <= 0.005 * len(t["matrix"]) + 0.01


def test_aborted_run_is_an_error():
    with pytest.raises(nvb.ParseError, match="device_to_device_memcpy_read_ce printed no result matrix"):
        parse(CRASH)


def _h100_lines():
    return fixture("nvbandwidth", H100).splitlines()


def _replace(text, old, new):
    assert old in text
    return text.replace(old, new, 1)


H100_ROW2 = "2    372.05    370.90       N/A    370.90    372.96    370.38    371.67    371.67"


def _bad_inputs():
    # Edge cases built from the real H100 capture (or other tools' real captures), changed as each comment says.
    h100 = fixture("nvbandwidth", H100)
    lines = h100.splitlines()
    return [
        ("empty", "", "empty output"),
        ("blank", "  \n\n", "empty output"),
        ("nvidia-smi topo -m", fixture("nvidia-smi-topo-m", "h100-8gpu-nv18-2numa"), "no result matrix"),
        ("ibstat", fixture("ibstat", "h100-ib-ndr-plus-bf3-bond-roce"), "no result matrix"),
        # row 2 lost its last cell
        ("short row", _replace(h100, H100_ROW2, H100_ROW2[:-10]), "line 26: expected a row label and 8 cells"),
        # row 7 got a ninth cell
        ("long row", _replace(h100, "    370.90       N/A\n", "    370.90       N/A    370.90\n"), "line 31: expected a row label"),
        ("letter in a cell", _replace(h100, "372.96", "372.9x"), "'372.9x' is neither a number nor N/A"),
        ("nan cell", _replace(h100, "372.96", "nan"), "'nan' is neither"),
        ("negative cell", _replace(h100, "370.26", "-1.00"), "'-1.00' is neither"),
        ("bad SUM value", _replace(h100, "20785.58", "n/a"), "'n/a' is neither"),
        # cut after the header line
        ("header without rows", "\n".join(lines[:23]), "matrix header with no rows"),
        # the Running line, then the next test's Running line instead of a matrix
        (
            "test without matrix",
            _replace(h100, "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)", "Running x."),
            "device_to_device_memcpy_read_ce printed no result",
        ),
        # nvbandwidth's own status line (output.cpp addTestcase), e.g. for `-t` with an unknown name
        ("ERROR status", "\n".join([*lines[:20], "ERROR: Testcase foo not found!"]), "reported 'ERROR: Testcase foo not found!'"),
        ("same run twice", h100 + "\n" + h100, "device_to_device_memcpy_read_ce printed twice"),
        (
            "SUM of another test",
            _replace(h100, "SUM device_to_device_memcpy_read_ce", "SUM host_to_device_memcpy_ce"),
            "SUM for host_to_device_memcpy_ce inside test",
        ),
        # the Running line removed and no SUM line: nothing names the matrix
        ("unnamed matrix", "\n".join(lines[21:31]), "neither a Running line nor a SUM line"),
    ]


@pytest.mark.parametrize(("text", "match"), [c[1:] for c in _bad_inputs()], ids=[c[0] for c in _bad_inputs()])
def test_bad_inputs(text, match):
    with pytest.raises(nvb.ParseError, match=re.escape(match)):
        nvb.parse_nvbandwidth(text)


@pytest.mark.parametrize("value", [None, b"nvbandwidth Version: v0.8\n", 42, ["Running x."]])
def test_non_text_is_a_parse_error(value):
    with pytest.raises(nvb.ParseError):
        nvb.parse_nvbandwidth(value)


def test_waived_and_noise_lines_are_ignored():
    # Built from the H100 capture: "Waived: " (v0.5+, output.cpp addTestcase with no name), "Waiving x." (v0.4),
    # -v sample and MIN/MAX/AVG lines, a hostname line (v0.8), and the COEFFICIENT_OF_VARIATION line later
    # releases print after SUM (seen in public v0.10 outputs).
    lines = _h100_lines()
    noisy = [
        *lines[:11],
        "elsah100",
        *lines[11:20],
        "Waived: ",
        "Waiving all_to_host_memcpy_ce.",
        lines[20],
        "\tSample 0: Device 1 -> Device 0: 370.90 GB/s",
    ]
    noisy += [
        *lines[21:],
        "MIN device_to_device_memcpy_read_ce 0.00",
        "COEFFICIENT_OF_VARIATION device_to_device_memcpy_read_ce 0.00",
        "Waived: ",
    ]
    assert nvb.parse_nvbandwidth("\n".join(noisy))["tests"] == parse(H100)
    assert nvb.parse_nvbandwidth("\r\n".join(lines))["tests"] == parse(H100)


def test_all_waived_run_has_no_tests():
    # the H100 preamble followed by v0.5+ waived lines only (e.g. a device-to-device test on one GPU)
    assert nvb.parse_nvbandwidth("\n".join([*_h100_lines()[:20], "Waived: ", "Waived: "])) == {"tests": {}}


def test_perf_formatter_sum_line():
    # --perfFormatter (v0.7+, inline_common.h) prints "&&&& PERF <key> <sum> +GB/s" instead of the SUM line
    text = _replace(
        fixture("nvbandwidth", H100),
        "SUM device_to_device_memcpy_read_ce 20785.58",
        "&&&& PERF device_to_device_memcpy_read_ce 20785.58 +GB/s",
    )
    assert nvb.parse_nvbandwidth(text)["tests"]["device_to_device_memcpy_read_ce"]["sum"] == 20785.58


def test_bidirectional_three_matrices_per_testcase():
    # v0.6+ bidirectional device-to-device tests print Read1, Read2 and Total matrices with SUM keys
    # <testcase>_read1/_read2/_total (testcases_ce.cpp). No capture at hand shows it: built from the A6000
    # capture's matrix (its numbers reused for all three) in that layout.
    lines = fixture("nvbandwidth", A6000).splitlines()
    header_rows = lines[10:17]
    text = ["Running device_to_device_bidirectional_memcpy_read_ce."]
    for part in ("read1", "read2", "total"):
        text += ["memcpy CE GPU(row) <-> GPU(column) %s bandwidth (GB/s)" % part.capitalize(), *header_rows, ""]
        text += ["SUM device_to_device_bidirectional_memcpy_read_ce_%s 715.53" % part, ""]
    tests = nvb.parse_nvbandwidth("\n".join(text))["tests"]
    assert sorted(tests) == ["device_to_device_bidirectional_memcpy_read_ce_" + p for p in ("read1", "read2", "total")]
    total = tests["device_to_device_bidirectional_memcpy_read_ce_total"]
    assert total["testcase"] == "device_to_device_bidirectional_memcpy_read_ce"
    assert total["title"] == "memcpy CE GPU(row) <-> GPU(column) Total bandwidth (GB/s)"
    assert total["matrix"][(0, 3)] == 21.95 and total["sum"] == 715.53


def test_latency_unit_and_bisect_labels():
    # Built from the H100 capture's numbers in layouts the source defines but no capture here shows: the latency
    # title of testcases_sm.cpp ("(ns)") and the multinode bisect rows of multinode_testcases.cpp, whose labels are
    # padded process ids ("10-> 0"), one column, no unit in the title.
    latency = _replace(
        fixture("nvbandwidth", H100),
        "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
        "Device to Device Latency SM GPU(row) <-> GPU(column) (ns)",
    )
    assert nvb.parse_nvbandwidth(latency)["tests"]["device_to_device_memcpy_read_ce"]["unit"] == "ns"
    bisect = ["Running multinode_bisect_write_ce.", "Bisect benchmarking, simultaneous write CE BW", "               0"]
    bisect += [" 0->10    370.90", "10-> 0    372.05", "", "SUM multinode_bisect_write_ce 742.95"]
    t = nvb.parse_nvbandwidth("\n".join(bisect))["tests"]["multinode_bisect_write_ce"]
    assert t["matrix"] == {("0->10", 0): 370.90, ("10->0", 0): 372.05} and t["unit"] is None
