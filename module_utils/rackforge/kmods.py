"""Kernel modules as a role asks for them: which to load now and at boot, with which options.

Pure functions (no I/O) but two readers: loaded() (/sys/module) and known() (`modinfo -F name`),
the one place the modules `kernel_modules` and `rackforge_sysctl` ask the node which modules it
has; the modules read the files, and these decide. The options a role may write are the parameters `modinfo -p` of the installed
module lists: a name copied from an old guide (ib_uverbs disable_raw_qp) is refused, naming the
variable and the parameters the module really has."""

from __future__ import annotations

import os

from ansible.module_utils.rackforge import C_ENV


class KmodError(ValueError):
    """A request this node's kernel cannot honour (the message names the variable)."""


def sysfs_name(name):
    """The directory /sys/module uses for a module: modprobe accepts dashes, the kernel has underscores."""
    return name.replace("-", "_")


def loaded(modules, sysfs_root):
    """The sysfs names of those of `modules` that are loaded (their /sys/module directory exists)."""
    return {m for m in (sysfs_name(x) for x in modules) if os.path.isdir(os.path.join(sysfs_root, "module", m))}


def known(module, modinfo, names):
    """{name: whether this kernel has it} from `modinfo -F name NAME` (exit 0); all False without
    modinfo. module: the AnsibleModule that runs it."""
    return {m: bool(modinfo) and module.run_command([modinfo, "-F", "name", m], environ_update=C_ENV)[0] == 0 for m in names}


def parse_params(text):
    """Parameter names from `modinfo -p` output (one `name:description (type)` per line)."""
    return [line.split(":", 1)[0].strip() for line in text.splitlines() if ":" in line and line.split(":", 1)[0].strip()]


def option_problems(options, params, options_var):
    """Error lines for options naming a module modinfo did not find or a parameter it lacks.
    options: {module: {param: value}}; params: {module: (parameter names, "") from `modinfo -p`, or
    (None, why) where it failed}."""
    out = []
    for module in sorted(options):
        have, why = params.get(module, (None, "not read"))
        if have is None:
            out.append("%s.%s: module %s not found on this node (%s)" % (options_var, module, module, why.strip()))
            continue
        unknown = sorted(set(options[module]) - set(have))
        if unknown:
            out.append(
                "%s.%s: unknown parameter(s) %s; %s has %s (modinfo -p)"
                % (options_var, module, ", ".join(unknown), module, ", ".join(have) if have else "no parameters at all")
            )
    return out


def render_value(value):
    """A parameter's value as modprobe.d takes it: a YAML boolean as 1/0, which every kernel's bool
    parameters accept (the words true/false are not read by older kernels)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def load_file(owner, modules):
    """The modules-load.d list (one module per line)."""
    return "".join(["# Managed by rackforge (%s): loaded at every boot\n" % owner] + ["%s\n" % m for m in modules])


def options_file(owner, options):
    """The modprobe.d options file: one `options` line per module, parameters sorted."""
    lines = [
        "# Managed by rackforge (%s)\n" % owner,
        "# Every parameter below was checked against `modinfo -p` of the installed module.\n",
    ]
    for module in sorted(options):
        params = options[module]
        lines.append("options %s%s\n" % (module, "".join(" %s=%s" % (k, render_value(params[k])) for k in sorted(params))))
    return "".join(lines)


def plan(modules, loaded, available, modules_var):
    """The modules to load now, in the order asked (each once). loaded: names whose /sys/module
    directory exists; available: {name: True/False} from modinfo for the others. Raises KmodError
    naming every module this kernel does not have."""
    missing = [m for m in modules if sysfs_name(m) not in loaded and not available.get(m)]
    if missing:
        raise KmodError(
            "%s: this kernel has no module %s (modinfo found none); the list takes modules this kernel has (`modinfo NAME` knows them)"
            % (modules_var, ", ".join(missing))
        )
    out = []
    for m in modules:
        if sysfs_name(m) not in loaded and m not in out:
            out.append(m)
    return out
