#!/usr/bin/python
from __future__ import annotations

DOCUMENTATION = r"""
module: nvlink_health
short_description: Check NVLink links, speeds, error counters, topology and the NVSwitch fabric (read-only)
description:
  - Runs C(nvidia-smi nvlink -s), C(nvlink -e), C(topo -p2p n) and C(-q) and compares them with the
    expected links per GPU, link speed and fabric state. Safe in check mode; changes nothing.
options:
  expected_links:
    description: Active NVLinks each GPU must have; 0 means no NVLink is expected. Omit to use the model table.
    type: int
  expected_speed_gbps:
    description: Per-link speed in GB/s as nvidia-smi prints it; omit to use the model table.
    type: float
  expected_gpus:
    description: Number of GPUs nvidia-smi must list.
    type: int
  nvswitch:
    description: The system has NVSwitches; the fabric must be Completed/Success and fabric manager active.
    type: bool
    default: false
  check_topology:
    description: Require NVLink P2P status OK between every GPU pair (C(topo -p2p n); NVSwitch systems).
    type: bool
    default: false
  baseline:
    description: NVLink error counters from an earlier healthy run, {uuid -> {link -> {replay, recovery, crc}}}.
    type: dict
    default: {}
author: rackforge
"""

EXAMPLES = r"""
- name: Check NVLink on an HGX H100
  nvlink_health:
    expected_links: 18
    expected_speed_gbps: 26.562
    nvswitch: true
"""

RETURN = r"""
healthy:
  description: No findings.
  returned: always
  type: bool
findings:
  description: Findings naming GPU and link (check, component, expected, observed, message).
  returned: always
  type: list
  elements: dict
gpus:
  description: Per GPU index, name, uuid, active and expected link counts.
  returned: always
  type: list
  elements: dict
counters:
  description: NVLink error counters now (use as the next baseline).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge.nvlink_check import ARGS, nvlink_check


def main():
    module = AnsibleModule(argument_spec=ARGS, supports_check_mode=True)
    module.exit_json(**nvlink_check(module, module.params))


if __name__ == "__main__":
    main()
