"""The optional CPU and topology managers and graceful shutdown (module_utils/rackforge/kubelet_managers.py,
through kubelet_reservation_facts), and the same documents taken through the lab's kubelet
(lab/k8sim/k8simlib/cpumanager.py, written from the kubelet's sources): off by default (nothing
written), a static policy only with CPUs reserved, a CPU list the node has, and a policy change
on a node with a checkpoint refused until the operator says the node is drained."""

from __future__ import annotations

import json

import pytest
import yaml
from ansible.module_utils.rackforge import kubelet_managers as km
from test_kubelet_reservations import run_module, write_proc

OFF = {
    "cpu_manager_policy": "none",
    "reserved_cpus": "",
    "topology_manager_policy": "none",
    "topology_manager_scope": "pod",
    "shutdown_grace_period": "0s",
    "shutdown_grace_period_critical_pods": "0s",
}


def test_off_by_default_writes_nothing():
    assert km.plan(OFF, range(224), 0.63) == ({}, [])


def test_the_numa_aligned_inference_node():
    fields, problems = km.plan(
        dict(OFF, cpu_manager_policy="static", reserved_cpus="0-1,112-113", topology_manager_policy="single-numa-node"), range(224), 0.63
    )
    assert problems == []
    assert fields == {
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0-1,112-113",
        "topologyManagerPolicy": "single-numa-node",
        "topologyManagerScope": "pod",
    }
    assert km.allocatable_cpu(224, 0.63, "0-1,112-113") == 220  # the list replaces the maps' cpu
    assert km.plan(dict(OFF, shutdown_grace_period="5m", shutdown_grace_period_critical_pods="1m"), range(8), 0.1)[0] == {
        "shutdownGracePeriod": "5m",
        "shutdownGracePeriodCriticalPods": "1m",
    }


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"cpu_manager_policy": "static"}, "kubernetes_node_cpu_manager_policy static needs CPUs reserved"),
        ({"reserved_cpus": "0-3,300"}, "kubernetes_node_reserved_cpus names CPU 300, which this node does not have (its CPUs: 0-223)"),
        ({"reserved_cpus": "3-1"}, "kubernetes_node_reserved_cpus: '3-1': range 3-1 runs backwards"),
        ({"reserved_cpus": "0-223"}, "reserves all 224 CPUs of this node"),
        ({"topology_manager_policy": "numa"}, "kubernetes_node_topology_manager_policy must be one of"),
        ({"shutdown_grace_period": "5 minutes"}, "kubernetes_node_shutdown_grace_period: '5 minutes' is not a duration"),
        (
            {"shutdown_grace_period": "30s", "shutdown_grace_period_critical_pods": "1m"},
            "kubernetes_node_shutdown_grace_period_critical_pods (1m) must not be longer than kubernetes_node_shutdown_grace_period (30s)",
        ),
    ],
)
def test_what_a_node_cannot_hold_is_named(change, needle):
    _fields, problems = km.plan(dict(OFF, **change), range(224), 0.0)
    assert any(needle in p for p in problems), problems


def test_a_checkpoint_of_another_policy_stands_in_the_way():
    assert km.reset_needed('{"policyName":"none","defaultCpuSet":"","checksum":1353318690}', "static")[:2] == (True, "none")
    assert km.reset_needed('{"policyName":"static"}', "static") == (False, "static", "")
    assert km.reset_needed(None, "static") == (False, None, "")  # a fresh node: the kubelet writes it
    assert km.reset_needed("not json", "static")[:2] == (True, km.CORRUPT)  # the kubelet will not start with it
    assert km.reset_needed('{"checksum": 1}', "none")[:2] == (True, km.CORRUPT)
    # static with exclusive assignments: a changed reservation may overlap them (the kubelet then refuses)
    held = '{"policyName":"static","defaultCpuSet":"0-1,4-7","entries":{"pod-uid":{"c":"2-3"}},"checksum":1}'
    assert km.reset_needed(held, "static", reservation_changes=True)[:2] == (True, "static")
    assert km.reset_needed(held, "static", reservation_changes=False)[0] is False
    assert km.reset_needed('{"policyName":"static","defaultCpuSet":"0-7"}', "static", reservation_changes=True)[0] is False


def test_the_topology_manager_refuses_more_than_8_numa_nodes(tmp_path, capsys):
    wanted = dict(OFF, cpu_manager_policy="static", topology_manager_policy="best-effort")
    assert km.plan(wanted, range(8), 1, numa_nodes=8)[1] == []
    assert "refuses machines with more than 8 NUMA nodes, and this one has 16" in km.plan(wanted, range(8), 1, numa_nodes=16)[1][0]
    assert km.plan(dict(wanted, topology_manager_policy="none"), range(8), 1, numa_nodes=16)[1] == []
    nodes = tmp_path / "sys" / "devices" / "system" / "node"
    for i in range(16):
        (nodes / ("node%d" % i)).mkdir(parents=True)
    (nodes / "possible").write_text("0-15\n")
    (tmp_path / "proc").mkdir()
    res = run_module(
        capsys,
        proc_root=str(write_proc(tmp_path / "proc", cpus=8)),
        sys_root=str(tmp_path / "sys"),
        cpu_manager_state=str(tmp_path / "none"),
        **{k: v for k, v in wanted.items() if k != "reserved_cpus"},
    )
    assert res["failed"] and "this one has 16" in res["msg"]


def test_offline_cpus_are_not_in_the_node():
    _fields, problems = km.plan(dict(OFF, reserved_cpus="2"), {0, 1, 3}, 0.1)  # CPU 2 offline
    assert problems == ["kubernetes_node_reserved_cpus names CPU 2, which this node does not have (its CPUs: 0-1,3)"]
    assert km.format_cpuset({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"


def test_module_writes_the_fields_and_refuses_a_change_until_the_node_is_drained(tmp_path, capsys):
    (tmp_path / "proc").mkdir()
    proc = write_proc(tmp_path / "proc", cpus=224)
    state = tmp_path / "cpu_manager_state"
    state.write_text('{"policyName":"none","defaultCpuSet":"","checksum":1353318690}')
    args = dict(proc_root=str(proc), cpu_manager_state=str(state), cpu_manager_policy="static", topology_manager_policy="restricted")
    res = run_module(capsys, **args)
    assert res["failed"] and "kubernetes_node_cpu_manager_policy: this node's kubelet ran the CPU manager with policy 'none'" in res["msg"]
    assert (
        "kubectl drain" in res["msg"]
        and "kubernetes_node_cpu_manager_reset=true" in res["msg"]
        and res["msg"].endswith("Nothing was changed.")
    )
    fact = run_module(capsys, cpu_manager_reset=True, **args)["ansible_facts"]["rackforge_kubelet_reservations"]
    assert fact["cpu_manager"] == {"policy": "static", "checkpoint": "none", "reset": True, "path": str(state)}
    doc = yaml.safe_load(fact["document"])
    assert (doc["cpuManagerPolicy"], doc["topologyManagerPolicy"], doc["topologyManagerScope"]) == ("static", "restricted", "pod")
    # defaults: a node whose kubelet already ran is left as it was (no field, no reset)
    kubeconfig = tmp_path / "kubelet.conf"
    kubeconfig.write_text("joined")
    fact = run_module(capsys, proc_root=str(proc), cpu_manager_state=str(state), kubelet_kubeconfig=str(kubeconfig))
    fact = fact["ansible_facts"]["rackforge_kubelet_reservations"]
    assert fact["managers"] == {} and fact["cpu_manager"]["reset"] is False and "cpuManagerPolicy" not in fact["document"]
    assert fact["joined"] is True  # its kubelet must run


def test_module_asks_for_a_reset_when_a_reservation_changes_under_exclusive_assignments(tmp_path, capsys):
    (tmp_path / "proc").mkdir()
    proc = write_proc(tmp_path / "proc", cpus=8)
    state = tmp_path / "cpu_manager_state"
    state.write_text('{"policyName":"static","defaultCpuSet":"0-1,4-7","entries":{"uid":{"c":"2-3"}},"checksum":1}')
    drop_in = tmp_path / "50-rackforge-reservations.conf"
    args = dict(proc_root=str(proc), cpu_manager_state=str(state), cpu_manager_policy="static", drop_in=str(drop_in))
    first = run_module(capsys, cpu_manager_reset=True, **args)["ansible_facts"]["rackforge_kubelet_reservations"]
    drop_in.write_text(first["document"])  # as written by that run
    same = run_module(capsys, **args)
    assert not same.get("failed") and same["ansible_facts"]["rackforge_kubelet_reservations"]["cpu_manager"]["reset"] is False
    moved = run_module(capsys, reserved_cpus="2-3", **args)
    assert moved["failed"] and "holds exclusive CPU assignments, and the reserved CPUs change" in moved["msg"]


def test_module_counts_the_reserved_list_in_allocatable(tmp_path, capsys):
    fact = run_module(capsys, proc_root=str(write_proc(tmp_path, cpus=8)), reserved_cpus="0-1", cpu_manager_state=str(tmp_path / "none"))
    fact = fact["ansible_facts"]["rackforge_kubelet_reservations"]
    assert fact["allocatable"]["cpu"] == 6 and fact["reserved"]["cpu"] == 2


# --------------------------------------------------------------------- the lab's kubelet (k8sim)
@pytest.fixture
def k8sim(k8sim_kubelet):
    """(kubelet, cpumanager) of the lab's kubelet, loaded afresh (tests/conftest.py's fixture)."""
    from k8simlib import cpumanager

    return k8sim_kubelet, cpumanager


def load(tmp_path, k8sim, fields):
    conf = tmp_path / "conf.d"
    conf.mkdir(exist_ok=True)
    (conf / "50-x.conf").write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsystemReserved: {cpu: 100m}\n"
        + "".join("%s: %s\n" % (k, json.dumps(v)) for k, v in fields.items())
    )
    return k8sim[0].load_config(["--config-dir", str(conf)])[0]


def test_lab_kubelet_keeps_its_policy_in_a_checkpoint_and_refuses_another(tmp_path, k8sim):
    kubelet, cm = k8sim
    checkpoint = str(tmp_path / "cpu_manager_state")
    cm.start(load(tmp_path, k8sim, {}), 8, kubelet.quantity, checkpoint)
    assert json.load(open(checkpoint))["policyName"] == "none"
    static, _ = km.plan(dict(OFF, cpu_manager_policy="static"), range(8), 0.1)
    cfg = load(tmp_path, k8sim, static)
    with pytest.raises(Exception, match='configured policy "static" differs from state checkpoint policy "none", please drain this node'):
        cm.start(cfg, 8, kubelet.quantity, checkpoint)
    (tmp_path / "cpu_manager_state").write_text("{not json")
    with pytest.raises(Exception, match="checkpoint is corrupted"):
        cm.start(cfg, 8, kubelet.quantity, checkpoint)
    (tmp_path / "cpu_manager_state").unlink()  # what the reset does
    cm.start(cfg, 8, kubelet.quantity, checkpoint)
    assert json.load(open(checkpoint)) == {"policyName": "static", "defaultCpuSet": "0-7", "checksum": 0}


def test_lab_kubelet_refuses_what_the_module_refuses(tmp_path, k8sim):
    kubelet, cm = k8sim
    cfg = load(tmp_path, k8sim, {"cpuManagerPolicy": "static"})
    cfg["systemReserved"] = {}
    with pytest.raises(Exception, match=r"the static policy requires systemreserved\.cpu"):
        cm.start(cfg, 8, kubelet.quantity, str(tmp_path / "state"))
    cfg = load(tmp_path, k8sim, {"shutdownGracePeriod": "30s", "shutdownGracePeriodCriticalPods": "1m"})
    with pytest.raises(Exception, match="shutdownGracePeriodCriticalPods 1m must be <= shutdownGracePeriod 30s"):
        cm.start(cfg, 8, kubelet.quantity, str(tmp_path / "state"))
    # reservedSystemCPUs replaces the maps' cpu in Node Allocatable
    cfg = load(tmp_path, k8sim, {"reservedSystemCPUs": "0-1"})
    assert kubelet.node_resources(cfg, "MemTotal: 16777216 kB\n", 8)[1]["cpu"] == "6000m"
