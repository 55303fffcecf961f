"""After site.yml: driver and fabric manager pinned and held together, services up, simulated GPUs
answer through the installed driver, health metrics published."""

from __future__ import annotations

import json

import pytest

testinfra_hosts = ["ansible://gpu_nodes"]


def profile(host):
    return json.loads(host.file("/etc/hwsim/profile.json").content_string)


# the lab inventory keeps nvidia_driver_kernel_module_type at its default, open: NVIDIA's
# repository calls that package nvidia-driver-<branch>-open
DRIVER = "nvidia-driver-535-open"


def test_driver_package_pinned_and_held(host):
    pkg = host.package(DRIVER)
    assert pkg.is_installed and pkg.version.startswith("535.247.01")
    held = host.check_output("apt-mark showhold")
    assert DRIVER in held.split()
    assert not host.package("nvidia-driver-535").is_installed  # the proprietary flavour conflicts


def test_the_loaded_kernel_module_is_the_open_one(host):
    # the proprietary module would taint the kernel P (and offers no dma-buf for GPUDirect RDMA)
    assert host.file("/var/lib/hwsim/sys/module/nvidia/taint").content_string.strip() == "OE"


def test_fabric_manager_matches_driver_only_on_nvswitch(host):
    fm = host.package("nvidia-fabricmanager-535")
    if profile(host)["nvswitch"]["count"]:
        assert fm.is_installed and fm.version == host.package(DRIVER).version
        assert "nvidia-fabricmanager-535" in host.check_output("apt-mark showhold").split()
        svc = host.service("nvidia-fabricmanager")
        assert svc.is_enabled and svc.is_running
        assert "State                             : Completed" in host.check_output("nvidia-smi -q")
    else:
        assert not fm.is_installed


def test_repo_is_signed_and_key_checked(host):
    src = host.file("/etc/apt/sources.list.d/rackforge-nvidia.list")
    assert src.contains("signed-by=/etc/apt/keyrings/rackforge-nvidia.asc")
    key = host.file("/etc/apt/keyrings/rackforge-nvidia.asc")
    assert key.mode == 0o644 and key.user == "root"


def test_nouveau_blacklisted(host):
    f = host.file("/etc/modprobe.d/blacklist-nouveau.conf")
    assert f.contains("^blacklist nouveau$") and f.mode == 0o644


@pytest.mark.parametrize("unit", ["nvidia-persistenced"])
def test_persistence_daemon(host, unit):
    svc = host.service(unit)
    assert svc.is_enabled and svc.is_running
    out = host.check_output("nvidia-smi --query-gpu=persistence_mode --format=csv,noheader")
    assert set(out.split()) == {"Enabled"}


def test_gpus_visible_through_installed_driver(host):
    gpus = host.check_output("nvidia-smi -L").splitlines()
    assert len(gpus) == profile(host)["gpu"]["count"]


def test_health_metrics_published(host):
    prom = host.file("/var/lib/prometheus/node-exporter/rackforge.prom")
    assert prom.contains("^rackforge_node_healthy 1$")
    assert prom.mode == 0o644


def test_node_exporter_listens_on_the_management_address_only(host):
    svc = host.service("prometheus-node-exporter")
    assert svc.is_enabled and svc.is_running
    mgmt = host.ansible.get_variables()["rackforge_mgmt_address"]
    assert host.socket("tcp://%s:9100" % mgmt).is_listening
    assert not host.socket("tcp://0.0.0.0:9100").is_listening
    fetch = "import urllib.request; print(urllib.request.urlopen('http://%s:9100/metrics').read().decode())" % mgmt
    metrics = host.check_output('python3 -c "%s"' % fetch)
    assert "rackforge_node_healthy 1" in metrics
    assert 'node_systemd_unit_state{name="nvidia-persistenced.service",state="active",type="simple"} 1' in metrics


def test_dcgm_counters_enable_nvlink_errors_and_ecc(host):
    counters = host.file("/etc/rackforge/dcgm-exporter/counters.csv")
    assert counters.mode == 0o644
    enabled = {line.split(",")[0] for line in counters.content_string.splitlines() if line and not line.startswith("#")}
    assert {
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_XID_ERRORS",
    } <= enabled


def _roce_ports(host):
    return [n["netdev"] for n in profile(host)["nics"] if n["role"] == "rdma"]


# lossless buffer = the mlx5 kernel's floor, xoff + max(netdev max_mtu, 9216) + 128 B, in
# 384-byte units (netmath.pfc_lossless_buffer), 7 m cable, MTU 9000. The lab's netdevs are real
# veths, whose max_mtu is 65535 (a ConnectX port has 9978): 400G: 150880 + 65535 + 128 ->
# 216576; 100G: 56080 + 65535 + 128 -> 122112
LOSSLESS_BUFFER = {400: 216576, 100: 122112}


def test_roce_ports_lossless_on_priority_3(host):
    sysfs = "/var/lib/hwsim/sys"
    rate = {n["netdev"]: n["rate"] for n in profile(host)["nics"]}
    for netdev in _roce_ports(host):
        qos = host.check_output("mlnx_qos -i %s" % netdev)
        lossless = LOSSLESS_BUFFER[rate[netdev]]
        assert "Receive buffer size (bytes): %d,%d,0,0,0,0,0,0,max_buffer_size=262016" % (262016 - lossless, lossless) in qos
        assert "buffer      0   0   0   1   0   0   0   0" in qos
        assert "Priority trust state: dscp" in qos
        assert "enabled     0   0   0   1   0   0   0   0" in qos, netdev
        assert "Cable len: 7" in qos
        for point in ("roce_np", "roce_rp"):
            assert host.file("%s/class/net/%s/ecn/%s/enable/3" % (sysfs, netdev, point)).content_string.strip() == "1"
            assert host.file("%s/class/net/%s/ecn/%s/enable/0" % (sysfs, netdev, point)).content_string.strip() == "0"
        # mlx5 lists per-priority pause counters only for PFC-enabled priorities
        stats = host.check_output("ethtool -S %s" % netdev)
        assert "rx_prio3_pause:" in stats and "rx_prio0_pause:" not in stats


def test_rdma_cm_defaults_to_roce_v2_with_dscp_26(host):
    for nic in profile(host)["nics"]:
        if nic["role"] != "rdma":
            continue
        port = "/var/lib/hwsim/sys/kernel/config/rdma_cm/%s/ports/1" % nic["ca"]
        assert host.file(port + "/default_roce_mode").content_string.strip() == "RoCE v2"
        assert host.file(port + "/default_roce_tos").content_string.strip() == "106"


def test_rdma_modules_loaded_and_loaded_at_boot(host):
    assert host.file("/etc/modules-load.d/rackforge-rdma.conf").content_string.split("\n")[1:4] == ["ib_uverbs", "rdma_ucm", "mlx5_ib"]
    loaded = host.check_output("lsmod").split()
    assert {"ib_uverbs", "rdma_ucm", "mlx5_ib"} <= set(loaded)
    assert host.package("rdma-core").is_installed and host.package("infiniband-diags").is_installed


def test_roce_boot_unit_enabled(host):
    unit = host.service("rackforge-roce-qos")
    assert unit.is_enabled
    script = host.file("/usr/local/sbin/rackforge-roce-qos")
    assert script.mode == 0o755 and "--pfc 0,0,0,1,0,0,0,0" in script.content_string


def test_network_sysctl_file(host):
    conf = host.file("/etc/sysctl.d/90-rackforge-network.conf")
    assert conf.mode == 0o644
    # lab inventory: bdp buffers for the 400g profile at 1 ms: 2 x 50 MB -> 128 MiB
    assert "net.core.rmem_max = 134217728" in conf.content_string
    assert "net.ipv4.tcp_rmem = 4096 87380 134217728" in conf.content_string
    assert "net.core.default_qdisc = fq" in conf.content_string
    assert "net.ipv4.tcp_congestion_control = bbr" in conf.content_string


# lab inventory: H100 2619,1755 MHz + 600 W + locked 1410..1755; A100 PCIe "1500,1500" resolved
# by the nearest policy to 1215,1410 + 225 W
GPU_SETTINGS = {
    "NVIDIA H100 80GB HBM3": ("2619 MHz", "1755 MHz", "600.00 W"),
    "NVIDIA A100-PCIE-40GB": ("1215 MHz", "1410 MHz", "225.00 W"),
}


def test_gpus_show_the_requested_clocks_power_and_persistence(host):
    fields = "name,clocks.applications.memory,clocks.applications.graphics,power.limit,persistence_mode"
    rows = host.check_output("nvidia-smi --query-gpu=%s --format=csv,noheader" % fields).splitlines()
    assert len(rows) == profile(host)["gpu"]["count"]
    for row in rows:
        name, mem, gr, power, persistence = (c.strip() for c in row.split(","))
        assert (mem, gr, power) == GPU_SETTINGS[name]
        assert persistence == "Enabled"


def test_gpu_boot_unit_and_offpeak_timer(host):
    unit = host.service("rackforge-gpu-tuning")
    assert unit.is_enabled
    script = host.file("/usr/local/sbin/rackforge-gpu-tuning").content_string
    assert " -pl " in script and " -ac " in script
    assert host.file("/etc/systemd/system/rackforge-gpu-tuning.service").contains("After=nvidia-persistenced.service")
    timer = host.service("rackforge-gpu-tuning-offpeak.timer")
    assert timer.is_enabled and timer.is_running
    assert host.file("/etc/systemd/system/rackforge-gpu-tuning-offpeak.timer").contains("OnCalendar=2099-12-31 22:00:00")
    assert "-lgc 210,1005" in host.file("/usr/local/sbin/rackforge-gpu-tuning-offpeak").content_string
