#!/usr/bin/python
"""Ansible module: systemd units and their files (unit files, drop-ins, scripts) in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
module: rackforge_units
short_description: Write a concern's unit files and scripts, and enable, start and restart its units, in one call
description:
  - Reads every file (bytes, mode, owner) and every unit (one C(systemctl show) for all of them),
    decides what differs (module_utils/rackforge/units.py) and changes only that. A run that finds
    everything as wanted runs no other command.
  - "Order: missing and drifted directories, every changed file staged beside its target, validated, then all
    renamed (a failing validation leaves every file as it was); stop; disable; remove the absent
    files; enable; one daemon-reload when a file under a systemd unit directory changed or was
    removed, enablement changed or a unit says NeedDaemonReload; then start, restart, reload."
  - A unit that must run or be enabled fails before any change when systemd does not know it and
    no file in the call provides it (its unit file, template or drop-in), or when it is masked;
    after the daemon-reload such units are read again and the call fails naming any systemd
    still cannot load.
  - Check mode changes nothing and returns the actions it would take; C(--diff) shows each file's
    text, mode/owner drift, removals and unit states before and after.
  - For a oneshot unit without RemainAfterExit (a boot script) leave I(state) unset (it is inactive
    after it ran, so C(started) would start it on every run).
options:
  files:
    description:
      - "Files to write: {dest, content, mode (octal string or number, default 0644), owner (root), group (root),
        validate (argv list, or a string split like a shell would, with %s for the staged file; optional),
        or secret_content instead of content: a no_log parameter, for a file that holds secrets
        (its whole text is masked wherever Ansible would print or log it, and --diff says only that
        it changes, never its old or new text)}."
      - Missing parent directories are created (0755, root), e.g. a unit's drop-in directory.
    type: list
    elements: dict
    default: []
  directories:
    description:
      - "Directories to make or keep: {path, mode (default 0755), owner (root), group (root)}; made
        before any file (so a file may go inside one), parents first; an existing one keeps its
        content and gets the mode and owner asked for (not recursively)."
    type: list
    elements: dict
    default: []
  absent:
    description: Files (or symlinks) that must not exist, e.g. a removed timer or a stale drop-in.
    type: list
    elements: path
    default: []
  units:
    description:
      - "{name, enabled (true, false, or null: leave), state (started, stopped, or null: leave),
        restart_on (dests from files/absent), reload_on (same)}."
      - "restart_on: when one of those paths changed in this call, a running unit is restarted (a unit
        whose state is started and that is not running is started anyway). reload_on does the same with
        C(systemctl reload). A stopped unit is never restarted. A name without a suffix is a service."
      - "A restart is remembered in O(pending_dir) before anything changes, and the marker is removed
        only once the unit started or restarted: a restart that fails (a mount unit whose share is
        busy, a daemon that does not come back), or a call that fails after writing the files, leaves
        it to the next run, which restarts the unit although its files are current; so a unit never
        stays on its old configuration without a failed task saying so."
    type: list
    elements: dict
    default: []
  pending_dir:
    description: Where a restart that has not succeeded yet is remembered (one empty file per unit).
    type: path
    default: /var/lib/rackforge/restart-pending
  redact:
    description:
      - Secrets the files carry (a receiver's URL, a password). Ansible masks each wherever it would
        appear in the result (a validator's output, the diff, the file list), also where the task's
        C(no_log) does not reach (ansible-core 2.19 prints a failed task's message).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Boot unit and script for the GPU settings, enabled; node_exporter restarted when its defaults change
  rackforge_units:
    files:
      - {dest: /usr/local/sbin/rackforge-gpu-tuning, mode: "0755", content: "{{ lookup('template', 'apply.sh.j2') }}"}
      - {dest: /etc/systemd/system/rackforge-gpu-tuning.service, content: "{{ lookup('template', 'unit.j2') }}",
         validate: [systemd-analyze, verify, "%s"]}
      - {dest: /etc/default/prometheus-node-exporter, content: "{{ lookup('template', 'defaults.j2') }}"}
    absent: [/etc/systemd/system/rackforge-gpu-tuning-night.timer]
    units:
      - {name: rackforge-gpu-tuning.service, enabled: true}
      - {name: rackforge-gpu-tuning-night.timer, enabled: false, state: stopped}
      - {name: prometheus-node-exporter.service, enabled: true, state: started, restart_on: [/etc/default/prometheus-node-exporter]}
"""

RETURN = r"""
actions:
  description: "What was done (would be, in check mode), in order: 'write /x (content)', 'daemon-reload', 'start u', ..."
  type: list
  returned: always
changed_files: {description: The dest of every file written (or that would be)., type: list, returned: always}
changed_directories: {description: Every directory made or given its mode and owner (or that would be)., type: list, returned: always}
removed_files: {description: The absent paths that existed and were removed (or would be)., type: list, returned: always}
units:
  description: "name -> {before: {load, enabled, active, sub}, after: {...}}: read again after changes, predicted in check mode."
  type: dict
  returned: always
diff:
  description: Before/after of each changed file, its mode/owner, each removal and each unit state (with --diff).
  type: list
  returned: when diff mode
"""

import os
import shlex

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV, filestage
from ansible.module_utils.rackforge import units as plan_units
from ansible.module_utils.rackforge.service import forget_restart, remember_restart, restart_pending

FILE_OPTIONS = {
    "dest": {"type": "path", "required": True},
    "content": {"type": "str"},
    # AnsibleModule masks a no_log value wherever it appears in the result and keeps it out of the
    # node's log, whatever quoting or escaping the file's format gave the secrets inside it
    "secret_content": {"type": "str", "no_log": True},
    "mode": {"type": "raw", "default": "0644"},
    "owner": {"type": "str", "default": "root"},
    "group": {"type": "str", "default": "root"},
    "validate": {"type": "raw"},
}
DIR_OPTIONS = {
    "path": {"type": "path", "required": True},
    "mode": {"type": "raw", "default": "0755"},
    "owner": {"type": "str", "default": "root"},
    "group": {"type": "str", "default": "root"},
}
UNIT_OPTIONS = {
    "name": {"type": "str", "required": True},
    "enabled": {"type": "bool"},
    "state": {"type": "str", "choices": ["started", "stopped"]},
    "restart_on": {"type": "list", "elements": "path", "default": []},
    "reload_on": {"type": "list", "elements": "path", "default": []},
}


def _meta(module, what, item):
    """(mode, uid, gid) of a files or directories entry; fails naming the entry."""
    mode = item["mode"]
    if isinstance(mode, int) and 0 <= mode <= 0o7777:  # YAML's unquoted 0644 arrives as 420
        pass
    elif isinstance(mode, str) and mode.isdigit() and set(mode) <= set("01234567") and len(mode) <= 5:
        mode = int(mode, 8)
    else:
        module.fail_json(msg="rackforge_units: %s: mode %r is not an octal mode such as '0644'" % (what, item["mode"]))
    try:
        return mode, filestage.uid_of(item["owner"]), filestage.gid_of(item["group"])
    except KeyError:
        module.fail_json(msg="rackforge_units: %s: this node has no user %r or no group %r" % (what, item["owner"], item["group"]))


def wanted_dir(module, item):
    mode, uid, gid = _meta(module, item["path"], item)
    return {"path": item["path"], "mode": mode, "uid": uid, "gid": gid, "owner": item["owner"], "group": item["group"]}


def wanted_file(module, item):
    dest = item["dest"]
    if (item["content"] is None) == (item["secret_content"] is None):
        module.fail_json(msg="rackforge_units: %s: give content or secret_content, one of them" % dest)
    mode, uid, gid = _meta(module, dest, item)
    validate = item.get("validate")
    if isinstance(validate, str):
        validate = shlex.split(validate)
    if validate is not None and (not isinstance(validate, list) or not validate or not any("%s" in str(a) for a in validate)):
        module.fail_json(
            msg="rackforge_units: %s: validate must be a command (argv) with %%s for the file; got %r" % (dest, item["validate"])
        )
    return {
        "dest": dest,
        "data": (item["content"] if item["secret_content"] is None else item["secret_content"]).encode("utf-8"),
        "mode": mode,
        "uid": uid,
        "gid": gid,
        "owner": item["owner"],
        "group": item["group"],
        "validate": validate,
        "secret": item["secret_content"] is not None,
    }


def read_units(module, systemctl, names, done):
    argv = plan_units.show_argv(systemctl, names)
    rc, out, err = module.run_command(argv, environ_update=C_ENV)
    if rc != 0:
        module.fail_json(
            msg="rackforge_units: %s failed: %s" % (" ".join(argv), err.strip() or out.strip()), rc=rc, stdout=out, stderr=err, actions=done
        )
    try:
        return plan_units.parse_show(out, names)
    except plan_units.ParseError as exc:
        module.fail_json(msg="rackforge_units: %s" % exc, rc=rc, stdout=out, stderr=err, actions=done)


def systemctl_do(module, systemctl, args, units, done, action):
    """One systemctl call that changes something; on failure the units' status is in the message."""
    argv = [systemctl, *args, "--", *units] if units else [systemctl, *args]
    rc, out, err = module.run_command(argv, environ_update=C_ENV)
    if rc != 0:
        status = ""
        if units and args[0] in ("start", "restart", "reload", "stop"):
            _src, sout, _serr = module.run_command([systemctl, "status", "--no-pager", "--lines=20", "--", *units], environ_update=C_ENV)
            status = "\n" + sout
        module.fail_json(
            msg="rackforge_units: %s failed (rc %d; done before: %s): %s%s" % (" ".join(argv), rc, done or "nothing", err.strip(), status),
            rc=rc,
            stdout=out,
            stderr=err,
            changed=bool(done),
            actions=done,
        )
    done.extend(action)


def execute(module, systemctl, p, all_actions):
    """Run the plan; returns the actions done (== all_actions unless it failed, which exits)."""
    done = []
    # the restarts are remembered before anything changes: a failure anywhere below (the files
    # written, the restart not done) leaves them to the next run, which finds the files current
    remember_restart(module, p["restart"], "rackforge_units", module.params["pending_dir"])
    file_actions = [a for a in all_actions if a.startswith(("mkdir ", "directory ", "write "))]
    try:
        filestage.commit(p["writes"], plan_units.made(p), lambda argv: module.run_command(argv, environ_update=C_ENV))
    except filestage.StageError as exc:
        module.fail_json(
            msg="rackforge_units: %s (nothing written): %s%s" % (exc, exc.stdout, exc.stderr),
            rc=exc.rc,
            stdout=exc.stdout,
            stderr=exc.stderr,
        )
    done.extend(file_actions)
    if p["stop"]:  # while the unit files still exist: a timer stopped after losing its file reads as failed
        systemctl_do(module, systemctl, ["stop"], p["stop"], done, plan_units.verb_actions(p, "stop"))
    if p["disable"]:
        # a plain disable leaves the links of `enable --runtime` in /run: both go
        systemctl_do(module, systemctl, ["--no-reload", "disable"], p["disable"], done, [])
        systemctl_do(module, systemctl, ["--no-reload", "--runtime", "disable"], p["disable"], done, ["disable " + n for n in p["disable"]])
    filestage.remove([r["path"] for r in p["removes"]])
    done.extend("remove " + r["path"] for r in p["removes"])
    if p["enable"]:
        systemctl_do(module, systemctl, ["--no-reload", "enable"], p["enable"], done, ["enable " + n for n in p["enable"]])
    if p["daemon_reload"]:
        systemctl_do(module, systemctl, ["daemon-reload"], [], done, ["daemon-reload"])
    if p["verify"]:
        bad = plan_units.not_loaded(read_units(module, systemctl, p["verify"], done))
        if bad:
            module.fail_json(
                msg="rackforge_units: after the daemon-reload systemd cannot load %s (done: %s)" % (", ".join(bad), done),
                changed=True,
                actions=done,
            )
    for verb in plan_units.VERBS:
        if p[verb]:
            systemctl_do(module, systemctl, [verb], p[verb], done, plan_units.verb_actions(p, verb))
    forget_restart(p["restart"] + p["start"], module.params["pending_dir"])
    return done


def main():
    module = AnsibleModule(
        argument_spec={
            "files": {"type": "list", "elements": "dict", "default": [], "options": FILE_OPTIONS},
            "directories": {"type": "list", "elements": "dict", "default": [], "options": DIR_OPTIONS},
            "absent": {"type": "list", "elements": "path", "default": []},
            "units": {"type": "list", "elements": "dict", "default": [], "options": UNIT_OPTIONS},
            # AnsibleModule masks every no_log value wherever it appears in the result
            "redact": {"type": "list", "elements": "str", "default": [], "no_log": True},
            "pending_dir": {"type": "path", "default": plan_units.PENDING_DIR},
        },
        supports_check_mode=True,
    )
    files = [wanted_file(module, item) for item in module.params["files"]]
    directories = [wanted_dir(module, item) for item in module.params["directories"]]
    absent = module.params["absent"]
    units = module.params["units"]
    have_files = {f["dest"]: filestage.read_state(f["dest"]) for f in files}
    have_absent = {path: filestage.read_state(path) for path in absent}
    # a directory may be a link to one (a TSDB on a data disk): it is followed, as chmod and chown do
    have_dirs = {d["path"]: filestage.read_state(os.path.realpath(d["path"])) for d in directories}
    systemctl = module.get_bin_path("systemctl")
    names = [u["name"] for u in units]
    if names and not systemctl:
        module.fail_json(msg="rackforge_units: units %s are asked for but this node has no systemctl" % ", ".join(names))
    before = read_units(module, systemctl, names, []) if names else {}
    pending = {u["name"] for u in units if u["restart_on"] and restart_pending(u["name"], module.params["pending_dir"])}
    try:
        p = plan_units.plan(files, absent, units, have_files, have_absent, before, directories, have_dirs, pending)
    except plan_units.PlanError as exc:
        module.fail_json(msg="rackforge_units: %s" % exc)
    if p["daemon_reload"] and not systemctl:
        module.fail_json(msg="rackforge_units: %s changed but this node has no systemctl to reload systemd" % ", ".join(p["daemon_reload"]))
    if not module.check_mode:
        made = {e if isinstance(e, str) else e["path"] for e in plan_units.made(p)}
        for w in p["writes"]:
            if not os.path.isdir(os.path.dirname(w["dest"])) and os.path.dirname(w["dest"]) not in made:
                module.fail_json(msg="rackforge_units: %s: %s is not a directory" % (w["dest"], os.path.dirname(w["dest"])))
    todo = plan_units.actions(p)
    if todo and not module.check_mode:
        execute(module, systemctl, p, todo)
        after = read_units(module, systemctl, names, todo) if names else {}
        after = {n: plan_units.unit_report(b) for n, b in after.items()}
    else:
        after = {n: plan_units.predicted(p, n, b) for n, b in before.items()}
    before = {n: plan_units.unit_report(b) for n, b in before.items()}
    result = {
        "changed": bool(todo),
        "actions": todo,
        "changed_files": [w["dest"] for w in p["writes"]],
        "changed_directories": [d["path"] for d in p["dirs"]],
        "removed_files": [r["path"] for r in p["removes"]],
        "units": {n: {"before": before[n], "after": after[n]} for n in names},
    }
    if module._diff:
        result["diff"] = plan_units.diffs(p, have_files, before, after)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
