#!/usr/bin/python
"""Ansible module: swap off now and at boot (the kubelet refuses to start with swap on), in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: swap_off
short_description: Turn swap off now and keep it off at boot, in one call
description:
  - Reads /proc/swaps and /etc/fstab. Every fstab line whose type is C(swap) is commented out
    (marked C(disabled by rackforge (kubelet))), written atomically; then C(swapoff -a) runs when
    /proc/swaps lists an active area. A node with neither reads two files and changes nothing.
  - In a container, /proc/swaps lists the host's swap, which the container must not switch off:
    the module says so in a warning and C(host_swap), and leaves it alone (the fstab is the
    container's own and is still fixed).
  - Check mode and C(--diff) show the fstab change and whether swapoff would run. A failing
    swapoff fails the task with its rc, stdout and stderr.
options:
  fstab: {description: The fstab to keep swap out of., type: path, default: /etc/fstab}
  proc_swaps: {description: Where the kernel lists the active swap areas., type: path, default: /proc/swaps}
"""

RETURN = r"""
active: {description: The swap areas that were active (the host's, in a container)., type: list, returned: always}
fstab_lines: {description: The fstab lines commented out (or that would be)., type: list, returned: always}
swapoff: {description: swapoff ran (or would)., type: bool, returned: always}
host_swap: {description: The active swap seen is the host's (a container) and was not touched., type: bool, returned: always}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV, in_container, read_file
from ansible.module_utils.rackforge.filestage import read_state
from ansible.module_utils.rackforge.rootfiles import commit_or_fail
from ansible.module_utils.rackforge.swap import active, fstab_without_swap


def main():
    module = AnsibleModule(
        argument_spec={
            "fstab": {"type": "path", "default": "/etc/fstab"},
            "proc_swaps": {"type": "path", "default": "/proc/swaps"},
        },
        supports_check_mode=True,
    )
    p = module.params
    areas = active(read_file(p["proc_swaps"], "") or "")
    host_swap = bool(areas) and in_container(module)
    have = read_state(p["fstab"])
    before = (have["data"] or b"").decode("utf-8", "replace")
    after, lines = fstab_without_swap(before)
    writes, diff = [], []
    if lines:
        # the fstab keeps its mode and owner
        mode = have.get("mode") or 0o644
        writes.append(
            {"dest": p["fstab"], "data": after.encode("utf-8"), "mode": mode, "uid": have.get("uid", 0), "gid": have.get("gid", 0)}
        )
        diff.append({"before_header": p["fstab"], "after_header": p["fstab"], "before": before, "after": after})
    swapoff = bool(areas) and not host_swap
    result = {"active": areas, "fstab_lines": lines, "swapoff": swapoff, "host_swap": host_swap}
    if host_swap:
        module.warn("/proc/swaps lists the host's swap (%s): not touched from a container" % ", ".join(areas))
    changed = bool(writes) or swapoff
    if module.check_mode or not changed:
        module.exit_json(changed=changed, diff=diff, **result)
    commit_or_fail(module, "swap_off", writes)
    if swapoff:
        rc, out, err = module.run_command([module.get_bin_path("swapoff", required=True), "-a"], environ_update=C_ENV)
        if rc != 0:
            module.fail_json(
                msg="swap_off: swapoff -a failed (rc %d): %s" % (rc, (err or out).strip()), rc=rc, stdout=out, stderr=err, **result
            )
    module.exit_json(changed=True, diff=diff, **result)


if __name__ == "__main__":
    main()
