#!/usr/bin/python
from __future__ import annotations

DOCUMENTATION = r"""
module: rackforge_preflight_facts
short_description: Read a host's OS and hardware, compare them with expectations, set the fact rackforge_preflight
description:
  - Read-only. PCI devices are read from the sysfs tree under O(sysfs_root) (like node_exporter's
    C(--path.sysfs)), so a simulator's or a chroot's tree can stand in for /sys.
  - Returns the observed hardware, the findings (the OS, O(os) and O(service_mgr)
    from the host's facts, against O(supported_os), then the hardware against O(expected)), and
    the public fact C(rackforge_preflight) (passed, messages, secure_boot, swap_mb,
    gpus_on_pci_bus, nvswitches_on_pci_bus, sysfs_root) that later roles read.
  - Secure Boot on, swap on (O(warn_swap)) and, with O(enforce) false, the findings themselves are
    warnings of the task; with O(enforce) true a finding fails it, naming every one.
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
  os:
    description: The host's distribution and major version (C(Debian-12)); '' = not checked.
    type: str
    default: ""
  service_mgr:
    description: The host's service manager (the fact C(service_mgr)); '' = not checked.
    type: str
    default: ""
  supported_os:
    description: The supported O(os) values ([] = any).
    type: list
    elements: str
    default: []
  enforce:
    description: Fail on a finding (else warn).
    type: bool
    default: false
  warn_swap:
    description: Warn when swap is on.
    type: bool
    default: false
  host:
    description: The inventory name the messages start with.
    type: str
    default: ""
  packages_snapshot:
    description:
      - "This run's id, given by the module's action plugin (not by a task): on a host with dpkg the
        one read also takes every package dpkg knows, the sha256 of each key under /etc/apt/keyrings
        and the text of each source under /etc/apt/sources.list.d, returned as the fact
        C(rackforge_packages_snapshot): the later package calls and repository checks of the run
        decide from it on the controller (module_utils/rackforge/packages_snapshot.py)."
    type: str
author: rackforge
"""

EXAMPLES = r"""
- name: Check the host against the hardware profile
  rackforge_preflight_facts:
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
ansible_facts:
  description: rackforge_preflight (see the description), and rackforge_packages_snapshot with O(packages_snapshot).
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV, read_file
from ansible.module_utils.rackforge import packages_snapshot as snapshots
from ansible.module_utils.rackforge.hardware import (
    NVSWITCH_PCI_IDS,
    count_pci,
    os_findings,
    parse_meminfo,
    pci_id,
    preflight_findings,
    preflight_warnings,
)


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
        argument_spec={
            "sysfs_root": {"type": "path", "default": "/sys"},
            "expected": {"type": "dict", "default": {}},
            "os": {"type": "str", "default": ""},
            "service_mgr": {"type": "str", "default": ""},
            "supported_os": {"type": "list", "elements": "str", "default": []},
            "enforce": {"type": "bool", "default": False},
            "warn_swap": {"type": "bool", "default": False},
            "host": {"type": "str", "default": ""},
            "packages_snapshot": {"type": "str"},
        },
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
    p = module.params
    findings = os_findings(p["os"], p["service_mgr"], p["supported_os"]) + preflight_findings(hw, p["expected"])
    messages = [f["message"] for f in findings]
    fact = {
        "passed": not messages,
        "messages": messages,
        "secure_boot": hw["secure_boot"],
        "swap_mb": hw["swap_mb"],
        "gpus_on_pci_bus": count_pci(hw["pci_devices"], p["expected"].get("gpu_pci_ids") or []),
        "nvswitches_on_pci_bus": hw["nvswitches"],
        "sysfs_root": sysfs_root,
    }
    prefix = "%s: " % p["host"] if p["host"] else ""
    for text in preflight_warnings(hw, messages, p["enforce"], p["warn_swap"]):
        module.warn(prefix + text)
    result = dict(changed=False, hardware=hw, findings=findings, ansible_facts={"rackforge_preflight": fact})
    if p["packages_snapshot"] and module.get_bin_path("dpkg-query"):
        result["ansible_facts"].update(snapshots.fact(p["packages_snapshot"], *snapshots.read_node(module, C_ENV)))
    if p["enforce"] and messages:
        module.fail_json(msg="%spreflight failed: %s" % (prefix, "; ".join(messages)), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
