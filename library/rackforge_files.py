#!/usr/bin/python
"""Ansible module: several small files (rendered on the controller) in one round trip."""

from __future__ import annotations

DOCUMENTATION = r"""
module: rackforge_files
short_description: Write several small files with their modes and owners in one call
description:
  - The content is rendered on the controller (a template lookup); the node compares each file
    (content, mode, owner, group) and writes only those that differ, each atomically (a temporary
    file in the same directory, renamed over the old one). One round trip for a role's files,
    where template/copy take two per file (a stat, then copy or file).
  - Check mode reports what would change; diff mode returns the before/after text.
  - Every file is checked before the first is written, so a bad entry changes nothing.
options:
  files:
    description: "[{dest, content, mode (octal string), owner, group, validate (argv with %s, optional)}]"
    type: list
    elements: dict
    required: true
"""

RETURN = r"""
changed_files: {description: The dest of every file written (or that would be, in check mode)., type: list, returned: always}
"""

import grp
import os
import pwd
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge.filestage import read_bytes as read


def wanted_ids(module, item):
    try:
        uid = pwd.getpwnam(item.get("owner") or "root").pw_uid
        gid = grp.getgrnam(item.get("group") or "root").gr_gid
    except KeyError as exc:
        module.fail_json(msg="rackforge_files: %s: unknown owner or group (%s)" % (item["dest"], exc))
    return uid, gid


def main():
    module = AnsibleModule(argument_spec={"files": {"type": "list", "elements": "dict", "required": True}}, supports_check_mode=True)
    changed = []  # the entries whose file differs (content, mode, owner or group)
    for item in module.params["files"]:
        dest, content = item.get("dest"), item.get("content")
        if not dest or not os.path.isabs(dest) or content is None:
            module.fail_json(msg="rackforge_files: every entry needs an absolute dest and a content; got dest %r" % (dest,))
        mode = int(str(item.get("mode", "0644")), 8)
        uid, gid = wanted_ids(module, item)
        data = content.encode("utf-8")
        old = read(dest)
        st = os.stat(dest) if old is not None else None
        # in check mode a directory an earlier task would create is not there yet: a change, not an error
        if not os.path.isdir(os.path.dirname(dest)) and not module.check_mode:
            module.fail_json(msg="rackforge_files: %s: directory %s does not exist" % (dest, os.path.dirname(dest)))
        if old != data or (st.st_mode & 0o7777) != mode or st.st_uid != uid or st.st_gid != gid:
            changed.append({"dest": dest, "data": data, "old": old, "mode": mode, "uid": uid, "gid": gid, "validate": item.get("validate")})
    diff = [
        {
            "before_header": c["dest"],
            "after_header": c["dest"],
            "before": (c["old"] or b"").decode("utf-8", "replace"),
            "after": c["data"].decode("utf-8", "replace"),
        }
        for c in changed
        if c["old"] != c["data"]
    ]
    if not module.check_mode:
        # every new file written and validated beside its target first, then all renamed: a
        # failing validation leaves every file as it was
        staged = []
        try:
            for c in changed:
                fd, tmp = tempfile.mkstemp(prefix=".rackforge-", dir=os.path.dirname(c["dest"]))
                staged.append(tmp)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(c["data"])
                os.chmod(tmp, c["mode"])
                os.chown(tmp, c["uid"], c["gid"])
                if c["validate"]:
                    argv = [str(a).replace("%s", tmp) for a in c["validate"]]
                    rc, out, err = module.run_command(argv)
                    if rc != 0:
                        module.fail_json(
                            msg="rackforge_files: %s: validation %s failed (nothing written): %s%s" % (c["dest"], argv, out, err),
                            rc=rc,
                            stdout=out,
                            stderr=err,
                        )
            for tmp, c in zip(staged, changed):
                os.rename(tmp, c["dest"])
        finally:
            for tmp in staged:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    module.exit_json(changed=bool(changed), changed_files=[c["dest"] for c in changed], diff=diff)


if __name__ == "__main__":
    main()
