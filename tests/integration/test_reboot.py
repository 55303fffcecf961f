"""A reboot loses NIC QoS, GPU clocks and power limits (the simulator resets them as hardware
does); the boot units restore them, and the node is then clean in check mode."""

from __future__ import annotations

from conftest import lab, on_node, playbook

UNITS = ("rackforge-roce-qos.service", "rackforge-gpu-tuning.service")


def qos_state(node, ports):
    sysfs = "/var/lib/hwsim/sys/class/net"
    script = "; ".join(f"mlnx_qos -i {p}; cat {sysfs}/{p}/ecn/roce_np/enable/3 {sysfs}/{p}/ecn/roce_rp/enable/3" for p in ports)
    return on_node(node, "sh", "-c", script).stdout


def gpu_state(node):
    fields = "index,clocks.applications.memory,clocks.applications.graphics,power.limit"
    return on_node(node, "nvidia-smi", "--query-gpu=" + fields, "--format=csv,noheader").stdout


def test_reboot_loses_qos_and_clocks_and_the_boot_units_restore_them(converged, gpu_nodes):
    node = gpu_nodes[1]  # an HGX H100 node: the lab inventory asks 2619,1755 MHz and 600 W
    ports = ["ens%dnp0" % i for i in range(1, 9)]
    converged_qos, converged_gpu = qos_state(node, ports), gpu_state(node)
    assert "Priority trust state: dscp" in converged_qos
    assert converged_gpu.splitlines()[0] == "0, 2619 MHz, 1755 MHz, 600.00 W"
    # the simulator's reboot resets NIC QoS and GPU clocks/power: prove the units do the work
    lab("exec", node, "systemctl", "disable", "--quiet", *UNITS)
    lab("reboot", node)
    assert "Priority trust state: pcp" in qos_state(node, ports)
    assert gpu_state(node).splitlines()[0] == "0, 2619 MHz, 1980 MHz, 700.00 W"
    lab("exec", node, "systemctl", "enable", "--quiet", *UNITS)
    lab("reboot", node)
    for unit in UNITS:
        assert on_node(node, "systemctl", "is-active", unit, check=False).stdout.strip() == "active", unit
    assert qos_state(node, ports) == converged_qos
    assert gpu_state(node) == converged_gpu
    res = playbook("site.yml", "--limit", node, "--check", "--diff")
    assert res.returncode == 0 and res.recap[node]["changed"] == 0, res.stdout[-3000:]
