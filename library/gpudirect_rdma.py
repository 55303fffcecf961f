#!/usr/bin/python
from __future__ import annotations

DOCUMENTATION = r"""
module: gpudirect_rdma
short_description: Read, decide and apply the GPUDirect RDMA prerequisites (peer path, ACS, IOMMU, peer memory)
description:
  - Reads the PCI hierarchy under O(sysfs_root) (which GPUs and RDMA NICs sit behind one PCIe switch,
    and the ports between them), C(lspci -D -vvv) (ACS control of those ports), each device's IOMMU
    group type, and the peer-memory path of O(method). The rules are module_utils/rackforge/gpudirect.py.
  - O(state=check) changes nothing and returns the findings (the health gate). With O(state=present)
    each finding (but C(gpudirect_peermem_boot), which the role's boot step settles after this call)
    is also a warning: not fatal here, the health gate holds the node.
  - "O(state=present): loads nvidia-peermem when O(method=peermem) and it is not loaded (a failed load
    fails the task before anything else changed: on Linux's own ib_core, without MLNX_OFED, nvidia-peermem
    refuses to load with EINVAL); with O(acs=disable) clears the ACS control register of each port on a
    GPU<->NIC path that redirects peer traffic (C(setpci -s PORT ECAP_ACS+6.w=0000)), then reads lspci
    again. Findings are those left after that. The boot list and the boot unit are the role's files."
  - "Fails closed: with O(acs=disable), ports lspci cannot read (lspci missing or failing, or not run
    as root: no PCI Express capability shown) fail the task before any change; with O(state=check)
    they are a C(gpudirect_acs_not_run) finding. A setpci that fails part-way reports the ports already cleared."
  - ACS is never cleared while the IOMMU translates the GPUs' or NICs' DMA (peer requests turning in the
    switch would bypass the translation); R(ports) is then empty and the finding names the IOMMU.
  - "Linux sets ACS again when it restores a port's state (after a reset or an AER recovery): the health
    gate then reports it until the next boot or run. The kernel's C(pci=disable_acs_redir=) parameter
    (Linux 5.1+) survives those; rackforge does not change the boot loader."
  - IOMMU mode is a kernel command line setting (iommu=pt, or the IOMMU off); it is reported, never changed.
  - Outside /sys (a simulator's or a chroot's tree) lspci and setpci are given
    C(-A linux-sysfs -O sysfs.path=<sysfs_root>/bus/pci), pciutils' own sysfs access method.
options:
  method:
    description:
      - How the NIC reaches GPU memory. C(peermem) (nvidia-peermem over MLNX_OFED's peer-memory API)
        or C(dmabuf) (Linux 5.12+ with NVIDIA's open kernel module).
    type: str
    required: true
    choices: [peermem, dmabuf]
  state:
    description: C(check) reads only; C(present) applies what O(method) and O(acs) allow.
    type: str
    default: check
    choices: [check, present]
  acs:
    description: C(disable) clears ACS on the GPU<->NIC ports (state=present); C(check) only reports it.
    type: str
    default: check
    choices: [check, disable]
  gpu_pci_ids:
    description: GPU vendor:device ids; empty = every NVIDIA display/3D controller.
    type: list
    elements: str
    default: []
  nic_pci_ids:
    description: RDMA NIC vendor:device ids; empty = every Mellanox Ethernet/InfiniBand controller.
    type: list
    elements: str
    default: []
  sysfs_root:
    description: sysfs root.
    type: path
    default: /sys
  modules_load_dirs:
    description:
      - Where the modules loaded at boot are listed, in systemd-modules-load's order (a directory's
        *.conf, an earlier one hiding a later one of the same name) and files such as Debian's /etc/modules.
    type: list
    elements: path
    default:
      - /etc/modules-load.d
      - /run/modules-load.d
      - /usr/local/lib/modules-load.d
      - /usr/lib/modules-load.d
      - /lib/modules-load.d
      - /etc/modules
  proc_root:
    description: procfs root (the running kernel's release, sys/kernel/osrelease).
    type: path
    default: /proc
author: rackforge
"""

EXAMPLES = r"""
- name: GPUDirect RDMA over the inbox RDMA stack, ACS cleared on the GPU<->NIC switch ports
  gpudirect_rdma:
    method: dmabuf
    state: present
    acs: disable
    gpu_pci_ids: ["10de:2330"]
    nic_pci_ids: ["15b3:1021"]
"""

RETURN = r"""
findings:
  description: What still stands in GPUDirect RDMA's way (check, component, expected, observed, message).
  returned: always
  type: list
  elements: dict
pairs:
  description: Each GPU and NIC behind one switch, with the ports between them.
  returned: always
  type: list
  elements: dict
ports:
  description:
    - Every port on a GPU<->NIC path that has an ACS capability, when O(acs=disable) may clear it
      (the boot unit's list); empty otherwise.
  returned: always
  type: list
  elements: str
pci_access:
  description: The access arguments lspci/setpci were given ([] on /sys).
  returned: always
  type: list
  elements: str
actions:
  description: The commands run (or, in check mode, that would run).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge.gpudirect_host import ARGS, gpudirect_host


def main():
    module = AnsibleModule(argument_spec=ARGS, supports_check_mode=True)
    result = gpudirect_host(module, module.params)
    if module.params["state"] == "present":
        # what still stands in the way is not fatal here (the health gate holds the node): said as a
        # warning; nvidia-peermem's boot entry is written after this call, by the role's boot step
        for finding in result["findings"]:
            if finding["check"] != "gpudirect_peermem_boot":
                module.warn(finding["message"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
