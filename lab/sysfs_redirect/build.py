#!/usr/bin/env python3
"""Build lab/sysfs_redirect/*.c into libhwsim_sysfs.so with the host's C compiler.

The lab nodes have no compiler: lab/lab.py builds the library here and copies it in; the unit
tests preload it into the real ibstat/ibstatus. The build is cached by a hash of the sources (every
*.c and *.h here), the flags and the compiler's version under .cache/sysfs_redirect/<hash>/ (so a changed source is
rebuilt, an unchanged one never is). Standard library only (lab.py runs before the venv exists).

    python3 lab/sysfs_redirect/build.py      # prints the library's path
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# sysfs_redirect.c rewrites paths; sysfs_redirect_{open,stat,refuse}.c are the intercepted calls
SOURCES = tuple(sorted(os.path.join(HERE, f) for f in os.listdir(HERE) if f.endswith((".c", ".h"))))
LIBRARY = "libhwsim_sysfs.so"
CACHE = os.path.join(ROOT, ".cache", "sysfs_redirect")
CFLAGS = ["-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-fno-delete-null-pointer-checks", "-Wall", "-Wextra", "-Werror"]
LIBS = ["-ldl"]


class BuildError(RuntimeError):
    """The library could not be built (no compiler, or the compiler failed)."""


def compiler():
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        raise BuildError(
            "no C compiler (%s) to build %s: install gcc and libc6-dev (scripts/setup.sh does)" % (os.environ.get("CC", "cc"), LIBRARY)
        )
    return cc


def build(cache=CACHE):
    """Path of the built library (built now unless the cache has this source's build)."""
    cc = compiler()
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False).stdout.splitlines()[:1]
    sources = []
    for path in SOURCES:
        with open(path, "rb") as fh:
            sources += [os.path.basename(path).encode(), fh.read()]
    key = hashlib.sha256(b"\0".join([*sources, " ".join(CFLAGS + LIBS).encode(), "".join(version).encode()])).hexdigest()[:16]
    out_dir = os.path.join(cache, key)
    out = os.path.join(out_dir, LIBRARY)
    if os.path.exists(out):
        return out
    os.makedirs(out_dir, exist_ok=True)
    # build beside the target and rename: a concurrent build or a reader never sees half a file
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=out_dir)
    os.close(fd)
    try:
        c_files = [path for path in SOURCES if path.endswith(".c")]
        res = subprocess.run([cc, *CFLAGS, "-I", HERE, "-o", tmp, *c_files, *LIBS], capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise BuildError("%s failed (%d) building %s from %s:\n%s%s" % (cc, res.returncode, LIBRARY, HERE, res.stdout, res.stderr))
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return out


if __name__ == "__main__":
    try:
        print(build())
    except BuildError as exc:
        sys.exit("sysfs_redirect: %s" % exc)
