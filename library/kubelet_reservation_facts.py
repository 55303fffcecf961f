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
  - Publishes the fact C(rackforge_kubelet_reservations) with the drop-in KubeletConfiguration
    document (C(document)) and the node's capacity, reserved and allocatable memory (bytes) and
    CPUs, which kubernetes_node writes and the join gate reads.
options:
  system_reserved: {description: "C(auto), or a map of cpu, memory, ephemeral-storage, pid to quantities.", type: raw, default: auto}
  kube_reserved: {description: "Same as I(system_reserved), for the kubelet and the container runtime.", type: raw, default: auto}
  eviction_hard: {description: "C(auto), or a map of eviction signals to quantities or percentages.", type: raw, default: auto}
  prefix: {description: The variables' prefix, named in errors., type: str, default: kubernetes_node_}
  proc_root: {description: Where /proc is (tests)., type: path, default: /proc}
"""

RETURN = r"""
ansible_facts:
  description: >-
    rackforge_kubelet_reservations: {document, systemReserved, kubeReserved, evictionHard,
    capacity: {memory, cpu}, reserved: {memory, cpu}, allocatable: {memory, cpu}} (memory in bytes).
  returned: success
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge.kubelet import GIB, QuantityError, config_document, meminfo_total, plan


def _read(path):
    with open(path) as fh:
        return fh.read()


def main():
    module = AnsibleModule(
        argument_spec={
            "system_reserved": {"type": "raw", "default": "auto"},
            "kube_reserved": {"type": "raw", "default": "auto"},
            "eviction_hard": {"type": "raw", "default": "auto"},
            "prefix": {"type": "str", "default": "kubernetes_node_"},
            "proc_root": {"type": "path", "default": "/proc"},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        mem = meminfo_total(_read(os.path.join(p["proc_root"], "meminfo")))
        cpus = sum(1 for line in _read(os.path.join(p["proc_root"], "cpuinfo")).splitlines() if line.split(":")[0].strip() == "processor")
    except (OSError, QuantityError) as exc:
        module.fail_json(msg="cannot read this node's memory and CPUs: %s" % exc)
    if cpus == 0:
        module.fail_json(msg="no 'processor' lines in %s/cpuinfo: cannot size the CPU reservations" % p["proc_root"])
    result, problems = plan(mem, cpus, p["system_reserved"], p["kube_reserved"], p["eviction_hard"], prefix=p["prefix"])
    if problems:
        module.fail_json(msg="; ".join(problems) + ". Nothing was changed.", problems=problems)
    names = ("system_reserved", "kube_reserved", "eviction_hard")
    how = ", ".join("%s%s: %s" % (p["prefix"], name, "auto" if p[name] == "auto" else "set") for name in names)
    header = (
        "Managed by rackforge (roles/kubernetes_node): the kubelet's reservations on this node\n"
        "(sized from %d GiB of memory and %d CPUs; %s)" % (mem // GIB, cpus, how)
    )
    fact = dict(result, document=config_document(result, header))
    module.exit_json(changed=False, ansible_facts={"rackforge_kubelet_reservations": fact})


if __name__ == "__main__":
    main()
