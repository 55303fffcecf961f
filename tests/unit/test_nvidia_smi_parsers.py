from __future__ import annotations

import pytest
from ansible.module_utils.rackforge import nvidia_smi as n
from conftest import fixture


def test_nvlink_status_a100_sxm_12_links():
    gpus = n.parse_nvlink_status(fixture("nvidia-smi-nvlink-status", "a100-sxm4-80gb-8gpu-12links"))
    assert [g["index"] for g in gpus] == list(range(8))
    assert gpus[0]["name"] == "NVIDIA A100-SXM4-80GB"
    assert gpus[0]["uuid"] == "GPU-5269b708-678a-b1a8-60f0-c90406537486"
    assert all(g["links"] == {i: 25.0 for i in range(12)} for g in gpus)
    assert not any(g["all_inactive"] for g in gpus)


def test_nvlink_status_h100_pcie_bridge_has_six_inactive():
    gpus = n.parse_nvlink_status(fixture("nvidia-smi-nvlink-status", "h100-pcie-2gpu-bridge-6-inactive"))
    assert len(gpus) == 2
    inactive = sorted(k for k, v in gpus[0]["links"].items() if v is None)
    assert inactive == [4, 5, 10, 11, 16, 17]
    assert gpus[0]["links"][0] == 26.562
    assert gpus[1]["all_inactive"] is False


def test_nvlink_status_all_inactive_pcie():
    gpus = n.parse_nvlink_status(fixture("nvidia-smi-nvlink-status", "a100-pcie-no-nvlink-all-inactive"))
    assert [(g["index"], g["links"], g["all_inactive"]) for g in gpus] == [(0, {}, True), (1, {}, True)]


def test_nvlink_status_rejects_garbage():
    with pytest.raises(n.ParseError):
        n.parse_nvlink_status("Failed to initialize NVML: Driver/library version mismatch\n")


def test_nvlink_errors_tolerates_elision_and_blank_lines():
    gpus = n.parse_nvlink_errors(fixture("nvidia-smi-nvlink-errors", "h100-hbm3-nvlink-e-all-zero"))
    assert len(gpus) == 1
    assert sorted(gpus[0]["links"]) == [0, 1, 17]
    assert gpus[0]["links"][17] == {"replay": 0, "recovery": 0, "crc": 0}


def test_fabric_h100_535_completed_success_without_clique():
    fabric = n.parse_fabric(fixture("nvidia-smi-q", "h100-8gpu-hgx-535-fabric-completed-powerbrake"))
    assert len(fabric) == 8
    assert fabric[0] == {"state": "Completed", "status": "Success", "clique_id": "N/A", "cluster_uuid": "N/A", "health_summary": None}


def test_fabric_h200_550_has_clique_and_cluster():
    fabric = n.parse_fabric(fixture("nvidia-smi-q", "h200-550-fabric-completed-clique0"))
    assert fabric == [
        {
            "state": "Completed",
            "status": "Success",
            "clique_id": "0",
            "cluster_uuid": "00000000-0000-0000-0000-000000000000",
            "health_summary": None,
        }
    ]


def test_fabric_v100_and_gh200_not_applicable():
    v100 = n.parse_fabric(fixture("nvidia-smi-q", "v100-sxm2-16gb-8gpu-550"))
    assert len(v100) == 8 and {f["state"] for f in v100} == {"N/A"}
    gh200 = n.parse_fabric(fixture("nvidia-smi-q", "gh200-550-remapped-row-uncorrectable-powercap"))
    assert len(gh200) == 1 and gh200[0]["state"] == "N/A"


def test_fabric_excerpt_with_health_summary():
    text = "GPU 00000000:19:00.0\n    Fabric\n        State : In Progress\n        Status : N/A\n        Health\n            Summary : Unhealthy\n"
    assert n.parse_fabric(text)[0]["state"] == "In Progress"
    assert n.parse_fabric(text)[0]["health_summary"] == "Unhealthy"


def test_query_text_sections_h100():
    q = n.parse_query_text(fixture("nvidia-smi-q", "h100-8gpu-hgx-535-fabric-completed-powerbrake"))
    assert q["header"]["Driver Version"] == "535.161.08"
    gpu = q["gpus"][0]
    assert gpu["Bus Id Header"] == "00000000:19:00.0"
    assert gpu["Persistence Mode"] == "Enabled"
    assert gpu["GPU Power Readings"]["Current Power Limit"] == "700.00 W"
    assert gpu["Applications Clocks"] == {"Graphics": "1980 MHz", "Memory": "2619 MHz"}


def test_query_xml_a100():
    x = n.parse_query_xml(fixture("nvidia-smi-q-x", "a100-sxm4-80gb-535-xml"))
    assert x["driver_version"] == "535.54.03" and x["attached_gpus"] == 4
    gpu = x["gpus"][0]
    assert gpu["name"] == "NVIDIA A100-SXM4-80GB"
    assert gpu["persistence_mode"] is False
    assert gpu["power"] == {"draw": 67.03, "limit": 500.0, "default_limit": 500.0, "min_limit": 100.0, "max_limit": 500.0}
    assert gpu["applications_clocks"] == {"graphics": 1275, "mem": 1593}
    assert gpu["supported_clocks"][1593][0] == 1410
    assert gpu["fabric"] == {"state": "N/A", "status": "N/A"}


def test_query_xml_rejects_text():
    with pytest.raises(n.ParseError):
        n.parse_query_xml("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


def test_query_gpu_csv_with_header_and_units():
    rows = n.parse_query_gpu_csv(fixture("nvidia-smi-query-gpu", "a100-pcie-query-gpu-app-clocks"))
    assert len(rows) == 2
    assert rows[0]["clocks.applications.graphics"] == "765 MHz"
    assert rows[1]["pci.bus_id"] == "00000000:8A:00.0"


def test_topo_m_h100_nv18_and_pcie_nv12():
    t = n.parse_topo_m(fixture("nvidia-smi-topo-m", "h100-8gpu-nv18-2numa"))
    assert t["devices"] == ["GPU%d" % i for i in range(8)]
    assert set(t["links"]["GPU0"].values()) == {"NV18"} and len(t["links"]["GPU0"]) == 7
    assert t["numa_affinity"]["GPU7"] == "1"
    t2 = n.parse_topo_m(fixture("nvidia-smi-topo-m", "h100-pcie-2gpu-nv12"))
    assert t2["links"] == {"GPU0": {"GPU1": "NV12"}, "GPU1": {"GPU0": "NV12"}}
