"""Rolling GPU driver upgrade in the lab (SIMULATED driver packages, SIMULATED control plane
answering kubernetes.core.k8s_drain): canary first, a node that fails its post-upgrade health
check stays cordoned and the run stops before the next batch; once it is fixed a re-run finishes
the fleet; a rollback is the same playbook with the old version. The reboot is the product's
ansible.builtin.reboot: in a lab node a real systemd reboot, after which podman's restart policy
starts the container again with an empty /run (the lab's inventory says how to tell the boots
apart: upgrade_boot_time_command); only the nodes that were upgraded reboot."""

from __future__ import annotations

import json

import yaml
from conftest import ROOT, lab, on_node, playbook

CP = "lab-cp1"
OLD, NEW = "535.247.01", "535.261.03"
BOOT_TIME = yaml.safe_load((ROOT / "lab" / "inventory_vars" / "rackforge.yml").read_text())["upgrade_boot_time_command"]
MARK = "/run/rackforge-test-upgrade"  # /run is a tmpfs: a reboot loses it


def boots(nodes):
    """Each node's boot, as the upgrade's reboot tells boots apart."""
    return {n: on_node(n, "sh", "-c", BOOT_TIME).stdout.strip() for n in nodes}


def rebooted(before, nodes):
    """The nodes whose boot changed since `before` (and that lost the /run mark)."""
    now = boots(nodes)
    changed = {n for n in nodes if now[n] != before[n]}
    lost = {n for n in nodes if on_node(n, "test", "-e", MARK, check=False).returncode != 0}
    assert changed == lost, (changed, lost)
    return changed


def mark(nodes):
    for node in nodes:
        on_node(node, "touch", MARK)
    return boots(nodes)


def driver(node):
    return on_node(node, "sh", "-c", "nvidia-smi --query-gpu=driver_version --format=csv,noheader | sort -u").stdout.strip()


def cordoned():
    nodes = json.loads(on_node(CP, "kubectl", "get", "nodes", "-o", "json").stdout)["items"]
    return {n["metadata"]["name"] for n in nodes if n["spec"].get("unschedulable")}


def pods():
    return {p["metadata"]["name"] for p in json.loads(on_node(CP, "kubectl", "get", "pods", "-o", "json").stdout)["items"]}


def upgrade(version):
    return playbook("playbooks/upgrade_gpu_driver.yml", "-e", "nvidia_driver_version=%s" % version)


def test_rolling_upgrade_canary_first_failed_node_stays_cordoned_then_rollback(converged, gpu_nodes):
    canary, second, third = gpu_nodes
    for node in gpu_nodes:  # a workload that a PodDisruptionBudget refuses to evict once, and a DaemonSet pod
        on_node(CP, "kubectl", "k8sim-add-pod", node, "inference/llm-7d9f-%s" % node, "--pdb-refusals", "1")
        on_node(CP, "kubectl", "k8sim-add-pod", node, "kube-system/calico-node-%s" % node, "--daemonset")
    before = mark(gpu_nodes)
    try:  # the fault is cleared whatever happens after it is injected (a later test needs a healthy node)
        lab("fault", second, "nvlink_inactive", "gpu=2", "links=7")  # persists across the reboot
        res = upgrade(NEW)
        assert res.returncode != 0
        out = res.stdout
        assert rebooted(before, gpu_nodes) == {canary, second}  # ansible.builtin.reboot, proven by the new boot
        first_reboot = out[out.index("TASK [Reboot into the new driver]") :].split("\nTASK [", 1)[0]
        assert "changed: [%s]" % canary in first_reboot, first_reboot  # the canary's batch rebooted with the module
        # batches [1, 10%, 25%]: the canary is upgraded and back in service before the next node starts
        assert out.index("TASK [Uncordon the healthy node]") < out.index("FAILED - RETRYING: [%s -> localhost]: Cordon and drain" % second)
        # after the reboot the device plugin advertises every GPU again before the node is let back
        gate = "TASK [nvidia_device_plugin : Gate the node on its advertised GPUs"
        assert out.index(gate) < out.index("TASK [Uncordon the healthy node]")
        assert "ok: [%s -> lab-cp1" % canary in out[out.index(gate) :].split("\nTASK [", 1)[0]
        assert res.recap[canary]["failed"] == 0 and res.recap[second]["failed"] == 1
        assert third not in res.recap or res.recap[third]["changed"] == 0  # the run stopped before its batch
        assert "FAILED - RETRYING: [%s -> localhost]: Cordon and drain" % canary in out  # the PDB refusal was retried
        assert (driver(canary), driver(second), driver(third)) == (NEW, NEW, OLD)
        assert cordoned() == {second}
        left = pods()
        assert "llm-7d9f-%s" % canary not in left and "llm-7d9f-%s" % second not in left
        assert {"llm-7d9f-%s" % third, "calico-node-%s" % canary, "calico-node-%s" % second} <= left
    finally:
        lab("fault", second, "clear")
    # fixed: the re-run uncordons the second node (already on the new version) and upgrades the third
    before = mark(gpu_nodes)
    res = upgrade(NEW)
    assert res.returncode == 0, res.stdout[-3000:]
    assert {driver(n) for n in gpu_nodes} == {NEW} and cordoned() == set()
    assert rebooted(before, gpu_nodes) == {third}
    for node in gpu_nodes:  # the CDI spec follows the driver: the new version's files, none of the old's
        spec = on_node(node, "cat", "/var/run/cdi/nvidia.json").stdout
        assert "libcuda.so.%s" % NEW in spec and OLD not in spec, node
    before = mark(gpu_nodes)
    again = upgrade(NEW)
    assert again.returncode == 0 and all(again.recap[n]["changed"] == 0 for n in gpu_nodes)
    assert rebooted(before, gpu_nodes) == set()
    # rollback: the same playbook, the old version
    before = mark(gpu_nodes)
    res = upgrade(OLD)
    assert res.returncode == 0, res.stdout[-3000:]
    assert {driver(n) for n in gpu_nodes} == {OLD} and cordoned() == set()
    assert rebooted(before, gpu_nodes) == set(gpu_nodes)
    nodes = {n["metadata"]["name"]: n for n in json.loads(on_node(CP, "kubectl", "get", "nodes", "-o", "json").stdout)["items"]}
    for node in gpu_nodes:
        labels = nodes[node]["metadata"]["labels"]
        assert nodes[node]["status"]["allocatable"]["nvidia.com/gpu"] == labels["nvidia.com/gpu.count"], node
    for node in gpu_nodes:
        held = on_node(node, "apt-mark", "showhold").stdout.split()
        assert {"nvidia-driver-535-open", "nvidia-fabricmanager-535"} & set(held)  # the open module by default
    assert not (ROOT / ".cache" / "rackforge-upgrade.kubeconfig").exists()  # the admin kubeconfig copy is gone
