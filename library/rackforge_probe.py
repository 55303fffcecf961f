#!/usr/bin/python
"""Ansible module: read several small facts about a node in one round trip (read-only)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: rackforge_probe
short_description: Read paths, small files, kernel modules and command outputs in one call
description:
  - One remote module call instead of one stat, slurp or command task each: a role reads what
    it needs to decide, then acts only where the node differs. Never changes anything, so it
    runs in check mode too.
  - A failing command is reported (rc, stderr), not fatal: the role decides what it means.
options:
  paths: {description: Paths to stat (exists, is a directory, sha256 of a regular file)., type: list, elements: path, default: []}
  files: {description: Small text files to read (up to 1 MiB each); a missing one reads as null., type: list, elements: path, default: []}
  modules: {description: Kernel modules; loaded when <sysfs_root>/module/<name> exists., type: list, elements: str, default: []}
  sysfs_root: {description: "Where sysfs is (a simulator's or a chroot's tree instead of /sys).", type: path, default: /sys}
  commands: {description: "name -> argv (a list, no shell), run read-only.", type: dict, default: {}}
  units: {description: "systemd units: each one's is-enabled and is-active state.", type: list, elements: str, default: []}
"""

RETURN = r"""
paths: {description: "path -> {exists, isdir, sha256 (regular files, else null)}", type: dict, returned: always}
files: {description: "path -> text, or null when missing", type: dict, returned: always}
modules: {description: "name -> loaded (bool)", type: dict, returned: always}
commands: {description: "name -> {rc, stdout, stderr}; rc is null when the program is missing", type: dict, returned: always}
units: {description: "unit -> {enabled (enabled, disabled, not-found, ...), active (active, inactive, ...)}", type: dict, returned: always}
"""

import hashlib
import os

from ansible.module_utils.basic import AnsibleModule

MAX_FILE = 1 << 20


def stat_path(path):
    if not os.path.exists(path):
        return {"exists": False, "isdir": False, "sha256": None}
    if os.path.isdir(path):
        return {"exists": True, "isdir": True, "sha256": None}
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 16), b""):
            digest.update(block)
    return {"exists": True, "isdir": False, "sha256": digest.hexdigest()}


def read_file(module, path):
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        module.fail_json(msg="rackforge_probe: cannot read %s: %s" % (path, exc))
    if len(data) > MAX_FILE:
        module.fail_json(msg="rackforge_probe: %s is over %d bytes; read it another way" % (path, MAX_FILE))
    return data.decode("utf-8", errors="replace")


def unit_states(module, units):
    """`systemctl is-enabled` and `is-active` print one line per unit, in order (two processes for
    all units together); a unit systemd does not know reads as not-found / inactive."""
    if not units:
        return {}
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return {u: {"enabled": "no-systemd", "active": "unknown"} for u in units}
    states = {u: {"enabled": "not-found", "active": "inactive"} for u in units}
    for key in ("enabled", "active"):
        _rc, out, _err = module.run_command([systemctl, "is-" + key, *units])
        lines = out.splitlines()
        if len(lines) == len(units):
            for unit, line in zip(units, lines):
                states[unit][key] = line.strip()
        else:  # older systemctl stops at the first unknown unit: ask one by one
            for unit in units:
                _rc, out, _err = module.run_command([systemctl, "is-" + key, unit])
                states[unit][key] = out.strip() or states[unit][key]
    return states


def main():
    module = AnsibleModule(
        argument_spec={
            "paths": {"type": "list", "elements": "path", "default": []},
            "files": {"type": "list", "elements": "path", "default": []},
            "modules": {"type": "list", "elements": "str", "default": []},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "commands": {"type": "dict", "default": {}},
            "units": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    p = module.params
    commands = {}
    for name, argv in p["commands"].items():
        if not isinstance(argv, list) or not argv or not all(isinstance(a, (str, int)) for a in argv):
            module.fail_json(msg="rackforge_probe: commands.%s must be a non-empty argv list, got %r" % (name, argv))
        argv = [str(a) for a in argv]
        found = os.access(argv[0], os.X_OK) if os.path.isabs(argv[0]) else module.get_bin_path(argv[0]) is not None
        if not found:
            commands[name] = {"rc": None, "stdout": "", "stderr": "%s: not installed" % argv[0]}
            continue
        rc, out, err = module.run_command(argv)
        commands[name] = {"rc": rc, "stdout": out, "stderr": err}
    module.exit_json(
        changed=False,
        paths={path: stat_path(path) for path in p["paths"]},
        files={path: read_file(module, path) for path in p["files"]},
        modules={name: os.path.isdir(os.path.join(p["sysfs_root"], "module", name)) for name in p["modules"]},
        commands=commands,
        units=unit_states(module, p["units"]),
    )


if __name__ == "__main__":
    main()
