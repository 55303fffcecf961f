#!/usr/bin/python
"""Ansible module: a concern's Kubernetes objects kept in one manifest and applied from the control plane, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: kubernetes_objects
short_description: Keep a concern's Kubernetes objects in one manifest on the control plane and apply them
description:
  - Writes O(objects) as one manifest (JSON documents, which kubectl reads as YAML) at O(dest) where
    its text differs, then runs C(kubectl apply -f) on it. The call is changed when the file changed
    or kubectl created or configured an object (a line of its output that does not end in
    C(unchanged)); so an object deleted or edited by hand is put back by the next run.
  - Every object needs apiVersion, kind and metadata.name, checked before anything is written.
  - A refused apply (a PersistentVolume's source is immutable once created, for one) fails the task
    with kubectl's rc, stdout and stderr; the next run applies the same file again.
  - Check mode writes and applies nothing. It reports the manifest's diff and asks
    C(kubectl get) for each object, so an object missing from the cluster reads as a change.
options:
  objects: {description: The objects (dicts as the API takes them)., type: list, elements: dict, required: true}
  dest: {description: The manifest on the control plane., type: path, required: true}
  kubeconfig: {description: The kubeconfig kubectl uses., type: path, default: /etc/kubernetes/admin.conf}
  owner: {description: What the manifest's header names as its owner (a role)., type: str, default: rackforge}
"""

RETURN = r"""
applied: {description: "kubectl apply's lines (created, configured, unchanged); [] in check mode.", type: list, returned: always}
missing: {description: "Objects not in the cluster (kind/name), asked in check mode only.", type: list, returned: always}
file_changed: {description: O(dest) was written (or would be)., type: bool, returned: always}
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge.rootfiles import commit_or_fail, queue
from ansible.module_utils.rackforge.units import PlanError


def manifest(owner, objects):
    """The manifest's text: a header, then one JSON document per object (sorted keys: the same
    objects give the same bytes)."""
    head = "# Managed by rackforge (%s): kubectl apply -f this file\n" % owner
    return head + "".join("---\n%s\n" % json.dumps(o, indent=1, sort_keys=True) for o in objects)


def problems(objects):
    out = []
    for i, o in enumerate(objects):
        missing = [k for k in ("apiVersion", "kind") if not o.get(k)] + ([] if (o.get("metadata") or {}).get("name") else ["metadata.name"])
        if missing:
            out.append("objects[%d]: needs %s" % (i, ", ".join(missing)))
    return out


def main():
    module = AnsibleModule(
        argument_spec={
            "objects": {"type": "list", "elements": "dict", "required": True},
            "dest": {"type": "path", "required": True},
            "kubeconfig": {"type": "path", "default": "/etc/kubernetes/admin.conf"},
            "owner": {"type": "str", "default": "rackforge"},
        },
        supports_check_mode=True,
    )
    p = module.params
    bad = problems(p["objects"])
    if bad:
        module.fail_json(msg="kubernetes_objects: %s. Nothing was changed." % "; ".join(bad))
    writes, diff = [], []
    try:
        queue(p["dest"], manifest(p["owner"], p["objects"]), writes, diff)
    except PlanError as exc:
        module.fail_json(msg="kubernetes_objects: %s" % exc)
    kubectl = [module.get_bin_path("kubectl", required=True), "--kubeconfig", p["kubeconfig"]]
    result = {"applied": [], "missing": [], "file_changed": bool(writes), "diff": diff}
    if module.check_mode:
        for o in p["objects"]:
            ns = (o["metadata"].get("namespace") and ["-n", o["metadata"]["namespace"]]) or []
            argv = [*kubectl, "get", o["kind"].lower(), o["metadata"]["name"], *ns, "-o", "name", "--ignore-not-found"]
            rc, out, err = module.run_command(argv, environ_update=C_ENV)
            if rc != 0:
                module.fail_json(
                    msg="kubernetes_objects: %s failed: %s" % (" ".join(argv), (err or out).strip()), rc=rc, stdout=out, stderr=err
                )
            if not out.strip():
                result["missing"].append("%s/%s" % (o["kind"].lower(), o["metadata"]["name"]))
        module.exit_json(changed=bool(writes or result["missing"]), **result)
    commit_or_fail(module, "kubernetes_objects", writes)
    rc, out, err = module.run_command([*kubectl, "apply", "-f", p["dest"]], environ_update=C_ENV)
    if rc != 0:
        module.fail_json(
            msg="kubernetes_objects: kubectl apply -f %s failed (rc %d): %s" % (p["dest"], rc, (err or out).strip()),
            rc=rc,
            stdout=out,
            stderr=err,
            changed=bool(writes),
            file_changed=bool(writes),
        )
    result["applied"] = [line.strip() for line in out.splitlines() if line.strip()]
    module.exit_json(changed=bool(writes) or any(not line.endswith(" unchanged") for line in result["applied"]), **result)


if __name__ == "__main__":
    main()
