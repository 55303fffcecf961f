"""Shared by the rackforge_units tests: the captured `systemctl show` output of Debian 12's systemd
252 (tests/fixtures/captured/systemctl-show-*.txt, each with its .src.txt) and its parsed blocks."""

from __future__ import annotations

import pathlib

from ansible.module_utils.rackforge import units as u

CAPTURED = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "captured"
STATES_NAMES = (
    "rf-sleep.service rf-fail.service rf-once.service rf-tick.timer rf-bad.service rf-gone.service rf-indirect.service"
    " rf-linked.service rf-off.service rf-manual.service nosuch.service systemd-logind.service sshd.service ssh dbus.socket"
).split()


def capture(name):
    return (CAPTURED / ("systemctl-show-%s.txt" % name)).read_text()


REAL = u.parse_show(capture("states"), STATES_NAMES)
