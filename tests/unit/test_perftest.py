"""parse_perftest on real perftest reports (tests/fixtures/realworld/perftest, provenance in *.src.txt).

Every capture is checked against the numbers it prints. Edge cases no capture shows are built
here from a real capture (a line changed, cut or added) and say so where they are built.
"""

from __future__ import annotations

import pytest
from ansible.module_utils.rackforge import perftest
from conftest import FIXTURES, captures, fixture

CAPTURES = [p.stem for p in captures("perftest")]

# name: (kind, test, device, link_type, gid_index, mtu, bw_unit, number of rows)
BANNERS = {
    "hpe-slingshot-roce-write-bw-duration-gbits": ("bw", "RDMA_Write BW Test", "mlx5_0", "Ethernet", 3, 4096, "Gb/sec", 1),
    "spiderpool-cx5-roce-read-lat-gid12-indented": ("lat", "RDMA_Read Latency Test", "mlx5_0", "Ethernet", 12, 1024, None, 1),
    "dgx-spark-cx7-write-bw-4qp-rdmacm-forced-ib": ("bw", "RDMA_Write BW Test", "rocep1s0f1", "IB", None, 1024, "Gb/sec", 1),
    "dgx-spark-cx7-write-lat-rdmacm-forced-ib": ("lat", "RDMA_Write Latency Test", "rocep1s0f1", "IB", None, 1024, None, 1),
    "azure-hc44rs-cx5vf-edr-send-lat-all-sizes-old-layout": ("lat", "Send Latency Test", "mlx5_0", "IB", None, 4096, None, 23),
    "azure-hc44rs-cx5vf-edr-send-bw-all-sizes-mbsec": ("bw", "Send BW Test", "mlx5_0", "IB", None, 4096, "MB/sec", 23),
    "a100-cx6-hdr-ib-write-lat-all-sizes-server-cpufreq-warnings": ("lat", "RDMA_Write Latency Test", "mlx5_0", "IB", None, 4096, None, 23),
    "cx7-ndr400-ib-send-bw-mibsec-doca-3.3": ("bw", "Send BW Test", "mlx5_0", "IB", None, 4096, "MB/sec", 1),
    "ompi-users-2012-infinihost3-sdr-write-bw-old-no-msgrate": ("bw", "RDMA_Write BW Test", None, "IB", None, 2048, "MB/sec", 1),
}
BW_KEYS = ["bytes", "iterations", "bw_peak", "bw_avg", "msg_rate_mpps"]
LAT_KEYS = ["bytes", "iterations", "t_min_us", "t_max_us", "t_typical_us", "t_avg_us", "t_stdev_us", "p99_us", "p99_9_us"]


def parsed(name):
    return perftest.parse_perftest(fixture("perftest", name))


def test_every_capture_has_provenance_and_a_banner_row():
    assert sorted(BANNERS) == CAPTURES
    for name in CAPTURES:
        src = (FIXTURES / "perftest" / (name + ".src.txt")).read_text()
        for field in ("source:", "repo:", "path:", "commit:", "command:", "hardware:", "state:", "verbatim:"):
            assert field in src, (name, field)


@pytest.mark.parametrize("name", sorted(BANNERS))
def test_banner_and_layout(name):
    kind, test, device, link_type, gid_index, mtu, bw_unit, count = BANNERS[name]
    out = parsed(name)
    assert (out["kind"], out["test"], out["device"], out["link_type"]) == (kind, test, device, link_type)
    assert (out["gid_index"], out["mtu"], out["bw_unit"], len(out["rows"])) == (gid_index, mtu, bw_unit, count)
    for row in out["rows"]:
        assert list(row) == (BW_KEYS if kind == "bw" else LAT_KEYS)
        assert type(row["bytes"]) is int and type(row["iterations"]) is int


def test_roce_bw_duration_mode_gbits():
    (row,) = parsed("hpe-slingshot-roce-write-bw-duration-gbits")["rows"]
    # duration mode (-D) does not measure a peak: perftest prints 0.00
    assert row == {"bytes": 65536, "iterations": 560960, "bw_peak": 0.0, "bw_avg": 98.03, "msg_rate_mpps": 0.186974}


def test_roce_lat_indented_with_cpu_frequency_warnings():
    (row,) = parsed("spiderpool-cx5-roce-read-lat-gid12-indented")["rows"]
    assert row == {
        "bytes": 2,
        "iterations": 1000,
        "t_min_us": 6.88,
        "t_max_us": 16.81,
        "t_typical_us": 7.04,
        "t_avg_us": 7.06,
        "t_stdev_us": 0.31,
        "p99_us": 7.38,
        "p99_9_us": 16.81,
    }


def test_forced_ib_link_type_is_what_perftest_printed():
    (bw,) = parsed("dgx-spark-cx7-write-bw-4qp-rdmacm-forced-ib")["rows"]
    assert (bw["iterations"], bw["bw_peak"], bw["bw_avg"], bw["msg_rate_mpps"]) == (20000, 111.72, 111.71, 0.21307)
    (lat,) = parsed("dgx-spark-cx7-write-lat-rdmacm-forced-ib")["rows"]
    assert (lat["t_min_us"], lat["t_typical_us"], lat["t_stdev_us"], lat["p99_us"], lat["p99_9_us"]) == (1.42, 1.47, 0.0, 1.57, 1.93)


def test_old_latency_layout_has_no_avg_stdev_or_percentiles():
    rows = parsed("azure-hc44rs-cx5vf-edr-send-lat-all-sizes-old-layout")["rows"]
    assert [r["bytes"] for r in rows] == [2**i for i in range(1, 24)]
    assert rows[0] == {
        "bytes": 2,
        "iterations": 1000,
        "t_min_us": 2.57,
        "t_max_us": 15.38,
        "t_typical_us": 2.66,
        "t_avg_us": None,
        "t_stdev_us": None,
        "p99_us": None,
        "p99_9_us": None,
    }
    assert (rows[13]["bytes"], rows[13]["t_max_us"]) == (16384, 27.13)
    assert (rows[-1]["t_min_us"], rows[-1]["t_max_us"], rows[-1]["t_typical_us"]) == (706.63, 715.72, 708.96)


def test_all_sizes_bw_in_mb_per_sec():
    rows = parsed("azure-hc44rs-cx5vf-edr-send-bw-all-sizes-mbsec")["rows"]
    assert [r["bytes"] for r in rows] == [2**i for i in range(1, 24)]
    assert rows[0] == {"bytes": 2, "iterations": 1000, "bw_peak": 9.88, "bw_avg": 9.73, "msg_rate_mpps": 5.100508}
    assert (rows[12]["bytes"], rows[12]["bw_peak"], rows[12]["bw_avg"]) == (8192, 10886.86, 10886.39)
    assert (rows[-1]["bw_avg"], rows[-1]["msg_rate_mpps"]) == (11511.92, 0.001439)


def test_all_sizes_lat_with_tabs_and_warnings_between_rows():
    rows = parsed("a100-cx6-hdr-ib-write-lat-all-sizes-server-cpufreq-warnings")["rows"]
    assert [r["bytes"] for r in rows] == [2**i for i in range(1, 24)]
    assert (rows[0]["t_typical_us"], rows[0]["t_avg_us"], rows[0]["t_stdev_us"], rows[0]["p99_us"]) == (1.87, 1.88, 0.19, 2.04)
    assert rows[-1] == {
        "bytes": 8388608,
        "iterations": 1000,
        "t_min_us": 345.22,
        "t_max_us": 447.04,
        "t_typical_us": 345.55,
        "t_avg_us": 348.39,
        "t_stdev_us": 16.09,
        "p99_us": 441.72,
        "p99_9_us": 447.04,
    }


def test_mib_per_sec_header_reports_mb_per_sec():
    # perftest 24.07 relabelled MB/sec as MiB/sec; both divide by 2^20 (format_factor 0x100000)
    (row,) = parsed("cx7-ndr400-ib-send-bw-mibsec-doca-3.3")["rows"]
    assert row == {"bytes": 65536, "iterations": 1000, "bw_peak": 46567.34, "bw_avg": 46557.03, "msg_rate_mpps": 0.744912}


def test_old_bw_layout_without_msgrate_column():
    (row,) = parsed("ompi-users-2012-infinihost3-sdr-write-bw-old-no-msgrate")["rows"]
    assert row == {"bytes": 65536, "iterations": 5000, "bw_peak": 937.61, "bw_avg": 937.6, "msg_rate_mpps": None}


def test_header_decides_the_layout_not_the_value_count():
    # Built from a real capture: the 5-value bw row under a 4-column header (MsgRate deleted) must not be read as
    # bw with a message rate; it is one value too many.
    text = fixture("perftest", "hpe-slingshot-roce-write-bw-duration-gbits").replace("   MsgRate[Mpps]", "")
    with pytest.raises(perftest.ParseError, match="row 21 has 5 values, the column header names 4"):
        perftest.parse_perftest(text)


def test_raw_latency_samples_are_not_rows():
    # Built from a real capture: -H / -U print "#, usec" and one "i, value" line per sample, then the rule and the
    # column header again before the result row (print_report_lat in perftest_parameters.c); samples from the row.
    text = fixture("perftest", "dgx-spark-cx7-write-lat-rdmacm-forced-ib")
    header = next(line for line in text.splitlines() if line.lstrip().startswith("#bytes"))
    rule = "-" * 87
    samples = "#, usec\n1, 1.42\n2, 1.47\n3, 1.93\n%s\n%s\n" % (rule, header)
    out = perftest.parse_perftest(text.replace(header + "\n", header + "\n" + samples, 1))
    assert [(r["bytes"], r["t_typical_us"]) for r in out["rows"]] == [(2, 1.47)]


def test_unknown_link_type_is_none():
    # Built from a real capture: link_layer_str() prints "Unknown" for a link layer it does not know
    text = fixture("perftest", "dgx-spark-cx7-write-lat-rdmacm-forced-ib").replace("Link type       : IB", "Link type       : Unknown")
    assert perftest.parse_perftest(text)["link_type"] is None


def cut_after_header(name):
    """A real capture cut right after its column header line (a run that died before its first row)."""
    text = fixture("perftest", name)
    return text[: text.index("\n", text.index("#bytes")) + 1]


def bad_value(name, old, new):
    text = fixture("perftest", name)
    assert old in text
    return text.replace(old, new, 1)


BAD = {
    "empty": ("", "empty"),
    "blank lines": ("\n  \n\t\n", "empty"),
    "bytes": (b" #bytes     #iterations", "must be text"),
    "none": (None, "must be text"),
    "ibstat output": (fixture("ibstat", "h100-roce-cx7-400g-two-ports-down"), "no perftest result table"),
    "banner only": (fixture("perftest", "hpe-slingshot-roce-write-bw-duration-gbits").split(" #bytes")[0], "no perftest result table"),
    "header, no rows (bw)": (cut_after_header("hpe-slingshot-roce-write-bw-duration-gbits"), "no result rows"),
    "header, no rows (lat)": (cut_after_header("a100-cx6-hdr-ib-write-lat-all-sizes-server-cpufreq-warnings"), "no result rows"),
    "non-number in a row": (bad_value("hpe-slingshot-roce-write-bw-duration-gbits", "98.03", "98.O3"), r"'98\.O3' is not a number"),
    "float bytes": (bad_value("azure-hc44rs-cx5vf-edr-send-bw-all-sizes-mbsec", " 4          1000", " 4.5        1000"), "not an integer"),
    "row missing a value": (
        bad_value("spiderpool-cx5-roce-read-lat-gid12-indented", "0.31      ", ""),
        "8 values, the column header names 9",
    ),
    "unknown column": (bad_value("dgx-spark-cx7-write-bw-4qp-rdmacm-forced-ib", "MsgRate[Mpps]", "Jitter[usec]"), "unknown column"),
    "no title": (bad_value("dgx-spark-cx7-write-bw-4qp-rdmacm-forced-ib", "RDMA_Write BW Test", ""), "no perftest test title"),
    "title of another test": (bad_value("dgx-spark-cx7-write-bw-4qp-rdmacm-forced-ib", "BW Test", "Latency Test"), "does not match"),
    "two tools concatenated": (
        fixture("perftest", "hpe-slingshot-roce-write-bw-duration-gbits") + fixture("perftest", "dgx-spark-cx7-write-lat-rdmacm-forced-ib"),
        "second table with other columns",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_not_perftest_output_raises_parse_error(case):
    text, message = BAD[case]
    with pytest.raises(perftest.ParseError, match=message):
        perftest.parse_perftest(text)


def test_parse_error_is_a_value_error():
    assert issubclass(perftest.ParseError, ValueError)


def test_gid_addresses_reads_the_ipv4_behind_each_sides_gid_on_real_roce_captures():
    # %02d per byte: "01" is 1, "00" is 0 (PERF_GID_FMT prints decimal, not hex)
    assert perftest.gid_addresses(fixture("perftest", "hpe-slingshot-roce-write-bw-duration-gbits")) == {
        "local": "192.168.1.4",
        "remote": "192.168.1.2",
    }
    assert perftest.gid_addresses(fixture("perftest", "spiderpool-cx5-roce-read-lat-gid12-indented")) == {
        "local": "172.81.0.119",
        "remote": "172.81.0.120",
    }
    # RDMA-CM without -x and forced IB: no GID lines, so no address
    assert perftest.gid_addresses(fixture("perftest", "dgx-spark-cx7-write-lat-rdmacm-forced-ib")) == {"local": None, "remote": None}
    # built from the RoCE capture: a GID that is not IPv4-mapped (link-local fe80::) has no IPv4 address
    text = fixture("perftest", "hpe-slingshot-roce-write-bw-duration-gbits").replace(
        "GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:02", "GID: 254:128:00:00:00:00:00:00:02:16:139:255:254:01:02:03"
    )
    assert perftest.gid_addresses(text)["remote"] is None
    with pytest.raises(perftest.ParseError):
        perftest.gid_addresses(b"GID: 00")
