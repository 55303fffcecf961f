"""Files as a module reads and writes them on the node (I/O helpers, no decisions).

read_state() is what the planners compare against; commit() writes a set of files so that either
all of them change or none does: each new file is staged beside its target (a hidden temporary
file, which systemd, sysctl.d, modprobe.d and sudoers.d readers all skip), given its mode and
owner, validated, and only when every one has passed are they renamed over their targets."""

from __future__ import annotations

import grp
import os
import pwd
import stat
import tempfile


class StageError(Exception):
    """A validation command refused a staged file; nothing was renamed."""

    def __init__(self, dest, argv, rc, stdout, stderr):
        Exception.__init__(self, "%s: validation %s failed (rc %s)" % (dest, " ".join(argv), rc))
        self.dest, self.argv, self.rc, self.stdout, self.stderr = dest, argv, rc, stdout, stderr


def user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def group_name(gid):
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def uid_of(name):
    """uid of a user name (or a number); KeyError when the node has no such user."""
    return int(name) if str(name).isdigit() else pwd.getpwnam(name).pw_uid


def gid_of(name):
    return int(name) if str(name).isdigit() else grp.getgrnam(name).gr_gid


def missing_dirs(path):
    """The ancestors of path that do not exist, outermost first."""
    out = []
    parent = os.path.dirname(path)
    while parent and parent != "/" and not os.path.lexists(parent):
        out.insert(0, parent)
        parent = os.path.dirname(parent)
    return out


def read_bytes(path):
    """A file's bytes, or None when it does not exist."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def read_state(path):
    """{kind: None|file|link|dir|other, data, mode, uid, gid, owner, group, missing_dirs} of path
    (a symlink's data is what it points to, when that can be read)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {"kind": None, "data": None, "missing_dirs": missing_dirs(path)}
    if stat.S_ISDIR(st.st_mode):
        kind = "dir"
    elif stat.S_ISLNK(st.st_mode):
        kind = "link"
    elif stat.S_ISREG(st.st_mode):
        kind = "file"
    else:
        kind = "other"
    data = None
    if kind in ("file", "link"):
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:  # a dangling link
            data = None
    return {
        "kind": kind,
        "data": data,
        "mode": stat.S_IMODE(st.st_mode),
        "uid": st.st_uid,
        "gid": st.st_gid,
        "owner": user_name(st.st_uid),
        "group": group_name(st.st_gid),
        "missing_dirs": [],
    }


def commit(writes, mkdirs, run):
    """Make mkdirs in the order given (parents first): a path is made 0755 root; an entry {path,
    mode, uid, gid, have} is made with that mode and owner when have has no kind, else given them.
    Then stage every write {dest, data, mode, uid, gid, validate (argv with %s)}, run each
    validation through run(argv) -> (rc, stdout, stderr), and rename them all. A failing
    validation raises StageError with every staged file and created directory removed again and
    every changed directory's mode and owner put back."""
    created, staged, fixed = [], [], []
    try:
        for d in mkdirs:
            path = d if isinstance(d, str) else d["path"]
            if not isinstance(d, str) and d["have"].get("kind"):
                fixed.append((path, d["have"]))
                os.chmod(path, d["mode"])
                os.chown(path, d["uid"], d["gid"])
                continue
            os.mkdir(path)
            created.append(path)
            os.chmod(path, 0o755 if isinstance(d, str) else d["mode"])
            if not isinstance(d, str):
                os.chown(path, d["uid"], d["gid"])
        for w in writes:
            fd, tmp = tempfile.mkstemp(prefix=".rackforge-", suffix="-" + os.path.basename(w["dest"]), dir=os.path.dirname(w["dest"]))
            staged.append(tmp)
            with os.fdopen(fd, "wb") as fh:
                fh.write(w["data"])
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, w["mode"])
            os.chown(tmp, w["uid"], w["gid"])
            if w.get("validate"):
                argv = [str(a).replace("%s", tmp) for a in w["validate"]]
                rc, out, err = run(argv)
                if rc != 0:
                    raise StageError(w["dest"], argv, rc, out, err)
        for tmp, w in zip(staged, writes):
            os.rename(tmp, w["dest"])
        staged = []
    except BaseException:
        for tmp in staged:
            if os.path.lexists(tmp):
                os.unlink(tmp)
        for d in reversed(created):
            try:
                os.rmdir(d)
            except OSError:
                pass
        for path, have in fixed:
            try:
                os.chown(path, have["uid"], have["gid"])
                os.chmod(path, have["mode"])
            except OSError:
                pass
        raise


def remove(paths):
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
