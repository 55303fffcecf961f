"""After site.yml: containerd with the systemd cgroup driver and the NVIDIA runtime, Kubernetes
packages pinned and held, every healthy node joined with its management IP, hardware labels and
taints (recorded by the SIMULATED control plane of lab/k8sim), and no join token left behind."""

from __future__ import annotations

import json

import tomllib

testinfra_hosts = ["ansible://gpu_nodes"]

CRI = "io.containerd.grpc.v1.cri"
K8S = "1.31.4"


def test_containerd_runs_with_systemd_cgroups_and_the_nvidia_runtime(host):
    assert host.service("containerd").is_running and host.service("containerd").is_enabled
    cfg = tomllib.loads(host.file("/etc/containerd/config.toml").content_string)
    runtimes = cfg["plugins"][CRI]["containerd"]["runtimes"]
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True}
    assert cfg["plugins"][CRI]["containerd"]["default_runtime_name"] == "nvidia"
    # Debian ships bin_dir = "/usr/lib/cni"; Calico installs its plugin into /opt/cni/bin
    assert cfg["plugins"][CRI]["cni"]["bin_dir"] == "/opt/cni/bin"
    assert cfg["plugins"][CRI]["cni"]["conf_dir"] == "/etc/cni/net.d"  # Debian's other keys kept
    # containerd itself reads it that way
    dump = host.check_output("containerd config dump")
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in dump and "SystemdCgroup = true" in dump
    assert 'bin_dir = "/opt/cni/bin"' in dump


def test_containerd_is_the_pinned_one_with_cdi_from_its_own_repository(host):
    # Debian 13's real containerd 1.7.24 from the lab mirror's /containerd (Debian 12's 1.6.20 has no CDI)
    assert host.package("containerd").version.startswith("1.7.24~ds1-")
    assert "containerd" in host.check_output("apt-mark showhold").split()
    assert host.file("/etc/apt/sources.list.d/rackforge-containerd.list").content_string.startswith("deb [signed-by=/etc/apt/keyrings/")
    assert host.check_output("containerd --version").split()[2] == "1.7.24~ds1"
    # the real binary reads CDI on, with the directories nvidia_driver and the device plugin write to
    dump = host.check_output("containerd config dump")
    assert "enable_cdi = true" in dump and 'cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]' in dump


def test_the_container_toolkit_ignores_nvidia_visible_devices_from_unprivileged_pods(host):
    # every CUDA image sets NVIDIA_VISIBLE_DEVICES=all: only the device plugin's volume mounts count
    path = "/etc/nvidia-container-runtime/config.toml"
    text = host.file(path).content_string
    cfg = tomllib.loads(text)
    assert cfg["accept-nvidia-visible-devices-envvar-when-unprivileged"] is False
    assert cfg["accept-nvidia-visible-devices-as-volume-mounts"] is True
    assert cfg["nvidia-container-runtime"]["modes"]["cdi"]["default-kind"] == "nvidia.com/gpu"  # the package's file kept
    assert "#swarm-resource" in text  # its commented defaults too
    assert host.file(path).mode == 0o644


def test_kernel_modules_sysctls_and_swap(host):
    assert host.file("/etc/modules-load.d/rackforge-containerd.conf").content_string.split("\n")[1:3] == ["overlay", "br_netfilter"]
    assert {"overlay", "br_netfilter"} <= set(host.check_output("lsmod").split())
    sysctl = host.file("/etc/sysctl.d/90-rackforge-kubernetes.conf")
    assert sysctl.contains("^net.ipv4.ip_forward = 1$") and sysctl.contains("^net.bridge.bridge-nf-call-iptables = 1$")
    assert sysctl.mode == 0o644
    fstab = host.file("/etc/fstab")
    if fstab.exists:  # swap stays off at boot: no active swap line left in fstab
        assert not [ln for ln in fstab.content_string.splitlines() if ln.split()[2:3] == ["swap"] and not ln.startswith("#")]


def test_kubernetes_packages_pinned_and_held(host):
    held = host.check_output("apt-mark showhold").split()
    for name in ("kubeadm", "kubelet", "kubectl"):
        assert host.package(name).version.startswith(K8S + "-"), name
        assert name in held
    assert host.file("/etc/apt/sources.list.d/rackforge-kubernetes.list").contains("signed-by=/etc/apt/keyrings/rackforge-kubernetes.asc")


def test_node_joined_and_no_token_left(host):
    conf = host.file("/etc/kubernetes/kubelet.conf")
    assert conf.exists and conf.mode == 0o600 and conf.user == "root"
    assert not host.file("/etc/kubernetes/rackforge-join.yaml").exists
    assert host.service("kubelet").is_running


def test_control_plane_recorded_the_node_with_its_management_ip_labels_and_taints(host):
    name = host.check_output("uname -n")
    ip = host.check_output("ip -j addr show eth0")
    ip = json.loads(ip)[0]["addr_info"][0]["local"]
    node = json.loads(host.check_output("kubectl --kubeconfig /etc/kubernetes/kubelet.conf get node %s -o json" % name))
    assert node["status"]["addresses"][0] == {"type": "InternalIP", "address": ip}
    assert ip.startswith("10.89.77.")  # the management network, never an RDMA NIC's 10.201.x.y
    labels = node["metadata"]["labels"]
    gpus = host.check_output("nvidia-smi --query-gpu=name --format=csv,noheader").splitlines()
    assert labels["nvidia.com/gpu.count"] == str(len(gpus))
    assert labels["nvidia.com/gpu.product"] == gpus[0].strip().replace(" ", "-")
    assert labels["rackforge.io/pool"] == "inference"
    assert node["spec"]["taints"] == [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]
