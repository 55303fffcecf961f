"""A reboot loses NIC QoS, GPU clocks and power limits (the simulator resets them as hardware
does); the boot units restore them, and the node is then clean in check mode."""

from __future__ import annotations

import subprocess

from conftest import lab, playbook


def qos_state(node, ports):
    sysfs = "/var/lib/hwsim/sys/class/net"
    script = "; ".join(f"mlnx_qos -i {p}; cat {sysfs}/{p}/ecn/roce_np/enable/3 {sysfs}/{p}/ecn/roce_rp/enable/3" for p in ports)
    return subprocess.run(
        ["podman", "exec", "rackforge-lab-" + node, "sh", "-c", script], capture_output=True, text=True, check=True
    ).stdout


def test_reboot_loses_qos_and_the_boot_unit_restores_it(converged, gpu_nodes):
    node = gpu_nodes[1]
    ports = ["ens%dnp0" % i for i in range(1, 9)]
    converged_state = qos_state(node, ports)
    assert "Priority trust state: dscp" in converged_state
    # the simulator's reboot resets NIC QoS exactly as a real one does: prove the unit did the work
    lab("exec", node, "systemctl", "disable", "--quiet", "rackforge-roce-qos.service")
    lab("reboot", node)
    assert "Priority trust state: pcp" in qos_state(node, ports)
    lab("exec", node, "systemctl", "enable", "--quiet", "rackforge-roce-qos.service")
    lab("reboot", node)
    active = subprocess.run(
        ["podman", "exec", "rackforge-lab-" + node, "systemctl", "is-active", "rackforge-roce-qos.service"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert active.stdout.strip() == "active"
    assert qos_state(node, ports) == converged_state
    res = playbook("site.yml", "--limit", node, "--check", "--diff")
    assert res.returncode == 0 and res.recap[node]["changed"] == 0, res.stdout[-3000:]
