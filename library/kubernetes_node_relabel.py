#!/usr/bin/python
"""Ansible module: a joined node's labels kept true to what it has, from the control plane, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: kubernetes_node_relabel
short_description: Keep a joined node's labels as wanted (read, decide and relabel in one call)
description:
  - Reads the Node with C(kubectl get node <node> -o json) and sets, with one
    C(kubectl label node <node> --overwrite), only the labels of O(labels) whose value differs or
    that the node lacks. Labels not in O(labels) are left as they are (the kubelet's, other tools').
  - A node registers its labels once, at join; this keeps the hardware labels true afterwards (a GPU
    that fell off the bus, a new driver). Run it on the control plane (delegate_to).
  - Check mode reads and reports the same change and the diff, and relabels nothing.
  - A failed kubectl (the node unknown to the cluster, an API server that does not answer, a label
    the API server refuses) fails with its rc, stdout and stderr, naming the command.
options:
  node: {description: The Node's name., type: str, required: true}
  labels: {description: "The labels wanted (key: value); values are strings as the API holds them.", type: dict, required: true}
  kubeconfig: {description: The kubeconfig kubectl uses., type: path, default: /etc/kubernetes/admin.conf}
"""

EXAMPLES = r"""
- name: Keep the labels of a joined node true to its hardware
  kubernetes_node_relabel:
    node: gpu-node-01
    labels: {nvidia.com/gpu.count: "8", rackforge.io/nvidia-driver: "535.247.01"}
  delegate_to: cp-01
"""

RETURN = r"""
relabelled:
  description: "The key=value pairs set (or that would be, in check mode); [] when every label was as wanted."
  type: list
  returned: always
labels:
  description: "key -> {before, after} for each label of O(labels) that differed (before null: the node lacked it)."
  type: dict
  returned: always
rc: {description: The failed command's exit status., type: int, returned: failure of a command}
stdout: {description: The failed command's output., type: str, returned: failure of a command}
stderr: {description: The failed command's error output., type: str, returned: failure of a command}
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge.kubectl import kubectl_argv, kubectl_runner


def stale_labels(current, wanted):
    """{key: (before, after)} for each wanted label whose value differs from the node's (before
    None: the node lacks it), in key order."""
    return {k: (current.get(k), str(v)) for k, v in sorted(wanted.items()) if current.get(k) != str(v)}


def main():
    module = AnsibleModule(
        argument_spec={
            "node": {"type": "str", "required": True},
            "labels": {"type": "dict", "required": True},
            "kubeconfig": {"type": "path", "default": "/etc/kubernetes/admin.conf"},
        },
        supports_check_mode=True,
    )
    p = module.params
    run = kubectl_runner(module, kubectl_argv(module, p["kubeconfig"]), "kubernetes_node_relabel: ")
    get = ["get", "node", p["node"], "-o", "json"]
    out = run(*get)
    try:
        current = (json.loads(out).get("metadata") or {}).get("labels") or {}
    except ValueError as exc:
        module.fail_json(msg="kubernetes_node_relabel: %s printed no JSON: %s" % (" ".join(get), exc), rc=0, stdout=out, stderr="")
    stale = stale_labels(current, p["labels"])
    pairs = ["%s=%s" % (k, after) for k, (_before, after) in stale.items()]
    result = {
        "relabelled": pairs,
        "labels": {k: {"before": before, "after": after} for k, (before, after) in stale.items()},
        "diff": {
            "before_header": "node/%s labels" % p["node"],
            "after_header": "node/%s labels" % p["node"],
            "before": "".join("%s=%s\n" % (k, before) for k, (before, _after) in stale.items() if before is not None),
            "after": "".join(k + "\n" for k in pairs),
        },
    }
    if pairs and not module.check_mode:
        run("label", "node", p["node"], "--overwrite", *pairs)
    module.exit_json(changed=bool(pairs), **result)


if __name__ == "__main__":
    main()
