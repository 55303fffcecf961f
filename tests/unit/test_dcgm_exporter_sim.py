"""lab/hwsim/dcgm_exporter_sim.py (SIMULATED dcgm-exporter for the lab) held to real dcgm-exporter 3.x
output (tests/fixtures/realworld/dcgm-exporter, with provenance): the same values render to the
same text, line for line; its values come from real `nvidia-smi -q -x` output; Prometheus's own
linter accepts what it serves."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "lab" / "hwsim"))
import dcgm_exporter_sim as sim  # noqa: E402

CAPTURES = ROOT / "tests" / "fixtures" / "realworld" / "dcgm-exporter"
COUNTERS = (ROOT / "roles" / "monitoring" / "templates" / "dcgm-counters.csv.j2").read_text().replace("{{ ansible_managed }}", "managed")


def test_the_h100_capture_is_rendered_line_for_line():
    gpu = {
        "index": 0,
        "uuid": "GPU-927d7444-b45a-7c49-8402-5e686e46a026",
        "bus": "00000000:00:09.0",
        "model": "NVIDIA H100 80GB HBM3",
        "values": {"DCGM_FI_DRIVER_VERSION": "535.183.01", "DCGM_FI_DEV_SM_CLOCK": 345, "DCGM_FI_DEV_MEM_CLOCK": 2619},
    }
    counters = sim.parse_counters(
        "# the capture's two families, and the driver label\n"
        "DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz).\n"
        "DCGM_FI_DEV_SM_CLOCK, gauge, SM clock frequency (in MHz).\n"
        "DCGM_FI_DRIVER_VERSION, label, Driver Version\n"
    )
    # families come out in DCGM field id order (SM 100 before MEM 101), whatever the file's order
    assert sim.render([gpu], counters, "6d6d7dc3ce21") == (CAPTURES / "digitalocean-3.3.8-h100.txt").read_text()


def test_the_xid_family_carries_err_code_and_err_msg_before_the_frame_buffer():
    gpu = {
        "index": 0,
        "uuid": "GPU-96be9fff-fdfd-9b87-88d4-fe5b9a012148",
        "bus": "00000000:08:00.0",
        "model": "NVIDIA GeForce RTX 3090",
        "values": {"DCGM_FI_DEV_XID_ERRORS": 0, "DCGM_FI_DEV_FB_FREE": 24268},
    }
    counters = [("DCGM_FI_DEV_FB_FREE", "gauge", "x"), ("DCGM_FI_DEV_XID_ERRORS", "gauge", "y")]
    samples = [line for line in sim.render([gpu], counters, "debian").splitlines() if not line.startswith("#")]
    real = (CAPTURES / "pr326-devbuild-rtx3090.txt").read_text().splitlines()
    # the development build said "Unknown Error" for code 0; the released table says "No Error"
    assert samples == [real[0].replace('err_msg="Unknown Error"', 'err_msg="No Error"'), real[1]]


def test_values_come_from_real_nvidia_smi_xml_and_the_kernel_log():
    xml = (ROOT / "tests" / "fixtures" / "realworld" / "nvidia-smi-q-x" / "a100-sxm4-80gb-535-xml.txt").read_text()
    gpus = sim.gpus_from(xml, "", "")
    assert gpus and all(g["uuid"].startswith("GPU-") and g["bus"].startswith("0000") for g in gpus)
    g = gpus[0]
    assert g["model"].startswith("NVIDIA A100") and g["values"]["DCGM_FI_DRIVER_VERSION"].startswith("535.")
    assert isinstance(g["values"]["DCGM_FI_DEV_FB_FREE"], int) and g["values"]["DCGM_FI_DEV_FB_FREE"] > 0
    assert g["values"]["DCGM_FI_DEV_XID_ERRORS"] == 0
    # an Xid for this GPU in the kernel log (the driver's own record format) is its last Xid
    _domain, bus, device = g["bus"].lower().split(":")  # 00000000:xx:yy.0; the log writes 0000:xx:yy
    kmsg = "4,9,99,-;NVRM: Xid (PCI:0000:%s:%s): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n" % (bus, device[:2])
    again = sim.gpus_from(xml, "", kmsg)
    assert again[0]["values"]["DCGM_FI_DEV_XID_ERRORS"] == 79
    line = next(x for x in sim.render(again[:1], sim.parse_counters(COUNTERS), "n1").splitlines() if x.startswith("DCGM_FI_DEV_XID_ERRORS"))
    assert line.endswith(',err_code="79",err_msg="GPU has fallen off the bus"} 79')


def test_nvlink_error_counters_are_summed_over_the_links_per_gpu():
    text = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\n"
        "\t Link 0: Replay Errors: 2\n\t Link 0: Recovery Errors: 0\n\t Link 0: CRC Errors: 5\n\n"
        "\t Link 1: Replay Errors: 1\n\t Link 1: Recovery Errors: 3\n\t Link 1: CRC Errors: 0\n"
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b)\n"
        "\t Link 0: Replay Errors: 0\n\t Link 0: Recovery Errors: 0\n\t Link 0: CRC Errors: 0\n"
    )
    xml = (
        "<nvidia_smi_log><driver_version>535.247.01</driver_version>"
        + "".join(
            '<gpu id="00000000:%02X:00.0"><product_name>NVIDIA H100 80GB HBM3</product_name><uuid>GPU-%s</uuid>'
            "<minor_number>%d</minor_number><pci><pci_bus_id>00000000:%02X:00.0</pci_bus_id></pci></gpu>" % (b, u, i, b)
            for i, (b, u) in enumerate([(0x19, "a"), (0x3B, "b")])
        )
        + "</nvidia_smi_log>"
    )
    gpus = sim.gpus_from(xml, text, "")
    assert gpus[0]["values"]["DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"] == 3
    assert gpus[0]["values"]["DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"] == 3
    assert gpus[0]["values"]["DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"] == 5
    assert gpus[1]["values"]["DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"] == 0
    # no value, no family (a field dcgm-exporter cannot read is left out, HELP and TYPE too)
    out = sim.render(gpus, sim.parse_counters(COUNTERS), "n1")
    assert "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL" not in out and "DCGM_FI_DEV_GPU_UTIL" not in out


def test_promtool_accepts_what_it_serves():
    xml = (ROOT / "tests" / "fixtures" / "realworld" / "nvidia-smi-q-x" / "a100-sxm4-80gb-535-xml.txt").read_text()
    text = sim.render(sim.gpus_from(xml, "", ""), sim.parse_counters(COUNTERS), "n1")
    res = subprocess.run([shutil.which("promtool"), "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    # promtool lints names (counters should end in _total: dcgm-exporter's do not) but must parse it
    assert "error while linting" not in res.stderr and "text format parsing error" not in res.stderr, res.stderr
    assert text.count("# TYPE ") >= 12
