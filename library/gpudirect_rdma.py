#!/usr/bin/python
from __future__ import annotations

DOCUMENTATION = r"""
module: gpudirect_rdma
short_description: Read, decide and apply the GPUDirect RDMA prerequisites (peer path, ACS, IOMMU, peer memory)
description:
  - Reads the PCI hierarchy under O(sysfs_root) (which GPUs and RDMA NICs sit behind one PCIe switch,
    and the ports between them), C(lspci -D -vvv) (ACS control of those ports), each device's IOMMU
    group type, and the peer-memory path of O(method). The rules are module_utils/rackforge/gpudirect.py.
  - O(state=check) changes nothing and returns the findings (the health gate).
  - "O(state=present): loads nvidia-peermem when O(method=peermem) and it is not loaded (a failed load
    fails the task before anything else changed: on Linux's own ib_core, without MLNX_OFED, nvidia-peermem
    refuses to load with EINVAL); with O(acs=disable) clears the ACS control register of each port on a
    GPU<->NIC path that redirects peer traffic (C(setpci -s PORT ECAP_ACS+6.w=0000)), then reads lspci
    again. Findings are those left after that. The boot list and the boot unit are the role's files."
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
    description: Directories whose *.conf list the modules loaded at boot (systemd-modules-load), and Debian's /etc/modules.
    type: list
    elements: path
    default: [/etc/modules-load.d, /run/modules-load.d, /usr/lib/modules-load.d, /lib/modules-load.d]
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
  description: Every port on a GPU<->NIC path that has an ACS capability (the boot unit's list).
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

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV, read_file
from ansible.module_utils.rackforge.gpudirect import PEERMEM_CLIENT, acs_ports, evaluate, lookup, pairs
from ansible.module_utils.rackforge.hardware import pci_id
from ansible.module_utils.rackforge.health import not_run
from ansible.module_utils.rackforge.pci import ParseError, parse_lspci_vv

PEERMEM = "nvidia_peermem"


def devices(sysfs_root, gpu_ids, nic_ids):
    """({gpu bdf: sysfs path}, {nic bdf: sysfs path}, {bdf: iommu group type or None})."""
    base = os.path.join(sysfs_root, "bus", "pci", "devices")
    gpus, nics, iommu = {}, {}, {}
    for bdf in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        dev = os.path.join(base, bdf)
        ident = pci_id(read_file(os.path.join(dev, "vendor"), ""), read_file(os.path.join(dev, "device"), ""))
        klass = read_file(os.path.join(dev, "class"), "")
        if (ident in gpu_ids) if gpu_ids else (ident.startswith("10de:") and klass[:6] in ("0x0302", "0x0300")):
            gpus[bdf] = os.path.realpath(dev)
        elif (ident in nic_ids) if nic_ids else (ident.startswith("15b3:") and klass[:6] in ("0x0200", "0x0207")):
            nics[bdf] = os.path.realpath(dev)
        else:
            continue
        group = os.path.join(dev, "iommu_group")
        iommu[bdf] = (read_file(os.path.join(group, "type"), "unknown") or "unknown") if os.path.exists(group) else None
    return gpus, nics, iommu


def at_boot(dirs, name):
    """True when a modules-load.d file (or /etc/modules) lists the module."""
    files = ["/etc/modules"]
    for d in dirs:
        if os.path.isdir(d):
            files += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".conf")]
    for path in files:
        for line in (read_file(path, "") or "").splitlines():
            word = line.split("#", 1)[0].strip()
            if word.replace("-", "_") == name:
                return True
    return False


def main():
    module = AnsibleModule(
        argument_spec={
            "method": {"type": "str", "required": True, "choices": ["peermem", "dmabuf"]},
            "state": {"type": "str", "default": "check", "choices": ["check", "present"]},
            "acs": {"type": "str", "default": "check", "choices": ["check", "disable"]},
            "gpu_pci_ids": {"type": "list", "elements": "str", "default": []},
            "nic_pci_ids": {"type": "list", "elements": "str", "default": []},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "modules_load_dirs": {
                "type": "list",
                "elements": "path",
                "default": ["/etc/modules-load.d", "/run/modules-load.d", "/usr/lib/modules-load.d", "/lib/modules-load.d"],
            },
        },
        supports_check_mode=True,
    )
    p = module.params
    root = p["sysfs_root"].rstrip("/") or "/"
    access = [] if root == "/sys" else ["-A", "linux-sysfs", "-O", "sysfs.path=%s/bus/pci" % root]
    gpus, nics, iommu = devices(root, [i.lower() for i in p["gpu_pci_ids"]], [i.lower() for i in p["nic_pci_ids"]])
    found = pairs(gpus, nics)
    actions = []
    changed = False
    result = {"pairs": found, "pci_access": access, "actions": actions}

    lspci_bin = module.get_bin_path("lspci")

    def read_lspci():
        argv = [lspci_bin, *access, "-D", "-vvv"]
        rc, out, err = module.run_command(argv, environ_update=C_ENV)
        if rc != 0:
            return None, not_run("gpudirect_acs", "lspci", "lspci exited %s" % rc, {"command": " ".join(argv), "stderr": err[-2000:]})
        try:
            return parse_lspci_vv(out), None
        except ParseError as exc:
            return None, not_run("gpudirect_acs", "lspci", str(exc), {"command": " ".join(argv), "stdout": out[-2000:]})

    lspci, problem = {}, None
    if found:
        if not lspci_bin:
            problem = not_run("gpudirect_acs", "lspci", "lspci is not installed (pciutils)")
        else:
            lspci, problem = read_lspci()
            lspci = lspci or {}
    # the ports with an ACS capability on any GPU<->NIC path (for the boot unit), in bus order
    ports = sorted({port for pair in found for port in pair["ports"] if (lookup(lspci, port) or {}).get("acs_ctl") is not None})

    if p["state"] == "present":
        if p["method"] == "peermem" and not os.path.isdir(os.path.join(root, "module", PEERMEM)):
            argv = [module.get_bin_path("modprobe", required=True), "nvidia-peermem"]
            actions.append(" ".join(argv))
            changed = True
            if not module.check_mode:
                rc, out, err = module.run_command(argv, environ_update=C_ENV)
                if rc != 0:
                    module.fail_json(
                        msg="gpudirect_rdma: modprobe nvidia-peermem failed (rc %s): %s. nvidia-peermem needs MLNX_OFED's "
                        "ib_core (its peer-memory API); on Linux's own RDMA stack set the hardware profile's "
                        "gpudirect_rdma to dmabuf (Linux 5.12+, the open NVIDIA kernel module). Nothing was changed."
                        % (rc, (err or out).strip()),
                        rc=rc,
                        stdout=out,
                        stderr=err,
                        **result,
                    )
        blocking = acs_ports(found, lspci) if p["acs"] == "disable" and problem is None else {}
        if blocking:
            setpci = module.get_bin_path("setpci", required=True)
            for port in sorted(blocking):
                argv = [setpci, *access, "-s", port, "ECAP_ACS+6.w=0000"]
                actions.append(" ".join(argv))
                if not module.check_mode:
                    rc, out, err = module.run_command(argv, environ_update=C_ENV)
                    if rc != 0:
                        module.fail_json(
                            msg="gpudirect_rdma: %s failed (rc %s): %s" % (" ".join(argv), rc, (err or out).strip()),
                            rc=rc,
                            stdout=out,
                            stderr=err,
                            **result,
                        )
            changed = True
            if not module.check_mode:
                lspci, problem = read_lspci()
                lspci = lspci or {}

    peermem = {
        "loaded": os.path.isdir(os.path.join(root, "module", PEERMEM)),
        "registered": os.path.isfile(os.path.join(root, "kernel", "mm", "memory_peers", PEERMEM_CLIENT, "version")),
        "at_boot": at_boot(p["modules_load_dirs"], PEERMEM),
    }
    dmabuf = {
        "kernel": os.uname().release,
        "nvidia_loaded": os.path.isdir(os.path.join(root, "module", "nvidia")),
        "taint": read_file(os.path.join(root, "module", "nvidia", "taint"), ""),
    }
    if module.check_mode and changed and p["method"] == "peermem":
        peermem["loaded"] = True  # what the load would give; registration is only known after it
    findings = evaluate(p["method"], gpus, nics, lspci, iommu, peermem=peermem, dmabuf=dmabuf)
    if problem is not None:
        findings = [f for f in findings if f["check"] != "gpudirect_acs"] + [problem]
    module.exit_json(changed=changed, findings=findings, ports=ports, peermem=peermem, dmabuf=dmabuf, iommu=iommu, **result)


if __name__ == "__main__":
    main()
