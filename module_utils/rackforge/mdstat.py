"""Pure parser for Linux /proc/mdstat, the software RAID (md) status file (no I/O).

Public, stable API:

- parse_mdstat(text) -> {"personalities": [str], "arrays": {name: array}, "unused": [str]}
  array = {"state": "active" | "inactive" | "broken", "read_only": bool, "level": str | None,
           "devices": [{"name": str, "slot": int, "role": None | "faulty" | "spare" |
                        "write-mostly" | "journal" | "replacement"}],
           "blocks": int | None, "super": str | None, "chunk_kb": int | None,
           "raid_disks": int | None, "active_disks": int | None, "status": str | None,
           "degraded": bool, "sync": None | sync, "bitmap": str | None}
  sync = {"action": "recovery" | "resync" | "reshape" | "check" | "repair", "percent": float | None,
          "done": int | None, "total": int | None, "finish_min": float | None, "speed_kbs": int | None}
- ParseError(ValueError): not text, not mdstat (no "Personalities :" and no mdN line), or an array
  block that cannot be read. Nothing else is raised.

Format, from the kernel source (drivers/md/md.c: md_seq_show, status_personalities, status_resync,
md_bitmap_status, status_unused; the personality's status(): raid0.c raid0_status, raid1.c
raid1_status, raid10.c raid10_status, raid5.c raid5_status, md-linear.c linear_status):

    Personalities : [raid0] [raid1]
    md0 : active raid0 nvme1n1[1] nvme0n1[0]              "active" | "broken" (MD_BROKEN: a raid0/linear
          1562566656 blocks super 1.2 512k chunks         member is gone) | "inactive" (no level)
    md1 : active (auto-read-only) raid1 sdb1[2](W)(F) sda1[0]
          975860 blocks super 1.2 [2/1] [U_]              [raid_disks/raid_disks-degraded] [U or _ each]
          [=>...................]  recovery =  7.8% (37384832/479008632) finish=61.8min speed=119022K/sec
          bitmap: 1/8 pages [4KB], 65536KB chunk
    unused devices: <none>

- member "name[n]": n is the superblock descriptor number (rdev->desc_nr), NOT the position in
  [U_]; flags (W) write-mostly, (J) journal, (F) faulty, (S) spare, (R) replacement. A member can
  carry two ("(W)(R)", "(W)(S)"); "role" keeps the strongest: F > S > R > J > W.
- no "super" is metadata 0.90; "super external:imsm" for containers. raid0 prints " Nk chunks",
  raid10 " NK chunks" and copies, raid4/5/6 " level L, Nk chunk, algorithm A", linear " Nk rounding"
  (all kept as chunk_kb). raid0/linear print no [n/m].
- sync line: the kernel writes "recovery", "resync", "reshape" or "check" (a requested repair reads
  "resync"), or "\\tresync=DELAYED" / "resync=PENDING" / "{recover,reshape,resync}=REMOTE"
  (action kept, numbers None). Indentation is not trusted (pasted captures lose it).
- degraded: state "broken", a member (F), active_disks < raid_disks, or a "_" in the status.
Lines before the first array line (a shell prompt) and after "unused devices:" are ignored.
"""

from __future__ import annotations

import re

_A = re.ASCII
_PERS = re.compile(r"Personalities\s*:(.*)$", _A)
_ARRAY = re.compile(r"(md(?:[0-9]+|_[\w.-]+))\s*:\s*(.*)$", _A)
_MEMBER = re.compile(r"([^\s\[\]()]+)\[([0-9]+)\]((?:\([A-Z]\))*)$", _A)
_BLOCKS = re.compile(
    r"([0-9]+) blocks(?: super (\S+))?(?: level [0-9]+,)?(?: ([0-9]+)[kK] (?:chunks|chunk,|rounding))?"
    r"(?: algorithm [0-9]+)?(?: [0-9]+ (?:near|far|offset)-copies)?(?: [0-9]+ devices per set)?"
    r"(?: \[([0-9]+)/([0-9]+)\] \[([U_]+)\])?$",
    _A,
)
_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_PROGRESS = re.compile(
    r"(?:\[[=>.]*\]\s*)?(recovery|resync|reshape|check|repair)\s*=\s*" + _NUM + r"%\s*\(([0-9]+)/([0-9]+)\)"
    r"(?:\s+finish=" + _NUM + r"min)?(?:\s+speed=([0-9]+)K/sec)?$",
    _A,
)
_WAITING = re.compile(r"(recovery|recover|resync|reshape|check|repair)=(?:DELAYED|PENDING|REMOTE)$", _A)
_BITMAP = re.compile(r"bitmap:\s*(\S.*)$", _A)
_ROLES = (("F", "faulty"), ("S", "spare"), ("R", "replacement"), ("J", "journal"), ("W", "write-mostly"))
_WORD = re.compile(r"[a-z]+$", _A)


class ParseError(ValueError):
    """The text is not /proc/mdstat output, or an array in it cannot be read."""


def _sync(action, percent=None, done=None, total=None, finish=None, speed=None):
    return {
        "action": "recovery" if action == "recover" else action,
        "percent": None if percent is None else float(percent),
        "done": None if done is None else int(done),
        "total": None if total is None else int(total),
        "finish_min": None if finish is None else float(finish),
        "speed_kbs": None if speed is None else int(speed),
    }


def _array_line(name, rest):
    words = rest.split()
    if not words or not _WORD.match(words[0]):
        raise ParseError("%s: no array state in %r" % (name, rest))
    state, words = words[0], words[1:]
    read_only = bool(words) and words[0] in ("(read-only)", "(auto-read-only)")
    if read_only:
        words = words[1:]
    level = None
    if words and "[" not in words[0] and state != "inactive":
        level, words = words[0], words[1:]
        if not re.match(r"[a-z][a-z0-9]*$", level, _A):
            raise ParseError("%s: bad level %r" % (name, level))
    devices = []
    for word in words:
        m = _MEMBER.match(word)
        if not m:
            raise ParseError("%s: bad member %r" % (name, word))
        flags = set(m.group(3)[1::3])
        if flags - set("FSRJW"):
            raise ParseError("%s: unknown member flag in %r" % (name, word))
        role = next((r for f, r in _ROLES if f in flags), None)
        devices.append({"name": m.group(1), "slot": int(m.group(2)), "role": role})
    return {
        "state": state,
        "read_only": read_only,
        "level": level,
        "devices": devices,
        "blocks": None,
        "super": None,
        "chunk_kb": None,
        "raid_disks": None,
        "active_disks": None,
        "status": None,
        "degraded": False,
        "sync": None,
        "bitmap": None,
    }


def _detail(name, array, line):
    m = _BLOCKS.match(line)
    if m:
        blocks, sup, chunk, raid, active, status = m.groups()
        if status is not None and len(status) != int(raid):
            raise ParseError("%s: status %r does not have %s disks" % (name, status, raid))
        array.update(blocks=int(blocks), super=sup, status=status)
        array["chunk_kb"] = None if chunk is None else int(chunk)
        array["raid_disks"] = None if raid is None else int(raid)
        array["active_disks"] = None if active is None else int(active)
        return
    m = _PROGRESS.match(line)
    if m:
        array["sync"] = _sync(*m.groups())
        return
    m = _WAITING.match(line)
    if m:
        array["sync"] = _sync(m.group(1))
        return
    m = _BITMAP.match(line)
    if m:
        array["bitmap"] = m.group(1)
        return
    raise ParseError("%s: unreadable line %r" % (name, line))


def _degraded(a):
    return (
        a["state"] == "broken"
        or any(d["role"] == "faulty" for d in a["devices"])
        or (a["raid_disks"] is not None and a["active_disks"] < a["raid_disks"])
        or "_" in (a["status"] or "")
    )


def parse_mdstat(text):
    """Parse /proc/mdstat text; see the module docstring for the result and the format."""
    if not isinstance(text, str):
        raise ParseError("mdstat: expected text, got %s" % type(text).__name__)
    result = {"personalities": [], "arrays": {}, "unused": []}
    seen_personalities = False
    current = None  # (name, array) of the block being read; None outside a block
    for raw in text.splitlines():
        line = raw.strip()
        pers = _PERS.match(line)
        arr = _ARRAY.match(line)
        if pers:
            names = re.findall(r"\[([^\[\]\s]+)\]", pers.group(1))
            if re.sub(r"\[[^\[\]\s]+\]", "", pers.group(1)).strip():
                raise ParseError("mdstat: bad Personalities line %r" % line)
            result["personalities"], seen_personalities, current = names, True, None
        elif arr:
            name = arr.group(1)
            if name in result["arrays"]:
                raise ParseError("mdstat: array %s listed twice" % name)
            current = (name, _array_line(name, arr.group(2)))
            result["arrays"][name] = current[1]
        elif line.startswith("unused devices:"):
            words = line[len("unused devices:") :].split()
            result["unused"], current = [w for w in words if w != "<none>"], None
        elif line and current is not None:
            _detail(current[0], current[1], line)
    if not seen_personalities and not result["arrays"]:
        raise ParseError("mdstat: no 'Personalities :' line and no mdN array line")
    for a in result["arrays"].values():
        a["degraded"] = _degraded(a)
    return result
