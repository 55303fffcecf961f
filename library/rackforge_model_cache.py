#!/usr/bin/python
"""Ansible module: the local NVMe model cache's RAID0 array and xfs filesystem, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: rackforge_model_cache
short_description: The local NVMe model cache's md RAID0 array, its xfs filesystem and its mdadm.conf line
description:
  - Reads the node once (C(lsblk -J -b), C(/proc/mdstat), C(mdadm --detail --brief /dev/md/<name>),
    mdadm.conf) and decides (module_utils/rackforge/model_cache.py plan); a node whose cache is in
    place runs nothing else.
  - The disks are the whole NVMe disks whose model and serial match one of C(devices) (globs),
    never a C(/dev/nvmeXn1) number, which can change between boots. A disk holding the root
    filesystem, anything mounted or an assembled array is refused; one with a partition table
    or a filesystem rackforge did not make is refused unless C(wipe_ok) (then C(wipefs -a)).
  - A new array is C(mdadm --create /dev/md/<name> --run --level=0 --metadata=1.2) over the disks
    in serial order, then C(mkfs.xfs -L <label>) (once: an array with xfs is never formatted
    again). Disks that are already the array's members (not assembled) are assembled instead.
    An assembled array is only kept as it is: members other than the matching disks, a member
    gone from the node, or an inactive array fail the task naming them, with nothing changed.
  - Its line in mdadm.conf (as C(mdadm --detail --brief) prints it) replaces any line for the same
    device or UUID; when mdadm.conf changes, C(update-initramfs -u) runs (Debian), so the
    initramfs assembles the array with the same name.
  - The filesystem is mounted by a systemd mount unit the role writes (roles/model_storage).
  - Check mode changes nothing and returns the same C(actions).
options:
  devices:
    description: Patterns of the cache's disks, each C({model: glob, serial: glob}) (a missing key matches anything).
    type: list
    elements: dict
    required: true
  count: {description: The number of disks the patterns must match (0 - any number)., type: int, default: 0}
  name: {description: "The array's name: /dev/md/<name>.", type: str, default: rackforge_cache}
  label: {description: The xfs label (12 characters at most)., type: str, default: rfcache}
  chunk_kb: {description: The RAID0 chunk size in KiB., type: int, default: 512}
  wipe_ok: {description: Erase a partition table or filesystem rackforge did not make on a matching disk., type: bool, default: false}
  mdadm_conf: {description: mdadm's configuration file., type: path, default: /etc/mdadm/mdadm.conf}
  proc_mdstat: {description: Where the kernel lists its md arrays., type: path, default: /proc/mdstat}
  dev_root: {description: Where the device nodes are (/dev/md/<name> is looked up under it)., type: path, default: /dev}
"""

RETURN = r"""
actions: {description: What was done (or would be) in order., type: list, returned: always}
members: {description: The array's disks (kernel names, serial order)., type: list, returned: always}
device: {description: The array's device (/dev/md/<name>)., type: str, returned: always}
array_line: {description: The ARRAY line of mdadm.conf (empty in check mode before the array exists)., type: str, returned: always}
initramfs: {description: "updated, unchanged, would update, or not installed (no update-initramfs).", type: str, returned: always}
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV, read_file
from ansible.module_utils.rackforge.mdstat import ParseError, parse_mdstat
from ansible.module_utils.rackforge.model_cache import mdadm_conf, parse_lsblk, plan
from ansible.module_utils.rackforge.rootfiles import commit_or_fail, queue
from ansible.module_utils.rackforge.units import PlanError

LSBLK_COLUMNS = "NAME,TYPE,MODEL,SERIAL,SIZE,FSTYPE,PTTYPE,MOUNTPOINTS"
NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


class Node:
    def __init__(self, module):
        self.module = module
        self.done = []

    def run(self, argv, what):
        rc, out, err = self.module.run_command(argv, environ_update=C_ENV)
        if rc != 0:
            self.module.fail_json(
                msg="rackforge_model_cache: %s failed (rc %d): %s" % (what, rc, (err or out).strip()),
                rc=rc, stdout=out, stderr=err, actions=self.done,
            )  # fmt: skip
        return out

    def tool(self, name):
        return self.module.get_bin_path(name, required=True)


def main():
    module = AnsibleModule(
        argument_spec={
            "devices": {"type": "list", "elements": "dict", "required": True},
            "count": {"type": "int", "default": 0},
            "name": {"type": "str", "default": "rackforge_cache"},
            "label": {"type": "str", "default": "rfcache"},
            "chunk_kb": {"type": "int", "default": 512},
            "wipe_ok": {"type": "bool", "default": False},
            "mdadm_conf": {"type": "path", "default": "/etc/mdadm/mdadm.conf"},
            "proc_mdstat": {"type": "path", "default": "/proc/mdstat"},
            "dev_root": {"type": "path", "default": "/dev"},
        },
        supports_check_mode=True,
    )
    p, check = module.params, module.check_mode
    bad = [d for d in p["devices"] if not d or set(d) - {"model", "serial"} or not all(isinstance(v, str) and v for v in d.values())]
    if not p["devices"] or bad:
        module.fail_json(
            msg="rackforge_model_cache: devices must be a non-empty list of {model: glob, serial: glob} (got %r)" % (bad or [])
        )
    if (
        not NAME_RE.match(p["name"])
        or not 0 < len(p["label"]) <= 12
        or p["count"] < 0
        or p["chunk_kb"] < 4
        or p["chunk_kb"] & (p["chunk_kb"] - 1)
    ):
        module.fail_json(
            msg="rackforge_model_cache: name must be 1-32 of [A-Za-z0-9_-], label 1-12 characters, count >= 0, chunk_kb a power of two >= 4"
        )
    node = Node(module)
    device = "/dev/md/" + p["name"]

    # the one read
    try:
        devices = parse_lsblk(node.run([node.tool("lsblk"), "-J", "-b", "-o", LSBLK_COLUMNS], "lsblk"))
        arrays = parse_mdstat(read_file(p["proc_mdstat"]))["arrays"] if os.path.exists(p["proc_mdstat"]) else {}
    except (ValueError, ParseError) as exc:
        module.fail_json(msg="rackforge_model_cache: %s" % exc)
    link = os.path.join(p["dev_root"], "md", p["name"])
    md = os.path.basename(os.path.realpath(link)) if os.path.exists(link) else None
    decided = plan(devices, arrays, md, p["devices"], p["count"], p["wipe_ok"])
    result = {"members": decided["members"], "device": device, "array_line": "", "initramfs": "unchanged"}
    if decided["problems"]:
        module.fail_json(msg="rackforge_model_cache: " + "; ".join(decided["problems"]) + ": nothing was changed", actions=[], **result)

    # the difference only
    disks = ["/dev/" + name for name in decided["members"]]
    for step, arg in decided["steps"]:
        if step == "wipe":
            for name in arg:
                if not check:
                    node.run([node.tool("wipefs"), "-a", "/dev/" + name], "wipefs -a /dev/" + name)
                node.done.append("wipe /dev/%s" % name)
        elif step == "create":
            if not check:  # (the tools are looked up only to run: a node checked before its first run has no mdadm yet)
                argv = [node.tool("mdadm"), "--create", device, "--run", "--level=0", "--raid-devices=%d" % len(disks)]
                argv += ["--metadata=1.2", "--chunk=%d" % p["chunk_kb"], "--name=" + p["name"], *disks]
                node.run(argv, "mdadm --create")
            node.done.append("create %s (RAID0 over %s)" % (device, ", ".join(disks)))
        elif step == "assemble":
            if not check:
                node.run([node.tool("mdadm"), "--assemble", device, *disks], "mdadm --assemble")
            node.done.append("assemble %s from %s" % (device, ", ".join(disks)))
        elif step == "mkfs":
            if not check:
                node.run([node.tool("mkfs.xfs"), *(["-f"] if arg else []), "-L", p["label"], device], "mkfs.xfs")
            node.done.append("mkfs.xfs -L %s %s" % (p["label"], device))

    # mdadm.conf: the array's line as mdadm prints it (none yet in check mode before a create)
    writes, diff = [], []
    if not (check and any(s in ("create", "assemble") for s, _ in decided["steps"])):
        line = node.run([node.tool("mdadm"), "--detail", "--brief", device], "mdadm --detail --brief").strip()
        result["array_line"] = line
        try:
            if queue(p["mdadm_conf"], mdadm_conf(read_file(p["mdadm_conf"]), line, device), writes, diff):
                node.done.append("write %s" % p["mdadm_conf"])
        except PlanError as exc:
            module.fail_json(msg="rackforge_model_cache: %s" % exc, actions=node.done, **result)
    else:
        node.done.append("write %s" % p["mdadm_conf"])
    commit_or_fail(module, "rackforge_model_cache", writes)
    if writes or (check and "write %s" % p["mdadm_conf"] in node.done):
        initramfs = module.get_bin_path("update-initramfs")
        if not initramfs:
            result["initramfs"] = "not installed"
            module.warn("update-initramfs is not installed: the initramfs was not updated (udev assembles the array at boot)")
        elif check:
            result["initramfs"] = "would update"
        else:
            node.run([initramfs, "-u"], "update-initramfs -u")
            result["initramfs"] = "updated"
        if initramfs:
            node.done.append("update-initramfs -u")
    module.exit_json(changed=bool(node.done), actions=node.done, diff=diff, **result)


if __name__ == "__main__":
    main()
