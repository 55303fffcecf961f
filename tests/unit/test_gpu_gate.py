"""The join gate (library/kubernetes_gpu_gate.py): a node is left schedulable only while it is
Ready and advertises exactly its GPUs (times the time-slicing replicas); short of that it is
cordoned and labelled, and let back once it advertises them. A fake kubectl holds the Node."""

from __future__ import annotations

import json
import textwrap

from module_helper import call_module


def fake_node_kubectl(tmp_path, node):
    state, calls = tmp_path / "node.json", tmp_path / "calls"
    state.write_text(json.dumps(node))
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(
        textwrap.dedent(
            """\
            #!/usr/bin/env python3
            import json, sys
            args = sys.argv[3:]
            open({calls!r}, "a").write(" ".join(args) + "\\n")
            node = json.load(open({state!r}))
            if args[0] == "get":
                print(json.dumps(node)); sys.exit(0)
            if args[0] in ("cordon", "uncordon"):
                node["spec"]["unschedulable"] = args[0] == "cordon"
            if args[0] == "label":
                for kv in args[3:]:
                    if kv.startswith("--"):
                        continue
                    if kv.endswith("-"):
                        node["metadata"]["labels"].pop(kv[:-1], None)
                    else:
                        k, _, v = kv.partition("=")
                        node["metadata"]["labels"][k] = v
            json.dump(node, open({state!r}, "w"))
            """
        ).format(calls=str(calls), state=str(state))
    )
    kubectl.chmod(0o755)
    return kubectl, state, calls


def k8s_node(gpus, ready=True, unschedulable=False, labels=None):
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}], "allocatable": {"cpu": "8"}}
    if gpus is not None:
        status["allocatable"]["nvidia.com/gpu"] = str(gpus)
    spec = {"unschedulable": True} if unschedulable else {}
    return {"metadata": {"name": "gpu-1", "labels": dict(labels or {})}, "spec": spec, "status": status}


def run_gate(monkeypatch, capsys, kubectl, gpus=8, replicas=0, check_mode=False, **extra):
    import kubernetes_gpu_gate

    monkeypatch.setattr(kubernetes_gpu_gate.AnsibleModule, "get_bin_path", lambda self, name, **kw: str(kubectl))
    monkeypatch.setattr(kubernetes_gpu_gate.time, "sleep", lambda s: None)
    args = {"node": "gpu-1", "gpus": gpus, "replicas": replicas, "timeout": 0, "kubeconfig": "/admin.conf", **extra}
    return call_module(kubernetes_gpu_gate, args, capsys, check_mode)


def test_gate_cordons_a_node_short_of_gpus_and_lets_it_back_once_they_are_advertised(tmp_path, monkeypatch, capsys):
    kubectl, state, calls = fake_node_kubectl(tmp_path, k8s_node(None))
    res = run_gate(monkeypatch, capsys, kubectl, check_mode=True)  # a preview warns, it does not fail
    assert not res.get("failed") and res["changed"] and res["cordoned"]
    assert "advertises 0 nvidia.com/gpu, expected 8" in res["finding"]
    assert calls.read_text().split("\n")[:-1] == ["get node gpu-1 -o json"]  # check mode changed nothing
    res = run_gate(monkeypatch, capsys, kubectl)
    assert res["failed"] and res["cordoned"] and res["allocatable"] == 0
    # the finding for the node's verdict and the fleet report, in the health findings' shape
    (f,) = res["findings"]
    assert f["check"] == "kubernetes_gpu_gate" and f["expected"] == "Ready, 8 nvidia.com/gpu allocatable"
    assert f["observed"] == "Ready, 0 nvidia.com/gpu allocatable" and "kept cordoned" in f["message"]
    node = json.loads(state.read_text())
    assert node["spec"]["unschedulable"] is True and node["metadata"]["labels"]["rackforge.io/gpu-gate"] == "cordoned"
    res = run_gate(monkeypatch, capsys, kubectl)  # still short, already cordoned: nothing more to do
    assert res["failed"] and not res["changed"]
    node["status"]["allocatable"]["nvidia.com/gpu"] = "8"
    state.write_text(json.dumps(node))
    res = run_gate(monkeypatch, capsys, kubectl)
    assert not res.get("failed") and res["changed"] and res["finding"] == "" and res["findings"] == []
    node = json.loads(state.read_text())
    assert node["spec"]["unschedulable"] is False and "rackforge.io/gpu-gate" not in node["metadata"]["labels"]
    res = run_gate(monkeypatch, capsys, kubectl)
    assert not res.get("failed") and not res["changed"]


def test_gate_leaves_a_node_cordoned_by_someone_else_and_fails_one_not_ready(tmp_path, monkeypatch, capsys):
    kubectl, state, _ = fake_node_kubectl(tmp_path, k8s_node(8, unschedulable=True))
    res = run_gate(monkeypatch, capsys, kubectl)
    assert not res.get("failed") and not res["changed"]  # a drain's cordon is the drainer's to lift
    assert json.loads(state.read_text())["spec"]["unschedulable"] is True
    kubectl, state, _ = fake_node_kubectl(tmp_path, k8s_node(8, ready=False))
    res = run_gate(monkeypatch, capsys, kubectl)
    assert res["failed"] and "gpu-1: not Ready" in res["msg"]
    kubectl, state, _ = fake_node_kubectl(tmp_path, k8s_node(16))
    res = run_gate(monkeypatch, capsys, kubectl)
    assert res["failed"] and "advertises 16 nvidia.com/gpu, expected 8" in res["msg"]  # more than it has is wrong too
    res = run_gate(monkeypatch, capsys, kubectl, gpus=4, replicas=4)  # time-slicing: 4 GPUs x 4 replicas
    assert not res.get("failed") and res["allocatable"] == 16
