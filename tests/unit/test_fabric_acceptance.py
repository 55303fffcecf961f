"""Fabric acceptance: the lab's simulated perftest / nvbandwidth / nccl-tests held to real captures,
and rdma_acceptance / nvlink_acceptance / the report run over simulated nodes on loopback."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import time

import nvlink_acceptance
import pytest
from ansible.module_utils.rackforge.acceptance_report import fleet_verdict, metrics, render_markdown
from ansible.module_utils.rackforge.nccl import parse_nccl_tests
from ansible.module_utils.rackforge.nvbandwidth import parse_nvbandwidth
from ansible.module_utils.rackforge.perftest import gid_addresses, parse_perftest
from conftest import fixture
from hwsim_helper import Sim
from test_modules import run_module

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUNNER = (
    "import sys, runpy, ansible.module_utils as m; m.__path__.append(%r); "
    "sys.argv = [sys.argv[0], sys.argv[1]]; runpy.run_path(%r, run_name='__main__')"
)


def node_sim(tmp_path, name):
    (tmp_path / name).mkdir()
    return Sim(tmp_path / name)


def shape(text):
    """A line's layout without its values: numbers, hex and names become placeholders."""
    text = re.sub(r"0x[0-9a-f]+", "H", text)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return re.sub(r"\s+", " ", text).strip()


def serve_and_connect(server, client, test, extra=(), port=19600):
    argv = [test, "-d", "mlx5_0", "-i", "1", "-F", "-p", str(port), "-x", "3", "--tclass=104", *extra]
    srv = subprocess.Popen(argv, env=server.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(50):
        res = subprocess.run([*argv, "127.0.0.1"], env=client.env, capture_output=True, text=True, check=False)
        if "Couldn't connect" not in res.stderr:
            break
        time.sleep(0.1)
    out, _ = srv.communicate(timeout=30)
    return res, out


def test_simulated_ib_write_bw_has_the_real_roce_layout_and_parses(tmp_path):
    a, b = node_sim(tmp_path, "a"), node_sim(tmp_path, "b")
    res, server_out = serve_and_connect(b, a, "ib_write_bw", ["--report_gbits", "-D", "1"])
    assert res.returncode == 0, res.stderr
    parsed = parse_perftest(res.stdout)
    assert (parsed["kind"], parsed["link_type"], parsed["gid_index"], parsed["mtu"], parsed["bw_unit"]) == (
        "bw",
        "Ethernet",
        3,
        4096,
        "Gb/sec",
    )
    assert 385 < float(parsed["rows"][0]["bw_avg"]) < 400  # 98 % of 400G
    assert float(parsed["rows"][0]["bw_peak"]) == 0.0  # -D: perftest prints no peak
    # the real RoCE capture (perftest 4.x, -D, --report_gbits): the same labels, addresses and GID lines
    real = fixture("perftest", "hpe-slingshot-roce-write-bw-duration-gbits").splitlines()
    labels = lambda lines: [shape(x.split(":")[0]) for x in lines if " : " in x]
    assert set(labels(real)) <= set(labels(res.stdout.splitlines())) | {"TX depth"}
    for prefix in (
        " local address: LID 0000 QPN",
        " GID: 00:00:00:00:00:00:00:00:00:00:255:255:",
        " #bytes     #iterations    BW peak[Gb/sec]",
    ):
        assert any(x.startswith(prefix) for x in real) and any(x.startswith(prefix) for x in res.stdout.splitlines())
    # the write_bw server waits for the client, then prints the client's row
    assert "* Waiting for client to connect... *" in server_out
    assert parse_perftest(server_out)["rows"] == parsed["rows"]


def test_simulated_ib_write_lat_parses_and_high_latency_adds_microseconds(tmp_path):
    a, b = node_sim(tmp_path, "a"), node_sim(tmp_path, "b")
    res, _ = serve_and_connect(b, a, "ib_write_lat")
    healthy = parse_perftest(res.stdout)["rows"][0]["t_typical_us"]
    assert healthy < 2.5
    b.run("hwsim", "fault", "add", "high_latency", "ca=mlx5_0", "us=6")
    res, _ = serve_and_connect(b, a, "ib_write_lat", port=19601)
    assert parse_perftest(res.stdout)["rows"][0]["t_typical_us"] > 7


def test_simulated_perftest_fails_as_the_real_one(tmp_path):
    a = node_sim(tmp_path, "a")
    res = subprocess.run(
        ["ib_write_bw", "-d", "mlx5_0", "-p", "19602", "127.0.0.1"], env=a.env, capture_output=True, text=True, check=False
    )
    assert res.returncode == 1 and "Couldn't connect to 127.0.0.1:19602" in res.stderr
    res = subprocess.run(["ib_write_bw", "-d", "mlx5_9"], env=a.env, capture_output=True, text=True, check=False)
    assert res.returncode == 1 and "IB device mlx5_9 not found" in res.stderr
    a.run("hwsim", "fault", "add", "rdma_port_down", "ca=mlx5_0")
    res = subprocess.run(["ib_write_bw", "-d", "mlx5_0"], env=a.env, capture_output=True, text=True, check=False)
    assert res.returncode == 1 and "Port number 1 state is Down" in res.stderr


def test_simulated_nvbandwidth_matches_the_real_h100_capture_line_by_line(tmp_path):
    sim = Sim(tmp_path)
    out = sim.run("nvbandwidth", "-t", "device_to_device_memcpy_read_ce")
    real = fixture("nvbandwidth", "h100-azure-ndv5-8gpu-nvlink-d2d-read-ce-v0.4").splitlines()[1:]  # [0]: the shell prompt
    mine = out.splitlines()
    assert [shape(x) for x in mine if not x.startswith(("Built", "CUDA", "Driver"))] == [
        shape(x) for x in real if not x.startswith(("Built", "CUDA", "Driver"))
    ]
    cells = parse_nvbandwidth(out)["tests"]["device_to_device_memcpy_read_ce"]["matrix"]
    assert len(cells) == 56 and all(365 < v < 378 for v in cells.values())  # the capture: 370.26-372.96


def test_simulated_nvbandwidth_write_test_has_the_real_title_and_matrix_layout(tmp_path):
    """The write copy (GPU(row) <- GPU(column)), held to the real H800 run's write section."""
    sim = Sim(tmp_path)
    out = sim.run("nvbandwidth", "-t", "device_to_device_memcpy_write_ce")
    real = fixture("nvbandwidth", "h800-8gpu-nvlink-full-run-v0.2")
    section = real[real.index("Running device_to_device_memcpy_write_ce.") :].splitlines()
    mine = out[out.index("Running device_to_device_memcpy_write_ce.") :].splitlines()
    assert mine[:2] == section[:2]  # "Running ...", "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)"
    assert [shape(x) for x in mine[3:11]] == [shape(x) for x in section[3:11]]  # the 8 rows, N/A on the diagonal
    assert shape(mine[-1] or mine[-2]) == shape(section[12])  # SUM <test> <total>
    result = parse_nvbandwidth(out)["tests"]["device_to_device_memcpy_write_ce"]
    assert len(result["matrix"]) == 56 and "<-" in result["title"]


def test_simulated_all_reduce_perf_matches_the_real_h100_capture(tmp_path):
    sim = Sim(tmp_path)
    out = sim.run("all_reduce_perf", "-b", "134217728", "-e", "4294967296", "-f", "2", "-g", "8")
    real = fixture("nccl-tests", "h100-8gpu-nvls-allreduce-single-node")
    strip = lambda text: [shape(x) for x in text.splitlines() if not x.startswith("#  Rank") and not x.startswith("# nThread")]
    assert strip(out) == strip(real)
    parsed = parse_nccl_tests(out)
    assert len(parsed["devices"]) == 8 and parsed["out_of_bounds"] == 0
    assert 465 < parsed["rows"][-1]["oop_busbw"] < 480  # the capture: 473.60 at 4 GiB


def test_nvlink_acceptance_passes_a_healthy_h100_and_names_a_slow_pair(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path)
    args = {"gpus": 8, "min_busbw_gbps": 400.0}
    res = run_module(nvlink_acceptance, args, sim, monkeypatch, capsys)
    assert res["findings"] == [] and res["busbw_gbps"] > 400 and len(res["pairs"]["gbps"]) == 56
    assert len(res["write_pairs"]["gbps"]) == 56 and res["write_pairs"]["median_gbps"] > 360
    sim.run("hwsim", "fault", "add", "slow_gpu_pair", "gpu=2", "peer=5", "factor=0.5")
    res = run_module(nvlink_acceptance, args, sim, monkeypatch, capsys)
    slow = sorted(f["component"] for f in res["findings"] if f["check"] == "nvlink_bandwidth")
    # the read copy (row -> column) and the write copy (row <- column), each direction of the pair
    assert slow == ["GPU 2 -> GPU 5", "GPU 2 <- GPU 5", "GPU 5 -> GPU 2", "GPU 5 <- GPU 2"]
    assert any(f["check"] == "nccl_busbw" for f in res["findings"])  # the ring crosses the slow pair


def test_nvlink_acceptance_judges_the_write_copy_even_when_the_read_copy_passes(tmp_path, monkeypatch, capsys):
    """An nvbandwidth that fails only its write test: the read matrix is kept, the write test is a
    finding with its evidence, never a pass."""
    sim = Sim(tmp_path)
    wrapper = tmp_path / "nvbandwidth-write-fails"
    wrapper.write_text(
        '#!/bin/sh\ncase "$*" in *write_ce*) echo "ERROR: CUDA error: an illegal memory access" >&2; exit 1;; esac\nexec nvbandwidth "$@"\n'
    )
    wrapper.chmod(0o755)
    res = run_module(nvlink_acceptance, {"gpus": 8, "nvbandwidth_path": str(wrapper)}, sim, monkeypatch, capsys)
    assert len(res["pairs"]["gbps"]) == 56 and res["write_pairs"] == {"gbps": {}, "median_gbps": None}
    bad = [f for f in res["findings"] if f["check"] == "nvlink_bandwidth_not_run"]
    assert len(bad) == 1 and "device_to_device_memcpy_write_ce" in bad[0]["evidence"]["command"], res["findings"]
    assert "illegal memory access" in bad[0]["evidence"]["stderr"]


def test_nvlink_acceptance_without_the_tools_is_not_run_never_a_pass(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path)
    res = run_module(nvlink_acceptance, {"gpus": 8, "nvbandwidth_path": "/nonexistent/nvbandwidth"}, sim, monkeypatch, capsys)
    assert [f["check"] for f in res["findings"]][:1] == ["nvlink_bandwidth_not_run"]


def fleet(tmp_path, names):
    """Simulated nodes with indices 1, 2, ... (so RoCE addresses 10.10<rail>.0.<index>) on loopback
    addresses of their own (127.0.0.<index + 1>: a lab node has its own netns), each knowing the
    fabric (which node answers for which RoCE address), as the lab writes it."""
    sims = {}
    for index, name in enumerate(names, start=1):
        sim = node_sim(tmp_path, name)
        sim.run("hwsim", "init", str(ROOT / "lab/hwsim/profiles/hgx-h100-8gpu.json"), "--seed", name, "--index", str(index))
        sim.env["HWSIM_LISTEN_ADDR"] = "127.0.0.%d" % (index + 1)
        sims[name] = sim
    fabric = {"10.%d.0.%d" % (100 + rail, i): "127.0.0.%d" % (i + 1) for rail in range(8) for i in range(1, len(names) + 1)}
    for sim in sims.values():
        (sim.tmp / "etc" / "fabric.json").write_text(json.dumps(fabric))
    return sims


def cm_pair(tmp_path):
    sims = fleet(tmp_path, ("a", "b"))
    return sims["a"], sims["b"]


def cm_run(server, client, host, port, extra=(), server_extra=()):
    argv = ["ib_write_lat", "-d", "mlx5_0", "-i", "1", "-F", "-p", str(port), "-R", "--tos=104"]
    srv = subprocess.Popen([*argv, *server_extra], env=server.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(50):
        res = subprocess.run([*argv, *extra, host], env=client.env, capture_output=True, text=True, check=False)
        if "bl blka 8" not in res.stderr:
            break
        time.sleep(0.1)
    return res, srv


def test_simulated_rdma_cm_matches_the_real_capture_and_routes_by_the_roce_address(tmp_path):
    a, b = cm_pair(tmp_path)
    res, srv = cm_run(b, a, "10.100.0.2", 19610)
    if res.returncode:
        srv.kill()
    server_out, server_err = srv.communicate(timeout=30)
    assert res.returncode == 0 and srv.returncode == 0, (res.stderr, server_err)
    parsed = parse_perftest(res.stdout)
    assert (parsed["kind"], parsed["device"], parsed["link_type"], parsed["gid_index"]) == ("lat", "mlx5_0", "Ethernet", 3)
    assert parsed["rows"][0]["t_typical_us"] < 2.5
    # the real rdma_cm capture (perftest 4.5, ib_write_lat -R): the same banner labels and values
    real = fixture("perftest", "dgx-spark-cx7-write-lat-rdmacm-forced-ib").splitlines()
    for line in (" rdma_cm QPs     : ON", " Data ex. method : rdma_cm"):
        assert line in real
    lines = [x.replace("\t", "     ") for x in res.stdout.splitlines()]
    assert " rdma_cm QPs      : ON" in lines or any(shape(x) == shape(" rdma_cm QPs : ON") for x in lines)
    assert " Data ex. method : rdma_cm      TOS    : 104" in lines
    assert [x for x in res.stdout.splitlines() if x.startswith(" GID: ")] == [
        " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:100:00:01",
        " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:100:00:02",
    ]
    assert "Waiting for client rdma_cm QP to connect" in server_out and parse_perftest(server_out)["rows"]

    # perftest 4.5 -R on a RoCE port without -x: the best GID (RoCE v2, IPv4), no RKey/VAddr
    assert "RKey" not in res.stdout and " PCIe relax order: OFF" in res.stdout

    # address resolution picks the QPs' device: rail 1's address goes over mlx5_1, whatever -d
    # says (the banner still names -d's device, as perftest 4.5 prints ib_devname)
    res, srv = cm_run(b, a, "10.101.0.2", 19611)
    srv.communicate(timeout=30)
    assert res.returncode == 0 and parse_perftest(res.stdout)["device"] == "mlx5_0", res.stderr
    assert gid_addresses(res.stdout) == {"local": "10.101.0.1", "remote": "10.101.0.2"}


def test_simulated_rdma_cm_fails_as_the_real_one(tmp_path):
    a, b = cm_pair(tmp_path)
    argv = ["ib_write_lat", "-d", "mlx5_0", "-p", "19612", "-R"]
    res = subprocess.run([*argv, "10.100.0.2"], env=a.env, capture_output=True, text=True, check=False)
    assert res.returncode == 1 and res.stderr.startswith("Unexpected CM event bl blka 8\n Unable to perform rdma_client function")
    # perftest 4.5's --source_ip is the raw-Ethernet option: an IPv4 address is checked, then unused
    res = subprocess.run([*argv, "--source_ip", "10.200.0"], env=b.env, capture_output=True, text=True, check=False)
    assert res.returncode == 1 and " Invalid client IP address" in res.stderr
    # an address no rail routes to: the route's netdev has no RDMA device, it fails at once
    started = time.time()
    res = subprocess.run([*argv, "10.89.77.12"], env=a.env, capture_output=True, text=True, check=False)
    assert res.returncode == 1 and res.stderr.startswith("Received 10 times ADDR_ERROR") and time.time() - started < 10
    res = subprocess.run(["ib_write_lat", "--tos", "104", "10.100.0.2"], env=a.env, capture_output=True, text=True, check=False)
    assert res.returncode == 1 and "TOS only valid for rdma_cm based QP" in res.stdout
    b.run("hwsim", "fault", "add", "rdma_cm_unresolved", "ca=mlx5_0")
    started = time.time()
    res, srv = cm_run(b, a, "10.100.0.2", 19613)
    assert res.returncode == 1 and res.stderr.startswith("Received 10 times ADDR_ERROR"), res.stderr
    assert time.time() - started >= 20  # ten resolutions of 2 s each
    srv.kill()


def run_rdma_nodes(tmp_path, sims, **overrides):
    """rdma_acceptance on every simulated node at once (as the playbook's async start does)."""
    nodes = [{"name": n, "address": sim.env["HWSIM_LISTEN_ADDR"], "rack": "", "rails": 2, "rate_gbps": 400} for n, sim in sims.items()]
    procs = {}
    for name, sim in sims.items():
        args = {"node": name, "nodes": nodes, "sysfs_root": str(sim.sysfs), "duration": 1, "repeats": 2, "connect_timeout": 20}
        args.update(overrides)
        path = tmp_path / ("%s-args.json" % name)
        path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        code = RUNNER % (str(ROOT / "module_utils"), str(ROOT / "library" / "rdma_acceptance.py"))
        procs[name] = subprocess.Popen(
            [sys.executable, "-c", code, str(path)], env=sim.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        out[name] = json.loads(stdout)
        assert not out[name].get("failed"), (out[name], stderr)
    return out


def test_rdma_acceptance_three_nodes_pass_then_a_slow_nic_fails_only_its_node(tmp_path):
    sims = fleet(tmp_path, ("n1", "n2", "n3"))
    res = run_rdma_nodes(tmp_path, sims)
    pairs = [p for r in res.values() for p in r["pairs"]]
    assert sorted((p["a"], p["b"]) for p in pairs if p["rail"] == 0) == [("n1", "n2"), ("n2", "n3"), ("n3", "n1")]
    assert all(p["ok"] for p in pairs) and all(p["runs"] == {"ib_write_bw": 2, "ib_write_lat": 2, "rdma_cm": 1} for p in pairs), [
        p["problems"] for p in pairs if not p["ok"]
    ]
    assert all(p["cm_lat_us"] < 2.5 for p in pairs)
    assert res["n1"]["rails"][0] == {"ca": "mlx5_0", "netdev": "ens1np0", "gid_index": 3, "address": "10.100.0.1"}
    report = fleet_verdict({n: {"rdma": r, "nvlink": None} for n, r in res.items()})
    assert all(not d["findings"] for d in report["nodes"].values())
    assert 'rackforge_acceptance_rdma_cm_latency_us{peer="n2",rail="0"}' in metrics("n1", report)
    assert "/ RDMA-CM 1." in render_markdown(report)

    sims["n2"].run("hwsim", "fault", "add", "slow_nic", "ca=mlx5_1", "factor=0.5")
    res = run_rdma_nodes(tmp_path, sims)
    report = fleet_verdict({n: {"rdma": r, "nvlink": None} for n, r in res.items()})
    assert [n for n, d in report["nodes"].items() if d["findings"]] == ["n2"]
    (f,) = report["nodes"]["n2"]["findings"]
    assert f["component"] == "rail 1" and "below 90 %" in f["message"] and "n1" in f["observed"] and "n3" in f["observed"]
    assert "FAIL" in render_markdown(report) and "rackforge_acceptance_healthy 0" in metrics("n2", report)
    assert 'rackforge_acceptance_rdma_bandwidth_gbps{peer="n1",rail="1"}' in metrics("n2", report)

    # a slow path between n1 and n3 (rail 0): the pair is reported, both nodes pass
    sims["n2"].run("hwsim", "fault", "clear")
    sims["n1"].run("hwsim", "fault", "add", "slow_link", "ca=mlx5_0", "peer=127.0.0.4", "factor=0.3")
    res = run_rdma_nodes(tmp_path, sims, rdma_cm=False)  # and rdma_cm off: no RDMA-CM run is due, none is held against a pair
    assert all(p["runs"] == {"ib_write_bw": 2, "ib_write_lat": 2} for r in res.values() for p in r["pairs"])
    report = fleet_verdict({n: {"rdma": r, "nvlink": None} for n, r in res.items()})
    assert [n for n, d in report["nodes"].items() if d["findings"]] == []
    assert [(p["a"], p["b"], p["rail"]) for p in report["paths"]] == [("n3", "n1", 0)]


def test_rdma_cm_catches_a_rail_whose_address_does_not_resolve_and_only_its_node_fails(tmp_path):
    sims = fleet(tmp_path, ("n1", "n2", "n3"))
    sims["n2"].run("hwsim", "fault", "add", "rdma_cm_unresolved", "ca=mlx5_1")
    res = run_rdma_nodes(tmp_path, sims, repeats=1, connect_timeout=5)
    pairs = [p for r in res.values() for p in r["pairs"]]
    # verbs (perftest's TCP exchange, the GID) still pass on that rail: only RDMA-CM sees it
    failed = sorted((p["a"], p["b"], p["rail"]) for p in pairs if not p["ok"])
    assert failed == [("n1", "n2", 1), ("n2", "n3", 1)]
    for p in pairs:
        if not p["ok"]:
            assert p["bw_gbps"] > 385 and [f["check"] for f in p["findings"]] == ["rdma_cm"]
            assert "Received 10 times ADDR_ERROR" in p["problems"][0] and " -R 10.101.0." in p["evidence"][0]["command"]
    report = fleet_verdict({n: {"rdma": r, "nvlink": None} for n, r in res.items()})
    assert [n for n, d in report["nodes"].items() if d["findings"]] == ["n2"]
    assert report["nodes"]["n2"]["findings"][0]["component"] == "rail 1"


def test_a_path_fault_is_the_pairs_not_the_nodes():
    ok = {"ok": True, "findings": [], "problems": [], "bw_gbps": 392.0, "lat_us": 1.9}
    bad = dict(ok, ok=False, bw_gbps=196.0, findings=[{"message": "RDMA write bandwidth 196.00 Gb/s is below 90 %"}])
    pair = lambda a, b, r: dict(r, a=a, b=b, rail=0)
    results = {
        "n1": {"rdma": {"pairs": [pair("n1", "n2", bad)], "served": []}},
        "n2": {"rdma": {"pairs": [pair("n2", "n3", ok)], "served": []}},
        "n3": {"rdma": {"pairs": [pair("n3", "n1", ok)], "served": []}},
    }
    report = fleet_verdict(results)
    assert all(not d["findings"] for d in report["nodes"].values())
    assert [(p["a"], p["b"]) for p in report["paths"]] == [("n1", "n2")]
    # two nodes only: nothing tells which end is at fault, both are held (fail closed)
    report = fleet_verdict({"n1": results["n1"], "n2": {"rdma": {"pairs": [], "served": []}}})
    assert sorted(n for n, d in report["nodes"].items() if d["findings"]) == ["n1", "n2"]


@pytest.mark.parametrize("bad", [{"nodes": []}])
def test_rdma_acceptance_refuses_a_node_not_in_the_plan(tmp_path, bad):
    sims = {"n1": node_sim(tmp_path, "n1")}
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"node": "n1", **bad}}))
    code = RUNNER % (str(ROOT / "module_utils"), str(ROOT / "library" / "rdma_acceptance.py"))
    res = subprocess.run([sys.executable, "-c", code, str(path)], env=sims["n1"].env, capture_output=True, text=True, check=False)
    out = json.loads(res.stdout)
    assert out["failed"] and "node 'n1' is not in nodes" in out["msg"]


def test_a_node_that_dropped_out_does_not_break_the_report_nor_blame_its_partners():
    ok = {"ok": True, "findings": [], "problems": [], "bw_gbps": 392.0, "lat_us": 1.9}
    lost = dict(ok, ok=False, bw_gbps=None, problems=["ib_write_bw failed (rc 1): Couldn't connect to 10.0.0.4:18515"])
    pair = lambda a, b, r: dict(r, a=a, b=b, rail=0)
    # a 4-ring n1 n2 n3 n4 where n4's job died: n3 -> n4 and n4 -> n1 are missing or failed
    results = {
        "n1": {"rdma": {"pairs": [pair("n1", "n2", ok)], "served": []}},
        "n2": {"rdma": {"pairs": [pair("n2", "n3", ok)], "served": []}},
        "n3": {"rdma": {"pairs": [pair("n3", "n4", lost)], "served": []}},
    }
    report = fleet_verdict(results, dropped=["n4"])
    assert report["dropped"] == ["n4"] and "n4" not in report["nodes"]
    assert all(not d["findings"] for d in report["nodes"].values())  # n3 passed with n2: the pair is the path's
    assert "Did not finish" in render_markdown(report)
