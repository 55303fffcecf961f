"""Small text files a module keeps on the node (root-owned, 0644), the project's one way: read the
file (filestage.read_state), let units.file_changes decide, queue the write with its --diff entry,
then write every queued file or none (filestage.commit). Used by the modules that keep a file
beside what they apply: rackforge_health (baseline, textfile metrics), rackforge_sysctl (its
sysctl.d file), kernel_modules (modules-load.d and modprobe.d)."""

from __future__ import annotations

import os

from ansible.module_utils.rackforge.filestage import StageError, commit, read_state
from ansible.module_utils.rackforge.units import file_changes


def queue(dest, text, writes, diff):
    """Queue dest (0644 root) with text when its content, mode or owner differs, and its --diff
    entry; True when queued. Raises units.PlanError when dest is a directory."""
    have = read_state(dest)
    want = {"dest": dest, "data": text.encode("utf-8"), "mode": 0o644, "uid": 0, "gid": 0, "owner": "root", "group": "root"}
    if not file_changes(want, have):
        return False
    writes.append(want)
    diff.append({"before_header": dest, "after_header": dest, "before": (have["data"] or b"").decode("utf-8", "replace"), "after": text})
    return True


def commit_or_fail(module, who, writes, mkdirs=()):
    """Make mkdirs and write the queued files, all or none (nothing in check mode); a write whose
    directory neither exists nor is made fails first. who names the module in the error."""
    if module.check_mode or not (writes or mkdirs):
        return
    made = set(mkdirs)
    for w in writes:
        parent = os.path.dirname(w["dest"])
        if parent not in made and not os.path.isdir(parent):
            module.fail_json(msg="%s: %s: directory %s does not exist; nothing was changed" % (who, w["dest"], parent))
    try:
        commit(writes, list(mkdirs), module.run_command)
    except (OSError, StageError) as exc:
        paths = list(mkdirs) + [w["dest"] for w in writes]
        module.fail_json(msg="%s: could not write %s: %s; nothing was changed" % (who, ", ".join(paths), exc))
