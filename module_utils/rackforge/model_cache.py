"""Pure decisions of the local NVMe model cache (no I/O): which disks, the md RAID0 over them, its
filesystem, its line in mdadm.conf and its mount unit. library/rackforge_model_cache.py reads the
node (lsblk, /proc/mdstat, mdadm, mdadm.conf) and acts on what plan() decides.

Public API:

- parse_lsblk(text) -> [dict]: `lsblk -J -b -o NAME,TYPE,MODEL,SERIAL,SIZE,FSTYPE,PTTYPE,MOUNTPOINTS`
  (util-linux 2.38, Debian 12) flattened: {name, type, model, serial, size, fstype, pttype,
  mountpoints, parent}. An md array under several members appears once per member.
- matching_disks(devices, patterns) -> [device]: the whole NVMe disks whose model and serial match
  a pattern ({"model": glob, "serial": glob}, a missing key matches anything), in serial order (a
  stable identity: /dev/nvmeXn1 numbers change between boots).
- select_cache_devices(devices, patterns, wipe_ok=False, ours=()) -> {"selected", "problems"}:
  the matching disks a new array may use; a disk that holds the root filesystem, anything
  mounted, an assembled md array, a partition table or a filesystem rackforge did not make (ours:
  signatures it may reuse) is a problem, unless wipe_ok allows the last two.
- plan(devices, arrays, md, patterns, count, wipe_ok) -> {"problems", "steps", "members", "md"}:
  arrays is parse_mdstat(...)["arrays"], md the kernel name (md127) /dev/md/<name> points at, or
  None. steps, in order: ("wipe", [disk]), ("create", [disk]) or ("assemble", [disk]), ("mkfs", force).
  An array in /proc/mdstat (by that name, or one a matching disk is in) is kept only as it is: all
  its members present and matching the patterns and nothing else, active, not degraded; anything
  else is a problem and nothing is done. A member listed but gone from lsblk is a broken RAID0
  (Debian 12's 6.1 kernel still prints such an array "active").
- mdadm_conf(text, line, device) -> str: mdadm.conf with the array's ARRAY line (the one
  `mdadm --detail --brief` prints) in place of any line for the same device or UUID.
- cache_mount_unit(device, where, options) -> str: the systemd .mount unit of the cache filesystem.
- pattern_problems(patterns) -> [why]: the patterns are not a list of {model: glob, serial: glob}
  (non-empty strings, at least one of the two keys, no other key).
"""

from __future__ import annotations

import fnmatch
import json


def parse_lsblk(text):
    """`lsblk -J -b -o NAME,TYPE,MODEL,SERIAL,SIZE,FSTYPE,PTTYPE,MOUNTPOINTS` -> flat list, each
    child with its parent's name; ValueError when the text is not that JSON."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError("lsblk printed no JSON: %s" % exc) from None
    if not isinstance(data, dict) or not isinstance(data.get("blockdevices"), list):
        raise ValueError("lsblk JSON has no blockdevices list")
    out = []

    def walk(node, parent):
        if not isinstance(node, dict) or "name" not in node or "type" not in node:
            raise ValueError("lsblk entry without name or type: %r" % (node,))
        mounts = node.get("mountpoints", [node.get("mountpoint")])
        out.append(
            {
                "name": node["name"],
                "type": node["type"],
                "model": (node.get("model") or "").strip() or None,
                "serial": (node.get("serial") or "").strip() or None,
                "size": int(node.get("size") or 0),
                "fstype": node.get("fstype"),
                "pttype": node.get("pttype"),
                "mountpoints": [m for m in mounts or [] if m],
                "parent": parent,
            }
        )
        for child in node.get("children") or []:
            walk(child, node["name"])

    for node in data["blockdevices"]:
        walk(node, None)
    return out


def _descendants(devices, name):
    kids = [d for d in devices if d["parent"] == name]
    return kids + [k for kid in kids for k in _descendants(devices, kid["name"])]


def _label(dev):
    return "%s (model %s, serial %s)" % (dev["name"], dev["model"], dev["serial"])


def matching_disks(devices, patterns):
    """The whole NVMe disks a pattern matches, in serial order."""
    found = [
        d
        for d in devices
        if d["type"] == "disk"
        and d["name"].startswith("nvme")
        and any(
            fnmatch.fnmatchcase(d["model"] or "", p.get("model") or "*") and fnmatch.fnmatchcase(d["serial"] or "", p.get("serial") or "*")
            for p in patterns
        )
    ]
    return sorted(found, key=lambda d: (d["serial"] or "", d["name"]))


def _in_use(devices, dev):
    """Why a disk can never be a cache disk (the root filesystem or another mount on it), or None."""
    below = _descendants(devices, dev["name"])
    mounts = dev["mountpoints"] + [m for d in below for m in d["mountpoints"]]
    if "/" in mounts:
        return "%s holds the root filesystem: never a cache device" % _label(dev)
    if mounts:
        return "%s is in use (mounted at %s)" % (_label(dev), ", ".join(sorted(set(mounts))))
    return None


def select_cache_devices(devices, patterns, wipe_ok=False, ours=()):
    """The cache's disks for a new array (see the module docstring): {"selected", "problems"}."""
    selected, problems = [], []
    for dev in matching_disks(devices, patterns):
        below = _descendants(devices, dev["name"])
        why = _in_use(devices, dev)
        if why:
            problems.append(why)
            continue
        arrays = sorted({d["name"] for d in below if d["type"].startswith(("raid", "linear"))})
        if arrays:
            problems.append("%s is a member of the assembled array %s: stop it first" % (_label(dev), ", ".join(arrays)))
            continue
        signature = dev["pttype"] or dev["fstype"]
        if signature and dev["fstype"] not in ours and not wipe_ok:
            problems.append(
                "%s holds a %s that rackforge did not make; set model_storage_wipe_ok: true to let it be erased"
                % (_label(dev), "partition table (%s)" % dev["pttype"] if dev["pttype"] else "filesystem (%s)" % dev["fstype"])
            )
            continue
        selected.append(dev)
    if not selected and not problems:
        problems.append("no NVMe disk matches the patterns %s" % json.dumps(patterns, sort_keys=True))
    return {"selected": selected, "problems": problems}


def _found(devices):
    disks = [_label(d) for d in devices if d["type"] == "disk" and d["name"].startswith("nvme")]
    return "; the node has " + (", ".join(disks) if disks else "no NVMe disk")


def _filesystem_step(fstype, wipe_ok, where):
    if fstype is None:
        return [("mkfs", False)], []
    if fstype == "xfs":
        return [], []
    if wipe_ok:
        return [("mkfs", True)], []
    return [], [
        "%s holds a %s filesystem that rackforge did not make; set model_storage_wipe_ok: true to let it be erased" % (where, fstype)
    ]


def _plan(problems=(), steps=(), members=(), md=None):
    return {"problems": list(problems), "steps": list(steps), "members": list(members), "md": md}


def plan(devices, arrays, md, patterns, count, wipe_ok):
    """What to do for the cache array (see the module docstring)."""
    matched = matching_disks(devices, patterns)
    want = [d["name"] for d in matched]
    if not (md and md in arrays):  # not running under its name: an array the matching disks are in (inactive after a boot)
        md = next((name for name, a in sorted(arrays.items()) if {d["name"] for d in a["devices"]} & set(want)), None)
    if md:
        array = arrays[md]
        members = sorted(d["name"] for d in array["devices"])
        gone = sorted(set(members) - {d["name"] for d in devices if d["type"] == "disk"})
        problems = []
        if gone:
            problems.append(
                "the cache array %s has lost %s (gone from the node; a RAID0 without a member is broken, its data lost):"
                " replace the disk and rebuild the array" % (md, ", ".join(gone))
            )
        elif array["state"] != "active" or array["degraded"]:
            problems.append(
                "the cache array %s is %s (members present: %s): a disk is missing or failed; replace it and rebuild the"
                " array (its data is lost: RAID0)"
                % (md, array["state"] + (", degraded" if array["degraded"] else ""), ", ".join(members) or "none")
            )
        elif set(members) != set(want):
            problems += [why for why in (_in_use(devices, d) for d in matched if d["name"] not in members) if why]
            problems.append(
                "the cache array %s is made of %s, but model_storage_cache_devices match %s%s: to rebuild it, stop it and wipe"
                " its members" % (md, ", ".join(members), ", ".join(want) or "no disk", _found(devices))
            )
        elif count and len(members) != count:
            problems.append("the cache array %s has %d members; model_storage_cache_device_count is %d" % (md, len(members), count))
        if problems:
            return _plan(problems, members=members, md=md)
        fstype = next((d["fstype"] for d in devices if d["name"] == md), None)
        steps, problems = _filesystem_step(fstype, wipe_ok, "the cache array %s" % md)
        return _plan(problems, steps, members, md)
    if not matched:
        return _plan(["model_storage_cache_devices %s match no NVMe disk%s" % (json.dumps(patterns, sort_keys=True), _found(devices))])
    if count and len(matched) != count:
        why = "model_storage_cache_devices match %d disks (%s); model_storage_cache_device_count is %d: a disk is missing, or the"
        why += " patterns match too much%s"
        return _plan([why % (len(matched), ", ".join(want), count, _found(devices))], members=want)
    ours = [d for d in matched if d["fstype"] == "linux_raid_member" and not d["pttype"]]
    if len(ours) == len(matched):  # the array's own members, not assembled (after a reboot without udev's assembly)
        sel = select_cache_devices(devices, patterns, ours=("linux_raid_member",))
        return _plan(sel["problems"], [] if sel["problems"] else [("assemble", want)], want)
    sel = select_cache_devices(devices, patterns, wipe_ok=wipe_ok)
    if sel["problems"]:
        return _plan(sel["problems"], members=want)
    wipe = [d["name"] for d in sel["selected"] if d["fstype"] or d["pttype"]]
    return _plan([], ([("wipe", wipe)] if wipe else []) + [("create", want), ("mkfs", False)], want)


def _array_fields(line):
    words = line.split()
    fields = {w.split("=", 1)[0]: w.split("=", 1)[1] for w in words[2:] if "=" in w}
    return (words[1] if len(words) > 1 else None), fields.get("UUID")


def mdadm_conf(text, line, device):
    """mdadm.conf with `line` (an ARRAY line) for `device`: the lines for the same device or UUID go."""
    _dev, uuid = _array_fields(line)
    kept = []
    for old in (text or "").splitlines():
        if old.split()[:1] == ["ARRAY"]:
            old_dev, old_uuid = _array_fields(old)
            if old_dev == device or (uuid and old_uuid == uuid):
                continue
        kept.append(old)
    if not kept:
        kept = ["# mdadm.conf: the local model cache's array is written by rackforge (model_storage)"]
    return "\n".join([*kept, line]) + "\n"


def cache_mount_unit(device, where, options):
    """The cache filesystem's .mount unit: wanted (not required) by local-fs.target, so a node with
    a failed cache still boots and its health check says why."""
    return (
        "# rackforge: the local model cache (model_storage)\n"
        "[Unit]\n"
        "Description=Local NVMe model cache on %s\n"
        "\n"
        "[Mount]\n"
        "What=%s\n"
        "Where=%s\n"
        "Type=xfs\n"
        "Options=%s\n"
        "\n"
        "[Install]\n"
        "WantedBy=local-fs.target\n"
    ) % (device, device, where, ",".join(options))


def pattern_problems(patterns):
    """[why] the disk patterns are malformed; [] when they are sound."""
    if not isinstance(patterns, list):
        return ["must be a list of {model: glob, serial: glob} (got %s)" % type(patterns).__name__]
    problems = []
    for i, pat in enumerate(patterns):
        if not isinstance(pat, dict) or not pat:
            problems.append("entry %d must be a mapping with model and/or serial (got %r)" % (i, pat))
            continue
        extra = sorted(set(pat) - {"model", "serial"})
        if extra:
            problems.append("entry %d has %s; only model and serial (shell globs) are known" % (i, ", ".join(map(str, extra))))
        empty = sorted(k for k in ("model", "serial") if k in pat and (not isinstance(pat[k], str) or not pat[k].strip()))
        if empty:
            problems.append("entry %d: %s must be a non-empty string (a glob)" % (i, " and ".join(empty)))
        elif pat.get("model", "*") == "*" and pat.get("serial", "*") == "*":
            problems.append("entry %d matches every NVMe disk (model and serial both *): name the cache's model or serials" % i)
    return problems
