"""The seed's inference Deployment (examples/inference, issue 20): valid for the API server
(Kubernetes 1.31 schemas, strict), asking for what the seed asks (nvidia.com/gpu: 4, /models
read-only), and placed by kube-scheduler's filters (tests/kube_scheduling.py) on the node
rackforge registers: the hardware labels kubernetes_node sets, the example inventory's taint and
the allocatable the kubelet reservations (module_utils/rackforge/kubelet.py) leave on an 8-GPU
HGX H100 server (2 TiB, 224 CPUs, as a DGX H100). The same spec against the lab's joined nodes:
tests/integration/test_kubernetes.py."""

from __future__ import annotations

import copy
import pathlib
import sys

import kubernetes_validate
import pytest
import yaml
from ansible.module_utils.rackforge import kubelet
from kube_scheduling import pod_requests, tolerates, unfit

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "filter_plugins"))
from rackforge import k8s_label_value  # noqa: E402  (filter_plugins/rackforge.py)

K8S = "1.31.4"
GIB = 1024**3


def objects():
    return list(yaml.safe_load_all((ROOT / "examples" / "inference" / "deployment.yaml").read_text()))


def pod_spec():
    return next(o for o in objects() if o["kind"] == "Deployment")["spec"]["template"]["spec"]


def node(gpus=8, product="NVIDIA H100 80GB HBM3", mem=2048 * GIB, cpus=224, taints=None, unschedulable=False):
    """A GPU node as rackforge registers it: hardware labels (roles/kubernetes_node/tasks/join.yml),
    the example inventory's taints, allocatable = capacity less the kubelet's `auto` reservations."""
    if taints is None:
        example = yaml.safe_load((ROOT / "inventories" / "example" / "group_vars" / "all" / "main.yml").read_text())
        taints = example["kubernetes_node_taints"]
    plan, problems = kubelet.plan(mem, cpus, "auto", "auto", "auto")
    assert not problems
    labels = {"kubernetes.io/hostname": "gpu-r01-01"}
    if gpus:
        labels.update(
            {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": k8s_label_value(product), "nvidia.com/gpu.count": str(gpus)}
        )
    allocatable = {"cpu": str(plan["allocatable"]["cpu"]), "memory": str(plan["allocatable"]["memory"]), "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {
        "metadata": {"name": "gpu-r01-01", "labels": labels},
        "spec": {"taints": taints, "unschedulable": unschedulable},
        "status": {"allocatable": allocatable},
    }


@pytest.mark.parametrize("index", range(2))
def test_the_objects_validate_against_the_kubernetes_schemas(index):
    kubernetes_validate.validate(objects()[index], K8S, strict=True)


def test_it_asks_for_four_gpus_and_mounts_the_models_read_only():
    spec = pod_spec()
    assert pod_requests(spec)["nvidia.com/gpu"] == 4
    (server,) = spec["containers"]
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in server["volumeMounts"]
    assert {"name": "models", "persistentVolumeClaim": {"claimName": "models", "readOnly": True}} in spec["volumes"]
    # the HPA (examples/autoscaling) scales this Deployment
    hpa = yaml.safe_load((ROOT / "examples" / "autoscaling" / "inference-hpa.yaml").read_text())
    deployment = objects()[1]
    assert hpa["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]


def test_two_replicas_fit_an_8_gpu_node_and_a_third_does_not():
    spec, gpu_node = pod_spec(), node()
    assert unfit(spec, gpu_node) == []
    one = pod_requests(spec)
    assert unfit(spec, gpu_node, requested=one, pods=1) == []
    two = {k: 2 * v for k, v in one.items()}
    assert unfit(spec, gpu_node, requested=two, pods=2) == ["Insufficient nvidia.com/gpu"]


def test_a_4_gpu_node_takes_one_replica():
    spec, small = pod_spec(), node(gpus=4, product="NVIDIA A100-PCIE-40GB", mem=512 * GIB, cpus=64)
    assert unfit(spec, small) == []
    # a second replica: its GPUs are taken, and half of a 64-CPU, 512 GiB server is less than a replica
    assert unfit(spec, small, requested=pod_requests(spec), pods=1) == [
        "Insufficient cpu",
        "Insufficient memory",
        "Insufficient nvidia.com/gpu",
    ]


def test_it_stays_off_the_nodes_it_must_not_use():
    spec = pod_spec()
    # a CPU node: no GPU labels, no nvidia.com/gpu
    assert unfit(spec, node(gpus=0, taints=[])) == ["node(s) didn't match Pod's node affinity/selector", "Insufficient nvidia.com/gpu"]
    # a 2-GPU node: labelled, but the count is below 4
    assert unfit(spec, node(gpus=2)) == ["node(s) didn't match Pod's node affinity/selector", "Insufficient nvidia.com/gpu"]
    # a node the join gate keeps cordoned (its GPUs not advertised, or a health finding)
    assert unfit(spec, node(unschedulable=True)) == ["node(s) were unschedulable"]
    # a taint the Deployment does not tolerate (an operator's maintenance taint)
    maintenance = {"key": "rackforge.io/maintenance", "value": "driver", "effect": "NoExecute"}
    assert unfit(spec, node(taints=[maintenance])) == ["node(s) had untolerated taint {rackforge.io/maintenance: driver}"]
    # PreferNoSchedule is a preference, not a filter
    assert unfit(spec, node(taints=[dict(maintenance, effect="PreferNoSchedule")])) == []


def test_a_node_with_too_little_memory_left_is_refused():
    spec = pod_spec()
    assert unfit(spec, node(gpus=8, mem=256 * GIB)) == ["Insufficient memory"]


@pytest.mark.parametrize(
    "toleration, taint, expected",
    [
        ({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, True),
        ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, True),
        ({"key": "k", "value": "v"}, {"key": "k", "value": "v", "effect": "NoExecute"}, True),  # empty operator = Equal, empty effect = all
        ({"key": "k", "value": "w", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, False),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, {"key": "k", "effect": "NoSchedule"}, False),
        ({"operator": "Exists"}, {"key": "anything", "value": "x", "effect": "NoExecute"}, True),  # empty key with Exists: all
        ({"key": "other", "operator": "Exists"}, {"key": "k", "effect": "NoSchedule"}, False),
        ({"key": "k", "operator": "Bogus"}, {"key": "k", "effect": "NoSchedule"}, False),
    ],
)
def test_toleration_matching_follows_kubernetes(toleration, taint, expected):
    assert tolerates(toleration, taint) is expected


def test_node_affinity_operators():
    spec = copy.deepcopy(pod_spec())
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    gpu_node = node()
    for exprs, fits in (
        ([{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}], True),
        ([{"key": "nvidia.com/gpu.product", "operator": "NotIn", "values": ["NVIDIA-H100-80GB-HBM3"]}], False),
        ([{"key": "rackforge.io/absent", "operator": "NotIn", "values": ["x"]}], True),  # NotIn holds where the label is absent
        ([{"key": "rackforge.io/absent", "operator": "DoesNotExist"}], True),
        ([{"key": "nvidia.com/gpu.count", "operator": "Lt", "values": ["8"]}], False),
        ([{"key": "nvidia.com/gpu.product", "operator": "Gt", "values": ["3"]}], False),  # not an integer
        ([], False),  # an empty term matches no node
    ):
        terms[:] = [{"matchExpressions": exprs}]
        assert (unfit(spec, gpu_node) == []) is fits, exprs
    # terms are ORed
    terms[:] = [
        {"matchExpressions": [{"key": "rackforge.io/absent", "operator": "Exists"}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-r01-01"]}]},
    ]
    assert unfit(spec, gpu_node) == []
