#!/usr/bin/python
"""Ansible module: set top-level keys of the NVIDIA Container Toolkit's config.toml in place."""

from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_ctk_config
short_description: Set the NVIDIA Container Toolkit's top-level settings (GPU isolation) in config.toml
description:
  - Sets top-level keys of /etc/nvidia-container-runtime/config.toml, as C(nvidia-ctk config --set
    KEY=VALUE --in-place) would, without needing nvidia-ctk: the line for the key (or its commented
    default, which the package's postinst writes) is replaced in place and every other line is kept.
  - Only keys the toolkit reads at the top level are accepted (module_utils/rackforge/ctkconfig.py
    lists them): the toolkit ignores unknown or misplaced keys without a word, which would leave
    GPUs open while the file looked right. The written text is parsed again, and nothing is
    written unless each key reads back with its value and every other key is unchanged.
  - Reads and writes in one call; check mode and diff are exact. The runtime reads the file at
    each container start, so nothing needs a restart.
options:
  path: {description: The toolkit's config file., type: path, default: /etc/nvidia-container-runtime/config.toml}
  settings: {description: "Top-level key -> value.", type: dict, required: true}
  backup: {description: Keep a timestamped copy of the file replaced., type: bool, default: true}
"""

RETURN = r"""
changes: {description: "Keys set ([] when nothing changed).", type: list, returned: always}
settings: {description: The top-level values the file holds afterwards (would hold, in check mode)., type: dict, returned: success}
backup_file: {description: The copy of the replaced file., type: str, returned: when a backup was made}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import filestage
from ansible.module_utils.rackforge.ctkconfig import problems, set_top_level
from ansible.module_utils.rackforge.tomlr import TOMLDecodeError


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "default": "/etc/nvidia-container-runtime/config.toml"},
            "settings": {"type": "dict", "required": True},
            "backup": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    bad = problems(p["settings"])
    if bad:
        module.fail_json(msg="settings: %s" % "; ".join(bad), changes=[])
    have = filestage.read_state(p["path"])
    before_text = (have["data"] or b"").decode()
    try:
        after_text, changes = set_top_level(before_text, p["settings"])
    except TOMLDecodeError as exc:
        module.fail_json(
            msg="%s is not valid TOML (%s): fix or remove it; rackforge does not rewrite a file it cannot read" % (p["path"], exc),
            changes=[],
        )
    except ValueError as exc:
        module.fail_json(msg="%s: %s (nothing written)" % (p["path"], exc), changes=[])
    result = {"changes": changes, "settings": dict(p["settings"])}
    if not changes:
        module.exit_json(changed=False, **result)
    diff = {"before": before_text, "after": after_text, "before_header": p["path"], "after_header": p["path"]}
    if module.check_mode:
        module.exit_json(changed=True, diff=diff, **result)
    if p["backup"] and before_text:
        result["backup_file"] = module.backup_local(p["path"])
    # staged beside the file and renamed over it; a file already there keeps its owner
    write = {"dest": p["path"], "data": after_text.encode(), "mode": 0o644, "uid": have.get("uid", 0), "gid": have.get("gid", 0)}
    filestage.commit([write], have["missing_dirs"], None)
    module.exit_json(changed=True, diff=diff, **result)


if __name__ == "__main__":
    main()
