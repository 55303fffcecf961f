#!/usr/bin/python
"""Ansible module: apply sysctl values now, never touching a host kernel from a container."""

from __future__ import annotations

DOCUMENTATION = r"""
module: rackforge_sysctl
short_description: Persist kernel settings in a sysctl.d file and apply them now, safely inside containers
description:
  - With O(file), first writes the persistent copy (O(header) as comments, then C(key = value)
    sorted by key) where it differs, atomically; check mode and C(--diff) show it.
  - Writes each value to /proc/sys when it differs. On a host every key is applied. In a container (scope netns) only
    C(net.*) keys visible in the container's own network namespace are applied, which are the
    per-namespace ones; every other key is reported in C(not_applied) with the reason, and nothing
    is applied at all when the container shares the host's network namespace.
  - A read-only /proc/sys (podman's default) is reported, not fatal; with O(report) the keys not
    applied now are a warning of the task (they wait for the next boot).
  - With O(congestion_control), also decides C(net.ipv4.tcp_congestion_control) from what the
    kernel offers (C(tcp_available_congestion_control)): C(auto) is bbr where the kernel has it,
    built in or as the module C(tcp_bbr) (C(modinfo)), else cubic; a name must be offered or be a
    C(tcp_<name>) module, else the call fails before any change, naming O(congestion_control_var).
    A module it needs is loaded (C(modprobe)) and listed in O(module_load_file) for every boot,
    written together with O(file), both or neither.
  - O(modules) are kernel modules the settings or their owner need (br_netfilter makes the
    C(net.bridge.*) keys exist; overlay for containerd): a module this kernel does not have
    (neither loaded nor known to C(modinfo)) fails the call before any change, naming
    O(modules_var); the others are listed in O(module_load_file) and the ones not loaded are
    loaded before the settings are applied. A re-run with every module loaded reads /sys/module only.
options:
  settings: {description: "key -> value (e.g. net.ipv4.tcp_rmem: 4096 87380 16777216).", type: dict, required: true}
  scope: {description: auto detects a container., type: str, default: auto, choices: [auto, host, netns]}
  proc_root: {description: Where /proc/sys is., type: path, default: /proc/sys}
  file: {description: "The sysctl.d file that persists the settings ('' = none written).", type: str, default: ""}
  header: {description: Comment lines at the top of O(file) (each gets a leading C(# ))., type: str, default: Managed by rackforge}
  congestion_control: {description: "auto, an algorithm (bbr, cubic, ...), or '' to leave it to O(settings).", type: str, default: ""}
  congestion_control_var: {description: Where O(congestion_control) came from (named in errors)., type: str, default: congestion_control}
  modules: {description: Kernel modules loaded now (before the settings) and at every boot., type: list, elements: str, default: []}
  modules_var: {description: Where O(modules) came from (named in errors)., type: str, default: modules}
  module_load_file:
    description: "The modules-load.d file for O(modules) and a congestion control module ('' = none written)."
    type: str
    default: ""
  owner: {description: What O(module_load_file)'s header names as its owner (a role)., type: str, default: rackforge}
  sysfs_root: {description: Where sysfs is (which modules are loaded)., type: path, default: /sys}
  report: {description: Warn about the keys not applied now., type: bool, default: false}
"""

RETURN = r"""
applied: {description: Keys whose value now equals the request (changed or already equal)., type: list, returned: always}
not_applied: {description: "[{key, reason}] not applied now (persisted for boot).", type: list, returned: always}
file_changed: {description: O(file) or O(module_load_file) was written (or would be)., type: bool, returned: always}
scope: {description: The scope used., type: str, returned: always}
congestion_control: {description: The algorithm chosen (with O(congestion_control))., type: str, returned: always}
loaded: {description: "The modules (O(modules), the congestion control's) this call loaded (or would).", type: list, returned: always}
"""

import errno
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV, in_container, kmods
from ansible.module_utils.rackforge.rootfiles import commit_or_fail, queue
from ansible.module_utils.rackforge.units import PlanError

# exists only in the initial network namespace: visible from a container = host network
HOST_NETNS_SENTINEL = "net/core/netdev_max_backlog"


def _norm(value):
    return " ".join(str(value).split())


def render(header, settings):
    """The sysctl.d file: the header's lines as comments, then one `key = value` per key, sorted."""
    lines = ["# %s\n" % line if line else "#\n" for line in header.splitlines()]
    return "".join(lines + ["%s = %s\n" % (key, _norm(settings[key])) for key in sorted(settings)])


def choose_congestion_control(want, offered, has_module, var):
    """(algorithm, module to load or None) for a request: `auto` is bbr where the kernel offers it
    or has tcp_bbr, else cubic; a name must be offered or be a module (has_module(name) -> bool).
    Raises ValueError naming the variable."""
    if want == "auto":
        if "bbr" in offered:
            return "bbr", None
        return ("bbr", "tcp_bbr") if has_module("tcp_bbr") else ("cubic", None)
    if want in offered:
        return want, None
    if has_module("tcp_" + want):
        return want, "tcp_" + want
    raise ValueError(
        "%s = %r: this kernel offers %s and has no module tcp_%s" % (var, want, ", ".join(offered) or "no algorithm at all", want)
    )


def congestion_control(module, p, settings):
    """Decide the algorithm (into settings) and the module it needs; (algorithm, module or None)."""
    path = os.path.join(p["proc_root"], "net", "ipv4", "tcp_available_congestion_control")
    try:
        with open(path) as fh:
            offered = fh.read().split()
    except OSError:
        offered = []
    modinfo = module.get_bin_path("modinfo")

    def has_module(name):
        return kmods.known(module, modinfo, [name])[name]

    try:
        algorithm, kmod = choose_congestion_control(p["congestion_control"], offered, has_module, p["congestion_control_var"])
    except ValueError as exc:
        module.fail_json(msg="%s. Nothing was changed." % exc)
    settings["net.ipv4.tcp_congestion_control"] = algorithm
    return algorithm, kmod


def plan_modules(module, p, kmod):
    """(every module wanted, in order; those to load now): O(modules) then the congestion control's
    (kmod, already known to modinfo). Fails, before any change, naming O(modules_var), where this
    kernel lacks one."""
    wanted = list(dict.fromkeys(list(p["modules"]) + ([kmod] if kmod else [])))
    loaded = kmods.loaded(wanted, p["sysfs_root"])
    # the congestion control's module: modinfo already said this kernel has it
    ask = [m for m in wanted if kmods.sysfs_name(m) not in loaded and m != kmod]
    available = dict(kmods.known(module, module.get_bin_path("modinfo") if ask else None, ask), **({kmod: True} if kmod else {}))
    try:
        return wanted, kmods.plan(wanted, loaded, available, p["modules_var"])
    except kmods.KmodError as exc:
        module.fail_json(msg="%s. Nothing was changed." % exc)


def persist(module, p, settings, wanted):
    """Write O(file) and the modules' boot list (0644 root) where they differ, both or neither;
    returns (changed, diff entries)."""
    for key in ("file", "module_load_file"):
        if p[key] and not os.path.isabs(p[key]):
            module.fail_json(msg="rackforge_sysctl: %s must be an absolute path, got %r" % (key, p[key]))
    writes, diff = [], []
    try:
        if p["file"]:
            queue(p["file"], render(p["header"], settings), writes, diff)
        if wanted and p["module_load_file"]:
            queue(p["module_load_file"], kmods.load_file(p["owner"], wanted), writes, diff)
    except PlanError as exc:
        module.fail_json(msg="rackforge_sysctl: %s" % exc)
    commit_or_fail(module, "rackforge_sysctl", writes)
    return bool(writes), diff


def main():
    module = AnsibleModule(
        argument_spec={
            "settings": {"type": "dict", "required": True},
            "scope": {"type": "str", "default": "auto", "choices": ["auto", "host", "netns"]},
            "proc_root": {"type": "path", "default": "/proc/sys"},
            "file": {"type": "str", "default": ""},
            "header": {"type": "str", "default": "Managed by rackforge"},
            "congestion_control": {"type": "str", "default": ""},
            "congestion_control_var": {"type": "str", "default": "congestion_control"},
            "modules": {"type": "list", "elements": "str", "default": []},
            "modules_var": {"type": "str", "default": "modules"},
            "module_load_file": {"type": "str", "default": ""},
            "owner": {"type": "str", "default": "rackforge"},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "report": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    p = module.params
    settings = dict(p["settings"])
    algorithm, kmod = congestion_control(module, p, settings) if p["congestion_control"] else ("", None)
    wanted, to_load = plan_modules(module, p, kmod)
    file_changed, diff = persist(module, p, settings, wanted)
    if to_load and not module.check_mode:
        modprobe = module.get_bin_path("modprobe", required=True)
        for name in to_load:  # in the order given: before the settings whose keys they make
            rc, out, err = module.run_command([modprobe, name], environ_update=C_ENV)
            if rc != 0:
                module.fail_json(
                    msg="rackforge_sysctl: modprobe %s failed (rc %d): %s" % (name, rc, (err or out).strip()),
                    rc=rc,
                    stdout=out,
                    stderr=err,
                )
    scope = p["scope"]
    if scope == "auto":
        scope = "netns" if in_container(module) else "host"
    root = p["proc_root"]
    shared_host_netns = scope == "netns" and os.path.exists(os.path.join(root, HOST_NETNS_SENTINEL))
    # (reported as not_applied, never "skipped": Ansible reads a true "skipped" in a result as a skipped task)
    applied, not_applied, changed = [], [], file_changed or bool(to_load)
    for key in sorted(settings):
        want = _norm(settings[key])
        path = os.path.join(root, *key.split("."))
        if scope == "netns" and not key.startswith("net."):
            not_applied.append({"key": key, "reason": "host-wide key: not applied from a container (persisted for the host's boot)"})
            continue
        if shared_host_netns:
            not_applied.append({"key": key, "reason": "container shares the host's network namespace: nothing applied"})
            continue
        if not os.path.exists(path):
            reason = "not in this network namespace (host-wide key)" if scope == "netns" else "not present in this kernel"
            not_applied.append({"key": key, "reason": reason})
            continue
        with open(path) as fh:
            current = _norm(fh.read())
        if current == want:
            applied.append(key)
            continue
        if module.check_mode:
            # what the real run would meet: a read-only /proc/sys (access(2) says EROFS) is a key
            # not applied, not a change
            if not os.access(path, os.W_OK):
                not_applied.append({"key": key, "reason": "/proc/sys is read-only here: persisted for boot"})
                continue
            changed = True
            applied.append(key)
            continue
        try:
            with open(path, "w") as fh:
                fh.write(want + "\n")
        except OSError as exc:
            if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                not_applied.append({"key": key, "reason": "/proc/sys is read-only here (%s): persisted for boot" % exc.strerror})
                continue
            module.fail_json(msg="%s: cannot set %r: %s" % (key, want, exc.strerror))
        changed = True
        applied.append(key)
    if p["report"] and not_applied:
        where = " (persisted in %s)" % p["file"] if p["file"] else ""
        module.warn("not applied now, scope %s%s: %s" % (scope, where, "; ".join("%s (%s)" % (s["key"], s["reason"]) for s in not_applied)))
    module.exit_json(
        changed=changed,
        applied=applied,
        not_applied=not_applied,
        scope=scope,
        file_changed=file_changed,
        congestion_control=algorithm,
        loaded=to_load,
        diff=diff,
    )


if __name__ == "__main__":
    main()
