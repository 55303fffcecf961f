"""rackforge_units' planner (module_utils/rackforge/units.py), on unit states read from real output
of Debian 12's systemd 252 (tests/fixtures/captured/systemctl-show-*.txt; the .src.txt
beside each gives the command and the state that was set up). The current unit states in the
planner tables are those real blocks, so a state systemd prints that the planner misreads fails here.
The parser is tested in test_units_show.py; the module itself runs against a real systemd in tests/integration/test_units_module.py."""

from __future__ import annotations

import pytest
from ansible.module_utils.rackforge import units as u
from units_helper import REAL

# ---------------------------------------------------------------- the planner

SCRIPT = "/usr/local/sbin/rf-x"
UNIT = "/etc/systemd/system/rf-x.service"
ENVFILE = "/etc/default/rf-x"


def want(dest, text="new\n", mode=0o644, owner="root", group="root", uid=0, gid=0, validate=None):
    return {"dest": dest, "data": text.encode(), "mode": mode, "uid": uid, "gid": gid, "owner": owner, "group": group, "validate": validate}


def have(text="old\n", mode=0o644, uid=0, gid=0, kind="file", owner=None, group=None):
    if kind is None:
        return {"kind": None, "data": None, "missing_dirs": []}
    owner = owner or {0: "root", 65534: "nobody"}[uid]
    group = group or {0: "root", 65534: "nogroup"}[gid]
    data = None if text is None else text.encode()
    return {"kind": kind, "data": data, "mode": mode, "uid": uid, "gid": gid, "owner": owner, "group": group, "missing_dirs": []}


def real(name, **override):
    """A real block from the capture (NeedDaemonReload=no unless asked), with overrides."""
    block = dict(REAL[name], NeedDaemonReload="no")
    block.update(override)
    return block


def unit(name, enabled=None, state=None, restart_on=(), reload_on=()):
    return {"name": name, "enabled": enabled, "state": state, "restart_on": list(restart_on), "reload_on": list(reload_on)}


def run(files=(), absent=(), units=(), have_files=None, have_absent=None, blocks=None):
    return u.plan(list(files), list(absent), list(units), have_files or {}, have_absent or {}, blocks or {})


SAME_SCRIPT = {SCRIPT: have("new\n", mode=0o755)}

# (id, files, have_files, units (name, block, enabled, state, restart_on, reload_on), expected actions)
CASES = [
    ("file new", [want(ENVFILE)], {ENVFILE: have(kind=None)}, [], ["write /etc/default/rf-x (new)"]),
    ("file same", [want(ENVFILE)], {ENVFILE: have("new\n")}, [], []),
    ("file changed", [want(ENVFILE)], {ENVFILE: have("old\n")}, [], ["write /etc/default/rf-x (content)"]),
    ("mode drift", [want(SCRIPT, mode=0o755)], {SCRIPT: have("new\n")}, [], ["write /usr/local/sbin/rf-x (mode 0644 -> 0755)"]),
    ("owner drift", [want(ENVFILE)], {ENVFILE: have("new\n", uid=65534)}, [], ["write /etc/default/rf-x (owner nobody -> root)"]),
    ("group drift", [want(ENVFILE)], {ENVFILE: have("new\n", gid=65534)}, [], ["write /etc/default/rf-x (group nogroup -> root)"]),
    ("symlink replaced", [want(ENVFILE)], {ENVFILE: have("new\n", kind="link")}, [], ["write /etc/default/rf-x (symlink -> file)"]),
    (
        "unit file changed: daemon-reload",
        [want(UNIT)],
        {UNIT: have()},
        [("rf-x.service", real("rf-off.service"), None, None, (), ())],
        ["write /etc/systemd/system/rf-x.service (content)", "daemon-reload"],
    ),
    ("script changed: no daemon-reload", [want(SCRIPT)], {SCRIPT: have()}, [], ["write /usr/local/sbin/rf-x (content)"]),
    (
        "enable a disabled unit",
        [],
        {},
        [("rf-off.service", real("rf-off.service"), True, None, (), ())],
        ["enable rf-off.service", "daemon-reload"],
    ),
    ("enabled stays", [], {}, [("rf-sleep.service", real("rf-sleep.service"), True, "started", (), ())], []),
    (
        "enable a runtime-only enablement",
        [],
        {},
        [("rf-once.service", real("rf-once.service"), True, None, (), ())],
        ["enable rf-once.service", "daemon-reload"],
    ),
    (
        "enable a linked unit",
        [],
        {},
        [("rf-linked.service", real("rf-linked.service"), True, None, (), ())],
        ["enable rf-linked.service", "daemon-reload"],
    ),
    ("static counts as enabled", [], {}, [("dbus.socket", real("dbus.socket"), True, "started", (), ())], []),
    ("indirect counts as enabled", [], {}, [("rf-indirect.service", real("rf-indirect.service"), True, None, (), ())], []),
    (
        "disable an enabled unit",
        [],
        {},
        [("rf-sleep.service", real("rf-sleep.service"), False, None, (), ())],
        ["disable rf-sleep.service", "daemon-reload"],
    ),
    (
        "disable a runtime enablement",
        [],
        {},
        [("rf-once.service", real("rf-once.service"), False, None, (), ())],
        ["disable rf-once.service", "daemon-reload"],
    ),
    ("disabled stays", [], {}, [("rf-off.service", real("rf-off.service"), False, "stopped", (), ())], []),
    (
        "indirect is not disabled (it would disable its Also=)",
        [],
        {},
        [("rf-indirect.service", real("rf-indirect.service"), False, None, (), ())],
        [],
    ),
    ("masked counts as disabled", [], {}, [("systemd-logind.service", real("systemd-logind.service"), False, "stopped", (), ())], []),
    ("start an inactive unit", [], {}, [("rf-off.service", real("rf-off.service"), None, "started", (), ())], ["start rf-off.service"]),
    ("start a failed unit", [], {}, [("rf-fail.service", real("rf-fail.service"), None, "started", (), ())], ["start rf-fail.service"]),
    ("running stays", [], {}, [("rf-manual.service", real("rf-manual.service"), None, "started", (), ())], []),
    ("a waiting timer is running", [], {}, [("rf-tick.timer", real("rf-tick.timer"), True, "started", (), ())], []),
    (
        "stop a running unit",
        [],
        {},
        [("rf-manual.service", real("rf-manual.service"), None, "stopped", (), ())],
        ["stop rf-manual.service"],
    ),
    (
        "stop a unit whose file is gone",
        [],
        {},
        [("rf-gone.service", real("rf-gone.service"), False, "stopped", (), ())],
        ["stop rf-gone.service"],
    ),
    ("a failed unit is stopped", [], {}, [("rf-fail.service", real("rf-fail.service"), None, "stopped", (), ())], []),
    (
        "restart_on a changed script",
        [want(SCRIPT, mode=0o755)],
        {SCRIPT: have(mode=0o755)},
        [("rf-manual.service", real("rf-manual.service"), None, "started", (SCRIPT,), ())],
        ["write /usr/local/sbin/rf-x (content)", "restart rf-manual.service (changed: /usr/local/sbin/rf-x)"],
    ),
    (
        "restart_on an unchanged script",
        [want(SCRIPT, mode=0o755)],
        SAME_SCRIPT,
        [("rf-manual.service", real("rf-manual.service"), None, "started", (SCRIPT,), ())],
        [],
    ),
    (
        "restart_on a changed script of a unit not running: start",
        [want(SCRIPT, mode=0o755)],
        {SCRIPT: have(mode=0o755)},
        [("rf-off.service", real("rf-off.service"), None, "started", (SCRIPT,), ())],
        ["write /usr/local/sbin/rf-x (content)", "start rf-off.service"],
    ),
    (
        "restart_on never starts a unit that is to stay stopped",
        [want(SCRIPT, mode=0o755)],
        {SCRIPT: have(mode=0o755)},
        [("rf-off.service", real("rf-off.service"), None, "stopped", (SCRIPT,), ())],
        ["write /usr/local/sbin/rf-x (content)"],
    ),
    (
        "restart_on with state left: restart only when running",
        [want(SCRIPT, mode=0o755)],
        {SCRIPT: have(mode=0o755)},
        [
            ("rf-manual.service", real("rf-manual.service"), None, None, (SCRIPT,), ()),
            ("rf-off.service", real("rf-off.service"), None, None, (SCRIPT,), ()),
        ],
        ["write /usr/local/sbin/rf-x (content)", "restart rf-manual.service (changed: /usr/local/sbin/rf-x)"],
    ),
    (
        "reload_on",
        [want(ENVFILE)],
        {ENVFILE: have()},
        [("rf-manual.service", real("rf-manual.service"), None, "started", (), (ENVFILE,))],
        ["write /etc/default/rf-x (content)", "reload rf-manual.service (changed: /etc/default/rf-x)"],
    ),
    (
        "restart wins over reload",
        [want(ENVFILE), want(SCRIPT, mode=0o755)],
        {ENVFILE: have(), SCRIPT: have(mode=0o755)},
        [("rf-manual.service", real("rf-manual.service"), None, "started", (SCRIPT,), (ENVFILE,))],
        [
            "write /etc/default/rf-x (content)",
            "write /usr/local/sbin/rf-x (content)",
            "restart rf-manual.service (changed: /usr/local/sbin/rf-x)",
        ],
    ),
    (
        "NeedDaemonReload=yes: daemon-reload",
        [],
        {},
        [("rf-sleep.service", REAL["rf-sleep.service"], None, None, (), ())],
        ["daemon-reload"],
    ),
    (
        "a new unit, written, enabled and started in one call",
        [want(SCRIPT, mode=0o755), want(UNIT)],
        {SCRIPT: have(kind=None), UNIT: have(kind=None)},
        [("rf-x.service", real("nosuch.service"), True, "started", (SCRIPT,), ())],
        [
            "write /usr/local/sbin/rf-x (new)",
            "write /etc/systemd/system/rf-x.service (new)",
            "enable rf-x.service",
            "daemon-reload",
            "start rf-x.service",
        ],
    ),
    (
        "a unit that does not exist and is to stay stopped is fine",
        [],
        {},
        [("nosuch.service", real("nosuch.service"), False, "stopped", (), ())],
        [],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_plan(case):
    _id, files, have_files, units, expected = case
    blocks = {name: block for name, block, *_ in units}
    request = [unit(name, *rest) for name, _block, *rest in units]
    p = run(files=files, have_files=have_files, units=request, blocks=blocks)
    assert u.actions(p) == expected


def test_removed_timer_is_disabled_before_its_file_goes_and_systemd_reloads_once():
    timer = "/etc/systemd/system/rf-tick.timer"
    p = run(
        absent=[timer],
        have_absent={timer: have()},
        units=[unit("rf-tick.timer", False, "stopped")],
        blocks={"rf-tick.timer": real("rf-tick.timer")},
    )
    # stopped while its file exists (stopped after the reload, a timer without its file reads as failed)
    assert u.actions(p) == ["stop rf-tick.timer", "disable rf-tick.timer", "remove /etc/systemd/system/rf-tick.timer", "daemon-reload"]
    assert p["daemon_reload"] == [timer, "enablement"]


def test_an_absent_file_that_is_absent_is_nothing_to_do():
    p = run(absent=["/etc/systemd/system/x.timer"], have_absent={"/etc/systemd/system/x.timer": have(kind=None)})
    assert u.actions(p) == [] and not p["daemon_reload"]


def test_a_missing_drop_in_directory_is_created_and_the_drop_in_provides_the_unit():
    dropin = "/etc/systemd/system/rf-bad.service.d/10-exec.conf"
    state = dict(have(kind=None), missing_dirs=["/etc/systemd/system/rf-bad.service.d"])
    p = run(
        files=[want(dropin)],
        have_files={dropin: state},
        units=[unit("rf-bad.service", None, "started")],
        blocks={"rf-bad.service": real("rf-bad.service")},
    )
    assert u.actions(p) == [
        "mkdir /etc/systemd/system/rf-bad.service.d",
        "write %s (new)" % dropin,
        "daemon-reload",
        "start rf-bad.service",
    ]
    assert p["verify"] == ["rf-bad.service"]  # read again after the reload: the drop-in must have fixed it


def test_a_template_file_provides_its_instances():
    tmpl = "/etc/systemd/system/rf-w@.service"
    p = run(
        files=[want(tmpl)],
        have_files={tmpl: have(kind=None)},
        units=[unit("rf-w@a.service", None, "started")],
        blocks={"rf-w@a.service": real("nosuch.service")},
    )
    assert u.actions(p)[-1] == "start rf-w@a.service"


def test_a_suffixless_name_is_a_service_for_the_unit_file_it_needs():
    p = run(files=[want(UNIT)], have_files={UNIT: have(kind=None)}, units=[unit("rf-x", True)], blocks={"rf-x": real("nosuch.service")})
    assert u.actions(p) == ["write %s (new)" % UNIT, "enable rf-x", "daemon-reload"]


@pytest.mark.parametrize(
    "request_, block, match",
    [
        (unit("rf-missing.service", None, "started"), "nosuch.service", r"rf-missing.service: no such unit \(LoadState=not-found\)"),
        (unit("rf-missing.service", True), "nosuch.service", "rf-missing.service: no such unit"),
        (unit("rf-bad.service", None, "started"), "rf-bad.service", r"rf-bad.service: no such unit \(LoadState=bad-setting\)"),
        (unit("systemd-logind.service", None, "started"), "systemd-logind.service", "systemd-logind.service is masked"),
        (unit("systemd-logind.service", True), "systemd-logind.service", "unmask it first"),
    ],
)
def test_a_unit_that_cannot_run_fails_before_any_change(request_, block, match):
    # the script would change too: the error comes from the plan, before anything is written
    with pytest.raises(u.PlanError, match=match):
        run(files=[want(SCRIPT)], have_files={SCRIPT: have()}, units=[request_], blocks={request_["name"]: real(block)})


def test_a_unit_file_for_another_unit_does_not_provide_this_one():
    with pytest.raises(u.PlanError, match=r"rf-y\.service: no such unit"):
        run(
            files=[want(UNIT)],
            have_files={UNIT: have(kind=None)},
            units=[unit("rf-y.service", True)],
            blocks={"rf-y.service": real("nosuch.service")},
        )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"files": [want(ENVFILE), want(ENVFILE)]}, "named more than once in files/absent/directories: /etc/default/rf-x"),
        ({"files": [want(ENVFILE)], "absent": [ENVFILE]}, "named more than once"),
        ({"files": [want("etc/default/x")]}, "must be absolute"),
        ({"absent": ["/etc/../etc/x"]}, "normalised"),
        ({"units": [unit("rf-x"), unit("rf-x.service")]}, "units named more than once: rf-x.service"),
        (
            {"units": [unit("rf-x.service", restart_on=["/etc/typo"])]},
            "restart_on/reload_on name paths that are not in files or absent: /etc/typo",
        ),
    ],
)
def test_bad_requests_are_refused(kwargs, match):
    with pytest.raises(u.PlanError, match=match):
        run(**kwargs)


def test_directories_are_refused_as_files_and_as_absent():
    with pytest.raises(u.PlanError, match="is a directory; files takes only files"):
        run(files=[want("/etc/x")], have_files={"/etc/x": have(kind="dir")})
    with pytest.raises(u.PlanError, match="is a directory; absent takes only files"):
        run(absent=["/etc/x"], have_absent={"/etc/x": have(kind="dir")})


def test_verify_only_when_systemd_reloads():
    p = run(units=[unit("rf-off.service", None, "started")], blocks={"rf-off.service": real("rf-off.service")})
    assert p["verify"] == [] and not p["daemon_reload"]
    p = run(units=[unit("rf-off.service", True, "started")], blocks={"rf-off.service": real("rf-off.service")})
    assert p["verify"] == ["rf-off.service"] and p["daemon_reload"] == ["enablement"]


def test_not_loaded_names_what_systemd_still_cannot_load():
    assert u.not_loaded({"a": real("nosuch.service"), "b": real("rf-off.service"), "c": real("systemd-logind.service")}) == [
        "a (LoadState=not-found)",
        "c (LoadState=masked)",
    ]


def test_predicted_and_diffs():
    blocks = {"rf-off.service": real("rf-off.service"), "rf-tick.timer": real("rf-tick.timer")}
    timer = "/etc/systemd/system/rf-tick.timer"
    files = [want(SCRIPT, "#!/bin/sh\nnew\n", mode=0o755), want(UNIT, "[Service]\n")]
    have_files = {SCRIPT: have("#!/bin/sh\nold\n"), UNIT: have(kind=None)}
    request = [unit("rf-off.service", True, "started", restart_on=[SCRIPT]), unit("rf-tick.timer", False, "stopped")]
    p = u.plan(files, [timer], request, have_files, {timer: have("[Timer]\n")}, blocks)
    before = {n: u.unit_report(b) for n, b in blocks.items()}
    after = {n: u.predicted(p, n, b) for n, b in blocks.items()}
    assert after["rf-off.service"] == {"load": "loaded", "enabled": "enabled", "active": "active", "sub": "running"}
    assert after["rf-tick.timer"] == {"load": "loaded", "enabled": "disabled", "active": "inactive", "sub": "dead"}
    diff = {d["before_header"]: d for d in u.diffs(p, have_files, before, after)}
    assert diff[SCRIPT]["before"] == "#!/bin/sh\nold\n" and diff[SCRIPT]["after"] == "#!/bin/sh\nnew\n"
    assert diff[SCRIPT + " (mode, owner, group)"]["before"].startswith("mode: 0644\n")
    assert diff[SCRIPT + " (mode, owner, group)"]["after"].startswith("mode: 0755\n")
    assert diff[UNIT]["before"] == "" and diff[UNIT]["after"] == "[Service]\n"
    assert UNIT + " (mode, owner, group)" not in diff  # a new file has no drift to show
    assert diff[timer]["after_header"] == timer + " (absent)" and diff[timer]["before"] == "[Timer]\n"
    assert diff["unit rf-off.service"]["before"] == "enabled: disabled\nactive: inactive (dead)\n"
    assert diff["unit rf-off.service"]["after"] == "enabled: enabled\nactive: active (running)\n"
    assert "unit rf-sleep.service" not in diff


def test_nothing_to_do_plans_nothing():
    blocks = {n: real(n) for n in ("rf-sleep.service", "rf-tick.timer", "rf-off.service")}
    request = [
        unit("rf-sleep.service", True, "started", restart_on=[SCRIPT]),
        unit("rf-tick.timer", True, "started"),
        unit("rf-off.service", False, "stopped"),
    ]
    p = run(files=[want(SCRIPT, mode=0o755)], have_files=SAME_SCRIPT, units=request, blocks=blocks)
    assert u.actions(p) == [] and not p["daemon_reload"] and not p["verify"]
    assert u.diffs(p, SAME_SCRIPT, {}, {}) == []


def test_a_restart_an_earlier_run_could_not_do_is_tried_again_with_the_files_current():
    """A mount unit whose share was busy: its file is current, but the restart failed last time."""
    blocks = {n: real(n) for n in ("rf-sleep.service", "rf-off.service")}
    request = [unit("rf-sleep.service", True, "started", restart_on=[SCRIPT]), unit("rf-off.service", None, "started", restart_on=[SCRIPT])]
    p = run(files=[want(SCRIPT, mode=0o755)], have_files=SAME_SCRIPT, units=request, blocks=blocks)
    assert u.actions(p) == ["start rf-off.service"]  # nothing pending: only the stopped one starts
    pending = {"rf-sleep.service", "rf-off.service"}
    p = u.plan([want(SCRIPT, mode=0o755)], [], request, SAME_SCRIPT, {}, blocks, pending=pending)
    assert u.actions(p) == ["start rf-off.service", "restart rf-sleep.service (changed: its restart failed in an earlier run)"]
    assert not p["daemon_reload"]  # no file changed: systemd has nothing new to load
