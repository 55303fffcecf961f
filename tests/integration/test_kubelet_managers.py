"""The optional static CPU manager and topology manager on a joined node (kubernetes_node). The
kubelet keeps its CPU manager policy in /var/lib/kubelet/cpu_manager_state and will not start
with another: a policy change is refused before any change until the operator says the node is
drained (kubernetes_node_cpu_manager_reset), then the kubelet is stopped, its checkpoint removed
and started with the new policy. The kubelet is lab/k8sim's (SIMULATED, its start-up checks
written from the kubelet's sources); the drop-in and the checkpoint are real files on the node."""

from __future__ import annotations

import json

from conftest import node_state, on_node, playbook

NODE = "lab-node2"
CHECKPOINT = "/var/lib/kubelet/cpu_manager_state"
DROP_IN = "/etc/kubernetes/kubelet.conf.d/50-rackforge-reservations.conf"
ALIGNED = {"kubernetes_node_cpu_manager_policy": "static", "kubernetes_node_topology_manager_policy": "single-numa-node"}


def runtime(extra):
    return playbook("playbooks/runtime.yml", "--limit", NODE, "-e", json.dumps(extra))


def policy():
    return json.loads(on_node(NODE, "cat", CHECKPOINT).stdout)["policyName"]


def kubelet_active():
    return on_node(NODE, "systemctl", "is-active", "kubelet", check=False).stdout.strip() == "active"


def test_a_cpu_manager_policy_change_waits_for_the_drain_then_resets_the_checkpoint(converged):
    assert policy() == "none" and kubelet_active()  # the kubelet ran with the default and wrote its checkpoint
    before = node_state(NODE)
    refused = runtime(ALIGNED)
    assert refused.returncode != 0 and refused.recap[NODE]["changed"] == 0
    text = " ".join(refused.stdout.split())
    assert "kubernetes_node_cpu_manager_policy: this node's kubelet ran the CPU manager with policy 'none'" in text
    assert "kubernetes_node_cpu_manager_reset=true" in text and "Nothing was changed." in text
    assert node_state(NODE) == before
    try:
        done = runtime(dict(ALIGNED, kubernetes_node_cpu_manager_reset=True))
        assert done.returncode == 0, done.stdout[-3000:]
        assert policy() == "static" and kubelet_active()  # started again, with the new policy
        drop_in = on_node(NODE, "cat", DROP_IN).stdout
        assert 'cpuManagerPolicy: "static"' in drop_in and 'topologyManagerPolicy: "single-numa-node"' in drop_in
        assert 'topologyManagerScope: "pod"' in drop_in
    finally:
        # back to the default, as if a reset run had died right after its first step (kubelet stopped,
        # checkpoint gone): the next plain run starts the kubelet with the policy it is given
        on_node(NODE, "sh", "-c", "systemctl stop kubelet && rm -f %s" % CHECKPOINT)
        back = runtime({})
        assert back.returncode == 0, back.stdout[-3000:]
    assert policy() == "none" and kubelet_active() and "cpuManagerPolicy" not in on_node(NODE, "cat", DROP_IN).stdout
