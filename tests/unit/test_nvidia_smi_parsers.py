from __future__ import annotations

import pytest
from ansible.module_utils.rackforge import nvidia_smi as n
from ansible.module_utils.rackforge.health import evaluate_nvlink
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
    assert gpu["power"] == {
        "draw": 67.03,
        "draw_average": None,
        "draw_instant": None,
        "limit": 500.0,
        "requested_limit": 500.0,
        "default_limit": 500.0,
        "min_limit": 100.0,
        "max_limit": 500.0,
    }
    # taken with -i 1 (attached_gpus 4, one <gpu>): the only GPU in the output is index 0, /dev/nvidia1
    assert (gpu["index"], gpu["minor_number"]) == (0, 1)
    assert gpu["mig_mode"] == "Enabled"
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


# --- nvlink -s across driver branches -------------------------------------------------------------


def test_nvlink_status_590_tab_indented_links():
    (gpu,) = n.parse_nvlink_status(fixture("nvidia-smi-nvlink-status", "h100-hbm3-590-18-links-tab-indent"))
    assert gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["links"] == {i: 26.562 for i in range(18)}
    assert (gpu["notice"], gpu["reason"], gpu["all_inactive"]) == (None, None, False)


@pytest.mark.parametrize(
    ("name", "reason", "notice"),
    [
        ("h100-hbm3-590-mig-mode-not-supported", "mig_mode", "Nvlink queries are not supported for Devices in MIG mode"),
        ("l40s-595-device-has-no-nvlink", "not_supported", "Device does not have or support Nvlink"),
        ("rtx2080s-595-nvml-all-links-inactive", "all_inactive", "NVML: Unable to retrieve Nvlink information as all links are inActive"),
        ("a100-pcie-no-nvlink-all-inactive", "all_inactive", "NVML: Unable to retrieve NVLink information as all links are inActive"),
    ],
)
def test_nvlink_status_notice_instead_of_links(name, reason, notice):
    gpus = n.parse_nvlink_status(fixture("nvidia-smi-nvlink-status", name))
    assert all(g["links"] == {} and g["reason"] == reason and g["notice"] == notice for g in gpus)
    assert all(g["all_inactive"] is (reason == "all_inactive") for g in gpus)


def test_nvlink_status_mig_notice_is_a_finding_that_says_why():
    gpus = n.parse_nvlink_status(fixture("nvidia-smi-nvlink-status", "h100-hbm3-590-mig-mode-not-supported"))
    (finding,) = evaluate_nvlink(gpus, 18, 26.562)
    assert finding["check"] == "nvlink_unavailable"
    assert "MIG mode" in finding["message"] and "expected 18 active links" in finding["message"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "No devices were found\n",
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n",  # cut short after the GPU line
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\n\t Link 0: 26.562 GB/s\n",
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\nGPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\n",
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: fast\n",
    ],
)
def test_nvlink_status_rejects_empty_cut_and_duplicated_output(text):
    with pytest.raises(n.ParseError):
        n.parse_nvlink_status(text)


# --- nvlink -e ---------------------------------------------------------------------------------------

# No verbatim 570+ capture of `nvlink -e` was found. The counter names below are the ones quoted from
# driver 595.91.07 on B300 (and in NVIDIA's nvbug tooling); the layout is the `Link N: <name>: <value>`
# one every branch prints. Composed for this test, not a capture.
NVLINK5_ERRORS = """GPU 0: NVIDIA B300 SXM6 AC (UUID: GPU-00000000-0000-0000-0000-000000000000)
\t Link 0: Malformed packet Errors: 0
\t Link 0: Buffer overrun Errors: 0
\t Link 0: Rx Errors: 2
\t Link 0: Tx discards: 0
\t Link 0: Link recovery successful events: 1
\t Link 0: Effective BER: 15e-255
\t Link 0: FEC Errors - 0: 36140749276
\t Link 0: FEC Errors - 1: 3
\t Link 0: Raw Errors Lane 0: 82
"""


def test_nvlink_errors_nvlink5_counters_apart_from_fec_and_ber():
    (gpu,) = n.parse_nvlink_errors(NVLINK5_ERRORS)
    assert gpu["links"][0] == {"malformed_packet": 0, "buffer_overrun": 0, "rx": 2, "tx_discards": 0, "link_recovery_successful_events": 1}
    assert gpu["other"][0] == {
        "Effective BER": "15e-255",
        "FEC Errors - 0": "36140749276",
        "FEC Errors - 1": "3",
        "Raw Errors Lane 0": "82",
    }


def test_nvlink_errors_replay_recovery_crc_keys_unchanged():
    (gpu,) = n.parse_nvlink_errors(fixture("nvidia-smi-nvlink-errors", "h100-hbm3-nvlink-e-all-zero"))
    assert all(set(c) == {"replay", "recovery", "crc"} for c in gpu["links"].values())
    assert gpu["other"] == {} and gpu["notice"] is None


def test_nvlink_errors_mig_notice_and_bad_counter():
    (gpu,) = n.parse_nvlink_errors(fixture("nvidia-smi-nvlink-status", "h100-hbm3-590-mig-mode-not-supported"))
    assert (gpu["links"], gpu["reason"]) == ({}, "mig_mode")
    with pytest.raises(n.ParseError):
        n.parse_nvlink_errors("GPU 0: X (UUID: GPU-1)\n\t Link 0 Replay Errors 0\n")
    with pytest.raises(n.ParseError):
        n.parse_nvlink_errors("")


# --- -q text ----------------------------------------------------------------------------------------


def test_query_text_590_power_readings_and_fabric():
    q = n.parse_query_text(fixture("nvidia-smi-q", "h100-hbm3-590-fabric-completed-health-na"))
    assert q["header"]["Driver Version"] == "590.48.01"
    gpu = q["gpus"][0]
    assert gpu["Bus Id Header"] == "00000000:00:09.0"
    assert gpu["GPU Power Readings"]["Average Power Draw"] == "69.85 W"
    assert "Power Draw" not in gpu["GPU Power Readings"]
    assert gpu["Module Power Readings"]["Current Power Limit"] == "N/A"
    assert n.parse_fabric(fixture("nvidia-smi-q", "h100-hbm3-590-fabric-completed-health-na")) == [
        {
            "state": "Completed",
            "status": "Success",
            "clique_id": "0",
            "cluster_uuid": "00000000-0000-0000-0000-000000000000",
            "health_summary": "N/A",
        }
    ]


def test_query_text_590_mig_enabled():
    q = n.parse_query_text(fixture("nvidia-smi-q", "h100-hbm3-590-mig-enabled"))
    gpu = q["gpus"][0]
    assert gpu["MIG Mode"] == {"Current": "Enabled", "Pending": "Enabled"}
    assert gpu["MIG Device"]["Index"] == "3"  # the last of the four MIG Device sections


def test_query_text_rejects_other_text():
    for text in ("", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "No devices were found\n"):
        with pytest.raises(n.ParseError):
            n.parse_query_text(text)
        with pytest.raises(n.ParseError):
            n.parse_fabric(text)


# --- -q -x across driver branches -------------------------------------------------------------------

XML_POWER = [
    # fixture, driver, draw, average, instant, limit, requested, min, max
    ("gtx1660ti-418-power-readings", "418.43", 8.93, None, None, 130.0, 130.0, 70.0, 130.0),
    ("gt1030-470-power-draw-na", "470.74", None, None, None, 30.0, 30.0, 25.5, 30.0),
    ("a100-sxm4-40gb-510-mig-enabled", "510.47.03", 66.92, None, None, 400.0, 400.0, 100.0, 400.0),
    ("tesla-t4-515-enforced-power-limit", "515.105.01", 26.78, None, None, 70.0, 70.0, 60.0, 70.0),
    ("quadro-p2000-525-power-limit-enforced", "525.125.06", 4.61, None, None, 75.0, 75.0, 75.0, 75.0),
    ("rtx4090-535-module-power-readings", "535.86.05", 26.84, None, None, 450.0, 450.0, 10.0, 600.0),
    ("rtx3080-win-536-minor-number-na", "536.40", 22.78, None, None, 336.0, 336.0, 100.0, 336.0),
    ("rtx3060-570-average-instant-power", "570.124.04", 11.6, 11.6, 11.63, 170.0, 170.0, 100.0, 190.0),
    ("rtx-pro-6000-580-excerpt-instant-power-only", None, 66.84, None, 66.84, None, None, None, None),
    ("dual-rtx2080-590-average-power-na", "590.44.01", 1.0, None, 1.0, 215.0, 215.0, 105.0, 240.0),
    ("rtx3080-595-deprecated-app-clocks", "595.58.03", 139.62, 139.62, 142.33, 320.0, 320.0, 100.0, 336.0),
    ("rtx4000-sff-ada-595", "595.84", 8.81, 8.81, 8.44, 70.0, 70.0, 30.0, 70.0),
]


@pytest.mark.parametrize(("name", "driver", "draw", "average", "instant", "limit", "requested", "low", "high"), XML_POWER)
def test_query_xml_power_every_branch(name, driver, draw, average, instant, limit, requested, low, high):
    x = n.parse_query_xml(fixture("nvidia-smi-q-x", name))
    assert x["driver_version"] == driver
    power = x["gpus"][0]["power"]
    assert (power["draw"], power["draw_average"], power["draw_instant"]) == (draw, average, instant)
    assert (power["limit"], power["requested_limit"], power["min_limit"], power["max_limit"]) == (limit, requested, low, high)


def test_query_xml_module_power_readings_present_from_535():
    assert n.parse_query_xml(fixture("nvidia-smi-q-x", "tesla-t4-515-enforced-power-limit"))["gpus"][0]["module_power"] is None
    module = n.parse_query_xml(fixture("nvidia-smi-q-x", "rtx4090-535-module-power-readings"))["gpus"][0]["module_power"]
    assert module is not None and set(module.values()) == {None}  # printed, all N/A on this part


def test_query_xml_index_is_position_minor_number_separate():
    two = n.parse_query_xml(fixture("nvidia-smi-q-x", "dual-rtx2080-590-average-power-na"))
    assert [(g["index"], g["minor_number"], g["bus_id"]) for g in two["gpus"]] == [(0, 0, "00000000:01:00.0"), (1, 1, "00000000:02:00.0")]
    windows = n.parse_query_xml(fixture("nvidia-smi-q-x", "rtx3080-win-536-minor-number-na"))["gpus"][0]
    assert (windows["index"], windows["minor_number"], windows["persistence_mode"]) == (0, None, False)


def test_query_xml_deprecated_application_clocks_read_as_absent():
    gpu = n.parse_query_xml(fixture("nvidia-smi-q-x", "rtx3080-595-deprecated-app-clocks"))["gpus"][0]
    assert gpu["applications_clocks"] == {} and gpu["default_applications_clocks"] == {}
    assert gpu["max_clocks"] == {"graphics": 2100, "sm": 2100, "mem": 9501}
    assert gpu["supported_clocks"][9501][0] == 2100


def test_query_xml_418_and_510():
    old = n.parse_query_xml(fixture("nvidia-smi-q-x", "gtx1660ti-418-power-readings"))
    assert (old["cuda_version"], old["gpus"][0]["name"], old["gpus"][0]["architecture"]) == ("10.1", "Graphics Device", None)
    assert old["gpus"][0]["fabric"] == {"state": "N/A", "status": "N/A"}
    mig = n.parse_query_xml(fixture("nvidia-smi-q-x", "a100-sxm4-40gb-510-mig-enabled"))["gpus"][0]
    assert (mig["mig_mode"], mig["applications_clocks"], mig["memory_total_mib"]) == ("Enabled", {"graphics": 1095, "mem": 1215}, 40960)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "<nvidia_smi_log><gpu>",  # cut short
        '<?xml version="1.0" encoding="bogus" ?><nvidia_smi_log/>',
        b"<nvidia_smi_log>\xff\xfe</nvidia_smi_log>",
        "<nvidia_smi_log>\udcff</nvidia_smi_log>",  # undecodable byte as Ansible's run_command hands it over
        "<nvidia_smi_log><gpu><supported_clocks><supported_mem_clock><value>N/A</value></supported_mem_clock></supported_clocks></gpu></nvidia_smi_log>",
    ],
)
def test_query_xml_rejects_malformed(text):
    with pytest.raises(n.ParseError):
        n.parse_query_xml(text)


# --- --query-gpu csv ---------------------------------------------------------------------------------


def test_query_gpu_csv_590_every_field():
    (row,) = n.parse_query_gpu_csv(fixture("nvidia-smi-query-gpu", "h100-hbm3-590-all-fields"))
    assert len(row) == 212
    assert (row["name"], row["index"], row["pci.bus_id"]) == ("NVIDIA H100 80GB HBM3", "0", "00000000:00:09.0")
    assert (row["power.draw"], row["power.limit"], row["fabric.state"]) == ("69.85 W", "700.00 W", "Completed")
    assert row["clocks.applications.graphics"] == "[Requested functionality has been deprecated]"


def test_query_gpu_csv_rejects_error_text_as_header():
    with pytest.raises(n.ParseError):
        n.parse_query_gpu_csv(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n"
        )
    with pytest.raises(n.ParseError):
        n.parse_query_gpu_csv("name, index\nNVIDIA H100, 0, extra\n")
    assert n.parse_query_gpu_csv("NVIDIA H100, 0\n", fields=["name", "index"]) == [{"name": "NVIDIA H100", "index": "0"}]


# --- -L --------------------------------------------------------------------------------------------------


def test_gpu_list_with_mig_devices():
    (gpu,) = n.parse_gpu_list(fixture("nvidia-smi-L", "h100-hbm3-590-mig-devices"))
    assert (gpu["index"], gpu["name"]) == (0, "NVIDIA H100 80GB HBM3")
    assert [(m["profile"], m["index"]) for m in gpu["mig_devices"]] == [("3g.40gb", 0), ("2g.20gb", 1), ("1g.10gb", 2), ("1g.10gb", 3)]
    assert gpu["mig_devices"][3]["uuid"] == "MIG-00000003-0000-0000-0000-000000000003"


def test_gpu_list_rejects_other_text():
    assert n.parse_gpu_list("No devices were found\n") == []
    with pytest.raises(n.ParseError):
        n.parse_gpu_list("Failed to initialize NVML: Driver/library version mismatch\n")
