"""rackforge_units' planner for directories (made, fixed, refused): module_utils/rackforge/units.py.
The module runs it against a real systemd in tests/integration/test_units_module.py."""

from __future__ import annotations

import pytest
from ansible.module_utils.rackforge import units as u
from test_units import have, want


def wdir(path, mode=0o755, uid=0, gid=0, owner="root", group="root"):
    return {"path": path, "mode": mode, "uid": uid, "gid": gid, "owner": owner, "group": group}


def test_directories_are_made_parents_first_with_their_own_mode_and_a_file_may_go_inside():
    tsdb, targets, conf = "/var/lib/rf/tsdb", "/etc/rf/file_sd", "/etc/rf/file_sd/node/x.json"
    dirs = [wdir(tsdb, 0o750, 65534, 65534, "nobody", "nogroup"), wdir(targets)]
    have_dirs = {
        tsdb: dict(have(kind=None), missing_dirs=["/var/lib/rf"]),
        targets: dict(have(kind=None), missing_dirs=["/etc/rf"]),
    }
    have_files = {conf: dict(have(kind=None), missing_dirs=["/etc/rf", "/etc/rf/file_sd", "/etc/rf/file_sd/node"])}
    p = u.plan([want(conf)], [], [], have_files, {}, {}, dirs, have_dirs)
    # /etc/rf/file_sd is made as asked (not as a plain 0755 parent); the parents no one asked for are 0755 root
    assert p["mkdirs"] == ["/var/lib/rf", "/etc/rf", "/etc/rf/file_sd/node"]
    # in the order filestage.commit makes them: parents first
    assert u.actions(p) == [
        "mkdir /etc/rf",
        "directory /etc/rf/file_sd (new)",
        "mkdir /etc/rf/file_sd/node",
        "mkdir /var/lib/rf",
        "directory /var/lib/rf/tsdb (new)",
        "write /etc/rf/file_sd/node/x.json (new)",
    ]
    diff = {d["before_header"]: d for d in u.diffs(p, have_files, {}, {})}
    assert diff[tsdb + " (directory: mode, owner, group)"] == {
        "before_header": tsdb + " (directory: mode, owner, group)",
        "after_header": tsdb + " (directory: mode, owner, group)",
        "before": "",
        "after": "mode: 0750\nowner: nobody\ngroup: nogroup\n",
    }


@pytest.mark.parametrize(
    "state, actions",
    [
        (have(kind="dir", mode=0o755), []),
        (have(kind="dir", mode=0o700), ["directory /d (mode 0700 -> 0755)"]),
        (have(kind="dir", mode=0o755, uid=65534, gid=65534), ["directory /d (owner nobody -> root, group nogroup -> root)"]),
    ],
)
def test_an_existing_directory_is_left_or_given_its_mode_and_owner(state, actions):
    p = u.plan([], [], [], {}, {}, {}, [wdir("/d")], {"/d": state})
    assert u.actions(p) == actions


def test_a_directory_that_is_a_file_or_named_twice_is_refused():
    with pytest.raises(u.PlanError, match="/d is a file, not a directory"):
        u.plan([], [], [], {}, {}, {}, [wdir("/d")], {"/d": have()})
    with pytest.raises(u.PlanError, match="named more than once in files/absent/directories: /d"):
        u.plan([want("/d")], [], [], {"/d": have()}, {}, {}, [wdir("/d")], {"/d": have(kind="dir")})
    with pytest.raises(u.PlanError, match="absolute and normalised"):
        u.plan([], [], [], {}, {}, {}, [wdir("/")], {"/": have(kind="dir")})


def test_a_secret_files_text_is_never_in_the_diff_only_that_it_changes():
    path = "/etc/prometheus/alertmanager.yml"
    old = "receivers:\n- name: a\n  webhook_configs:\n  - url: http://old/T0KEN\n"
    w = dict(want(path, old.replace("old/T0KEN", "new/T1KEN")), secret=True)
    have_files = {path: have(old)}
    p = u.plan([w], [], [], have_files, {}, {})
    diff = u.diffs(p, have_files, {}, {})[0]
    assert diff["before"] == "(secret content, not shown)\n" and diff["after"] == "(secret content, not shown), changed\n"
    assert u.actions(p) == ["write %s (content)" % path]


def test_actions_list_the_directories_in_the_order_they_are_made():
    want_dir, child = "/etc/rf", "/etc/rf/a/b.json"
    have_files = {child: dict(have(kind=None), missing_dirs=["/etc/rf", "/etc/rf/a"])}
    p = u.plan([want(child)], [], [], have_files, {}, {}, [wdir(want_dir)], {want_dir: have(kind=None)})
    assert u.actions(p) == ["directory /etc/rf (new)", "mkdir /etc/rf/a", "write /etc/rf/a/b.json (new)"]
