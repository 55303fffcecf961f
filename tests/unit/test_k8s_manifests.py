"""The Kubernetes files the roles render, validated against the real formats:
- kubeadm InitConfiguration/ClusterConfiguration/JoinConfiguration v1beta4, KubeletConfiguration and
  KubeSchedulerConfiguration: by the lab stand-in's strict decoder (lab/k8sim), the same code
  that refuses them in the lab;
- core Kubernetes objects (the Node the stand-in records, the stand-in operator manifest): by
  kubernetes-validate, strict, against the Kubernetes 1.31 schemas;
- Calico's Installation (a CRD, not in those schemas): against the fields of operator.tigera.io/v1
  that rackforge sets, from the operator's API reference (docs.tigera.io, reference/installation/api).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys

import jsonschema
import kubernetes_validate
import pytest
import yaml
from conftest import ROOT

sys.path.insert(0, str(ROOT / "lab" / "k8sim"))
import k8sim

K8S = "1.31.4"

SETTINGS = {
    "kubernetes_node_version": K8S,
    "kubernetes_node_api_endpoint": "10.89.77.10:6443",
    "kubernetes_node_network_cidr": "10.89.77.0/24",
    "kubernetes_node_taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    "kubernetes_control_plane_rdma_cidrs": ["10.201.0.0/16"],
    # what the roles' earlier tasks compute on the hosts
    "__kubernetes_control_plane_address": "10.89.77.10",
    "__kubernetes_node_name": "lab-node1",
    "__kubernetes_node_ip": "10.89.77.11",
    "__kubernetes_node_labels": {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "rackforge.io/nvlink": "true",
    },
    "__kubernetes_node_token": {"stdout": "abcdef.0123456789abcdef"},
    "__kubernetes_node_ca_hash": {"stdout": "a" * 64},
    "__calico_mtu": 1450,
    "__calico_autodetect": {"cidrs": ["10.89.77.0/24"]},
}

# operator.tigera.io/v1 Installation, the part rackforge renders (field names and enums from the
# operator's API reference); unknown fields are refused so a typo cannot slip through
INSTALLATION = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "operator.tigera.io/v1"},
        "kind": {"const": "Installation"},
        "metadata": {"type": "object", "properties": {"name": {"const": "default"}}},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "calicoNetwork": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "mtu": {"type": "integer", "minimum": 0},
                        "bgp": {"enum": ["Enabled", "Disabled"]},
                        "nodeAddressAutodetectionV4": {
                            "type": "object",
                            "additionalProperties": False,
                            "minProperties": 1,
                            "maxProperties": 1,
                            "properties": {
                                "firstFound": {"type": "boolean"},
                                "kubernetes": {"enum": ["NodeInternalIP"]},
                                "interface": {"type": "string"},
                                "skipInterface": {"type": "string"},
                                "canReach": {"type": "string"},
                                "cidrs": {"type": "array", "items": {"type": "string"}},
                            },
                        },
                        "ipPools": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["cidr"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "cidr": {"type": "string"},
                                    "blockSize": {"type": "integer", "minimum": 20, "maximum": 32},
                                    "encapsulation": {"enum": ["IPIPCrossSubnet", "IPIP", "VXLAN", "VXLANCrossSubnet", "None"]},
                                    "natOutgoing": {"enum": ["Enabled", "Disabled"]},
                                    "nodeSelector": {"type": "string"},
                                    "disableBGPExport": {"type": "boolean"},
                                },
                            },
                        },
                    },
                }
            },
        },
    },
}


def render(tmp_path, **overrides):
    settings = tmp_path / "settings.yml"
    settings.write_text(yaml.safe_dump({**SETTINGS, **overrides}))
    out = tmp_path / "out"
    out.mkdir()
    res = subprocess.run(
        [
            "ansible-playbook",
            str(ROOT / "tests" / "unit" / "playbooks" / "render_k8s.yml"),
            "-i",
            "localhost,",
            "-e",
            "out=%s settings=%s ansible_python_interpreter=%s" % (out, settings, sys.executable),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    return render(tmp_path_factory.mktemp("k8s"))


def test_kubeadm_init_config_is_strict_v1beta4_with_the_gpu_scheduler_profile(rendered, tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "etc" / "kubernetes").mkdir(parents=True)
    shutil.copy(rendered / "scheduler.yaml", root / "etc" / "kubernetes" / "rackforge-scheduler.yaml")
    monkeypatch.setattr(k8sim, "ROOT", str(root))
    docs = k8sim.load_docs(str(rendered / "kubeadm.yaml"))
    assert set(docs) == {"InitConfiguration", "ClusterConfiguration", "KubeletConfiguration"}
    k8sim.validate_cluster(docs["ClusterConfiguration"])  # also reads and checks the scheduler file
    cluster = docs["ClusterConfiguration"]
    assert cluster["networking"] == {"podSubnet": "10.244.0.0/16", "serviceSubnet": "10.96.0.0/12"}
    assert cluster["kubernetesVersion"] == "v" + K8S and cluster["controlPlaneEndpoint"] == "10.89.77.10:6443"
    assert docs["KubeletConfiguration"]["cgroupDriver"] == "systemd"
    sched = yaml.safe_load((rendered / "scheduler.yaml").read_text())
    strategy = sched["profiles"][0]["pluginConfig"][0]["args"]["scoringStrategy"]
    assert strategy["type"] == "MostAllocated"
    assert {"name": "nvidia.com/gpu", "weight": 3} in strategy["resources"]


def test_join_config_carries_node_ip_labels_and_taints(rendered):
    docs = k8sim.load_docs(str(rendered / "join.yaml"))
    join = docs["JoinConfiguration"]
    args, labels = k8sim.validate_node_registration(join["nodeRegistration"], "JoinConfiguration.nodeRegistration")
    assert args["node-ip"] == "10.89.77.11"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3" and labels["nvidia.com/gpu.count"] == "8"
    assert join["nodeRegistration"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    bt = join["discovery"]["bootstrapToken"]
    assert bt["caCertHashes"] == ["sha256:" + "a" * 64] and k8sim.TOKEN_RE.match(bt["token"])


def test_the_stand_in_refuses_what_kubeadm_refuses(tmp_path):
    def refused(text, match):
        path = tmp_path / "c.yaml"
        path.write_text(text)
        with pytest.raises(k8sim.Invalid, match=match):
            docs = k8sim.load_docs(str(path))
            for doc in docs.values():
                if "nodeRegistration" in doc:
                    k8sim.validate_node_registration(doc["nodeRegistration"], "nodeRegistration")

    head = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n"
    refused(head.replace("v1beta4", "v1beta3"), "reads kubeadm.k8s.io/v1beta4")
    refused(head + "nodeRegistration:\n  kubeletExtraArgs: {node-ip: 10.0.0.1}\n", "not a map")
    refused(head + "discovery: {}\nnodeRegistrations: {}\n", 'unknown field.*"nodeRegistrations"')
    refused(
        head + "nodeRegistration:\n  kubeletExtraArgs: [{name: node-labels, value: node-role.kubernetes.io/gpu=}]\n",
        "unknown 'kubernetes.io' or 'k8s.io' labels",
    )
    refused(head + "nodeRegistration:\n  taints: [{key: a, effect: NoRun}]\n", "effect")
    with pytest.raises(k8sim.Invalid, match=r"weight must be an integer 1\.\.100"):
        prof = {
            "name": "NodeResourcesFit",
            "args": {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "x", "weight": 0}]}},
        }
        k8sim.validate_scheduler(
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "profiles": [{"pluginConfig": [prof]}]}
        )


def test_installation_pins_autodetection_and_derives_the_mtu(rendered):
    docs = list(yaml.safe_load_all((rendered / "installation.yaml").read_text()))
    inst = docs[0]
    jsonschema.validate(inst, INSTALLATION)
    net = inst["spec"]["calicoNetwork"]
    assert net["nodeAddressAutodetectionV4"] == {"cidrs": ["10.89.77.0/24"]}
    assert net["mtu"] == 1450 and net["bgp"] == "Disabled"
    assert net["ipPools"][0]["encapsulation"] == "VXLANCrossSubnet" and net["ipPools"][0]["cidr"] == "10.244.0.0/16"
    assert docs[1]["kind"] == "APIServer"


def test_installation_with_interface_autodetection_and_ipip(tmp_path):
    out = render(tmp_path, calico_encapsulation="IPIP", __calico_autodetect={"interface": "^eno1$"}, __calico_mtu=1480)
    inst = next(yaml.safe_load_all((out / "installation.yaml").read_text()))
    jsonschema.validate(inst, INSTALLATION)
    assert inst["spec"]["calicoNetwork"]["nodeAddressAutodetectionV4"] == {"interface": "^eno1$"}
    assert inst["spec"]["calicoNetwork"]["bgp"] == "Enabled"


def test_core_objects_validate_against_the_kubernetes_schemas():
    node = k8sim.node_object("lab-node1", "10.89.77.11", SETTINGS["__kubernetes_node_labels"], SETTINGS["kubernetes_node_taints"])
    kubernetes_validate.validate(json.loads(json.dumps(node)), K8S, strict=True)
    spec = importlib.util.spec_from_file_location("mirror_build", ROOT / "lab" / "mirror" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    docs = [d for d in yaml.safe_load_all(build.TIGERA_OPERATOR) if d]
    assert [d["kind"] for d in docs] == ["Namespace", "ServiceAccount", "Deployment"]
    for doc in docs:
        kubernetes_validate.validate(doc, K8S, strict=True)
    bad = json.loads(json.dumps(node))
    bad["spec"]["taints"][0]["efect"] = "NoSchedule"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S, strict=True)
