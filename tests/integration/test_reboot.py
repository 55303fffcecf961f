"""A reboot loses NIC QoS, GPU clocks and power limits (the simulator resets them as hardware
does); the boot units restore them, and the model share is mounted again at boot, and the node is then clean in check mode. A lab node's reboot
is a reboot: a new boot, an empty /run and none of the kernel network state the last boot made."""

from __future__ import annotations

import yaml
from conftest import ROOT, lab, not_idempotent, on_node, playbook

# what ansible.builtin.reboot compares in a lab node to tell its boots apart (the lab's inventory)
BOOT_TIME = yaml.safe_load((ROOT / "lab" / "inventory_vars" / "rackforge.yml").read_text())["upgrade_boot_time_command"]
UNITS = ("rackforge-roce-qos.service", "rackforge-gpu-tuning.service", "rackforge-gpudirect-acs.service")
# a oneshot without RemainAfterExit (inactive once it ran): the CDI spec under /var/run is its proof
CDI_UNIT, CDI_SPEC = "rackforge-cdi-spec.service", "/var/run/cdi/nvidia.json"
# the REAL lspci over the simulated PCI config space: ACS of the switch port above GPU 0
ACS = ["lspci", "-A", "linux-sysfs", "-O", "sysfs.path=/var/lib/hwsim/sys/bus/pci", "-vvv", "-s", "17:00.0"]


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
    assert "ReqRedir- CmpltRedir-" in on_node(node, *ACS).stdout
    assert "Priority trust state: dscp" in converged_qos
    assert converged_gpu.splitlines()[0] == "0, 2619 MHz, 1755 MHz, 600.00 W"
    spec = on_node(node, "cat", CDI_SPEC).stdout
    assert '"name":"all"' in spec
    # the simulator's reboot resets NIC QoS and GPU clocks/power: prove the units do the work
    lab("exec", node, "systemctl", "disable", "--quiet", *UNITS, CDI_UNIT)
    lab("reboot", node)
    assert on_node(node, "test", "-e", CDI_SPEC, check=False).returncode == 1  # /var/run is gone with the boot
    assert "Priority trust state: pcp" in qos_state(node, ports)
    assert gpu_state(node).splitlines()[0] == "0, 2619 MHz, 1980 MHz, 700.00 W"
    assert "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+" in on_node(node, *ACS).stdout  # Linux's boot default
    # the boot mounted the model share again (a mount does not outlive its boot): its unit is enabled
    assert on_node(node, "systemctl", "is-active", "models.mount", check=False).stdout.strip() == "active"
    assert on_node(node, "findmnt", "-n", "-o", "TARGET", "/models").stdout.strip() == "/models"
    # and the local cache: the array assembled again before the local filesystems (udev's work,
    # SIMULATED by the lab's block unit), its filesystem mounted by its unit
    assert "md127 : active raid0" in on_node(node, "cat", "/proc/mdstat").stdout
    assert on_node(node, "systemctl", "is-active", "var-cache-models.mount", check=False).stdout.strip() == "active"
    lab("exec", node, "systemctl", "enable", "--quiet", *UNITS, CDI_UNIT)
    lab("reboot", node)
    assert on_node(node, "cat", CDI_SPEC).stdout == spec  # written again by the oneshot, for this boot's driver
    for unit in UNITS:
        assert on_node(node, "systemctl", "is-active", unit, check=False).stdout.strip() == "active", unit
    assert qos_state(node, ports) == converged_qos
    assert gpu_state(node) == converged_gpu
    assert "ReqRedir- CmpltRedir-" in on_node(node, *ACS).stdout
    res = playbook("site.yml", "--limit", node, "--check", "--diff")
    assert res.returncode == 0 and res.recap[node]["changed"] == 0, not_idempotent(res)


def test_a_lab_reboot_is_a_reboot(converged, gpu_nodes):
    node = gpu_nodes[0]
    boot = on_node(node, "sh", "-c", BOOT_TIME).stdout.strip()
    # runtime-only state, as a process or an operator leaves it: a file in /run, a link, an address
    on_node(
        node,
        "sh",
        "-c",
        "touch /run/rackforge-test-reboot && ip link add rftest0 type veth peer name rftest1 && ip addr add 192.0.2.7/32 dev lo",
    )
    try:
        lab("reboot", node)
        assert on_node(node, "sh", "-c", BOOT_TIME).stdout.strip() not in ("", boot)  # what ansible.builtin.reboot waits for
        assert on_node(node, "test", "-e", "/run/rackforge-test-reboot", check=False).returncode == 1
        links = on_node(node, "ip", "-o", "link", "show").stdout
        assert "rftest0" not in links and "rftest1" not in links
        assert "192.0.2.7" not in on_node(node, "ip", "-o", "addr", "show", "dev", "lo").stdout
        # made again at boot: the simulated RDMA netdevs with their RoCE addresses
        assert "inet 10.201.0." in on_node(node, "ip", "-o", "addr", "show", "dev", "ens1np0").stdout
    finally:
        on_node(
            node, "sh", "-c", "ip link delete rftest0; ip addr delete 192.0.2.7/32 dev lo; rm -f /run/rackforge-test-reboot", check=False
        )


def test_a_driver_the_node_has_not_loaded_is_rebooted_into_where_allowed(converged, gpu_nodes):
    """nvidia_driver decides the reboot from the node (loaded driver != installed one), not from a
    change in this run: a run that installed a driver it could not reboot into leaves the node
    marked; the next run with nvidia_driver_reboot_ok reboots it, reads the driver again and carries
    on with it (no package changes in that run)."""
    node = gpu_nodes[-1]
    old, new = "535.247.01", "535.261.03"

    def boot():
        return on_node(node, "sh", "-c", BOOT_TIME).stdout.strip()

    def loaded():
        return on_node(
            node, "sh", "-c", "nvidia-smi --query-gpu=driver_version --format=csv,noheader | sort -u", check=False
        ).stdout.strip()

    assert loaded() == old
    before = boot()
    try:
        res = playbook("playbooks/gpu.yml", "--limit", node, "-e", "nvidia_driver_version=" + new)
        assert res.returncode == 0, res.stdout[-3000:]
        assert "A reboot is required and nvidia_driver_reboot_ok is false" in res.stdout
        assert boot() == before and "version mismatch" in loaded().lower()
        # check mode previews the reboot and fails nothing (the driver is not usable until it)
        dry = playbook(
            "playbooks/gpu.yml", "--limit", node, "--check", "-e", "nvidia_driver_version=" + new, "-e", "nvidia_driver_reboot_ok=true"
        )
        assert dry.returncode == 0, dry.stdout[-3000:]
        task = dry.stdout[dry.stdout.index("TASK [nvidia_driver : Reboot into the installed driver]") :].split("\nTASK [", 1)[0]
        assert "changed: [%s]" % node in task and boot() == before, task
        res = playbook("playbooks/gpu.yml", "--limit", node, "-e", "nvidia_driver_version=" + new, "-e", "nvidia_driver_reboot_ok=true")
        assert res.returncode == 0, res.stdout[-3000:]
        assert boot() != before and loaded() == new
        reboot = res.stdout[res.stdout.index("TASK [nvidia_driver : Reboot into the installed driver]") :].split("\nTASK [", 1)[0]
        assert "changed: [%s]" % node in reboot, reboot
        install = res.stdout[res.stdout.index("TASK [nvidia_driver : Install the driver") :].split("\nTASK [", 1)[0]
        assert "ok: [%s]" % node in install, install  # nothing installed in this run: the node's state decided
        assert "rackforge-gpu-tuning.service" in on_node(node, "systemctl", "list-unit-files").stdout  # gpu_tuning ran after it
    finally:
        args = ["-e", "nvidia_driver_allow_downgrade=true", "-e", "nvidia_driver_reboot_ok=true"]
        res = playbook("playbooks/gpu.yml", "--limit", node, *args)
        assert res.returncode == 0 and loaded() == old, res.stdout[-3000:]
    res = playbook("site.yml", "--limit", node)
    assert res.returncode == 0 and res.recap[node]["changed"] == 0, not_idempotent(res)
