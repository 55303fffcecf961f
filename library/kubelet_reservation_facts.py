#!/usr/bin/python
"""Ansible module: the kubelet's reservations for this node, sized from its memory and CPUs."""

from __future__ import annotations

DOCUMENTATION = r"""
module: kubelet_reservation_facts
short_description: Size and check the kubelet's systemReserved, kubeReserved and evictionHard for this node
description:
  - Read-only (changes nothing, also outside check mode). Reads MemTotal from /proc/meminfo (what
    the kubelet reports as the node's memory capacity) and the CPUs from /proc/cpuinfo, sizes the
    reservations (module_utils/rackforge/kubelet.py; C(auto)) or checks the operator's maps, and
    fails before any change when a value is not a Kubernetes quantity, names an unknown resource
    or eviction signal, or leaves the node no memory or CPU for pods.
  - With O(network_cidr), also finds the node IP the kubelet registers with: C(ip -j addr show),
    the one IPv4 address inside O(network_cidr), published as the fact C(rackforge_node_ip)
    (interface, address, MTU, cidr; kubernetes_node, kubernetes_control_plane and calico read it).
    None or several fail, naming what was found, so a multi-NIC GPU node never silently picks an
    RDMA NIC's address for Kubernetes.
  - Publishes the fact C(rackforge_kubelet_reservations) with the drop-in KubeletConfiguration
    document (C(document)) and the node's capacity, reserved and allocatable memory (bytes) and
    CPUs, which kubernetes_node writes and the join gate reads.
options:
  system_reserved: {description: "C(auto), or a map of cpu, memory, ephemeral-storage, pid to quantities.", type: raw, default: auto}
  kube_reserved: {description: "Same as I(system_reserved), for the kubelet and the container runtime.", type: raw, default: auto}
  eviction_hard: {description: "C(auto), or a map of eviction signals to quantities or percentages.", type: raw, default: auto}
  cpu_manager_policy: {description: "cpuManagerPolicy: none (the kubelet's default, not written) or static.", type: str, default: none}
  reserved_cpus: {description: "reservedSystemCPUs, a CPU list such as 0-1,64-65 ('' = none).", type: str, default: ""}
  topology_manager_policy:
    description: "topologyManagerPolicy: none (not written), best-effort, restricted or single-numa-node."
    type: str
    default: none
  topology_manager_scope:
    description: "topologyManagerScope: container or pod (written with a policy other than none)."
    type: str
    default: pod
  shutdown_grace_period: {description: "shutdownGracePeriod, a duration ('0s' = off, not written).", type: str, default: 0s}
  shutdown_grace_period_critical_pods: {description: "shutdownGracePeriodCriticalPods (<= shutdown_grace_period).", type: str, default: 0s}
  cpu_manager_state: {description: The kubelet's CPU manager checkpoint., type: path, default: /var/lib/kubelet/cpu_manager_state}
  drop_in:
    description: "The drop-in as written now ('' = none): under the static policy a changed reservation may need a checkpoint reset."
    type: path
    default: ""
  kubelet_kubeconfig:
    description: "The kubelet's kubeconfig: present once the node has joined."
    type: path
    default: /etc/kubernetes/kubelet.conf
  node_name:
    description:
      - "The Node's name as configured ('' = the host name, C(uname -n), kubeadm's default)."
      - Returned lowercased, as kubeadm registers it.
    type: str
    default: ""
  kubelet_serving_cert:
    description: "The kubelet's serving certificate: present once its CSR was approved and issued."
    type: path
    default: /var/lib/kubelet/pki/kubelet-server-current.pem
  cpu_manager_reset:
    description:
      - "Allow a CPU manager policy change on a node whose checkpoint names another policy (the node
        drained first): the fact then says C(reset), and kubernetes_node stops the kubelet and removes the
        checkpoint before the kubelet starts with the new policy. Without it such a change fails here,
        before any change, naming the drain and this option."
    type: bool
    default: false
  prefix: {description: The variables' prefix, named in errors., type: str, default: kubernetes_node_}
  network_cidr: {description: "The management network the node IP is taken from ('' = no node IP).", type: str, default: ""}
  host: {description: The host's name in the node IP's error message., type: str, default: ""}
  proc_root: {description: Where /proc is (tests)., type: path, default: /proc}
  sys_root: {description: "Where /sys is (tests): the NUMA nodes are the node<N> of devices/system/node.", type: path, default: /sys}
"""

RETURN = r"""
ansible_facts:
  description: >-
    rackforge_kubelet_reservations: {document, systemReserved, kubeReserved, evictionHard,
    capacity: {memory, cpu}, reserved: {memory, cpu}, allocatable: {memory, cpu}} (memory in bytes),
    managers (the manager fields written), cpu_manager: {policy, checkpoint (the policy the node's
    kubelet ran with, null without a checkpoint), reset (the checkpoint must go before the kubelet restarts)},
    node_name (the Node's name), joined (the kubelet's kubeconfig exists: its kubelet must run), serving_certificate (the
    kubelet has its serving certificate: nothing to wait for at CSR approval); with O(network_cidr),
    rackforge_node_ip: {interface, address, mtu, cidr}.
  returned: success
  type: dict
"""

import json
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge import kubelet_managers as km
from ansible.module_utils.rackforge.kubelet import GIB, QuantityError, config_document, meminfo_total, plan
from ansible.module_utils.rackforge.netaddrs import AddressError, addresses_in, describe


def _read(path):
    with open(path) as fh:
        return fh.read()


def _read_or_none(module, path):
    """The file's text, None where there is no file ('' names none)."""
    if not path:
        return None
    try:
        return _read(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        module.fail_json(msg="cannot read %s: %s" % (path, exc))


def node_ip(module, cidr, source, host):
    """The one IPv4 address in cidr: {interface, address, mtu, cidr}; fails naming what it found."""
    ip = module.get_bin_path("ip")
    if not ip:
        module.fail_json(msg="ip (iproute2) is not installed: cannot read the node's addresses")
    rc, out, err = module.run_command([ip, "-j", "addr", "show"], environ_update=C_ENV)
    if rc != 0:
        module.fail_json(msg="ip -j addr show failed", rc=rc, stdout=out, stderr=err)
    try:
        found = addresses_in(json.loads(out), cidr)
    except (ValueError, AddressError) as exc:
        module.fail_json(msg="%s %s: %s" % (source, cidr, exc), rc=rc, stdout=out, stderr=err)
    if len(found) != 1:
        module.fail_json(
            msg="%s %s must match exactly one interface address on %s (the node IP); found %s"
            % (source, cidr, host or "this host", describe(found)),
            found=found,
        )
    return dict(found[0], cidr=cidr)


def main():
    module = AnsibleModule(
        argument_spec={
            "system_reserved": {"type": "raw", "default": "auto"},
            "kube_reserved": {"type": "raw", "default": "auto"},
            "eviction_hard": {"type": "raw", "default": "auto"},
            "cpu_manager_policy": {"type": "str", "default": "none"},
            "reserved_cpus": {"type": "str", "default": ""},
            "topology_manager_policy": {"type": "str", "default": "none"},
            "topology_manager_scope": {"type": "str", "default": "pod"},
            "shutdown_grace_period": {"type": "str", "default": "0s"},
            "shutdown_grace_period_critical_pods": {"type": "str", "default": "0s"},
            "cpu_manager_state": {"type": "path", "default": km.CPU_MANAGER_STATE},
            "cpu_manager_reset": {"type": "bool", "default": False},
            "kubelet_kubeconfig": {"type": "path", "default": "/etc/kubernetes/kubelet.conf"},
            "node_name": {"type": "str", "default": ""},
            "kubelet_serving_cert": {"type": "path", "default": "/var/lib/kubelet/pki/kubelet-server-current.pem"},
            "drop_in": {"type": "path", "default": ""},
            "prefix": {"type": "str", "default": "kubernetes_node_"},
            "proc_root": {"type": "path", "default": "/proc"},
            "sys_root": {"type": "path", "default": "/sys"},
            "network_cidr": {"type": "str", "default": ""},
            "host": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    facts = {"rackforge_node_ip": node_ip(module, p["network_cidr"], p["prefix"] + "network_cidr", p["host"])} if p["network_cidr"] else {}
    try:
        mem = meminfo_total(_read(os.path.join(p["proc_root"], "meminfo")))
        cpu_ids = {
            int(line.split(":", 1)[1])
            for line in _read(os.path.join(p["proc_root"], "cpuinfo")).splitlines()
            if line.split(":")[0].strip() == "processor"
        }
    except (OSError, QuantityError, ValueError) as exc:
        module.fail_json(msg="cannot read this node's memory and CPUs: %s" % exc)
    cpus = len(cpu_ids)
    if cpus == 0:
        module.fail_json(msg="no 'processor' lines in %s/cpuinfo: cannot size the CPU reservations" % p["proc_root"])
    result, problems = plan(mem, cpus, p["system_reserved"], p["kube_reserved"], p["eviction_hard"], prefix=p["prefix"])
    if problems:
        module.fail_json(msg="; ".join(problems) + ". Nothing was changed.", problems=problems)
    settings = {k: p[k] for k in km.SETTINGS}
    try:
        numa = sum(1 for n in os.listdir(os.path.join(p["sys_root"], "devices/system/node")) if re.match(r"^node[0-9]+$", n))
    except OSError:
        numa = 1  # no NUMA information: one node, as the kubelet's cadvisor then reports
    managers, problems = km.plan(settings, cpu_ids, result["reserved"]["cpu"], prefix=p["prefix"], numa_nodes=numa)
    if problems:
        module.fail_json(msg="; ".join(problems) + ". Nothing was changed.", problems=problems)
    if p["reserved_cpus"]:
        result["allocatable"]["cpu"] = km.allocatable_cpu(cpus, result["reserved"]["cpu"], p["reserved_cpus"])
        result["reserved"]["cpu"] = round(cpus - result["allocatable"]["cpu"], 3)
    names = ("system_reserved", "kube_reserved", "eviction_hard")
    how = ", ".join("%s%s: %s" % (p["prefix"], name, "auto" if p[name] == "auto" else "set") for name in names)
    header = (
        "Managed by rackforge (roles/kubernetes_node): the kubelet's reservations on this node\n"
        "(sized from %d GiB of memory and %d CPUs; %s)" % (mem // GIB, cpus, how)
    )
    document = config_document(result, header, managers)
    checkpoint, current = (_read_or_none(module, path) for path in (p["cpu_manager_state"], p["drop_in"]))
    reset, had, why = km.reset_needed(checkpoint, p["cpu_manager_policy"], reservation_changes=p["drop_in"] != "" and current != document)
    if reset and not p["cpu_manager_reset"]:
        module.fail_json(
            msg=(
                "%scpu_manager_policy: this node's kubelet ran the CPU manager with policy %r, and its checkpoint %s stands in "
                "the way: %s. Drain the node (kubectl drain <node> --ignore-daemonsets), then run once more with "
                "-e %scpu_manager_reset=true: rackforge then stops the kubelet, removes the checkpoint and starts the kubelet with "
                "the new settings. Nothing was changed."
            )
            % (p["prefix"], had, p["cpu_manager_state"], why, p["prefix"]),
        )
    fact = dict(
        result,
        document=document,
        managers=managers,
        cpu_manager={"policy": p["cpu_manager_policy"], "checkpoint": had, "reset": reset, "path": p["cpu_manager_state"]},
        node_name=(p["node_name"] or os.uname().nodename).lower(),
        joined=os.path.exists(p["kubelet_kubeconfig"]),
        serving_certificate=os.path.exists(p["kubelet_serving_cert"]),
    )
    facts["rackforge_kubelet_reservations"] = fact
    module.exit_json(changed=False, ansible_facts=facts)


if __name__ == "__main__":
    main()
