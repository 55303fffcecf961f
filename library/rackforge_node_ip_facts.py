#!/usr/bin/python
"""Ansible module: the node's one address in the management CIDR, as the public fact rackforge_node_ip."""

from __future__ import annotations

DOCUMENTATION = r"""
module: rackforge_node_ip_facts
short_description: Find the node's one IPv4 address in a CIDR (its node IP) and publish it as a fact
description:
  - Read-only. Runs C(ip -j addr show) and returns the interface, address and MTU of the one
    IPv4 address inside O(cidr) as the fact C(rackforge_node_ip). Fails, naming what it found,
    when none or several addresses match, so a multi-NIC GPU node never silently picks an RDMA
    NIC's address for Kubernetes.
  - C(rackforge_node_ip) is a public fact (README, contracts): the roles that need the node's
    management address (kubernetes_node, kubernetes_control_plane, calico) read it.
options:
  cidr: {description: The management network., type: str, required: true}
  source: {description: The variable the CIDR came from (named in the error)., type: str, default: cidr}
  host: {description: The host's name in the error message., type: str}
"""

RETURN = r"""
ansible_facts:
  description: "rackforge_node_ip: {interface, address, mtu, cidr}."
  returned: success
  type: dict
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge.netaddrs import AddressError, addresses_in, describe


def main():
    module = AnsibleModule(
        argument_spec={"cidr": {"type": "str", "required": True}, "source": {"type": "str", "default": "cidr"}, "host": {"type": "str"}},
        supports_check_mode=True,
    )
    p = module.params
    ip = module.get_bin_path("ip")
    if not ip:
        module.fail_json(msg="ip (iproute2) is not installed: cannot read the node's addresses")
    rc, out, err = module.run_command([ip, "-j", "addr", "show"], environ_update=C_ENV)
    if rc != 0:
        module.fail_json(msg="ip -j addr show failed", rc=rc, stdout=out, stderr=err)
    try:
        found = addresses_in(json.loads(out), p["cidr"])
    except (ValueError, AddressError) as exc:
        module.fail_json(msg="%s %s: %s" % (p["source"], p["cidr"], exc), rc=rc, stdout=out, stderr=err)
    if len(found) != 1:
        module.fail_json(
            msg="%s %s must match exactly one interface address on %s (the node IP); found %s"
            % (p["source"], p["cidr"], p["host"] or "this host", describe(found)),
            found=found,
        )
    module.exit_json(changed=False, ansible_facts={"rackforge_node_ip": dict(found[0], cidr=p["cidr"])})


if __name__ == "__main__":
    main()
