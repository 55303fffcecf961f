#!/usr/bin/python
from __future__ import annotations

DOCUMENTATION = r"""
module: rackforge_preflight_info
short_description: Read a host's CPUs, memory, swap, disk, kernel, Secure Boot and PCI devices and compare them with expectations
description:
  - Read-only. PCI devices are read from the sysfs tree under O(sysfs_root) (like node_exporter's
    C(--path.sysfs)), so a simulator's or a chroot's tree can stand in for /sys.
  - Returns the observed hardware and a list of findings; the calling role decides whether a
    finding fails the host.
options:
  sysfs_root:
    description: Root of the sysfs tree to read PCI devices from.
    type: path
    default: /sys
  expected:
    description: >-
      Expectations: gpu_count, gpu_pci_ids, rdma_nic_count, rdma_nic_pci_ids, min_cpus,
      min_memory_gb, min_root_free_gb, min_kernel. Missing keys are not checked.
    type: dict
    default: {}
author: rackforge
"""

EXAMPLES = r"""
- name: Check the host against the hardware profile
  rackforge_preflight_info:
    sysfs_root: /sys
    expected:
      gpu_count: 8
      gpu_pci_ids: ["10de:2330"]
      min_memory_gb: 512
"""

RETURN = r"""
hardware:
  description: >-
    Observed hardware: memory_mb, swap_mb, cpus, root_free_gb, kernel, secure_boot, pci_devices
    [{address, id, class}] and nvswitches (how many PCI devices are NVSwitches).
  returned: always
  type: dict
findings:
  description: One entry per unmet expectation (check, variable, expected, observed, message).
  returned: always
  type: list
  elements: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import read_file
from ansible.module_utils.rackforge.hardware import NVSWITCH_PCI_IDS, parse_meminfo, pci_id, preflight_findings


def pci_devices(sysfs_root):
    base = os.path.join(sysfs_root, "bus", "pci", "devices")
    devices = []
    for address in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        path = os.path.join(base, address)
        vendor, device = read_file(os.path.join(path, "vendor"), ""), read_file(os.path.join(path, "device"), "")
        if vendor and device:
            devices.append({"address": address, "id": pci_id(vendor, device), "class": read_file(os.path.join(path, "class"), "")[:6]})
    return devices


def secure_boot():
    efivars = "/sys/firmware/efi/efivars"
    if not os.path.isdir("/sys/firmware/efi"):
        return "legacy-bios"
    for name in os.listdir(efivars) if os.path.isdir(efivars) else []:
        if name.startswith("SecureBoot-"):
            try:
                with open(os.path.join(efivars, name), "rb") as fh:
                    data = fh.read()
                return "enabled" if data[-1:] == b"\x01" else "disabled"
            except OSError:
                return "unknown"
    return "unknown"


def main():
    module = AnsibleModule(
        argument_spec={"sysfs_root": {"type": "path", "default": "/sys"}, "expected": {"type": "dict", "default": {}}},
        supports_check_mode=True,
    )
    sysfs_root = module.params["sysfs_root"]
    if not os.path.isdir(sysfs_root):
        module.fail_json(msg="sysfs_root %s does not exist on this host" % sysfs_root)
    stat = os.statvfs("/")
    hw = dict(parse_meminfo(read_file("/proc/meminfo", "")))
    hw.update(
        {
            "cpus": os.cpu_count() or 0,
            "root_free_gb": stat.f_bavail * stat.f_frsize // (1000**3),
            "kernel": os.uname().release,
            "secure_boot": secure_boot(),
            "pci_devices": pci_devices(sysfs_root),
        }
    )
    hw["nvswitches"] = len([d for d in hw["pci_devices"] if d["id"] in NVSWITCH_PCI_IDS])
    module.exit_json(changed=False, hardware=hw, findings=preflight_findings(hw, module.params["expected"]))


if __name__ == "__main__":
    main()
