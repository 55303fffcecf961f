"""After site.yml, on the control-plane host (SIMULATED control plane, lab/k8sim): initialised
with the GPU bin-packing scheduler profile, Calico's Installation applied with autodetection
pinned to the management CIDR, the admin kubeconfig private."""

from __future__ import annotations

import json

import yaml

testinfra_hosts = ["ansible://kube_control_plane"]


def kubectl(host, *args):
    return json.loads(host.check_output("kubectl --kubeconfig /etc/kubernetes/admin.conf %s -o json" % " ".join(args)))


def test_initialised_with_private_kubeconfigs(host):
    for path in ("/etc/kubernetes/admin.conf", "/root/.kube/config", "/etc/kubernetes/pki/ca.key"):
        f = host.file(path)
        assert f.exists and f.mode == 0o600, path
    assert host.service("k8sim-apiserver").is_running


def test_scheduler_profile_bin_packs_gpus(host):
    cfg = yaml.safe_load(host.file("/etc/kubernetes/rackforge-scheduler.yaml").content_string)
    strategy = cfg["profiles"][0]["pluginConfig"][0]["args"]["scoringStrategy"]
    assert strategy["type"] == "MostAllocated" and {"name": "nvidia.com/gpu", "weight": 3} in strategy["resources"]


def test_every_gpu_node_joined_once(host):
    nodes = {n["metadata"]["name"]: n for n in kubectl(host, "get", "nodes")["items"]}
    assert {"lab-node1", "lab-node2", "lab-node3"} <= set(nodes)
    assert "node-role.kubernetes.io/control-plane" in nodes["lab-cp1"]["metadata"]["labels"]


def test_calico_installation_pins_autodetection_and_mtu(host):
    inst = kubectl(host, "get", "installation", "default")
    net = inst["spec"]["calicoNetwork"]
    assert net["nodeAddressAutodetectionV4"] == {"cidrs": ["10.89.77.0/24"]}
    mtu = int(host.check_output("cat /sys/class/net/eth0/mtu"))
    assert net["mtu"] == mtu - 50  # VXLANCrossSubnet
    assert kubectl(host, "get", "namespace", "tigera-operator")["kind"] == "Namespace"


def test_the_device_plugin_makes_every_gpu_node_s_gpus_allocatable(host):
    ds = kubectl(host, "get", "daemonset", "nvidia-device-plugin-daemonset", "-n", "kube-system")
    assert "@sha256:" in ds["spec"]["template"]["spec"]["containers"][0]["image"]
    nodes = {n["metadata"]["name"]: n for n in kubectl(host, "get", "nodes")["items"]}
    for name in ("lab-node1", "lab-node2", "lab-node3"):
        labels = nodes[name]["metadata"]["labels"]
        assert nodes[name]["status"]["allocatable"]["nvidia.com/gpu"] == labels["nvidia.com/gpu.count"], name
        assert not nodes[name]["spec"].get("unschedulable"), name
