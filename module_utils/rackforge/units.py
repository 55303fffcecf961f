"""systemd units and their files: what must change (pure; library/rackforge_units.py does the I/O).

The planner compares what the caller wants (files, absent paths, units) with what the node has
(each file's bytes, mode and owner; one `systemctl show` for all units) and returns the plan:
only the difference, in the order it must run. Facts it relies on, checked on Debian 12's
systemd 252 (tests/fixtures/captured/systemctl-show-*.src.txt):
- `systemctl show -p P1,P2 u1 u2` prints one block per unit, in argument order, blank-line
  separated, properties in systemd's own order (not -p's), `Id=` being the unit's real name
  (an alias such as sshd.service reads as Id=ssh.service); an unknown unit is LoadState=not-found
  with an empty UnitFileState; rc is 0 for both.
- `systemctl disable` of a unit whose file is gone still removes its dangling .wants links;
  `enable` of a missing or masked unit file fails; a plain `disable` leaves runtime links
  (enabled-runtime) in /run, only `--runtime disable` removes those.
- `enable`/`disable` with `--no-reload` change the symlinks only; one daemon-reload afterwards
  makes the manager see them and every changed unit file.
- a timer stopped after its unit file was removed and systemd reloaded ends up `failed`: units
  are stopped while their files still exist (before removals and the reload).
"""

from __future__ import annotations

import posixpath

SHOW_PROPERTIES = ("Id", "LoadState", "ActiveState", "SubState", "UnitFileState", "NeedDaemonReload")
# a file under one of these is a unit file or drop-in: writing or removing one needs a daemon-reload
UNIT_DIRS = (
    "/etc/systemd/system/",
    "/run/systemd/system/",
    "/lib/systemd/system/",
    "/usr/lib/systemd/system/",
    "/usr/local/lib/systemd/system/",
)
UNIT_SUFFIXES = (".service", ".socket", ".device", ".mount", ".automount", ".swap", ".target", ".path", ".timer", ".slice", ".scope")
# UnitFileState values that satisfy enabled: true (what `systemctl is-enabled` exits 0 for, except
# enabled-runtime, which a reboot loses); those `systemctl enable` cannot change count as enabled
ENABLED = frozenset(("enabled", "alias", "static", "indirect", "generated", "transient"))
# UnitFileState values that enabled: false must change (disable removes /etc and /run links)
DISABLE = frozenset(("enabled", "enabled-runtime"))
RUNNING = frozenset(("active", "activating", "reloading", "refreshing"))
NOT_LOADED = frozenset(("not-found", "bad-setting", "error"))
VERBS = ("start", "restart", "reload")  # after the daemon-reload, in this order (stop runs before any file goes)


SECRET_TEXT = "(secret content, not shown)\n"


class ParseError(ValueError):
    """systemctl's output is not what systemd prints."""


class PlanError(ValueError):
    """The request cannot be met; nothing has been changed."""


def unit_name(name):
    """The name systemctl uses: a name without a unit suffix is a service (`containerd`)."""
    return name if name.endswith(UNIT_SUFFIXES) else name + ".service"


def show_argv(systemctl, names):
    return [systemctl, "show", "-p", ",".join(SHOW_PROPERTIES), "--", *names]


def parse_show(text, names):
    """{name: {property: value}} from `systemctl show -p ...` of names (blocks in argument order)."""
    blocks, block = [], {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.rstrip("\r")
        if not line:
            if block:
                blocks.append(block)
                block = {}
            continue
        key, sep, value = line.partition("=")
        if not sep or not key or key in block:
            raise ParseError("systemctl show: line %d is not a new property=value: %r" % (lineno, line))
        block[key] = value
    if block:
        blocks.append(block)
    if len(blocks) != len(names):
        raise ParseError("systemctl show: %d blocks for %d units (%s)" % (len(blocks), len(names), ", ".join(names)))
    result = {}
    for name, block in zip(names, blocks):
        missing = [p for p in SHOW_PROPERTIES if p not in block]
        if missing:
            raise ParseError("systemctl show: %s has no %s" % (name, ", ".join(missing)))
        result[name] = block
    return result


def in_unit_dir(path):
    return path.startswith(UNIT_DIRS)


def _template(name):
    """foo@bar.service -> foo@.service (the file an instance is loaded from), else None."""
    prefix, at, rest = name.partition("@")
    if not at or not rest:
        return None
    return prefix + "@" + rest[rest.rfind(".") :] if "." in rest else None


def provides(path, name):
    """Whether a file at path is name's unit file (or its template's) or one of their drop-ins."""
    if not in_unit_dir(path):
        return False
    stems = {name, _template(name)} - {None}
    base = posixpath.basename(path)
    parent = posixpath.basename(posixpath.dirname(path))
    return base in stems or parent in {s + ".d" for s in stems}


def octal(mode):
    return "%04o" % mode


def file_changes(want, have):
    """Why the file at want["dest"] must be written ([] when it already matches).
    want: {data, mode, uid, gid, owner, group}; have: {kind (None, file, link, dir, other), data, mode, uid, gid, owner, group}."""
    kind = have.get("kind")
    if kind is None:
        return ["new"]
    if kind == "dir":
        raise PlanError("%s is a directory; files takes only files" % want["dest"])
    why = []
    if kind != "file":
        why.append("%s -> file" % ("symlink" if kind == "link" else kind))
    if have.get("data") != want["data"]:
        why.append("content")
    if kind == "file":
        why.extend(_meta_changes(want, have))
    return why


def _check_request(files, absent, units, directories):
    dests = [f["dest"] for f in files]
    dirs = [d["path"] for d in directories]
    for path in dests + list(absent) + dirs:
        if not posixpath.isabs(path) or posixpath.normpath(path) != path or path == "/":
            raise PlanError("%r: every path must be absolute and normalised" % (path,))
    named = dests + list(absent) + dirs
    dupes = sorted({p for p in named if named.count(p) > 1})
    if dupes:
        raise PlanError("named more than once in files/absent/directories: %s" % ", ".join(dupes))
    names = [unit_name(u["name"]) for u in units]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise PlanError("units named more than once: %s" % ", ".join(dupes))
    known = set(dests) | set(absent)
    for u in units:
        stray = [p for p in (u.get("restart_on") or []) + (u.get("reload_on") or []) if p not in known]
        if stray:
            raise PlanError("%s: restart_on/reload_on name paths that are not in files or absent: %s" % (u["name"], ", ".join(stray)))


PENDING = "its restart failed in an earlier run"
# where a restart not done yet is remembered, one empty file per unit (rackforge_units, service.keep_running)
PENDING_DIR = "/var/lib/rackforge/restart-pending"


def unit_plan(u, cur, touched, changed_paths, pending=False):
    """(enable, disable, verb, because) for one unit; verb is start/stop/restart/reload/None.
    pending: an earlier run's restart of it failed (the unit still runs what it ran before)."""
    name, enabled, state = u["name"], u.get("enabled"), u.get("state")
    load, ufs, active = cur["LoadState"], cur["UnitFileState"], cur["ActiveState"]
    running = active in RUNNING
    restart_because = [p for p in u.get("restart_on") or [] if p in changed_paths]
    reload_because = [p for p in u.get("reload_on") or [] if p in changed_paths]
    verb, because = None, []
    if state == "started" and not running:
        verb = "start"
    elif state == "stopped" and running:
        verb = "stop"
    elif running and (restart_because or pending):  # a unit to be stopped was caught above
        verb, because = "restart", restart_because or [PENDING]
    elif running and reload_because:
        verb, because = "reload", reload_because
    enable = enabled is True and ufs not in ENABLED
    disable = enabled is False and ufs in DISABLE
    if enable or verb in ("start", "restart", "reload"):
        if load == "masked" or ufs.startswith("masked"):
            raise PlanError(
                "%s is masked (LoadState=%s, UnitFileState=%s): unmask it first, or do not ask for it to run" % (name, load, ufs)
            )
        if load in NOT_LOADED and not touched:
            raise PlanError(
                "%s: no such unit (LoadState=%s) and no file in this call provides it; is the package installed, the name right?"
                % (name, load)
            )
    return enable, disable, verb, because


def _meta_changes(want, have):
    why = []
    if have["mode"] != want["mode"]:
        why.append("mode %s -> %s" % (octal(have["mode"]), octal(want["mode"])))
    if have["uid"] != want["uid"]:
        why.append("owner %s -> %s" % (have["owner"], want["owner"]))
    if have["gid"] != want["gid"]:
        why.append("group %s -> %s" % (have["group"], want["group"]))
    return why


def dir_changes(want, have):
    """Why the directory at want["path"] must be made or fixed ([] when it is as wanted)."""
    kind = have.get("kind")
    if kind is None:
        return ["new"]
    if kind != "dir":
        raise PlanError("%s is a %s, not a directory; directories takes only directories" % (want["path"], kind))
    return _meta_changes(want, have)


def plan(files, absent, units, have_files, have_absent, have_units, directories=(), have_dirs=None, pending=()):
    """What to do, in the order to do it.
    files: [{dest, data (bytes), mode (int), uid, gid, owner, group, validate, secret}]; absent: [path];
    units: [{name, enabled (True/False/None), state (started/stopped/None), restart_on, reload_on}];
    directories: [{path, mode, uid, gid, owner, group}];
    have_files / have_absent / have_dirs: {path: {kind, data, mode, uid, gid, owner, group, missing_dirs}};
    have_units: {name: parsed `systemctl show` block}; pending: names whose restart an earlier run
    left undone (restarted again where they run)."""
    _check_request(files, absent, units, directories)
    writes, mkdirs, dirs = [], [], []
    for d in directories:
        have = (have_dirs or {})[d["path"]]
        why = dir_changes(d, have)
        if why:
            dirs.append(dict(d, why=why, have=have))
            mkdirs.extend(m for m in have.get("missing_dirs") or [] if m not in mkdirs)
    for f in files:
        have = have_files[f["dest"]]
        why = file_changes(f, have)
        if why:
            writes.append(dict(f, why=why, old=have.get("data") if have.get("kind") else None))
            mkdirs.extend(d for d in have.get("missing_dirs") or [] if d not in mkdirs)
    removes = []
    for path in absent:
        have = have_absent[path]
        if have.get("kind") == "dir":
            raise PlanError("%s is a directory; absent takes only files" % path)
        if have.get("kind"):
            removes.append({"path": path, "old": have.get("data"), "kind": have["kind"]})
    changed_paths = {w["dest"] for w in writes} | {r["path"] for r in removes}
    wanted = {d["path"] for d in directories}  # made with their own mode and owner, not as a parent
    mkdirs = [m for m in mkdirs if m not in wanted]
    p = {"mkdirs": mkdirs, "dirs": dirs, "writes": writes, "removes": removes, "disable": [], "enable": [], "verify": []}
    p.update({"stop": [], "start": [], "restart": [], "reload": [], "because": {}})
    reload_units = []
    for u in units:
        name = u["name"]
        cur = have_units[name]
        touched = any(provides(path, unit_name(name)) for path in changed_paths)
        enable, disable, verb, because = unit_plan(u, cur, touched, changed_paths, name in pending)
        if enable:
            p["enable"].append(name)
        if disable:
            p["disable"].append(name)
        if verb:
            p[verb].append(name)
            if because:
                p["because"][name] = because
        if cur["NeedDaemonReload"] == "yes":
            reload_units.append(name)
        if enable or verb in ("start", "restart", "reload"):
            p["verify"].append(name)
    reasons = sorted(path for path in changed_paths if in_unit_dir(path))
    if p["enable"] or p["disable"]:
        reasons.append("enablement")
    if reload_units:
        reasons.append("unit file changed on disk since loaded: " + ", ".join(reload_units))
    p["daemon_reload"] = reasons
    if not reasons:
        p["verify"] = []  # nothing the manager has loaded can have changed
    return p


def made(p):
    """The directories to make or fix, parents first (a path sorts after its parent): a plain
    parent as its path (0755, root), a directory asked for as its plan entry. filestage.commit
    makes them in this order, and actions() lists them in it."""
    return [e for _path, e in sorted([(m, m) for m in p["mkdirs"]] + [(d["path"], d) for d in p["dirs"]], key=lambda pe: pe[0])]


def actions(p):
    """What the plan does, one line per action, in the order it runs."""
    out = ["mkdir " + e if isinstance(e, str) else "directory %s (%s)" % (e["path"], ", ".join(e["why"])) for e in made(p)]
    out += ["write %s (%s)" % (w["dest"], ", ".join(w["why"])) for w in p["writes"]]
    out += verb_actions(p, "stop")
    out += ["disable " + n for n in p["disable"]]
    out += ["remove " + r["path"] for r in p["removes"]]
    out += ["enable " + n for n in p["enable"]]
    if p["daemon_reload"]:
        out.append("daemon-reload")
    for verb in VERBS:
        out += verb_actions(p, verb)
    return out


def verb_actions(p, verb):
    """The action lines of one systemctl verb (all its units go in one call)."""
    out = []
    for n in p[verb]:
        why = p["because"].get(n)
        out.append("%s %s%s" % (verb, n, " (changed: %s)" % ", ".join(why) if why else ""))
    return out


def unit_report(block):
    return {"load": block["LoadState"], "enabled": block["UnitFileState"], "active": block["ActiveState"], "sub": block["SubState"]}


def predicted(p, name, block):
    """The state a unit would have after the plan (check mode)."""
    after = unit_report(block)
    if name in p["enable"]:
        after["enabled"] = "enabled"
    if name in p["disable"]:
        after["enabled"] = "disabled"
    if name in p["verify"]:
        after["load"] = "loaded"
    if name in p["start"] or name in p["restart"]:
        after["active"], after["sub"] = "active", "running"
    if name in p["stop"]:
        after["active"], after["sub"] = "inactive", "dead"
    return after


def _text(data):
    return "" if data is None else data.decode("utf-8", "replace")


def _meta(mode, owner, group):
    return "mode: %s\nowner: %s\ngroup: %s\n" % (octal(mode), owner, group)


def diffs(p, have_files, units_before, units_after):
    """Ansible's diff list: each file's text before/after, mode/owner drift, removals, unit states."""
    out = []
    for d in p["dirs"]:
        header = d["path"] + " (directory: mode, owner, group)"
        before = _meta(d["have"]["mode"], d["have"]["owner"], d["have"]["group"]) if d["have"].get("kind") else ""
        out.append({"before_header": header, "after_header": header, "before": before, "after": _meta(d["mode"], d["owner"], d["group"])})
    for w in p["writes"]:
        if w["old"] != w["data"]:
            if w.get("secret"):  # its text, old or new, never shown: the change only
                before, after = SECRET_TEXT, SECRET_TEXT.replace("\n", ", changed\n")
            else:
                before, after = _text(w["old"]), _text(w["data"])
            out.append({"before_header": w["dest"], "after_header": w["dest"], "before": before, "after": after})
        have = have_files[w["dest"]]
        if have.get("kind") == "file" and (have["mode"], have["uid"], have["gid"]) != (w["mode"], w["uid"], w["gid"]):
            header = w["dest"] + " (mode, owner, group)"
            before, after = _meta(have["mode"], have["owner"], have["group"]), _meta(w["mode"], w["owner"], w["group"])
            out.append({"before_header": header, "after_header": header, "before": before, "after": after})
    for r in p["removes"]:
        before = _text(r["old"]) if r["kind"] == "file" else "(%s)\n" % r["kind"]
        out.append({"before_header": r["path"], "after_header": r["path"] + " (absent)", "before": before, "after": ""})
    for name in sorted(units_before):
        before, after = units_before[name], units_after[name]
        if before != after:
            text = "enabled: {enabled}\nactive: {active} ({sub})\n"
            header = "unit " + name
            out.append({"before_header": header, "after_header": header, "before": text.format(**before), "after": text.format(**after)})
    return out


def not_loaded(blocks):
    """Units a fresh `systemctl show` (after the daemon-reload) says systemd cannot load."""
    return ["%s (LoadState=%s)" % (n, b["LoadState"]) for n, b in blocks.items() if b["LoadState"] in NOT_LOADED | {"masked"}]
