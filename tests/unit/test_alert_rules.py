"""The alert rules are valid and every alert is unit-tested with promtool (Debian's prometheus package)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
RULES = ROOT / "roles" / "monitoring" / "files" / "rackforge-alerts.yml"
TESTS = ROOT / "tests" / "promtool" / "rackforge-alerts.test.yml"


def promtool(*args, cwd=TESTS.parent):
    exe = shutil.which("promtool")
    assert exe, "promtool not found: scripts/setup.sh installs the prometheus package"
    return subprocess.run([exe, *args], check=False, capture_output=True, text=True, cwd=cwd)


def test_rules_are_valid():
    res = promtool("check", "rules", str(RULES))
    assert res.returncode == 0, res.stdout + res.stderr


def test_promtool_rule_tests_pass():
    res = promtool("test", "rules", TESTS.name)
    assert res.returncode == 0, res.stdout + res.stderr


def test_every_alert_has_a_firing_test_case():
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r}
    cases = yaml.safe_load(TESTS.read_text())["tests"]
    fired = {t["alertname"] for c in cases for t in c["alert_rule_test"] if t["exp_alerts"]}
    assert alerts - fired == set(), "alerts without a test that makes them fire"
    assert len(alerts) >= 12
