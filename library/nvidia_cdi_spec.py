#!/usr/bin/python
"""Ansible module: the NVIDIA CDI spec for the running driver, written by nvidia-ctk, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_cdi_spec
short_description: Keep the NVIDIA CDI spec (nvidia-ctk cdi generate) current for the running driver and GPUs
description:
  - Runs C(nvidia-ctk cdi generate) into a scratch file beside I(path) and compares it with the spec
    there. The spec is replaced (atomically, 0644) only when it differs in substance, so a re-run on
    an unchanged node reports ok; a driver upgrade, a GPU that appeared or went, or a missing spec
    report changed.
  - nvidia-ctk 1.17.0-1.17.7 order a create-symlinks hook's C(--link) arguments (and update-ldcache's
    C(--folder)s) by Go map iteration (fixed in 1.17.8, NVIDIA/nvidia-container-toolkit dd40dadb), so
    two runs can differ only in that order: the comparison ignores it.
  - Check mode generates into a scratch directory and says whether the spec would change; C(--diff)
    shows the old and new spec.
  - The spec must be JSON (I(path) ends in .json), so every check reads it without a YAML parser.
options:
  path:
    description: Where the spec lives (a CDI spec directory: /var/run/cdi is regenerated every boot, /etc/cdi is not).
    type: path
    default: /var/run/cdi/nvidia.json
  nvidia_ctk:
    description: The nvidia-ctk binary (nvidia-container-toolkit).
    type: path
    default: /usr/bin/nvidia-ctk
"""

EXAMPLES = r"""
- name: Write the CDI spec for this driver
  nvidia_cdi_spec:
    path: /var/run/cdi/nvidia.json
"""

RETURN = r"""
devices:
  description: The device names the spec offers (each GPU by index and UUID, and all).
  type: list
  returned: always
cdi_version:
  description: The spec's cdiVersion.
  type: str
  returned: always
"""

import json
import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge.cdi import device_names, parse, read

# hooks whose repeated (flag, value) pairs nvidia-ctk 1.17.0-1.17.7 emit in map order
UNORDERED_HOOKS = ("create-symlinks", "update-ldcache")


def canonical(spec):
    """The spec with the map-ordered hook arguments sorted, as sorted-key JSON."""
    spec = json.loads(json.dumps(spec))
    edits = [spec.get("containerEdits") or {}] + [d.get("containerEdits") or {} for d in spec["devices"]]
    for edit in edits:
        for hook in edit.get("hooks") or []:
            args = hook.get("args") or []
            if len(args) > 1 and args[1] in UNORDERED_HOOKS:
                pairs = sorted(zip(args[2::2], args[3::2]))
                hook["args"] = args[:2] + [x for pair in pairs for x in pair]
    return json.dumps(spec, sort_keys=True)


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "default": "/var/run/cdi/nvidia.json"},
            "nvidia_ctk": {"type": "path", "default": "/usr/bin/nvidia-ctk"},
        },
        supports_check_mode=True,
    )
    path, ctk = module.params["path"], module.params["nvidia_ctk"]
    if not path.endswith(".json"):
        module.fail_json(msg="path: %s must end in .json (the spec is written as JSON)" % path)
    if not os.path.exists(ctk):
        if module.check_mode:  # a check run before the toolkit's install: the spec would be written
            module.exit_json(changed=True, path=path, devices=[], cdi_version=None, msg="%s is not installed yet" % ctk)
        module.fail_json(msg="nvidia_ctk: %s is not installed (nvidia-container-toolkit)" % ctk)
    directory = os.path.dirname(path)
    if not module.check_mode:
        os.makedirs(directory, mode=0o755, exist_ok=True)
    scratch = tempfile.mkdtemp(dir=directory if os.path.isdir(directory) else None, prefix=".rackforge-cdi-")
    try:
        new_path = os.path.join(scratch, "nvidia.json")
        cmd = [ctk, "cdi", "generate", "--output=" + new_path]
        rc, out, err = module.run_command(cmd, environ_update={"LC_ALL": "C"})
        new_text = read(new_path)
        if rc != 0 or new_text is None:
            module.fail_json(msg="nvidia-ctk cdi generate failed (rc %d)" % rc, rc=rc, stdout=out, stderr=err, cmd=cmd)
        try:
            new = parse(new_text)
        except ValueError as exc:
            module.fail_json(msg="nvidia-ctk wrote no usable spec: %s" % exc, rc=rc, stdout=out, stderr=err, cmd=cmd)
        old_text = read(path)
        try:
            old = parse(old_text) if old_text is not None else None
        except ValueError:
            old = None
        changed = old is None or canonical(old) != canonical(new)
        if changed and not module.check_mode:
            os.chmod(new_path, 0o644)
            os.replace(new_path, path)
        result = {"changed": changed, "path": path, "devices": device_names(new), "cdi_version": new["cdiVersion"]}
        if module._diff and changed:
            before = json.dumps(old, indent=2) + "\n" if old is not None else (old_text or "")
            result["diff"] = {"before": before, "after": json.dumps(new, indent=2) + "\n", "before_header": path, "after_header": path}
        module.exit_json(**result)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
