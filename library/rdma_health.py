#!/usr/bin/python
from __future__ import annotations

DOCUMENTATION = r"""
module: rdma_health
short_description: Check the RDMA ports a node is expected to have (read-only)
description:
  - Reads C(ibstat), C(ibv_devinfo), C(show_gids) (when installed), C(ethtool -S) and the sysfs tree
    under O(sysfs_root), and compares the ports of the expected link layer (minus management
    interfaces) with the expectations. Spare ports of another link layer are ignored on purpose.
  - A check that cannot run (its tool missing, failing or printing what does not parse) is a
    finding C(<check>_not_run) with C(not_run=true) and the evidence (command, rc, output),
    never a silent pass: MTU (ibv_devinfo), GID (show_gids), PFC and counters (ethtool -S).
options:
  expected_count:
    description: RDMA ports that must be present.
    type: int
  link_layer:
    description: Link layer of the RDMA fabric.
    type: str
    default: Ethernet
    choices: [Ethernet, InfiniBand]
  rate_gbps:
    description: Expected port rate (Gb/s); 0 skips the check.
    type: int
    default: 0
  exclude_netdevs:
    description: Interfaces that are not part of the RDMA fabric (management NIC).
    type: list
    elements: str
    default: []
  lossless_priority:
    description: Priority that must have PFC enabled (RoCE only); omit to skip.
    type: int
  sysfs_root:
    description: sysfs root (netdev MTUs, port counters).
    type: path
    default: /sys
  baseline:
    description: Port error counters from an earlier healthy run, {ca -> {counter -> value}}.
    type: dict
    default: {}
author: rackforge
"""

EXAMPLES = r"""
- name: Check 8x 400G RoCE ports
  rdma_health:
    expected_count: 8
    rate_gbps: 400
    exclude_netdevs: [ens9f0np0]
    lossless_priority: 3
"""

RETURN = r"""
healthy:
  description: No findings.
  returned: always
  type: bool
findings:
  description: Findings naming NIC and port (check, component, expected, observed, message).
  returned: always
  type: list
  elements: dict
ports:
  description: >-
    The ports checked, with state, rate, active MTU, PFC priorities, error counters, traffic counters
    (PFC pause frames per priority, CNP/ECN; reported, never judged) and a per-port verdict.
  returned: always
  type: list
  elements: dict
counters:
  description: Port error counters now (use as the next baseline).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge.rdma_check import ARGS, rdma_check


def main():
    module = AnsibleModule(argument_spec=ARGS, supports_check_mode=True)
    module.exit_json(**rdma_check(module, module.params))


if __name__ == "__main__":
    main()
