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
  - A read-only /proc/sys (podman's default) is reported, not fatal.
options:
  settings: {description: "key -> value (e.g. net.ipv4.tcp_rmem: 4096 87380 16777216).", type: dict, required: true}
  scope: {description: auto detects a container., type: str, default: auto, choices: [auto, host, netns]}
  proc_root: {description: Where /proc/sys is., type: path, default: /proc/sys}
  file: {description: "The sysctl.d file that persists the settings ('' = none written).", type: str, default: ""}
  header: {description: Comment lines at the top of O(file) (each gets a leading C(# ))., type: str, default: Managed by rackforge}
"""

RETURN = r"""
applied: {description: Keys whose value now equals the request (changed or already equal)., type: list, returned: always}
not_applied: {description: "[{key, reason}] not applied now (persisted for boot).", type: list, returned: always}
file_changed: {description: O(file) was written (or would be)., type: bool, returned: always}
scope: {description: The scope used., type: str, returned: always}
"""

import errno
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge.rootfiles import commit_or_fail, queue
from ansible.module_utils.rackforge.units import PlanError

# exists only in the initial network namespace: visible from a container = host network
HOST_NETNS_SENTINEL = "net/core/netdev_max_backlog"


def _norm(value):
    return " ".join(str(value).split())


def in_container(module):
    if os.path.exists("/run/.containerenv") or os.path.exists("/.dockerenv"):
        return True
    tool = module.get_bin_path("systemd-detect-virt")
    if tool:
        rc, _, _ = module.run_command([tool, "--container", "--quiet"])
        return rc == 0
    return False


def render(header, settings):
    """The sysctl.d file: the header's lines as comments, then one `key = value` per key, sorted."""
    lines = ["# %s\n" % line if line else "#\n" for line in header.splitlines()]
    return "".join(lines + ["%s = %s\n" % (key, _norm(settings[key])) for key in sorted(settings)])


def persist(module, path, text):
    """Write path (0644 root) when it differs; returns (changed, diff)."""
    if not os.path.isabs(path):
        module.fail_json(msg="rackforge_sysctl: file must be an absolute path, got %r" % path)
    writes, diff = [], []
    try:
        queue(path, text, writes, diff)
    except PlanError as exc:
        module.fail_json(msg="rackforge_sysctl: %s" % exc)
    commit_or_fail(module, "rackforge_sysctl", writes)
    return bool(writes), (diff[0] if diff else None)


def main():
    module = AnsibleModule(
        argument_spec={
            "settings": {"type": "dict", "required": True},
            "scope": {"type": "str", "default": "auto", "choices": ["auto", "host", "netns"]},
            "proc_root": {"type": "path", "default": "/proc/sys"},
            "file": {"type": "str", "default": ""},
            "header": {"type": "str", "default": "Managed by rackforge"},
        },
        supports_check_mode=True,
    )
    p = module.params
    file_changed, diff = persist(module, p["file"], render(p["header"], p["settings"])) if p["file"] else (False, None)
    scope = p["scope"]
    if scope == "auto":
        scope = "netns" if in_container(module) else "host"
    root = p["proc_root"]
    shared_host_netns = scope == "netns" and os.path.exists(os.path.join(root, HOST_NETNS_SENTINEL))
    # (reported as not_applied, never "skipped": Ansible reads a true "skipped" in a result as a skipped task)
    applied, not_applied, changed = [], [], file_changed
    for key in sorted(p["settings"]):
        want = _norm(p["settings"][key])
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
    module.exit_json(changed=changed, applied=applied, not_applied=not_applied, scope=scope, file_changed=file_changed, diff=diff or {})


if __name__ == "__main__":
    main()
