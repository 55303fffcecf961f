"""The `systemctl show` parser of rackforge_units (module_utils/rackforge/units.py), on real output of
Debian 12's systemd 252 (tests/fixtures/captured/systemctl-show-*.txt; the .src.txt beside each
gives the command and the state that was set up). The planner is tested in test_units.py."""

from __future__ import annotations

import random

import pytest
from ansible.module_utils.rackforge import units as u
from units_helper import CAPTURED, REAL, STATES_NAMES, capture


def test_every_capture_has_its_source():
    for path in CAPTURED.glob("systemctl-show-*.txt"):
        if not path.name.endswith(".src.txt"):
            src = path.with_name(path.name[: -len(".txt")] + ".src.txt").read_text()
            assert "systemd: 252" in src or "systemd 252" in src, path.name
            assert "command:" in src and "verbatim: yes" in src, path.name


# ---------------------------------------------------------------- the parser, on real output


def test_parse_show_reads_every_block_in_argument_order():
    assert list(REAL) == STATES_NAMES
    assert all(set(b) == set(u.SHOW_PROPERTIES) for b in REAL.values())
    states = {n: (b["LoadState"], b["UnitFileState"], b["ActiveState"], b["SubState"]) for n, b in REAL.items()}
    assert states["rf-sleep.service"] == ("loaded", "enabled", "active", "running")
    assert states["rf-fail.service"] == ("loaded", "static", "failed", "failed")
    assert states["rf-once.service"] == ("loaded", "enabled-runtime", "active", "exited")
    assert states["rf-tick.timer"] == ("loaded", "enabled", "active", "waiting")
    assert states["rf-bad.service"][0] == "bad-setting"
    assert states["rf-gone.service"] == ("not-found", "", "active", "running")  # removed while running
    assert states["rf-indirect.service"][1] == "indirect" and states["rf-linked.service"][1] == "linked"
    assert states["rf-off.service"] == ("loaded", "disabled", "inactive", "dead")
    assert states["rf-manual.service"] == ("loaded", "disabled", "active", "running")
    assert states["nosuch.service"] == ("not-found", "", "inactive", "dead")
    assert states["systemd-logind.service"][:2] == ("masked", "masked")
    assert REAL["rf-sleep.service"]["NeedDaemonReload"] == "yes"
    assert REAL["rf-off.service"]["NeedDaemonReload"] == "no"


def test_blocks_are_matched_by_position_not_by_id():
    # an alias and a suffix-less name print the real unit's Id: only the position says which is which
    assert REAL["sshd.service"]["Id"] == "ssh.service" and REAL["ssh"]["Id"] == "ssh.service"


def test_parse_show_reads_a_single_block_without_a_trailing_blank_line():
    text = capture("one")
    assert not text.endswith("\n\n")
    assert u.parse_show(text, ["ssh.service"])["ssh.service"]["ActiveState"] == "active"


def test_fewer_blocks_than_names_is_refused():
    # systemctl stops at a name it refuses (rc 1) after printing the blocks before it
    with pytest.raises(u.ParseError, match="1 blocks for 2 units"):
        u.parse_show(capture("template-error"), ["ssh.service", "foo@.service"])
    with pytest.raises(u.ParseError, match="16 units"):
        u.parse_show(capture("states"), [*STATES_NAMES, "extra.service"])


@pytest.mark.parametrize(
    "damage, match",
    [
        (lambda t: t.replace("ActiveState=inactive\n", "", 1), "has no ActiveState"),
        (lambda t: t.replace("SubState=dead\n", "SubState=dead\nSubState=dead\n", 1), "not a new property"),
        (lambda t: t.replace("LoadState=loaded", "LoadState loaded", 1), "not a new property"),
        (lambda t: "Failed to connect to bus: No such file or directory\n", "not a new property"),
    ],
)
def test_damaged_output_is_a_parse_error(damage, match):
    with pytest.raises(u.ParseError, match=match):
        u.parse_show(damage(capture("states")), STATES_NAMES)


def test_mutated_output_parses_or_raises_only_parse_error():
    text = capture("states")
    lines = text.splitlines()
    rng = random.Random(252)
    for _ in range(300):
        cut = lines[:]
        kind = rng.randrange(4)
        if kind == 0:
            cut = cut[: rng.randrange(len(cut))]
        elif kind == 1:
            del cut[rng.randrange(len(cut))]
        elif kind == 2:
            cut.insert(rng.randrange(len(cut)), rng.choice(["", "=", "==x", "Id=", "\x00", "UnitFileState=enabled"]))
        else:
            i = rng.randrange(len(cut))
            cut[i] = cut[i][: rng.randrange(len(cut[i]) + 1)]
        try:
            u.parse_show("\n".join(cut), STATES_NAMES)
        except u.ParseError:
            pass


def test_show_argv_asks_for_every_property_the_parser_needs():
    argv = u.show_argv("/usr/bin/systemctl", ["a.service", "-b.service"])
    assert argv[:3] == ["/usr/bin/systemctl", "show", "-p"] and argv[3].split(",") == list(u.SHOW_PROPERTIES)
    assert argv[4:] == ["--", "a.service", "-b.service"]  # a name is never read as an option
