"""The lab's output must be format-identical to real captures: the same parsers read both and get
the same structure (only values differ).

nvidia-smi here is the REAL binary (Debian 12 non-free 535.261.03) over the lab NVML (lab/nvml) and
the simulator's GPUs: its formats are NVIDIA's own, so these tests check that the NVML answers
the simulator gives make it print what it prints on real hardware (sections, layout, values where
the captures' hardware matches the profiles'). The NIC tools are the simulator's (SIMULATION)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from ansible.module_utils.rackforge import nvidia_smi as n
from ansible.module_utils.rackforge import rdma as r
from conftest import fixture
from hwsim_helper import Sim

H100_535 = "h100-8gpu-hgx-535-fabric-completed-powerbrake"  # 8x H100 80GB HBM3 HGX, driver 535.161.08


@pytest.fixture
def sim(tmp_path):
    return Sim(tmp_path)


def _paths(d, prefix=()):
    """Every key path of a parse_query_text section (the layout, without the values)."""
    out = set()
    for key, value in d.items():
        out.add((*prefix, key))
        if isinstance(value, dict):
            out |= _paths(value, (*prefix, key))
    return out


def test_nvlink_status_same_shape_as_real_h100(sim):
    out = sim.run("nvidia-smi", "nvlink", "-s")
    simulated = n.parse_nvlink_status(out)
    real = n.parse_nvlink_status(fixture("nvidia-smi-nvlink-status", "h100-pcie-2gpu-bridge-6-inactive"))
    assert len(simulated) == 8
    assert set(simulated[0]) == set(real[0])
    assert sorted(simulated[0]["links"]) == sorted(real[0]["links"]) == list(range(18))
    assert {type(v) for v in simulated[0]["links"].values()} == {float}
    assert simulated[0]["links"][0] == real[0]["links"][0] == 26.562
    # the binary indents link lines with a TAB and a space; the capture was pasted with the TAB expanded
    real_lines = fixture("nvidia-smi-nvlink-status", "h100-pcie-2gpu-bridge-6-inactive").splitlines()
    assert out.splitlines()[1].expandtabs(8) == real_lines[1] == "         Link 0: 26.562 GB/s"
    assert out.splitlines()[0].startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")


def test_nvlink_errors_same_shape(sim):
    simulated = n.parse_nvlink_errors(sim.run("nvidia-smi", "nvlink", "-e"))
    real = n.parse_nvlink_errors(fixture("nvidia-smi-nvlink-errors", "h100-hbm3-nvlink-e-all-zero"))
    assert simulated[0]["links"][17] == real[0]["links"][17] == {"replay": 0, "recovery": 0, "crc": 0}
    assert set(simulated[0]["links"]) == set(range(18))
    # the long option is --errorcounters (there is no --error-counters)
    assert sim.run("nvidia-smi", "nvlink", "--errorcounters") == sim.run("nvidia-smi", "nvlink", "-e")


def test_pcie_gpu_without_bridge_prints_all_links_inactive_as_the_real_a100(tmp_path):
    s = Sim(tmp_path, profile="pcie-a100-4gpu")
    out = s.run("nvidia-smi", "nvlink", "-s")
    real = fixture("nvidia-smi-nvlink-status", "a100-pcie-no-nvlink-all-inactive")
    assert out.splitlines()[1] == real.splitlines()[1] == "NVML: Unable to retrieve NVLink information as all links are inActive"
    assert [g["reason"] for g in n.parse_nvlink_status(out)] == ["all_inactive"] * 4


def test_query_text_has_exactly_the_sections_of_the_real_h100_535_capture(sim):
    simulated = n.parse_query_text(sim.run("nvidia-smi", "-q"))
    real = n.parse_query_text(fixture("nvidia-smi-q", H100_535))
    assert set(simulated["header"]) == set(real["header"])
    assert len(simulated["gpus"]) == len(real["gpus"]) == 8
    assert _paths(simulated["gpus"][0]) == _paths(real["gpus"][0])
    s_gpu, r_gpu = simulated["gpus"][0], real["gpus"][0]
    # the profile is this capture's hardware: identity, PCI, memory, power and clock values agree
    for section, keys in {
        "PCI": ("Bus", "Device Id", "Bus Id", "Sub System Id"),
        "FB Memory Usage": ("Total", "Reserved"),
        "GPU Power Readings": ("Default Power Limit", "Min Power Limit", "Max Power Limit", "Power Draw"),
        "Max Clocks": ("Graphics", "SM", "Memory", "Video"),
        "Default Applications Clocks": ("Graphics", "Memory"),
        "Remapped Rows": ("Correctable Error", "Pending"),
        "Fabric": ("State", "Status"),
    }.items():
        assert {k: s_gpu[section][k] for k in keys} == {k: r_gpu[section][k] for k in keys}, section
    for key in ("Product Name", "Product Brand", "Product Architecture", "VBIOS Version", "Board ID", "Module ID", "Minor Number"):
        assert s_gpu[key] == r_gpu[key], key
    assert s_gpu["ECC Errors"]["Volatile"] == r_gpu["ECC Errors"]["Volatile"]  # Hopper's SRAM/DRAM layout, no errors
    assert n.parse_fabric(sim.run("nvidia-smi", "-q"))[0]["state"] == "Completed"


def test_query_text_column_alignment_matches_real(sim):
    sim_lines = sim.run("nvidia-smi", "-q").splitlines()
    real_lines = fixture("nvidia-smi-q", H100_535).splitlines()
    for label in ("Persistence Mode", "Bus Id", "Max Power Limit", "Memory Max Operating T.Limit Temp"):
        sim_line = next(ln for ln in sim_lines if label in ln)
        real_line = next(ln for ln in real_lines if label in ln)
        assert sim_line.index(":") == real_line.index(":") == 42, label


def _tags(element):
    return {child.tag for child in element}


def test_query_xml_same_facts_as_real(sim):
    out = sim.run("nvidia-smi", "-q", "-x")
    simulated = n.parse_query_xml(out)
    real_text = fixture("nvidia-smi-q-x", "a100-sxm4-80gb-535-xml")
    real = n.parse_query_xml(real_text)
    assert set(simulated) == set(real)
    assert set(simulated["gpus"][0]) == set(real["gpus"][0])
    assert set(simulated["gpus"][0]["power"]) == set(real["gpus"][0]["power"])
    assert simulated["gpus"][0]["supported_clocks"][2619][0] == 1980
    assert [g["index"] for g in simulated["gpus"]] == list(range(8))
    # element layout: 535.261 adds two GPU elements to the 535.54 capture's, and drops none
    s_gpu = ET.fromstring(out.encode()).find("gpu")
    r_gpu = ET.fromstring(real_text.encode()).find("gpu")
    assert _tags(s_gpu) - _tags(r_gpu) == {"inforom_bbx_flush", "sparse_operation_mode"}
    assert _tags(r_gpu) <= _tags(s_gpu)
    for block in ("pci", "fb_memory_usage", "gpu_power_readings", "clocks", "applications_clocks", "max_clocks", "fabric"):
        assert _tags(s_gpu.find(block)) == _tags(r_gpu.find(block)), block


def test_topo_matrix_needs_nvml_private_tables_the_lab_does_not_have(sim):
    """`topo -m`/`-mp` are computed through NVML's private export table (nvmlInternalGetExportTable),
    which the lab NVML does not implement: the real binary prints the header and fails, making no
    public NVML call for the matrix (HWSIM_NVML_TRACE shows none). `topo -p2p n` uses the public
    nvmlDeviceGetP2PStatus and shows the NVLink connectivity the simulator models."""
    res = sim.run("nvidia-smi", "topo", "-m", check=False)
    assert res.returncode == 255 and "Failed to run topology matrix" in res.stdout
    assert res.stdout.splitlines()[0].split("\t")[1:9] == ["\x1b[4mGPU0"] + ["GPU%d" % i for i in range(1, 8)]
    p2p = sim.run("nvidia-smi", "topo", "-p2p", "n")
    rows = [ln.split("\t") for ln in p2p.splitlines() if ln.startswith(" GPU")]
    assert len(rows) == 8 and all(set(row[1:9]) == {"X", "OK"} for row in rows)


def test_topo_p2p_shows_a_gpu_whose_links_are_all_down(sim):
    sim.run("hwsim", "fault", "add", "gpu_links_all_inactive", "gpu=2")
    rows = {
        ln.split("\t")[0].strip(): ln.split("\t")[1:9]
        for ln in sim.run("nvidia-smi", "topo", "-p2p", "n").splitlines()
        if ln.startswith(" GPU")
    }
    assert rows["GPU2"] == ["NS", "NS", "X", "NS", "NS", "NS", "NS", "NS"]
    assert rows["GPU0"][2] == "NS" and rows["GPU0"][1] == "OK"


def test_query_gpu_csv_like_real(tmp_path):
    s = Sim(tmp_path, profile="pcie-a100-4gpu")  # the capture's GPU model
    real = fixture("nvidia-smi-query-gpu", "a100-pcie-query-gpu-app-clocks").splitlines()
    fields = [f.split(" [")[0].strip() for f in real[0].split(",")]
    out = s.run("nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv").splitlines()
    assert out[0] == real[0]  # the header, units included, as the real binary prints it
    simulated, captured = n.parse_query_gpu_csv("\n".join(out)), n.parse_query_gpu_csv("\n".join(real))
    assert simulated[0]["pci.bus_id"] == captured[0]["pci.bus_id"] == "00000000:12:00.0"
    for key in ("name", "vbios_version", "memory.total", "clocks.applications.graphics", "clocks.applications.memory"):
        assert simulated[0][key] == captured[0][key], key
    assert [v.split(" ")[1:] for v in simulated[0].values()][3:] == [v.split(" ")[1:] for v in captured[0].values()][3:]


def test_supported_clocks_text_and_xml_agree(sim):
    text = sim.run("nvidia-smi", "-q", "-d", "SUPPORTED_CLOCKS", "-i", "0")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    i = lines.index("    Supported Clocks")
    assert lines[i + 1].split(":") == ["        Memory                            ", " 2619 MHz"]
    graphics = [int(ln.split(":")[1].split()[0]) for ln in lines[i + 2 :] if ln.startswith("            Graphics")]
    xml = n.parse_query_xml(sim.run("nvidia-smi", "-q", "-x", "-i", "0"))["gpus"][0]["supported_clocks"]
    assert graphics == xml[2619] and graphics[0] == 1980 and graphics[-1] == 345


def test_ibstat_same_shape_as_real_roce(sim):
    simulated = r.parse_ibstat(sim.run("ibstat"))
    real = r.parse_ibstat(fixture("ibstat", "h100-roce-cx7-400g-two-ports-down"))
    assert simulated["mlx5_0"] == real["mlx5_0"] | {"firmware": "28.39.1002"}
    assert len(simulated) == 9


def test_ibstat_text_layout_matches_real(sim):
    sim_lines = sim.run("ibstat", "mlx5_0").splitlines()
    real_lines = fixture("ibstat", "h100-roce-cx7-400g-two-ports-down").splitlines()[:17]
    assert [ln.split(":")[0] for ln in sim_lines] == [ln.split(":")[0] for ln in real_lines]


def test_mlnx_qos_same_shape_as_real(sim):
    out = sim.run("mlnx_qos", "-i", "ens1np0", "--trust", "dscp", "--pfc", "0,0,0,1,0,0,0,0", "--cable_len", "7")
    simulated = r.parse_mlnx_qos(out)
    real = r.parse_mlnx_qos(fixture("mlnx_qos", "trust-dscp-pfc-prio3-cable7"))
    for key in ("trust", "pfc", "cable_len", "dscp2prio", "tcs"):
        assert simulated[key] == real[key], key
    assert simulated["buffer_size"] is not None  # newer mlnx_qos prints buffer rows


def test_ethtool_lists_pause_counters_only_for_pfc_priorities(sim):
    assert r.pfc_enabled_priorities(r.parse_ethtool_stats(sim.run("ethtool", "-S", "ens1np0"))) == []
    sim.run("mlnx_qos", "-i", "ens1np0", "--pfc", "0,0,0,1,0,0,0,0")
    stats = r.parse_ethtool_stats(sim.run("ethtool", "-S", "ens1np0"))
    assert r.pfc_enabled_priorities(stats) == [3]
    real = r.parse_ethtool_stats(fixture("ethtool-S", "cx4lx-mlx5-kernel4.15-ethq-fixture"))
    assert {"rx_prio3_bytes", "rx_out_of_buffer", "link_down_events_phy"} <= set(stats) & set(real)


def test_rdma_link_and_devinfo_and_gids(sim):
    links = r.parse_rdma_link(sim.run("rdma", "link", "show"))
    assert links[0] == {"device": "mlx5_0", "port": 1, "state": "ACTIVE", "physical_state": "LINK_UP", "netdev": "ens1np0"}
    dev = r.parse_ibv_devinfo(sim.run("ibv_devinfo"))
    assert dev["mlx5_0"]["ports"][1]["active_mtu"] == 4096  # netdev MTU 9000
    assert dev["mlx5_8"]["ports"][1]["active_mtu"] == 1024  # management NIC at MTU 1500
    gids = r.parse_show_gids(sim.run("show_gids"))
    assert any(g["device"] == "mlx5_0" and g["version"] == "v2" and g["ipv4"] == "10.100.0.1" for g in gids)


FAULTS = [
    (
        ["nvlink_inactive", "gpu=3", "links=4,5"],
        lambda s: (
            sorted(k for k, v in n.parse_nvlink_status(s.run("nvidia-smi", "nvlink", "-s"))[3]["links"].items() if v is None) == [4, 5]
        ),
    ),
    (["gpu_links_all_inactive", "gpu=2"], lambda s: n.parse_nvlink_status(s.run("nvidia-smi", "nvlink", "-s"))[2]["all_inactive"]),
    (["fabric_in_progress"], lambda s: n.parse_fabric(s.run("nvidia-smi", "-q"))[0]["state"] == "In Progress"),
    (["gpu_missing", "gpu=7"], lambda s: len(n.parse_gpu_list(s.run("nvidia-smi", "-L"))) == 7),
    (["rdma_port_down", "ca=mlx5_2"], lambda s: r.parse_ibstat(s.run("ibstat"))["mlx5_2"]["ports"][1]["state"] == "Down"),
    (["roce_mtu_1024", "ca=mlx5_1"], lambda s: r.parse_ibv_devinfo(s.run("ibv_devinfo"))["mlx5_1"]["ports"][1]["active_mtu"] == 1024),
    (
        ["pfc_off", "ca=mlx5_0"],
        # the kernel refuses the change (mlnx_qos then dies, as the real tool does): PFC stays off
        lambda s: (
            s.run("mlnx_qos", "-i", "ens1np0", "--pfc", "0,0,0,1,0,0,0,0", check=False).returncode != 0
            and r.parse_mlnx_qos(s.run("mlnx_qos", "-i", "ens1np0"))["pfc"] == [0] * 8
        ),
    ),
    (
        ["nvlink_errors", "gpu=1", "link=2", "count=5"],
        lambda s: n.parse_nvlink_errors(s.run("nvidia-smi", "nvlink", "-e"))[1]["links"][2]["replay"] == 5,
    ),
]


@pytest.mark.parametrize(("fault", "check"), FAULTS, ids=[f[0][0] for f in FAULTS])
def test_fault_injection(tmp_path, fault, check):
    s = Sim(tmp_path)
    assert not check(s)
    s.run("hwsim", "fault", "add", *fault)
    assert check(s)


def test_no_driver_fails_like_real_nvidia_smi(tmp_path):
    s = Sim(tmp_path, driver=None)
    for argv in (["-q", "-x"], ["nvlink", "-s"], ["--bogus"]):  # NVML fails before the arguments are read
        res = s.run("nvidia-smi", *argv, check=False)
        assert res.returncode == 9, argv
        assert res.stdout.startswith("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."), argv


def test_fabricmanager_refuses_version_mismatch(tmp_path):
    s = Sim(tmp_path, fabricmanager=False)
    (s.tmp / "fm-version").write_text("535.247.01\n")
    res = s.run("hwsim", "fabricmanager", "start", check=False)
    assert res.returncode == 1 and "must be identical" in res.stderr
    assert n.parse_fabric(s.run("nvidia-smi", "-q"))[0]["state"] == "Not Started"


def test_reboot_resets_volatile_gpu_state(tmp_path):
    s = Sim(tmp_path)
    s.run("nvidia-smi", "-pl", "500")
    assert n.parse_query_xml(s.run("nvidia-smi", "-q", "-x"))["gpus"][0]["power"]["limit"] == 500.0
    assert json.loads((s.tmp / "run" / "gpu.json").read_text())["0"]["power_limit"] == 500.0
    s.run("hwsim", "boot")
    assert n.parse_query_xml(s.run("nvidia-smi", "-q", "-x"))["gpus"][0]["power"]["limit"] == 700.0


def test_upgrade_without_reboot_is_a_version_mismatch(tmp_path):
    s = Sim(tmp_path, driver="535.247.01")
    (s.tmp / "driver-version").write_text("535.261.03\n")  # the new package is installed, the old module loaded
    res = s.run("nvidia-smi", "-L", check=False)
    assert res.returncode == 18
    assert res.stdout.splitlines() == ["Failed to initialize NVML: Driver/library version mismatch", "NVML library version: 535.261"]


def test_simulated_modinfo_matches_the_debian_kernel_capture(tmp_path):
    from conftest import ROOT

    text = (ROOT / "tests" / "fixtures" / "captured" / "modinfo-p-debian12-6.1.0-57.txt").read_text()
    sim = Sim(tmp_path)
    for block in text.split("### modinfo -p ")[1:]:
        name, _, body = block.partition("\n")
        assert sim.run("modinfo", "-p", name) == body, name


def test_simulated_modprobe_loads_dependencies_and_options(tmp_path):
    sim = Sim(tmp_path)
    conf = sim.tmp / "etc" / "modprobe.d"
    conf.mkdir(parents=True)
    (conf / "rdma.conf").write_text("options ib_core netns_mode=0\noptions ib_uverbs disable_raw_qp=0\n")
    sim.run("modprobe", "-r", "mlx5_ib", "ib_uverbs", "ib_core")
    res = sim.run("modprobe", "rdma_ucm", check=False)
    assert res.returncode == 0
    assert "ib_uverbs: unknown parameter 'disable_raw_qp' ignored" in res.stderr  # as the kernel does
    assert (sim.sysfs / "module" / "ib_core" / "parameters" / "netns_mode").read_text() == "0\n"
    assert {"rdma_cm", "rdma_ucm", "ib_uverbs"} <= set(sim.run("lsmod").split())
    assert (sim.sysfs / "kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_mode").read_text() == "RoCE v2\n"
    missing = sim.run("modprobe", "no_such_mod", check=False)
    assert missing.returncode == 1 and "Module no_such_mod not found" in missing.stderr


def test_boot_loads_the_hardware_drivers_and_modules_load_d(tmp_path):
    sim = Sim(tmp_path)
    assert "rdma_ucm" not in sim.run("lsmod")
    loadd = sim.tmp / "etc" / "modules-load.d"
    loadd.mkdir(parents=True)
    (loadd / "rackforge-rdma.conf").write_text("# comment\nrdma_ucm\n")
    sim.run("hwsim", "boot")
    assert {"mlx5_core", "mlx5_ib", "ib_uverbs", "rdma_ucm"} <= set(sim.run("lsmod").split())
