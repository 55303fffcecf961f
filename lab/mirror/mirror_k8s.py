"""The lab mirror's SIMULATED Kubernetes packages (kubelet, kubectl, kubeadm: lab/k8sim, published
like pkgs.k8s.io) and the stand-in Calico operator manifest. Part of lab/mirror/build.py."""

from __future__ import annotations

import os

LAB = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# SIMULATED Kubernetes packages (lab/k8sim), published like pkgs.k8s.io: a flat repository per
# minor version at /kubernetes/core:/stable:/v<minor>/deb/ with its Release.key
K8S_VERSIONS = ("1.31.4", "1.31.5")
CALICO_VERSION = "v3.29.1"
DEVICE_PLUGIN_VERSION = "v0.20.0"
SIM_K8S = "SIMULATED stand-in for the rackforge lab (lab/k8sim): validates configs, records joins; runs no containers."
K8SIM_DIR = os.path.join(LAB, "k8sim")
K8SIM_LIB = "usr/lib/k8sim"  # each package's own copy: /usr/lib/k8sim/<package>/ (versions may differ)
K8SIM_ENTRY = """#!/usr/bin/python3
\"\"\"SIMULATED %(tool)s for the rackforge lab (lab/k8sim): the stand-in is in /%(lib)s.\"\"\"
import sys

sys.dont_write_bytecode = True  # leave nothing in /%(lib)s that the package does not list
sys.path.insert(0, "/%(lib)s")
import k8sim

sys.exit(k8sim.main(%(prog)s))
"""


def k8sim_files(version):
    """lab/k8sim's Python files (the entry k8sim.py and the k8simlib package) as {path under
    lab/k8sim: text}, with @VERSION@ replaced by the version."""
    files = {}
    for dirpath, dirs, names in os.walk(K8SIM_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path) as fh:
                    files[os.path.relpath(path, K8SIM_DIR)] = fh.read().replace("@VERSION@", version)
    return files


def k8sim_install(package, version, tools):
    """The files of one stand-in package: k8sim under /usr/lib/k8sim/<package>/ and an entry script
    in /usr/bin per {tool: the tool k8sim runs for it (None: by its name)}."""
    lib = "%s/%s" % (K8SIM_LIB, package)
    files = {"%s/%s" % (lib, rel): text for rel, text in k8sim_files(version).items()}
    for tool, prog in tools.items():
        files["usr/bin/" + tool] = K8SIM_ENTRY % {"tool": tool, "lib": lib, "prog": "" if prog is None else repr(prog)}
    return files


KUBELET_UNIT = """[Unit]
Description=kubelet: The Kubernetes Node Agent (SIMULATED, rackforge lab)
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
"""
KUBEADM_DROPIN = """# as pkgs.k8s.io's kubeadm ships it
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \\
--kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""
APISERVER_UNIT = """[Unit]
Description=SIMULATED kube-apiserver (rackforge lab k8sim; started by kubeadm init)
After=network-online.target

[Service]
ExecStart=/usr/bin/kubeadm-apiserver-sim
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
"""


def k8s_packages(version):
    deb_version = "%s-1.1" % version  # pkgs.k8s.io's version scheme
    common = "python3, python3-yaml"
    return [
        {
            "Package": "kubelet",
            "Version": deb_version,
            "Depends": common,
            "Description": "Kubernetes node agent\n %s" % SIM_K8S,
            "files": {**k8sim_install("kubelet", version, {"kubelet": None}), "lib/systemd/system/kubelet.service": KUBELET_UNIT},
            "postinst": "#!/bin/sh\nsystemctl daemon-reload >/dev/null 2>&1 || true\n"
            "systemctl enable kubelet.service >/dev/null 2>&1 || true\n",
        },
        {
            "Package": "kubectl",
            "Version": deb_version,
            "Depends": common,
            "Description": "Kubernetes command-line tool\n %s" % SIM_K8S,
            "files": k8sim_install("kubectl", version, {"kubectl": None}),
            "postinst": None,
        },
        {
            "Package": "kubeadm",
            "Version": deb_version,
            "Depends": common + ", openssl, kubelet (>= %s), kubectl (>= %s)" % (version.rsplit(".", 1)[0], version.rsplit(".", 1)[0]),
            "Description": "Kubernetes cluster bootstrapping tool\n %s" % SIM_K8S,
            "files": {
                # kubeadm init starts the SIMULATED API server (k8sim-apiserver.service) from this package
                **k8sim_install("kubeadm", version, {"kubeadm": None, "kubeadm-apiserver-sim": "apiserver"}),
                "lib/systemd/system/kubelet.service.d/10-kubeadm.conf": KUBEADM_DROPIN,
                "lib/systemd/system/k8sim-apiserver.service": APISERVER_UNIT,
            },
            "postinst": "#!/bin/sh\nsystemctl daemon-reload >/dev/null 2>&1 || true\n",
        },
    ]


TIGERA_OPERATOR = (
    """# SIMULATED stand-in for Calico's tigera-operator.yaml (%s), rackforge lab: the real manifest
# (CRDs, RBAC, the operator Deployment) is published on GitHub, which the lab cannot reach.
apiVersion: v1
kind: Namespace
metadata:
  name: tigera-operator
  labels:
    name: tigera-operator
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: tigera-operator
  namespace: tigera-operator
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: tigera-operator
  namespace: tigera-operator
  labels:
    k8s-app: tigera-operator
spec:
  replicas: 1
  selector:
    matchLabels:
      name: tigera-operator
  template:
    metadata:
      labels:
        name: tigera-operator
        k8s-app: tigera-operator
    spec:
      serviceAccountName: tigera-operator
      hostNetwork: true
      tolerations:
        - effect: NoExecute
          operator: Exists
        - effect: NoSchedule
          operator: Exists
      containers:
        - name: tigera-operator
          image: quay.io/tigera/operator:v1.36.2
          imagePullPolicy: IfNotPresent
          command: ["operator"]
"""
    % CALICO_VERSION
)


# The shape of NVIDIA/k8s-device-plugin's deployments/static/nvidia-device-plugin.yml (one DaemonSet
# in kube-system, the plugin image nvcr.io/nvidia/k8s-device-plugin:<tag>, the kubelet's
# device-plugins directory mounted, a toleration of nvidia.com/gpu), written for the lab: the real
# file is on GitHub, which the lab cannot reach. rackforge renders whatever the URL serves.
DEVICE_PLUGIN = """# SIMULATED stand-in for NVIDIA k8s-device-plugin's static nvidia-device-plugin.yml (%s), rackforge lab
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nvidia-device-plugin-daemonset
  namespace: kube-system
spec:
  selector:
    matchLabels:
      name: nvidia-device-plugin-ds
  updateStrategy:
    type: RollingUpdate
  template:
    metadata:
      labels:
        name: nvidia-device-plugin-ds
    spec:
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
          effect: NoSchedule
      priorityClassName: system-node-critical
      containers:
        - name: nvidia-device-plugin-ctr
          image: nvcr.io/nvidia/k8s-device-plugin:%s
          env:
            - name: FAIL_ON_INIT_ERROR
              value: "false"
          securityContext:
            allowPrivilegeEscalation: false
            capabilities:
              drop: ["ALL"]
          volumeMounts:
            - name: kubelet-device-plugins-dir
              mountPath: /var/lib/kubelet/device-plugins
      volumes:
        - name: kubelet-device-plugins-dir
          hostPath:
            path: /var/lib/kubelet/device-plugins
            type: Directory
""" % (DEVICE_PLUGIN_VERSION, DEVICE_PLUGIN_VERSION)
