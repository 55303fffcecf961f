"""What gpudirect_rdma reads and does on a host (the GPUs and NICs in sysfs, ACS of the switch ports
between them, nvidia-peermem or DMA-BUF), as a function both that module and rackforge_health (state
check: read-only) call: gpudirect_host(module, params) -> the result dict. ARGS: the parameters and
defaults."""

from __future__ import annotations

import os

from ansible.module_utils.rackforge import C_ENV, read_file
from ansible.module_utils.rackforge.gpudirect import (
    PEERMEM_CLIENT,
    acs_ports,
    evaluate,
    lookup,
    pairs,
    translating,
    unreadable_ports,
)
from ansible.module_utils.rackforge.hardware import pci_id
from ansible.module_utils.rackforge.health import not_run
from ansible.module_utils.rackforge.pci import ParseError, parse_lspci_vv

PEERMEM = "nvidia_peermem"
# systemd-modules-load's directories, in its precedence order, and Debian's /etc/modules
MODULES_LOAD = [
    "/etc/modules-load.d",
    "/run/modules-load.d",
    "/usr/local/lib/modules-load.d",
    "/usr/lib/modules-load.d",
    "/lib/modules-load.d",
    "/etc/modules",
]


def devices(sysfs_root, gpu_ids, nic_ids):
    """({gpu bdf: sysfs path}, {nic bdf: sysfs path}, {bdf: iommu group type, "unknown" or None}).
    SR-IOV virtual functions (a physfn link) are left out: the physical function is the rail."""
    base = os.path.join(sysfs_root, "bus", "pci", "devices")
    gpus, nics, iommu = {}, {}, {}
    for bdf in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        dev = os.path.join(base, bdf)
        if os.path.lexists(os.path.join(dev, "physfn")):
            continue
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


def at_boot(paths, name):
    """True when a modules-load.d file (or a file such as /etc/modules) lists the module. A
    file in an earlier directory hides one of the same name in a later one (systemd's order);
    '#' and ';' start comments."""
    seen, files = set(), []
    for path in paths:
        if os.path.isdir(path):
            for f in sorted(os.listdir(path)):
                if f.endswith(".conf") and f not in seen:
                    seen.add(f)
                    files.append(os.path.join(path, f))
        elif os.path.isfile(path):
            files.append(path)
    for path in files:
        for line in (read_file(path, "") or "").splitlines():
            word = line.strip()
            if word[:1] in ("#", ";"):
                continue
            if word.replace("-", "_") == name:
                return True
    return False


ARGS = {
    "method": {"type": "str", "required": True, "choices": ["peermem", "dmabuf"]},
    "state": {"type": "str", "default": "check", "choices": ["check", "present"]},
    "acs": {"type": "str", "default": "check", "choices": ["check", "disable"]},
    "gpu_pci_ids": {"type": "list", "elements": "str", "default": []},
    "nic_pci_ids": {"type": "list", "elements": "str", "default": []},
    "sysfs_root": {"type": "path", "default": "/sys"},
    "proc_root": {"type": "path", "default": "/proc"},
    "modules_load_dirs": {"type": "list", "elements": "path", "default": MODULES_LOAD},
}


def gpudirect_host(module, p):
    root = p["sysfs_root"].rstrip("/") or "/"
    access = [] if root == "/sys" else ["-A", "linux-sysfs", "-O", "sysfs.path=%s/bus/pci" % root]
    gpus, nics, iommu = devices(root, [i.lower() for i in p["gpu_pci_ids"]], [i.lower() for i in p["nic_pci_ids"]])
    found = pairs(gpus, nics)
    actions = []
    result = {"pairs": found, "pci_access": access, "actions": actions, "ports": []}
    lspci_bin = module.get_bin_path("lspci")
    present = p["state"] == "present"

    def read_lspci():
        """(parsed lspci, None) or ({}, a not_run finding, with the command's output)."""
        if not lspci_bin:
            return {}, not_run("gpudirect_acs", "lspci", "lspci is not installed (pciutils)")
        argv = [lspci_bin, *access, "-D", "-vvv"]
        rc, out, err = module.run_command(argv, environ_update=C_ENV)
        evidence = {"command": " ".join(argv), "rc": rc, "stdout": out[-2000:], "stderr": err[-2000:]}
        if rc != 0:
            return {}, not_run("gpudirect_acs", "lspci", "lspci exited %s" % rc, evidence)
        try:
            return parse_lspci_vv(out), None
        except ParseError as exc:
            return {}, not_run("gpudirect_acs", "lspci", str(exc), evidence)

    lspci, problem = read_lspci() if found else ({}, None)
    unreadable = unreadable_ports(found, lspci) if lspci else []
    if present and p["acs"] == "disable" and (problem or unreadable) and module.check_mode:
        # a check-mode run on a fresh node: pciutils is among what the run would install
        module.warn("gpudirect_rdma: ACS of the GPU<->NIC switch ports not read in check mode: %s" % (problem or {}).get("observed"))
    elif present and p["acs"] == "disable" and (problem or unreadable):
        # the ports are unknown: neither clear ACS nor let the role drop the boot unit
        module.fail_json(
            msg="gpudirect_rdma: cannot read ACS of the GPU<->NIC switch ports (%s); nothing was changed"
            % ((problem or {}).get("observed") or "unreadable: %s" % ", ".join(unreadable)),
            rc=(problem or {}).get("evidence", {}).get("rc"),
            stdout=(problem or {}).get("evidence", {}).get("stdout", ""),
            stderr=(problem or {}).get("evidence", {}).get("stderr", ""),
            **result,
        )
    # ACS is cleared only where the IOMMU does not translate: under translation, peer requests
    # turning in the switch would bypass it
    clear_acs = p["acs"] == "disable" and not translating(gpus, nics, iommu)
    if clear_acs:
        result["ports"] = sorted(
            {port for pair in found for port in pair["ports"] if (lookup(lspci, port) or {}).get("acs_ctl") is not None}
        )
    pending = set()

    if present and p["method"] == "peermem" and not os.path.isdir(os.path.join(root, "module", PEERMEM)):
        argv = [module.get_bin_path("modprobe", required=True), "nvidia-peermem"]
        actions.append(" ".join(argv))
        pending.add("peermem")
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
    blocking = acs_ports(found, lspci) if present and clear_acs else {}
    if blocking:
        setpci = module.get_bin_path("setpci", required=True)
        applied = []
        for port in sorted(blocking):
            argv = [setpci, *access, "-s", port, "ECAP_ACS+6.w=0000"]
            actions.append(" ".join(argv))
            if module.check_mode:
                continue
            rc, out, err = module.run_command(argv, environ_update=C_ENV)
            if rc != 0:
                module.fail_json(
                    msg="gpudirect_rdma: %s failed (rc %s): %s; ACS already cleared on: %s"
                    % (" ".join(argv), rc, (err or out).strip(), ", ".join(applied) or "none"),
                    rc=rc,
                    stdout=out,
                    stderr=err,
                    changed=bool(applied) or "peermem" in pending,
                    cleared=applied,
                    **result,
                )
            applied.append(port)
        pending.add("acs")
        if not module.check_mode:
            lspci, problem = read_lspci()

    peermem = {
        "loaded": os.path.isdir(os.path.join(root, "module", PEERMEM)),
        "registered": os.path.isfile(os.path.join(root, "kernel", "mm", "memory_peers", PEERMEM_CLIENT, "version")),
        "at_boot": at_boot(p["modules_load_dirs"], PEERMEM),
    }
    dmabuf = {
        "kernel": read_file(os.path.join(p["proc_root"], "sys", "kernel", "osrelease"), "") or os.uname().release,
        "nvidia_loaded": os.path.isdir(os.path.join(root, "module", "nvidia")),
        "taint": read_file(os.path.join(root, "module", "nvidia", "taint"), ""),
    }
    findings = evaluate(p["method"], gpus, nics, lspci, iommu, peermem=peermem, dmabuf=dmabuf)
    if module.check_mode:
        # what the pending actions would settle is not reported as standing in the way
        findings = [
            f
            for f in findings
            if not (f["check"] == "gpudirect_peermem" and "peermem" in pending)
            and not (f["check"] == "gpudirect_acs" and "acs" in pending and f.get("evidence", {}).get("port") in blocking)
        ]
    if problem is not None:
        findings = [f for f in findings if f["check"] != "gpudirect_acs"] + [problem]
    return dict(changed=bool(pending), findings=findings, peermem=peermem, dmabuf=dmabuf, iommu=iommu, **result)
