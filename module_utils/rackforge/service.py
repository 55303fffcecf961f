"""One systemd service kept enabled and running by the module that owns its config, in the same
call: read with one `systemctl show`, decided by units.unit_plan (the rules rackforge_units uses),
then enable, start, or restart where the config changed. A stopped unit is started, never
restarted; check mode predicts the same actions and runs none.

A restart is remembered (remember_restart, before the config is written) until the unit has
started or restarted (forget_restart): a run that wrote the config but could not restart the
unit leaves the restart to the next run, which finds the config current (restart_pending).
rackforge_units keeps its restarts with the same three functions, in the same directory."""

from __future__ import annotations

import os

from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge import units as plan_units

PENDING_DIR = plan_units.PENDING_DIR


def remember_restart(module, names, who, pending_dir=PENDING_DIR):
    """Mark each of `names` as needing a restart (call before writing what they read); nothing in
    check mode. The marker stays until forget_restart, after the unit started or restarted."""
    if module.check_mode or not names:
        return
    try:
        os.makedirs(pending_dir, mode=0o755, exist_ok=True)
        for name in names:
            open(os.path.join(pending_dir, name), "w").close()
    except OSError as exc:
        module.fail_json(
            msg="%s: cannot remember the pending restart of %s in %s: %s (nothing was changed)" % (who, ", ".join(names), pending_dir, exc)
        )


def restart_pending(name, pending_dir=PENDING_DIR):
    """Whether an earlier run left `name`'s restart undone."""
    return os.path.exists(os.path.join(pending_dir, name))


def forget_restart(names, pending_dir=PENDING_DIR):
    """Remove the markers of units that have started or restarted."""
    for name in names:
        marker = os.path.join(pending_dir, name)
        if os.path.lexists(marker):
            os.remove(marker)


def keep_running(module, name, config_changed, who, not_installed_ok=False, pending_dir=PENDING_DIR):
    """Enable and start `name`, restarting it where config_changed (or a restart is pending) and it
    runs; returns the actions (done, or that would be in check mode). not_installed_ok: in check
    mode a unit whose package is not installed yet reads as one to start once it is. Failures
    carry rc, stdout, stderr and leave a pending restart marked."""
    config_changed = config_changed or restart_pending(name, pending_dir)
    systemctl = module.get_bin_path("systemctl", required=True)
    argv = plan_units.show_argv(systemctl, [name])
    rc, out, err = module.run_command(argv, environ_update=C_ENV)
    if rc != 0:
        module.fail_json(msg="%s: %s failed: %s" % (who, " ".join(argv), (err or out).strip()), rc=rc, stdout=out, stderr=err)
    try:
        cur = plan_units.parse_show(out, [name])[name]
    except plan_units.ParseError as exc:
        module.fail_json(msg="%s: %s" % (who, exc), rc=rc, stdout=out, stderr=err)
    if module.check_mode and not_installed_ok and cur["LoadState"] in plan_units.NOT_LOADED:
        return ["start %s (once installed)" % name]
    want = {"name": name, "enabled": True, "state": "started", "restart_on": ["config"]}
    try:
        enable, _disable, verb, _because = plan_units.unit_plan(want, cur, False, ["config"] if config_changed else [])
    except plan_units.PlanError as exc:
        module.fail_json(msg="%s: %s" % (who, exc))
    steps = ([["enable", name]] if enable else []) + ([[verb, name]] if verb else [])
    done = []
    for step in steps:
        if not module.check_mode:
            rc, out, err = module.run_command([systemctl, step[0], "--", step[1]], environ_update=C_ENV)
            if rc != 0:
                _src, status, _serr = module.run_command(
                    [systemctl, "status", "--no-pager", "--lines=20", "--", name], environ_update=C_ENV
                )
                module.fail_json(
                    msg="%s: systemctl %s %s failed (rc %d; done before: %s): %s\n%s"
                    % (who, step[0], name, rc, done or "nothing", err.strip(), status),
                    rc=rc,
                    stdout=out,
                    stderr=err,
                    changed=True,
                )
        done.append(" ".join(step))
    if not module.check_mode:
        forget_restart([name], pending_dir)  # started or restarted (or running, with nothing pending to restart)
    return done
