"""Run the REAL ibstat / ibstatus (Debian's infiniband-diags) over a simulator's sysfs tree.

The lab's sysfs redirect library (lab/sysfs_redirect, built with the host's compiler and cached)
is preloaded, so the unmodified binaries read Sim(tmp).sysfs at /sys/class/infiniband. Nothing
of the tools' output is produced by the simulator: only the tree is simulated.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import pathlib
import shlex
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILDER = ROOT / "lab" / "sysfs_redirect" / "build.py"
REAL = {"ibstat": "/usr/sbin/ibstat", "ibstatus": "/usr/sbin/ibstatus"}


@functools.lru_cache(maxsize=1)
def redirect_library():
    """Path of the built library (lab/sysfs_redirect/build.py; cached by source hash)."""
    spec = importlib.util.spec_from_file_location("sysfs_redirect_build", BUILDER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build()


def require_real(tool):
    path = REAL[tool]
    if not os.access(path, os.X_OK):
        raise AssertionError(
            "%s is not installed: the real %s comes from Debian's infiniband-diags (scripts/setup.sh installs it)" % (path, tool)
        )
    return path


def preload_env(sysfs, base=None):
    """The environment that shows `sysfs` at /sys/class/infiniband[_mad] to a dynamically linked program."""
    env = dict(os.environ if base is None else base, LC_ALL="C", HWSIM_SYSFS=str(sysfs))
    env["LD_PRELOAD"] = redirect_library()
    return env


def install_real_tools(bindir, sysfs):
    """`ibstat` and `ibstatus` in `bindir` that exec the real binaries over `sysfs` (for a Sim's
    bin/ directory: tools the modules under test find with get_bin_path)."""
    for tool, path in REAL.items():
        script = pathlib.Path(bindir) / tool
        env = "LD_PRELOAD=%s HWSIM_SYSFS=%s" % (shlex.quote(redirect_library()), shlex.quote(str(sysfs)))
        script.write_text('#!/bin/sh\n%s exec %s "$@"\n' % (env, path))
        script.chmod(0o755)


def run_real(tool, sysfs, *args):
    """The real tool over the tree: subprocess.CompletedProcess (text), never raising on its exit code."""
    return subprocess.run([require_real(tool), *args], env=preload_env(sysfs), capture_output=True, text=True, check=False)


def run_preloaded(argv, sysfs):
    """Any command under the preload (to show what else it does and does not redirect)."""
    return subprocess.run(list(argv), env=preload_env(sysfs), capture_output=True, text=True, check=False)
