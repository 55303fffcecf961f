"""The simulator's output must be format-identical to real captures: the same parsers read both
and get the same structure (only values differ)."""

from __future__ import annotations

import pytest
from ansible.module_utils.rackforge import nvidia_smi as n
from ansible.module_utils.rackforge import rdma as r
from conftest import fixture
from hwsim_helper import Sim


@pytest.fixture
def sim(tmp_path):
    return Sim(tmp_path)


def _shape(d):
    return {k: _shape(v) if isinstance(v, dict) else type(v).__name__ for k, v in d.items()}


def test_nvlink_status_same_shape_as_real_h100(sim):
    simulated = n.parse_nvlink_status(sim.run("nvidia-smi", "nvlink", "-s"))
    real = n.parse_nvlink_status(fixture("nvidia-smi-nvlink-status", "h100-pcie-2gpu-bridge-6-inactive"))
    assert len(simulated) == 8
    assert set(simulated[0]) == set(real[0])
    assert sorted(simulated[0]["links"]) == sorted(real[0]["links"]) == list(range(18))
    assert {type(v) for v in simulated[0]["links"].values()} == {float}
    assert simulated[0]["links"][0] == real[0]["links"][0] == 26.562


def test_nvlink_status_line_format_matches_real(sim):
    sim_lines = sim.run("nvidia-smi", "nvlink", "-s").splitlines()
    real_lines = fixture("nvidia-smi-nvlink-status", "h100-pcie-2gpu-bridge-6-inactive").splitlines()
    assert sim_lines[1] == real_lines[1] == "         Link 0: 26.562 GB/s"
    assert sim_lines[0].startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")


def test_nvlink_errors_same_shape(sim):
    simulated = n.parse_nvlink_errors(sim.run("nvidia-smi", "nvlink", "-e"))
    real = n.parse_nvlink_errors(fixture("nvidia-smi-nvlink-errors", "h100-hbm3-nvlink-e-all-zero"))
    assert simulated[0]["links"][17] == real[0]["links"][17] == {"replay": 0, "recovery": 0, "crc": 0}


def test_query_text_sections_are_a_subset_of_real_h100(sim):
    simulated = n.parse_query_text(sim.run("nvidia-smi", "-q"))
    real = n.parse_query_text(fixture("nvidia-smi-q", "h100-8gpu-hgx-535-fabric-completed-powerbrake"))
    assert set(simulated["header"]) == set(real["header"])
    s_gpu, r_gpu = simulated["gpus"][0], real["gpus"][0]
    for key, value in s_gpu.items():
        if key == "Fabric":  # 550+ layout (CliqueId/ClusterUUID/Health), as the real H200 capture
            h200 = n.parse_query_text(fixture("nvidia-smi-q", "h200-550-fabric-completed-clique0"))["gpus"][0]
            assert _shape(value) == _shape(h200["Fabric"])
            continue
        assert key in r_gpu, key
        if isinstance(value, dict):
            assert set(value) <= set(r_gpu[key]), key
    assert n.parse_fabric(sim.run("nvidia-smi", "-q"))[0]["state"] == "Completed"


def test_query_text_column_alignment_matches_real(sim):
    sim_line = next(ln for ln in sim.run("nvidia-smi", "-q").splitlines() if "Persistence Mode" in ln)
    real_line = next(
        ln for ln in fixture("nvidia-smi-q", "h100-8gpu-hgx-535-fabric-completed-powerbrake").splitlines() if "Persistence Mode" in ln
    )
    assert sim_line.index(":") == real_line.index(":")


def test_query_xml_same_facts_as_real(sim):
    simulated = n.parse_query_xml(sim.run("nvidia-smi", "-q", "-x"))
    real = n.parse_query_xml(fixture("nvidia-smi-q-x", "a100-sxm4-80gb-535-xml"))
    assert set(simulated) == set(real)
    assert set(simulated["gpus"][0]) == set(real["gpus"][0])
    assert set(simulated["gpus"][0]["power"]) == set(real["gpus"][0]["power"])
    assert simulated["gpus"][0]["supported_clocks"][2619][0] == 1980


def test_topo_same_shape(sim):
    simulated = n.parse_topo_m(sim.run("nvidia-smi", "topo", "-m"))
    real = n.parse_topo_m(fixture("nvidia-smi-topo-m", "h100-8gpu-nv18-2numa"))
    assert simulated["links"] == real["links"]
    assert simulated["numa_affinity"] == real["numa_affinity"]


def test_query_gpu_csv_header_like_real(sim):
    out = sim.run("nvidia-smi", "--query-gpu=name,pci.bus_id,clocks.applications.graphics,clocks.applications.memory", "--format=csv")
    real_header = fixture("nvidia-smi-query-gpu", "a100-pcie-query-gpu-app-clocks").splitlines()[0]
    assert "clocks.applications.graphics [MHz]" in out.splitlines()[0] and "clocks.applications.graphics [MHz]" in real_header
    assert n.parse_query_gpu_csv(out)[0]["clocks.applications.memory"] == "2619 MHz"


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
        lambda s: r.parse_mlnx_qos(s.run("mlnx_qos", "-i", "ens1np0", "--pfc", "0,0,0,1,0,0,0,0"))["pfc"] == [0] * 8,
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
    res = s.run("nvidia-smi", "-q", "-x", check=False)
    assert res.returncode == 9
    assert "couldn't communicate with the NVIDIA driver" in res.stdout


def test_fabricmanager_refuses_version_mismatch(tmp_path):
    s = Sim(tmp_path, fabricmanager=False)
    (s.tmp / "fm-version").write_text("550.144.03\n")
    res = s.run("hwsim", "fabricmanager", "start", check=False)
    assert res.returncode == 1 and "must be identical" in res.stderr
    assert n.parse_fabric(s.run("nvidia-smi", "-q"))[0]["state"] == "Not Started"


def test_reboot_resets_volatile_gpu_state(tmp_path):
    s = Sim(tmp_path)
    s.run("nvidia-smi", "-pl", "500")
    assert n.parse_query_xml(s.run("nvidia-smi", "-q", "-x"))["gpus"][0]["power"]["limit"] == 500.0
    s.run("hwsim", "boot")
    assert n.parse_query_xml(s.run("nvidia-smi", "-q", "-x"))["gpus"][0]["power"]["limit"] == 700.0


def test_upgrade_without_reboot_is_a_version_mismatch(tmp_path):
    s = Sim(tmp_path)
    (s.tmp / "driver-version").write_text("550.144.03\n")
    res = s.run("nvidia-smi", "-L", check=False)
    assert res.returncode != 0 and "Driver/library version mismatch" in res.stdout


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
