"""kubernetes_node_relabel (a joined node's labels from the control plane): one read, only the
labels that differ set with one `kubectl label --overwrite`, check mode reads and relabels nothing,
a failed kubectl carries its rc, stdout and stderr. kubectl here is a fake over one Node's labels,
answering as kubectl get -o json and kubectl label print."""

from __future__ import annotations

import json

import kubernetes_node_relabel
import pytest
from module_helper import call_module

WANTED = {"nvidia.com/gpu.count": "8", "nvidia.com/gpu.present": "true", "rackforge.io/nvidia-driver": "535.247.01"}


@pytest.fixture
def node(monkeypatch):
    labels = {"kubernetes.io/hostname": "gpu-01", "nvidia.com/gpu.count": "7", "nvidia.com/gpu.present": "true"}
    state = {"labels": labels, "calls": [], "fail": None}

    def run(self, argv, environ_update=None, **kw):
        state["calls"].append(argv[3:])  # after kubectl --kubeconfig FILE
        verb = argv[3]
        if state["fail"] == verb:
            return 1, "", 'Error from server (NotFound): nodes "gpu-01" not found\n'
        if verb == "get":
            return 0, json.dumps({"kind": "Node", "metadata": {"name": argv[5], "labels": dict(labels)}}), ""
        if verb == "label":
            assert argv[4:7] == ["node", "gpu-01", "--overwrite"]
            labels.update(pair.split("=", 1) for pair in argv[7:])
            return 0, "node/gpu-01 labeled\n", ""
        raise AssertionError(argv)

    monkeypatch.setattr(kubernetes_node_relabel.AnsibleModule, "run_command", run)
    monkeypatch.setattr(
        kubernetes_node_relabel.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name
    )
    return state


def test_only_the_labels_that_differ_are_set_and_a_rerun_changes_nothing(node, capsys):
    args = {"node": "gpu-01", "labels": WANTED}
    dry = call_module(kubernetes_node_relabel, args, capsys, check_mode=True)
    assert dry["changed"] and dry["relabelled"] == ["nvidia.com/gpu.count=8", "rackforge.io/nvidia-driver=535.247.01"]
    assert dry["labels"]["rackforge.io/nvidia-driver"] == {"before": None, "after": "535.247.01"}
    assert dry["diff"]["before"] == "nvidia.com/gpu.count=7\n" and "nvidia.com/gpu.count=8\n" in dry["diff"]["after"]
    assert [c[0] for c in node["calls"]] == ["get"] and node["labels"]["nvidia.com/gpu.count"] == "7"
    done = call_module(kubernetes_node_relabel, args, capsys)
    assert done["changed"] and node["calls"][-1][0] == "label"
    assert node["calls"][-1][4:] == ["nvidia.com/gpu.count=8", "rackforge.io/nvidia-driver=535.247.01"]
    assert node["labels"]["kubernetes.io/hostname"] == "gpu-01"  # a label it does not manage is left alone
    node["calls"].clear()
    again = call_module(kubernetes_node_relabel, args, capsys)
    assert not again["changed"] and again["relabelled"] == [] and [c[0] for c in node["calls"]] == ["get"]


@pytest.mark.parametrize("verb", ["get", "label"])
def test_a_failed_kubectl_carries_its_evidence(node, capsys, verb):
    node["fail"] = verb
    res = call_module(kubernetes_node_relabel, {"node": "gpu-01", "labels": WANTED}, capsys)
    assert res["failed"] and res["rc"] == 1 and "NotFound" in res["stderr"] and res["stdout"] == ""
    assert res["msg"].startswith("kubernetes_node_relabel: %s node gpu-01" % verb)
