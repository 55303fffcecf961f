#!/usr/bin/python
"""Ansible module: approve the kubelet-serving CSRs of the given nodes that are their own, deny the rest."""

from __future__ import annotations

DOCUMENTATION = r"""
module: kubelet_serving_csr
short_description: Approve kubelet-serving CSRs whose requester and SANs are the node's own; deny forged ones, saying why
description:
  - Runs on the control plane. Lists the CertificateSigningRequests (C(kubectl get csr -o json)); for
    each pending one with signer kubernetes.io/kubelet-serving that speaks for one of O(nodes) (its
    requester or its subject names it), reads the request with C(openssl req -noout -text) and
    approves it only when the requester the API server authenticated is C(system:node:<name>) in
    group system:nodes, the subject is CN=system:node:<name>, O=system:nodes, the usages are server
    auth (with digital signature / key encipherment) and the SANs are exactly DNS:<name> and
    IP:<address>. Any other is denied (C(kubectl certificate deny)) and returned with its reasons,
    also as a warning. CSRs of nodes not in O(nodes) are left alone.
  - Nodes with C(wait) (their kubelet has no serving certificate yet) are waited for up to
    O(timeout) seconds until their CSR appears; one that never does is returned in C(missing).
  - Check mode approves and denies nothing and returns what it would do.
options:
  nodes:
    description: "[{name, address, wait}]: the Node name and management address of each node."
    type: list
    elements: dict
    required: true
  kubeconfig: {description: The admin kubeconfig., type: path, default: /etc/kubernetes/admin.conf}
  timeout: {description: Seconds to wait for the CSRs of nodes with C(wait)., type: int, default: 60}
"""

RETURN = r"""
approved: {description: "[{name, node}]: CSRs approved (would be, in check mode).", type: list, returned: always}
denied: {description: "[{name, node, reasons}]: CSRs denied and why.", type: list, returned: always}
missing: {description: Nodes with wait whose CSR did not appear within the timeout., type: list, returned: always}
"""

import base64
import json
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge.csr import SIGNER, CSRParseError, decided, judge, parse_openssl_req_text, requester_node


def main():
    module = AnsibleModule(
        argument_spec={
            "nodes": {"type": "list", "elements": "dict", "required": True},
            "kubeconfig": {"type": "path", "default": "/etc/kubernetes/admin.conf"},
            "timeout": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    p = module.params
    nodes = {n["name"]: n for n in p["nodes"]}
    kubectl, openssl = module.get_bin_path("kubectl", required=True), module.get_bin_path("openssl", required=True)
    base = [kubectl, "--kubeconfig", p["kubeconfig"]]
    approved, denied, seen, handled, requests = [], [], set(), set(), {}
    deadline = time.time() + p["timeout"]
    while True:
        rc, out, err = module.run_command([*base, "get", "csr", "-o", "json"], environ_update=C_ENV)
        if rc != 0:
            module.fail_json(msg="kubectl get csr failed", rc=rc, stdout=out, stderr=err)
        try:
            items = json.loads(out).get("items", [])
        except ValueError:
            module.fail_json(msg="kubectl get csr -o json printed no JSON", rc=rc, stdout=out, stderr=err)
        for csr in items:
            if csr.get("spec", {}).get("signerName") != SIGNER:
                continue
            name = csr["metadata"]["name"]
            if name not in requests:  # a request never changes: read once, not on every poll
                pem = base64.b64decode(csr["spec"].get("request", ""))
                rc, text, err = module.run_command([openssl, "req", "-noout", "-text"], data=pem, binary_data=True, environ_update=C_ENV)
                try:
                    requests[name] = (parse_openssl_req_text(text) if rc == 0 else None, err)
                except CSRParseError:
                    requests[name] = (None, err)
            request, err = requests[name]
            node = requester_node(csr, request or {}, nodes)
            if node is None:
                continue
            seen.add(node)
            if decided(csr) or name in handled:
                continue
            handled.add(name)
            reasons = judge(csr, request, nodes[node]) if request else ["openssl cannot read the request: %s" % err.strip()]
            verb = "deny" if reasons else "approve"
            if not module.check_mode:
                rc, out, err = module.run_command([*base, "certificate", verb, name], environ_update=C_ENV)
                if rc != 0:
                    module.fail_json(msg="kubectl certificate %s %s failed" % (verb, name), rc=rc, stdout=out, stderr=err)
            if reasons:
                denied.append({"name": name, "node": node, "reasons": reasons})
                module.warn("denied %s (kubelet-serving for %s): %s" % (name, node, "; ".join(reasons)))
            else:
                approved.append({"name": name, "node": node})
        missing = sorted(n for n, spec in nodes.items() if spec.get("wait") and n not in seen)
        if not missing or time.time() > deadline or module.check_mode:
            break
        time.sleep(2)
    module.exit_json(changed=bool(approved or denied), approved=approved, denied=denied, missing=missing)


if __name__ == "__main__":
    main()
