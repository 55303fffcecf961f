#!/usr/bin/python
"""Ansible module: apply sysctl values now, never touching a host kernel from a container."""

from __future__ import annotations

DOCUMENTATION = r"""
module: rackforge_sysctl
short_description: Apply kernel settings now, safely inside containers
description:
  - Writes each value to /proc/sys when it differs (the persistent copy is the role's
    /etc/sysctl.d file). On a host every key is applied. In a container (scope netns) only
    C(net.*) keys visible in the container's own network namespace are applied, which are the
    per-namespace ones; every other key is reported in C(skipped) with the reason, and nothing
    is applied at all when the container shares the host's network namespace.
  - A read-only /proc/sys (podman's default) is reported, not fatal.
options:
  settings: {description: "key -> value (e.g. net.ipv4.tcp_rmem: 4096 87380 16777216).", type: dict, required: true}
  scope: {description: auto detects a container., type: str, default: auto, choices: [auto, host, netns]}
  proc_root: {description: Where /proc/sys is., type: path, default: /proc/sys}
"""

RETURN = r"""
applied: {description: Keys whose value now equals the request (changed or already equal)., type: list, returned: always}
skipped: {description: "[{key, reason}] not applied now (persisted for boot).", type: list, returned: always}
scope: {description: The scope used., type: str, returned: always}
"""

import errno
import os

from ansible.module_utils.basic import AnsibleModule

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


def main():
    module = AnsibleModule(
        argument_spec={
            "settings": {"type": "dict", "required": True},
            "scope": {"type": "str", "default": "auto", "choices": ["auto", "host", "netns"]},
            "proc_root": {"type": "path", "default": "/proc/sys"},
        },
        supports_check_mode=True,
    )
    p = module.params
    scope = p["scope"]
    if scope == "auto":
        scope = "netns" if in_container(module) else "host"
    root = p["proc_root"]
    shared_host_netns = scope == "netns" and os.path.exists(os.path.join(root, HOST_NETNS_SENTINEL))
    applied, skipped, changed = [], [], False
    for key in sorted(p["settings"]):
        want = _norm(p["settings"][key])
        path = os.path.join(root, *key.split("."))
        if scope == "netns" and not key.startswith("net."):
            skipped.append({"key": key, "reason": "host-wide key: not applied from a container (persisted for the host's boot)"})
            continue
        if shared_host_netns:
            skipped.append({"key": key, "reason": "container shares the host's network namespace: nothing applied"})
            continue
        if not os.path.exists(path):
            reason = "not in this network namespace (host-wide key)" if scope == "netns" else "not present in this kernel"
            skipped.append({"key": key, "reason": reason})
            continue
        with open(path) as fh:
            current = _norm(fh.read())
        if current == want:
            applied.append(key)
            continue
        if module.check_mode:
            changed = True
            applied.append(key)
            continue
        try:
            with open(path, "w") as fh:
                fh.write(want + "\n")
        except OSError as exc:
            if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                skipped.append({"key": key, "reason": "/proc/sys is read-only here (%s): persisted for boot" % exc.strerror})
                continue
            module.fail_json(msg="%s: cannot set %r: %s" % (key, want, exc.strerror))
        changed = True
        applied.append(key)
    module.exit_json(changed=changed, applied=applied, skipped=skipped, scope=scope)


if __name__ == "__main__":
    main()
