"""Memory protection on a converged lab: the kubelet runs with rackforge's reservations drop-in
(--config-dir), the Node's allocatable memory is its capacity less the reservations and the hard
eviction threshold (the stand-in kubelet, lab/k8sim, applies upstream's formula: SIMULATED), and
the kernel's OOM killer would take pods before the kubelet, containerd, the GPU daemons and the
exporters: the OOMScoreAdjust real systemd loaded from the units and rackforge's drop-ins. The
process's own /proc/<pid>/oom_score_adj stays 0 here: this machine's kernel refuses a negative
value even to root outside the containers (systemd ignores that failure in a container), so
the score applied to a running process is proven only on real hardware."""

from __future__ import annotations

import json
import re
import time

import yaml
from conftest import on_node, playbook

CP = "lab-cp1"
DROP_IN = "/etc/kubernetes/kubelet.conf.d/50-rackforge-reservations.conf"
UNIT_FACTOR = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def qty(text):
    m = re.match(r"^([0-9]+)(Ki|Mi|Gi)$", text)
    assert m, text
    return int(m.group(1)) * UNIT_FACTOR[m.group(2)]


def api_node(name):
    return json.loads(on_node(CP, "kubectl", "get", "node", name, "-o", "json").stdout)


def main_pid(node, unit):
    return on_node(node, "systemctl", "show", "-p", "MainPID", "--value", unit).stdout.strip()


def oom_score_adjust(node, unit):
    """The OOMScoreAdjust systemd loaded for the unit (its file and every drop-in)."""
    return int(on_node(node, "systemctl", "show", "-p", "OOMScoreAdjust", "--value", unit).stdout)


def wait_allocatable(node, want_bytes, timeout=60):
    deadline = time.time() + timeout
    while True:
        status = api_node(node)["status"]
        got = qty(status.get("allocatable", {}).get("memory", "0Ki"))
        if got == want_bytes or time.time() > deadline:
            return status, got
        time.sleep(2)


def expected_allocatable(node):
    doc = yaml.safe_load(on_node(node, "cat", DROP_IN).stdout)
    mem_total = int(re.search(r"^MemTotal:\s+(\d+) kB$", on_node(node, "cat", "/proc/meminfo").stdout, re.M).group(1)) * 1024
    reserved = qty(doc["systemReserved"]["memory"]) + qty(doc["kubeReserved"]["memory"]) + qty(doc["evictionHard"]["memory.available"])
    return doc, mem_total, (mem_total - reserved) // 1024 * 1024


def test_the_kubelet_runs_with_the_reservations_and_the_node_reports_what_is_left(converged, gpu_nodes):
    for node in [*gpu_nodes, CP]:
        doc, mem_total, want = expected_allocatable(node)
        assert doc["kind"] == "KubeletConfiguration" and doc["apiVersion"] == "kubelet.config.k8s.io/v1beta1"
        assert set(doc["evictionHard"]) >= {"memory.available", "nodefs.available", "imagefs.available", "nodefs.inodesFree"}
        cmdline = on_node(node, "cat", "/proc/%s/cmdline" % main_pid(node, "kubelet")).stdout.split("\0")
        assert "--config-dir=/etc/kubernetes/kubelet.conf.d" in cmdline, cmdline
        status, got = wait_allocatable(node, want)
        assert qty(status["capacity"]["memory"]) == mem_total // 1024 * 1024
        assert got == want, (node, status)


def test_the_oom_killer_takes_pods_before_the_node_daemons(converged, gpu_nodes):
    for node in gpu_nodes:
        # below a Guaranteed pod's -997: kubelet and GPU daemons (rackforge's drop-ins), containerd
        # (Debian's own unit sets -999), node_exporter (rackforge's drop-in)
        assert oom_score_adjust(node, "kubelet") == -999
        assert oom_score_adjust(node, "containerd") == -999
        assert oom_score_adjust(node, "nvidia-persistenced") == -999
        assert oom_score_adjust(node, "prometheus-node-exporter") == -998
    assert oom_score_adjust("lab-node1", "nvidia-fabricmanager") == -999  # the NVSwitch node's fabric manager
    assert oom_score_adjust(CP, "kubelet") == -999
    # and without the drop-ins these units would run at 0, like any other process
    assert oom_score_adjust("lab-node1", "ssh") == 0


def test_an_operator_reservation_reaches_the_node_and_drift_is_repaired(converged):
    node = "lab-node2"
    mine = {
        "kubernetes_node_system_reserved": {"memory": "3Gi", "cpu": "250m"},
        "kubernetes_node_eviction_hard": {"memory.available": "1Gi"},
    }
    before = main_pid(node, "kubelet")
    try:
        res = playbook("playbooks/runtime.yml", "--limit", node, "-e", json.dumps(mine))
        assert res.returncode == 0 and res.recap[node]["changed"] == 1, res.stdout[-3000:]
        assert main_pid(node, "kubelet") != before  # restarted to read it
        doc, _, want = expected_allocatable(node)
        assert doc["systemReserved"] == {"memory": "3Gi", "cpu": "250m"}
        assert doc["evictionHard"]["memory.available"] == "1Gi" and doc["evictionHard"]["nodefs.available"] == "10%"
        status, got = wait_allocatable(node, want)
        assert got == want, status
        assert status["allocatable"]["cpu"] == "%dm" % (int(status["capacity"]["cpu"]) * 1000 - 250 - int(doc["kubeReserved"]["cpu"][:-1]))
    finally:
        back = playbook("playbooks/runtime.yml", "--limit", node)
        assert back.returncode == 0 and back.recap[node]["changed"] == 1, back.stdout[-3000:]
    _, _, want = expected_allocatable(node)
    assert wait_allocatable(node, want)[1] == want
