from __future__ import annotations

from ansible.module_utils.rackforge import health as h
from ansible.module_utils.rackforge import nvidia_smi as n
from ansible.module_utils.rackforge import rdma as r
from conftest import fixture


def status(name):
    return n.parse_nvlink_status(fixture("nvidia-smi-nvlink-status", name))


def test_h100_pcie_bridge_healthy_against_its_own_expectation():
    assert h.evaluate_nvlink(status("h100-pcie-2gpu-bridge-6-inactive"), 12, 26.562) == []


def test_h100_pcie_bridge_is_a_fault_where_18_links_are_expected():
    findings = h.evaluate_nvlink(status("h100-pcie-2gpu-bridge-6-inactive"), 18, 26.562)
    assert [f["check"] for f in findings] == ["nvlink_inactive", "nvlink_inactive"]
    assert "NVLink(s) 4,5,10,11,16,17 inactive: 12 of 18" in findings[0]["message"]
    assert findings[0]["component"].startswith("GPU 0 (GPU-6968dfc2")


def test_all_inactive_only_matters_where_nvlink_is_expected():
    assert h.evaluate_nvlink(status("a100-pcie-no-nvlink-all-inactive"), 0, 0) == []
    findings = h.evaluate_nvlink(status("a100-pcie-no-nvlink-all-inactive"), 12, 25.0)
    assert [f["check"] for f in findings] == ["nvlink_all_inactive"] * 2


def test_wrong_speed():
    findings = h.evaluate_nvlink(status("a100-sxm4-80gb-8gpu-12links"), 12, 26.562)
    assert len(findings) == 8 * 12 and findings[0]["check"] == "nvlink_speed"


def test_model_table():
    assert h.model_expectation("NVIDIA H100 80GB HBM3") == (18, 26.562)
    assert h.model_expectation("NVIDIA A100-SXM4-80GB") == (12, 25.0)
    assert h.model_expectation("NVIDIA A100-PCIE-40GB") is None


def test_error_counters_against_baseline():
    errors = n.parse_nvlink_errors(fixture("nvidia-smi-nvlink-errors", "h100-hbm3-nvlink-e-all-zero"))
    errors[0]["links"][1]["crc"] = 7
    uuid = errors[0]["uuid"]
    found = h.evaluate_nvlink(status("a100-sxm4-80gb-8gpu-12links")[:0], 18, 26.562, errors=errors, baseline={uuid: {"1": {"crc": 2}}})
    assert [(f["check"], f["observed"], f["expected"]) for f in found] == [("nvlink_errors", 7, 2)]
    assert h.evaluate_nvlink([], 18, 26.562, errors=errors, baseline={uuid: {"1": {"crc": 7}}}) == []


def test_nvlink_p2p_matrix():
    p2p = n.parse_topo_p2p(fixture("nvidia-smi-topo-p2p", "h100-8gpu-p2p-read-all-ok"))
    assert h.evaluate_nvlink([], 18, 26.562, p2p=p2p) == []
    p2p["status"]["GPU0"]["GPU3"] = "NS"
    found = h.evaluate_nvlink([], 18, 26.562, p2p=p2p)
    assert [(f["check"], f["component"], f["observed"]) for f in found] == [("nvlink_p2p", "GPU0-GPU3", "NS")]


FABRIC_CASES = [
    ({"state": "Completed", "status": "Success"}, True, []),
    ({"state": "In Progress", "status": "N/A"}, True, ["fabric"]),
    ({"state": "Not Started", "status": "N/A"}, True, ["fabric"]),
    ({"state": "Completed", "status": "Success", "health_summary": "Unhealthy"}, True, ["fabric"]),
    ({"state": "Completed", "status": "Success"}, False, ["fabricmanager"]),
]


def test_fabric_table():
    for entry, fm_active, checks in FABRIC_CASES:
        entry = dict({"clique_id": "N/A", "cluster_uuid": "N/A", "health_summary": None}, **entry)
        assert [f["check"] for f in h.evaluate_fabric([entry], fm_active)] == checks, entry


def test_fabric_real_h100_capture_is_healthy():
    fabric = n.parse_fabric(fixture("nvidia-smi-q", "h100-8gpu-hgx-535-fabric-completed-powerbrake"))
    assert h.evaluate_fabric(fabric, True) == []


def test_rdma_two_ports_down_named():
    ibstat = r.parse_ibstat(fixture("ibstat", "h100-roce-cx7-400g-two-ports-down"))
    findings, ports = h.evaluate_rdma(ibstat, {}, {}, {"count": 12, "link_layer": "Ethernet"})
    assert sorted(f["component"] for f in findings) == ["mlx5_11/1 (no netdev)", "mlx5_5/1 (no netdev)"]
    assert len(ports) == 12


def test_rdma_spare_ports_of_another_link_layer_are_ignored():
    ibstat = r.parse_ibstat(fixture("ibstat", "h100-ib-cx7-400g-eth-ports-disabled"))
    findings, ports = h.evaluate_rdma(ibstat, {}, {}, {"count": 8, "link_layer": "InfiniBand", "rate": 400})
    assert findings == [] and len(ports) == 8


def test_rdma_mtu_pfc_gid_counters():
    ibstat = {
        "mlx5_0": {
            "ca_type": "MT4129",
            "firmware": "x",
            "ports": {1: {"state": "Active", "physical_state": "LinkUp", "rate": 400, "link_layer": "Ethernet"}},
        }
    }
    devinfo = {
        "mlx5_0": {
            "fw_ver": "x",
            "vendor_part_id": 4129,
            "ports": {1: {"state": "PORT_ACTIVE", "active_mtu": 1024, "max_mtu": 4096, "port_lid": 0, "link_layer": "Ethernet"}},
        }
    }
    findings, ports = h.evaluate_rdma(
        ibstat,
        devinfo,
        {"mlx5_0": "ens1np0"},
        {"count": 1, "rate": 400, "lossless_priority": 3},
        pause_prios={"ens1np0": []},
        mtus={"ens1np0": 9000},
        gids=[],
        counters={"mlx5_0": {"symbol_error": 3}},
        baseline={"mlx5_0": {"symbol_error": 1}},
    )
    assert sorted(f["check"] for f in findings) == ["pfc", "rdma_errors", "roce_gid", "roce_mtu"]
    assert ports[0]["healthy"] is False


def test_rdma_excludes_management_and_counts():
    ibstat = r.parse_ibstat(fixture("ibstat", "h100-roce-cx7-400g-two-ports-down"))
    netdevs = {ca: "eth%s" % ca[5:] for ca in ibstat}
    exclude = [netdevs[c] for c in ("mlx5_5", "mlx5_11")]
    findings, ports = h.evaluate_rdma(ibstat, {}, netdevs, {"count": 11, "exclude_netdevs": exclude})
    assert [f["check"] for f in findings] == ["rdma_port_count"] and len(ports) == 10


def test_rdma_wrong_rate_is_named():
    ibstat = {
        "mlx5_0": {
            "ca_type": "MT4129",
            "firmware": "x",
            "ports": {1: {"state": "Active", "physical_state": "LinkUp", "rate": 200, "link_layer": "Ethernet"}},
        }
    }
    findings, _ = h.evaluate_rdma(ibstat, {}, {"mlx5_0": "ens1np0"}, {"count": 1, "rate": 400})
    assert [(f["check"], f["message"]) for f in findings] == [("rdma_rate", "mlx5_0/1 (ens1np0): rate 200 Gb/s, expected 400 Gb/s")]


def test_fabric_completed_is_decided_in_one_place():
    entries, done = h.fabric_summary([{"state": "Completed", "status": "Success"}, {"state": "In Progress", "status": "N/A"}])
    assert [e["completed"] for e in entries] == [True, False] and done is False
    assert h.fabric_summary([{"state": "Completed", "status": "Success"}])[1] is True
    assert h.fabric_summary([]) == ([], False)  # no Fabric section: not trained
