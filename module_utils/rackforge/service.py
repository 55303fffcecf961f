"""One systemd service kept enabled and running by the module that owns its config, in the same
call: read with one `systemctl show`, decided by units.unit_plan (the rules rackforge_units uses),
then enable, start, or restart where the config changed. A stopped unit is started, never
restarted; check mode predicts the same actions and runs none."""

from __future__ import annotations

from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge import units as plan_units


def keep_running(module, name, config_changed, who, not_installed_ok=False):
    """Enable and start `name`, restarting it where config_changed and it runs; returns the actions
    (done, or that would be in check mode). not_installed_ok: in check mode a unit whose package
    is not installed yet reads as one to start once it is. Failures carry rc, stdout, stderr."""
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
    return done
