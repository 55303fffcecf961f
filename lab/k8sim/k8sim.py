#!/usr/bin/python3
"""rackforge lab Kubernetes stand-in (SIMULATION: no kubelet, no containers, no real API server).

kubeadm and kubelet are not packaged for Debian and cannot run in the lab's containers, so the lab
mirror ships stand-in `kubeadm`, `kubelet` and `kubectl` packages that call this one program.
What it does for real:
  - parses and validates the files the roles render against the real formats (kubeadm
    InitConfiguration/ClusterConfiguration/JoinConfiguration v1beta4, KubeletConfiguration
    v1beta1, KubeSchedulerConfiguration v1), unknown fields rejected, as kubeadm's strict decoder does;
  - `kubeadm init` makes a real CA (openssl) and serves a small HTTPS API on :6443 (the
    k8s-shaped paths the roles and kubectl use: /version, the kube-public cluster-info
    ConfigMap, /api/v1/nodes, pods, evictions);
  - bootstrap tokens with a TTL; `kubeadm join` does the real discovery (cluster-info fetched
    without trust, the CA public key pinned by the sha256 in caCertHashes) and registers the
    Node with its node IP, labels (NodeRestriction rules) and taints;
  - `kubectl` get/cordon/uncordon/drain/label/apply against that API.
What it does not: schedule, run pods, network. State: /var/lib/k8sim/state.json on the
control-plane host (the "etcd").

This file is the entry point; the code is in k8simlib/ (common: settings and errors, validate: the
formats, state: the state file, certificates and API client, kubeadm, kubectl, apiserver,
kubelet). Every public name the single-file k8sim had is importable from here as before; its settings
(k8sim.ROOT, k8sim.VERSION, ...) are k8simlib.common's, read and set through this module.
"""

from __future__ import annotations

import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from k8simlib import common
from k8simlib.apiserver import apiserver
from k8simlib.common import Invalid
from k8simlib.kubeadm import kubeadm, kubeadm_init, kubeadm_join, kubeadm_token_create
from k8simlib.kubectl import kubectl, sim_pod
from k8simlib.kubelet import kubelet
from k8simlib.state import State, api, ca_hash, kubeconfig, load_kubeconfig, node_info, node_object, now, openssl, write_private
from k8simlib.validate import (
    ARG,
    BOOTSTRAP_DISCOVERY,
    CGROUP_DRIVERS,
    COMPONENT,
    DISCOVERY,
    DNS1123_RE,
    EFFECTS,
    HOST_PATH_MOUNT,
    KUBEADM,
    KUBELET,
    KUBELET_LABELS,
    NAME_RE,
    NETWORKING,
    NODE_REGISTRATION,
    SCHEDULER,
    SCORING_TYPES,
    TAINT,
    TOKEN_RE,
    label_problems,
    load_docs,
    node_restriction,
    parse_labels,
    validate_cluster,
    validate_kubelet,
    validate_node_registration,
    validate_scheduler,
    validate_taints,
)

# every public name the single-file k8sim had, importable as k8sim.<name> (its settings: see _Entry)
__all__ = [
    "ARG",
    "BOOTSTRAP_DISCOVERY",
    "CGROUP_DRIVERS",
    "COMPONENT",
    "DISCOVERY",
    "DNS1123_RE",
    "EFFECTS",
    "HOST_PATH_MOUNT",
    "KUBEADM",
    "KUBELET",
    "KUBELET_LABELS",
    "NAME_RE",
    "NETWORKING",
    "NODE_REGISTRATION",
    "SCHEDULER",
    "SCORING_TYPES",
    "TAINT",
    "TOKEN_RE",
    "Invalid",
    "State",
    "api",
    "apiserver",
    "ca_hash",
    "kubeadm",
    "kubeadm_init",
    "kubeadm_join",
    "kubeadm_token_create",
    "kubeconfig",
    "kubectl",
    "kubelet",
    "label_problems",
    "load_docs",
    "load_kubeconfig",
    "main",
    "node_info",
    "node_object",
    "node_restriction",
    "now",
    "openssl",
    "parse_labels",
    "sim_pod",
    "validate_cluster",
    "validate_kubelet",
    "validate_node_registration",
    "validate_scheduler",
    "validate_taints",
    "write_private",
]


def _setting(name):
    """k8simlib.common.<name>, read and set through this module (a data descriptor, so that
    setting k8sim.<name>, as a test does with ROOT, sets it where the code reads it)."""
    return property(lambda _self: getattr(common, name), lambda _self, value: setattr(common, name, value))


class _Entry(types.ModuleType):
    """This module, with k8simlib.common's settings as its own attributes."""

    VERSION = _setting("VERSION")
    ROOT = _setting("ROOT")
    STATE = _setting("STATE")
    ETC_K8S = _setting("ETC_K8S")
    PKI = _setting("PKI")
    KUBELET_DIR = _setting("KUBELET_DIR")
    PORT = _setting("PORT")


sys.modules[__name__].__class__ = _Entry


def main(prog=None):
    """Run the tool named by prog, else by the name this was called as (kubeadm, kubectl, kubelet;
    `k8sim.py TOOL ...` names it in the first argument)."""
    prog = prog or os.path.basename(sys.argv[0])
    argv = sys.argv[1:]
    if prog in ("k8sim", "k8sim.py") and argv:
        prog, argv = argv[0], argv[1:]
    tools = {"kubeadm": kubeadm, "kubectl": kubectl, "kubelet": kubelet, "apiserver": apiserver}
    if prog not in tools:
        sys.stderr.write("k8sim: call as one of %s\n" % ", ".join(tools))
        return 2
    return tools[prog](argv) or 0


if __name__ == "__main__":
    sys.exit(main())
