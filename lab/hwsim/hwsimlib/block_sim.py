"""Simulated NVMe disks and Linux md (SIMULATION: the lab's containers cannot see or assemble block
devices). What runs on the node is real: systemd, mount(8), mdadm.conf and the initramfs tools;
the kernel side (disks, md arrays, /proc/mdstat, the xfs filesystem) and the tools that would touch
it are simulated here, each answering as the real tool does:

- lsblk -J -b -o COLUMNS (util-linux 2.38's JSON: tests/fixtures/captured/lsblk-J-debian12-vm.txt):
  the profile's NVMe disks (nvme<i>n1 in profile order), the boot disk's GPT partitions, md arrays
  as children of each member; an md member's FSTYPE is linux_raid_member.
- mdadm --create / --assemble / --detail --brief / --detail --scan / --examine --scan / --stop
  (mdadm 4.2's messages on stderr; exit 2 when a device cannot be opened, 1 on other failures), RAID0 only.
- wipefs -a DEV, mkfs.xfs [-f] [-L LABEL] DEV (refuses a signature without -f, as xfsprogs does).
- mount.xfs SPEC DIR [-o OPTS] (the helper mount(8) runs for -t xfs): a tmpfs of the array's size
  at DIR (source SPEC in mountinfo), so systemd sees a real mount and statvfs real numbers.
- /proc/mdstat: written to /run/hwsim/mdstat (md.c md_seq_show's layout, held to
  tests/fixtures/realworld/mdstat/gce-nvme-raid0-healthy.txt); the node's sysfs redirect library
  shows it at /proc/mdstat.

Disk contents (signatures, arrays, the filesystem) live in $HWSIM_VARLIB/block.json and survive a
reboot; which arrays are assembled is runtime state ($HWSIM_RUN/block.json): a boot assembles each
array whose members are all present and leaves one with a member missing inactive, its present
members spares, with no /dev/md/NAME link (udev's incremental assembly: `mdadm -I`, and the md udev
rules, which link only a running array). Faults: nvme_missing serial=S (the disk is gone from
lsblk; a running RAID0 over it goes on listing it in /proc/mdstat, as Debian 12's 6.1 kernel
prints a broken raid0 "active" (md.c md_seq_show prints "broken" only from a later kernel), and
its filesystem no longer mounts)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys

from hwsimlib.state import RUN, VARLIB, faults, load_json, profile, save_json

DEV = os.environ.get("HWSIM_DEV", "/dev")
MDSTAT = os.path.join(RUN, "mdstat")
DISKS_FILE = os.path.join(VARLIB, "block.json")
ASSEMBLED_FILE = os.path.join(RUN, "block.json")
# the boot disk's layout (an HGX server's M.2 boot drive): GPT, EFI system partition, root
BOOT_PARTS = ((1, 536870912, "vfat", "/boot/efi"), (2, None, "ext4", "/"))


def disks():
    """[{name, model, serial, size, boot}] present (a disk with an nvme_missing fault is gone)."""
    gone = {f.get("serial") for f in faults("nvme_missing")}
    out = []
    for i, d in enumerate(profile().get("nvme", [])):
        if d["serial"] not in gone:
            out.append(dict(d, name="nvme%dn1" % i, boot=bool(d.get("boot"))))
    return out


def contents():
    return load_json(DISKS_FILE, {"sig": {}, "arrays": {}})


def assembled():
    return load_json(ASSEMBLED_FILE, {})


def _short(array):
    """The array's name without its homehost ("lab-node1:rackforge_cache" -> "rackforge_cache"): /dev/md/<it>."""
    return array["name"].split(":")[-1]


def _disk_by_dev(path):
    name = os.path.basename(os.path.realpath(path) if path.startswith(DEV) else path)
    return next((d for d in disks() if d["name"] == name or "/dev/" + d["name"] == path), None)


def _md_by_dev(path):
    """(mdN, uuid) of a running array named by /dev/mdN or /dev/md/NAME, else (None, None)."""
    base, arrays = os.path.basename(path), contents()["arrays"]
    for md, a in assembled().items():
        name = _short(arrays[a["uuid"]])
        if not a["inactive"] and (base == md or path in ("/dev/md/" + name, os.path.join(DEV, "md", name))):
            return md, a["uuid"]
    return None, None


def _busy(disk):
    """The array a disk is an assembled member of, or the mount on it (the boot disk's root)."""
    if disk["boot"]:
        return "mounted"
    run, arrays = assembled(), contents()["arrays"]
    return next((md for md, a in run.items() if disk["serial"] in arrays[a["uuid"]]["members"]), None)


def render():
    """/proc/mdstat (as md.c prints it) and the /dev nodes of the disks and assembled arrays."""
    data, run = contents(), assembled()
    present = {d["serial"]: d["name"] for d in disks()}
    lines = ["Personalities : " + ("[raid0] " if any(not r["inactive"] for r in run.values()) else "")]
    for md in sorted(run, key=lambda m: -int(m[2:])):
        a = data["arrays"][run[md]["uuid"]]
        names = dict(zip(a["members"], a["names"]))  # a running array keeps its members' names
        if run[md]["inactive"]:
            here = [(i, s) for i, s in enumerate(a["members"]) if s in present]
            lines.append("%s : inactive %s" % (md, " ".join("%s[%d](S)" % (present[s], i) for i, s in reversed(here))))
            lines.append("      %d blocks super 1.2" % (len(here) * (a["kib"] // len(a["members"]))))
            lines.append("       ")
            continue
        lines.append("%s : active raid0 %s" % (md, " ".join("%s[%d]" % (names[s], i) for i, s in reversed(list(enumerate(a["members"]))))))
        lines.append("      %d blocks super 1.2 %dk chunks" % (a["kib"], a["chunk_kb"]))
        lines.append("      ")
    lines.append("unused devices: <none>")
    os.makedirs(RUN, exist_ok=True)
    with open(MDSTAT + ".tmp", "w") as fh:
        fh.write("\n".join(lines) + "\n")
    os.replace(MDSTAT + ".tmp", MDSTAT)
    os.makedirs(os.path.join(DEV, "md"), exist_ok=True)
    for name in os.listdir(os.path.join(DEV, "md")):  # udev removes the link of an array that stopped
        target = os.path.basename(os.readlink(os.path.join(DEV, "md", name)))
        if target not in run or run[target]["inactive"]:
            os.unlink(os.path.join(DEV, "md", name))
    here = {d["name"] for d in disks()}
    for i, _d in enumerate(profile().get("nvme", [])):  # devtmpfs: the node of a disk that is gone goes with it
        name = "nvme%dn1" % i
        if name in here:
            _node(os.path.join(DEV, name), 259, i * 8)
        elif os.path.exists(os.path.join(DEV, name)):
            os.unlink(os.path.join(DEV, name))
    for md, r in run.items():
        _node(os.path.join(DEV, md), 9, int(md[2:]))
        link = os.path.join(DEV, "md", _short(data["arrays"][r["uuid"]]))
        if not r["inactive"] and not os.path.islink(link):
            os.symlink("../" + md, link)


def _node(path, major, minor):
    """A block device node (CAP_MKNOD; never openable in a lab node), or an empty file (the unit tests' $HWSIM_DEV)."""
    if not os.path.exists(path):
        if subprocess.run(["mknod", path, "b", str(major), str(minor)], check=False, capture_output=True).returncode != 0:
            open(path, "a").close()


def boot():
    """A reboot: an array runs when udev has seen all its members, is inactive with some."""
    run = {}
    present = {d["serial"]: d["name"] for d in disks()}
    data = contents()
    for uuid, a in sorted(data["arrays"].items(), key=lambda kv: kv[1]["md"]):
        if set(a["members"]) & set(present):
            run[a["md"]] = {"uuid": uuid, "inactive": not set(a["members"]) <= set(present)}
            a["names"] = [present.get(s, n) for s, n in zip(a["members"], a["names"])]
    save_json(DISKS_FILE, data)
    save_json(ASSEMBLED_FILE, run)
    render()


def _lsblk_row(cols, values):
    return {c.lower(): values.get(c.lower()) for c in cols}


def lsblk(argv):
    cols = next((argv[i + 1] for i, a in enumerate(argv) if a == "-o" and i + 1 < len(argv)), None)
    if "-J" not in argv or "-b" not in argv or not cols:
        sys.stderr.write("lsblk (hwsim): only `lsblk -J -b -o COLUMNS` is simulated\n")
        return 1
    cols = cols.split(",")
    data, run = contents(), assembled()
    mounts = _mounts()
    out = []
    for d in disks():
        sig = data["sig"].get(d["serial"], {})
        row = {"name": d["name"], "type": "disk", "model": d["model"], "serial": d["serial"], "size": d["size"]}
        row.update(fstype=sig.get("fstype"), pttype=sig.get("pttype"), mountpoints=[None])
        kids = []
        if d["boot"]:
            row["pttype"] = "gpt"
            start = 0
            for num, size, fstype, where in BOOT_PARTS:
                size = size or d["size"] - start - 2 * 1048576
                kids.append(_lsblk_row(cols, {"name": "%sp%d" % (d["name"], num), "type": "part", "size": size, "fstype": fstype,
                                              "pttype": "gpt", "mountpoints": [where]}))  # fmt: skip
                start += size
        for md, r in run.items():
            a = data["arrays"][r["uuid"]]
            if d["serial"] in a["members"]:
                where = mounts.get("/dev/" + md) or mounts.get("/dev/md/" + _short(a)) or [None]
                fs, kind = (None, "md") if r["inactive"] else ((a.get("fs") or {}).get("type"), "raid0")
                kids.append(_lsblk_row(cols, {"name": md, "type": kind, "size": a["kib"] * 1024, "fstype": fs, "mountpoints": where}))
        row = _lsblk_row(cols, row)
        if kids:
            row["children"] = kids
        out.append(row)
    sys.stdout.write(json.dumps({"blockdevices": out}, indent=3) + "\n")
    return 0


def _mounts():
    found = {}
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                found.setdefault(right.split()[1], []).append(left.split()[4])
    except OSError:
        pass
    return found


def _fail(tool, text, rc=1):
    sys.stderr.write("%s: %s\n" % (tool, text))
    return rc


def _opt(argv, long, short=None):
    for i, a in enumerate(argv):
        if a.startswith(long + "="):
            return a.split("=", 1)[1]
        if a in (long, short) and i + 1 < len(argv):
            return argv[i + 1]
    return None


def mdadm(argv):
    data = contents()
    positional = [a for i, a in enumerate(argv) if a.startswith("/") and not (i and argv[i - 1] in ("-l", "-n"))]
    if "--create" in argv or "-C" in argv:
        return _create(argv, positional, data)
    if "--assemble" in argv or "-A" in argv:
        return _assemble(positional, data)
    if "--examine" in argv or "-E" in argv:  # --examine --scan: every array whose superblocks are on a present disk
        present = {d["serial"] for d in disks()}
        return _array_lines([u for u, a in sorted(data["arrays"].items()) if set(a["members"]) & present])
    if "--detail" in argv or "-D" in argv:
        if not positional:  # --detail --scan: the assembled arrays
            return _array_lines([r["uuid"] for _md, r in sorted(assembled().items()) if not r["inactive"]])
        uuids = []
        for path in positional:
            uuid = _md_by_dev(path)[1]
            if uuid is None:
                return _fail("mdadm", "cannot open %s: No such file or directory" % path, 2)
            uuids.append(uuid)
        return _array_lines(uuids)
    if "--stop" in argv or "-S" in argv:
        md, _uuid = _md_by_dev(positional[0]) if positional else (None, None)
        md = md or next((m for m in assembled() if positional and os.path.basename(positional[0]) == m), None)
        if md is None:
            return _fail("mdadm", "error opening %s: No such file or directory" % (positional or ["?"])[0])
        run = assembled()
        del run[md]
        save_json(ASSEMBLED_FILE, run)
        render()
        sys.stderr.write("mdadm: stopped %s\n" % positional[0])
        return 0
    return _fail("mdadm", "(hwsim) only --create, --assemble, --detail, --examine and --stop are simulated")


def _array_lines(uuids):
    """mdadm's brief ARRAY lines (Detail.c/Examine.c: metadata, name, UUID in its colon form)."""
    arrays = contents()["arrays"]
    for uuid in uuids:
        a = arrays[uuid]
        sys.stdout.write("ARRAY /dev/md/%s metadata=1.2 name=%s UUID=%s\n" % (_short(a), a["name"], a["uuid"]))
    return 0


def _members(paths):
    out = []
    for p in paths:
        d = _disk_by_dev(p)
        if d is None:
            return None, _fail("mdadm", "cannot open %s: No such file or directory" % p, 2)
        if _busy(d):
            return None, _fail("mdadm", "cannot open %s: Device or resource busy" % p, 2)
        out.append(d)
    return out, 0


def _create(argv, positional, data):
    level = _opt(argv, "--level", "-l")
    count = _opt(argv, "--raid-devices", "-n")
    if level not in ("0", "raid0", "stripe"):
        return _fail("mdadm", "(hwsim) only --level=0 is simulated")
    target, paths = positional[0], positional[1:]
    if count is None or int(count) != len(paths):
        return _fail("mdadm", "You have listed more devices (%d) than are in the array(%s)!" % (len(paths), count))
    members, rc = _members(paths)
    if rc:
        return rc
    for d in members:
        sig = data["sig"].get(d["serial"], {})
        if sig and "--run" not in argv and "-R" not in argv:
            return _fail(
                "mdadm",
                "%s appears to contain a %s\nmdadm: create aborted." % ("/dev/" + d["name"], sig.get("fstype") or "partition table"),
            )
    name = _opt(argv, "--name", "-N") or os.path.basename(target)
    host = _opt(argv, "--homehost") or socket.gethostname()
    uuid_hex = hashlib.sha256(("%s/%s/%s" % (host, name, sorted(d["serial"] for d in members))).encode()).hexdigest()[:32]
    uuid = ":".join(uuid_hex[i : i + 8] for i in range(0, 32, 8))
    chunk = int(_opt(argv, "--chunk", "-c") or 512)
    used = {a["md"] for a in data["arrays"].values()}
    md = next("md%d" % n for n in range(127, 0, -1) if "md%d" % n not in used)
    per = min(d["size"] for d in members) // 1024 - 8192  # 1.2 superblock's data offset, rounded to the chunk
    kib = (per - per % chunk) * len(members)
    data["arrays"][uuid] = {"uuid": uuid, "name": "%s:%s" % (host, name), "md": md, "members": [d["serial"] for d in members],
                            "names": [d["name"] for d in members], "chunk_kb": chunk, "kib": kib, "fs": None}  # fmt: skip
    for d in members:
        data["sig"][d["serial"]] = {"fstype": "linux_raid_member", "array": uuid}
    save_json(DISKS_FILE, data)
    run = assembled()
    run[md] = {"uuid": uuid, "inactive": False}
    save_json(ASSEMBLED_FILE, run)
    render()
    sys.stderr.write("mdadm: array %s started.\n" % target)
    return 0


def _assemble(positional, data):
    target, paths = positional[0], positional[1:]
    members, rc = _members(paths)
    if rc:
        return rc
    uuids = {data["sig"].get(d["serial"], {}).get("array") for d in members}
    if len(uuids) != 1 or None in uuids:
        return _fail(
            "mdadm",
            "no RAID superblock on %s"
            % next("/dev/" + d["name"] for d in members if data["sig"].get(d["serial"], {}).get("array") is None),
        )
    uuid = uuids.pop()
    a = data["arrays"][uuid]
    if len(members) < len(a["members"]):
        return _fail(
            "mdadm",
            "%s assembled from %d drive%s - not enough to start the array." % (target, len(members), "s" if len(members) > 1 else ""),
        )
    a["names"] = [next(d["name"] for d in members if d["serial"] == s) for s in a["members"]]
    save_json(DISKS_FILE, data)
    run = assembled()
    run[a["md"]] = {"uuid": uuid, "inactive": False}
    save_json(ASSEMBLED_FILE, run)
    render()
    sys.stderr.write("mdadm: %s has been started with %d drives.\n" % (target, len(members)))
    return 0


def wipefs(argv):
    paths = [a for a in argv if a.startswith("/")]
    if "-a" not in argv and "--all" not in argv:
        return _fail("wipefs", "(hwsim) only wipefs -a DEVICE is simulated")
    data = contents()
    for p in paths:
        d = _disk_by_dev(p)
        if d is None:
            return _fail("wipefs", "error: %s: probing initialization failed: No such file or directory" % p)
        if _busy(d):
            return _fail("wipefs", "error: %s: probing initialization failed: Device or resource busy" % p)
        sig = data["sig"].pop(d["serial"], None)
        if sig:
            sys.stdout.write("%s: 4 bytes were erased at offset 0x00001000 (%s): fc 4e 2b a9\n" % (p, sig.get("fstype") or "gpt"))
    save_json(DISKS_FILE, data)
    return 0


def mkfs_xfs(argv):
    paths = [a for i, a in enumerate(argv) if a.startswith("/") and argv[i - 1] != "-L"]
    if len(paths) != 1:
        return _fail("mkfs.xfs", "(hwsim) one device expected", 1)
    _md, uuid = _md_by_dev(paths[0])
    if uuid is None:
        return _fail("mkfs.xfs", "cannot open %s: No such file or directory" % paths[0])
    data = contents()
    fs = data["arrays"][uuid].get("fs")
    if fs and "-f" not in argv:
        sys.stderr.write("mkfs.xfs: %s appears to contain an existing filesystem (%s).\n" % (paths[0], fs["type"]))
        return _fail("mkfs.xfs", "Use the -f option to force overwrite.")
    data["arrays"][uuid]["fs"] = {"type": "xfs", "label": _opt(argv, "-L")}
    save_json(DISKS_FILE, data)
    kib = data["arrays"][uuid]["kib"]
    sys.stdout.write("meta-data=%-22s isize=512    agcount=32, agsize=%d blks\n" % (paths[0], kib // 4 // 32))
    sys.stdout.write("data     =%-22s bsize=4096   blocks=%d, imaxpct=5\n" % ("", kib // 4))
    return 0


def mount_xfs(argv):
    args = [a for i, a in enumerate(argv) if not a.startswith("-") and (i == 0 or argv[i - 1] not in ("-o", "-t"))]
    opts = _opt(argv, "-o") or ""
    if len(args) < 2:
        return _fail("mount.xfs", "(hwsim) usage: mount.xfs SPEC DIR [-o OPTIONS]", 1)
    spec, where = args[0], args[1]
    _md, uuid = _md_by_dev(spec)
    array = contents()["arrays"][uuid] if uuid else {}
    if not (array.get("fs") or {}).get("type") == "xfs":
        return _fail(
            "mount",
            "%s: wrong fs type, bad option, bad superblock on %s, missing codepage or helper program, or other error." % (where, spec),
            32,
        )
    if not set(array["members"]) <= {d["serial"] for d in disks()}:  # a raid0 with a member gone reads nothing
        return _fail("mount", "%s: can't read superblock on %s." % (where, spec), 32)
    size = array["kib"] * 1024
    keep = [o for o in opts.split(",") if o in ("ro", "rw", "noatime", "nodev", "nosuid", "noexec")]
    return subprocess.run(["mount", "-i", "-t", "tmpfs", "-o", ",".join(["size=%d" % size, *keep]), spec, where], check=False).returncode
