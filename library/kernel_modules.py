#!/usr/bin/python
"""Ansible module: kernel modules loaded now and at boot, with checked options, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: kernel_modules
short_description: Load kernel modules now and at boot, with options checked against modinfo, in one call
description:
  - Reads which of O(modules) are loaded (C(<sysfs_root>/module/<name>)), asks C(modinfo) about
    the others and C(modinfo -p) about every module in O(options), and refuses, before any change,
    a module this kernel does not have or an option the installed module does not take. The error
    names the variable (O(modules_var), O(options_var)) and, for an option, the parameters the
    module really has.
  - Then writes the boot list (O(load_file), one module per line for systemd-modules-load) and
    the options file (O(options_file); removed when O(options) is empty) where they differ, both
    or neither (staged, then renamed), and loads with C(modprobe) the modules not loaded yet, in
    the order given. A changed options file does not reload a loaded module: C(options_changed)
    says so, for the role to report.
  - Check mode and C(--diff) are honest: nothing is written or loaded, and the result says what
    would be. O(state=check) is the read-only form (a role's validation): every check, no change,
    C(changed) false.
options:
  modules: {description: Modules to load now and at every boot., type: list, elements: str, default: []}
  load_file: {description: "The modules-load.d file ('' = none written).", type: str, default: ""}
  options: {description: "{module: {parameter: value}} for modprobe.d.", type: dict, default: {}}
  options_file: {description: "The modprobe.d file ('' = none; required with options).", type: str, default: ""}
  owner: {description: What the files' header names as their owner (a role)., type: str, default: rackforge}
  modules_var: {description: The variable O(modules) came from (named in errors)., type: str, default: modules}
  options_var: {description: The variable O(options) came from (named in errors)., type: str, default: options}
  sysfs_root: {description: Where sysfs is (another root for a simulated or test tree)., type: path, default: /sys}
  state: {description: "present: write and load; check: only check.", type: str, choices: [present, check], default: present}
"""

RETURN = r"""
loaded: {description: The modules loaded by this call (or that would be)., type: list, returned: always}
changed_files: {description: The files written or removed (or that would be)., type: list, returned: always}
options_changed:
  description: The options file changed (loaded modules keep their old parameters until reloaded).
  type: bool
  returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV, kmods
from ansible.module_utils.rackforge.filestage import remove
from ansible.module_utils.rackforge.rootfiles import commit_or_fail, queue
from ansible.module_utils.rackforge.units import PlanError


def tool(module, name):
    path = module.get_bin_path(name)
    if not path:
        module.fail_json(msg="kernel_modules: %s is not installed (kmod)" % name)
    return path


def main():
    module = AnsibleModule(
        argument_spec={
            "modules": {"type": "list", "elements": "str", "default": []},
            "load_file": {"type": "str", "default": ""},
            "options": {"type": "dict", "default": {}},
            "options_file": {"type": "str", "default": ""},
            "owner": {"type": "str", "default": "rackforge"},
            "modules_var": {"type": "str", "default": "modules"},
            "options_var": {"type": "str", "default": "options"},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "state": {"type": "str", "choices": ["present", "check"], "default": "present"},
        },
        supports_check_mode=True,
    )
    p = module.params
    for key in ("load_file", "options_file"):
        if p[key] and not os.path.isabs(p[key]):
            module.fail_json(msg="kernel_modules: %s must be an absolute path, got %r" % (key, p[key]))
    if p["options"] and not p["options_file"]:
        module.fail_json(msg="kernel_modules: options need an options_file")
    for name, params in p["options"].items():
        if not isinstance(params, dict):
            module.fail_json(msg="%s.%s must be a mapping of parameter: value, got %r" % (p["options_var"], name, params))

    # read: what is loaded, what modinfo knows; decide: refuse before any change
    loaded = kmods.loaded(p["modules"], p["sysfs_root"])
    unloaded = list(dict.fromkeys(m for m in p["modules"] if kmods.sysfs_name(m) not in loaded))
    modinfo = tool(module, "modinfo") if p["options"] or unloaded else None
    available = kmods.known(module, modinfo, unloaded)
    params = {}
    for m in p["options"]:
        rc, out, err = module.run_command([modinfo, "-p", m], environ_update=C_ENV)
        params[m] = (kmods.parse_params(out), "") if rc == 0 else (None, err or "modinfo exited %d" % rc)
    problems = kmods.option_problems(p["options"], params, p["options_var"])
    try:
        to_load = kmods.plan(p["modules"], loaded, available, p["modules_var"])
    except kmods.KmodError as exc:
        problems.insert(0, str(exc))
    if problems:
        module.fail_json(msg="; ".join(problems) + ". Nothing was changed.")

    writes, absent, diff = [], [], []
    try:
        if p["load_file"]:
            queue(p["load_file"], kmods.load_file(p["owner"], p["modules"]), writes, diff)
        if p["options"]:
            queue(p["options_file"], kmods.options_file(p["owner"], p["options"]), writes, diff)
    except PlanError as exc:
        module.fail_json(msg="kernel_modules: %s" % exc)
    if p["options_file"] and not p["options"] and os.path.lexists(p["options_file"]):
        absent.append(p["options_file"])
        diff.append({"before_header": p["options_file"], "after_header": p["options_file"], "before": "(present)\n", "after": "(absent)\n"})
    changed_files = [w["dest"] for w in writes] + absent
    result = dict(
        loaded=to_load,
        changed_files=changed_files,
        options_changed=bool(p["options_file"]) and p["options_file"] in changed_files,
    )
    if p["state"] == "check":
        module.exit_json(changed=False, **result)
    if module.check_mode:
        module.exit_json(changed=bool(to_load or changed_files), diff=diff, **result)

    # act: the files (both or neither), then the modules in order
    commit_or_fail(module, "kernel_modules", writes)
    remove(absent)
    if to_load:
        modprobe = tool(module, "modprobe")
        for m in to_load:
            rc, out, err = module.run_command([modprobe, m], environ_update=C_ENV)
            if rc != 0:
                why = (err or out).strip()
                msg = "kernel_modules: modprobe %s failed (rc %d): %s" % (m, rc, why)
                module.fail_json(msg=msg, rc=rc, stdout=out, stderr=err, **result)
    module.exit_json(changed=bool(to_load or changed_files), diff=diff, **result)


if __name__ == "__main__":
    main()
