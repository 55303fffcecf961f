#!/usr/bin/python
"""Ansible module: leave a GPU node schedulable only when it is Ready and advertises all its GPUs."""

from __future__ import annotations

DOCUMENTATION = r"""
module: kubernetes_gpu_gate
short_description: Keep a GPU node cordoned until it is Ready and advertises every GPU (or MIG device) it has
description:
  - Runs on the control plane. Reads the Node (C(kubectl get node NAME -o json)) every 3 seconds
    for up to O(timeout) seconds until it is Ready and its C(status.allocatable) holds what the
    device plugin advertises for its GPUs (module_utils/rackforge/device_plugin.py
    expected_resources): with O(mig_strategy=none) O(gpus) x O(replicas) of O(resource); with
    C(single) or C(mixed) the counts the plugin derives from the node's MIG layout O(mig)
    (C(nvidia.com/gpu), C(nvidia.com/mig-<profile>)).
  - A MIG layout the plugin refuses (single with mixed MIG modes or profiles, a MIG GPU without
    MIG devices; mixed with a compute-instance profile) is a finding at once: the node is cordoned
    without waiting, the finding says why.
  - Passed, a node this gate cordoned (label C(rackforge.io/gpu-gate=cordoned)) is uncordoned and
    the label removed; a node cordoned by someone else (a drain, an operator) is left cordoned.
  - Not passed, the node is cordoned and labelled (unless it already was cordoned) and the module
    fails with the finding (what the node advertises and what it should), so the scheduler never
    places GPU pods on a node that cannot run them.
  - Check mode reads the Node once, changes nothing and says what it would do (a warning, not a
    failure: a preview may run before the plugin is applied).
options:
  node: {description: The Node's name., type: str, required: true}
  gpus: {description: The GPUs the health check counted on the node., type: int, required: true}
  replicas: {description: Time-slicing replicas of each GPU (0 = off)., type: int, default: 0}
  resource: {description: The extended resource (MIG strategy none)., type: str, default: nvidia.com/gpu}
  mig_strategy: {description: The plugin's MIG_STRATEGY., type: str, choices: [none, single, mixed], default: none}
  mig:
    description:
      - Per GPU {index, enabled, devices} (devices are the MIG profiles nvidia-smi -L lists), nvidia_gpu_info's C(mig).
      - Empty reads as every GPU with MIG off.
    type: list
    elements: dict
    default: []
  timeout: {description: Seconds to wait for the count., type: int, default: 120}
  kubeconfig: {description: The admin kubeconfig., type: path, default: /etc/kubernetes/admin.conf}
"""

RETURN = r"""
allocatable:
  description: What the node advertised last of the expected resources, summed (0 when it advertises nothing).
  type: int
  returned: always
advertised: {description: What the node advertised last, per expected resource., type: dict, returned: always}
ready: {description: Whether the node was Ready., type: bool, returned: always}
finding: {description: Why the node is kept cordoned (empty when it passed)., type: str, returned: always}
findings:
  description:
    - The finding as the health checks shape theirs (C(kubernetes_gpu_gate)), for the node's verdict and the fleet report.
    - Empty when the node passed.
  type: list
  returned: always
cordoned: {description: Whether the node is (would be) left cordoned by this gate., type: bool, returned: always}
"""

import json
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge.device_plugin import MIG_STRATEGIES, expected_resources
from ansible.module_utils.rackforge.health import finding
from ansible.module_utils.rackforge.kubectl import kubectl_argv, kubectl_runner

LABEL = "rackforge.io/gpu-gate"


def allocatable(node, resource):
    value = str(node.get("status", {}).get("allocatable", {}).get(resource, "0"))
    try:
        return int(value)
    except ValueError:
        return 0


def ready(node):
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in node.get("status", {}).get("conditions", []))


def shortfall(name, node, expected):
    problems = [] if ready(node) else ["not Ready"]
    for resource, want in sorted(expected.items()):
        have = allocatable(node, resource)
        if have != want:
            problems.append("advertises %d %s, expected %d (its GPUs as the health check counted them)" % (have, resource, want))
    return "%s: %s" % (name, "; ".join(problems)) if problems else ""


def counts(expected):
    return ", ".join("%d %s" % (n, r) for r, n in sorted(expected.items()))


def main():
    module = AnsibleModule(
        argument_spec={
            "node": {"type": "str", "required": True},
            "gpus": {"type": "int", "required": True},
            "replicas": {"type": "int", "default": 0},
            "resource": {"type": "str", "default": "nvidia.com/gpu"},
            "mig_strategy": {"type": "str", "choices": list(MIG_STRATEGIES), "default": "none"},
            "mig": {"type": "list", "elements": "dict", "default": []},
            "timeout": {"type": "int", "default": 120},
            "kubeconfig": {"type": "path", "default": "/etc/kubernetes/admin.conf"},
        },
        supports_check_mode=True,
    )
    p = module.params
    base = kubectl_argv(module, p["kubeconfig"])
    run = kubectl_runner(module, base, "kubectl ")

    expected, refused = expected_resources(p["gpus"], p["replicas"], p["mig_strategy"], p["mig"])
    if p["mig_strategy"] == "none":
        expected = {p["resource"]: expected["nvidia.com/gpu"]}
    deadline = time.time() + p["timeout"]
    while True:
        rc, out, err = module.run_command([*base, "get", "node", p["node"], "-o", "json"], environ_update=C_ENV)
        if rc != 0 and module.check_mode and "not found" in (out + err).lower():  # the preview of a join
            module.exit_json(
                changed=False,
                allocatable=0,
                advertised={},
                ready=False,
                cordoned=False,
                finding="%s has not joined yet (check mode)" % p["node"],
                findings=[],
            )
        if rc != 0:
            module.fail_json(msg="kubectl get node %s failed" % p["node"], rc=rc, stdout=out, stderr=err)
        try:
            node = json.loads(out)
        except ValueError:
            module.fail_json(msg="kubectl get node -o json printed no JSON", rc=0, stdout=out, stderr="")
        why = "%s: the device plugin refuses its MIG layout: %s" % (p["node"], refused) if refused else shortfall(p["node"], node, expected)
        if not why or refused or module.check_mode or time.time() > deadline:
            break
        time.sleep(3)
    ours = node.get("metadata", {}).get("labels", {}).get(LABEL) == "cordoned"
    unschedulable = bool(node.get("spec", {}).get("unschedulable"))
    have = {r: allocatable(node, r) for r in sorted(expected) or [p["resource"]]}
    res = {"allocatable": sum(have.values()), "advertised": have, "ready": ready(node), "finding": why, "findings": []}
    if why:
        res["findings"] = [
            finding(
                "kubernetes_gpu_gate",
                "node",
                "Ready, %s allocatable" % counts(expected) if expected else "Ready, a MIG layout the plugin accepts",
                "%s, %s allocatable" % ("Ready" if res["ready"] else "not Ready", counts(have)),
                "GPU gate: %s; the node is kept cordoned (label %s=cordoned)" % (why, LABEL),
            )
        ]
    if not why:
        if ours and not module.check_mode:
            run("uncordon", p["node"])
            run("label", "node", p["node"], LABEL + "-")
        module.exit_json(changed=ours, cordoned=False, **res)
    # short of GPUs: marked as this gate's first (so a later pass lets it back even if the cordon
    # below fails), then cordoned
    changed = not unschedulable
    if module.check_mode:  # a preview (before the plugin is applied, say): said, not failed
        module.warn("GPU gate: %s; a run would %s" % (why, "cordon the node" if changed else "keep the node cordoned"))
        module.exit_json(changed=changed, cordoned=True, **res)
    if changed:
        run("label", "node", p["node"], "--overwrite", LABEL + "=cordoned")
        run("cordon", p["node"])
    module.fail_json(msg="GPU gate: %s; the node is kept cordoned" % why, changed=changed, cordoned=True, **res)


if __name__ == "__main__":
    main()
