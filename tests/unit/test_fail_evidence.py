"""Errors carry evidence: every fail_json that follows a command's failure passes the command's
rc, stdout and stderr (an operator at 3 a.m. needs what the tool said, not our summary of it)."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def command_failures(tree):
    """fail_json calls inside an `if` whose test reads an rc variable of a run_command result."""
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
            if not names & {"rc", "rc2"}:
                continue
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "fail_json":
                    yield call


def test_every_fail_json_after_a_command_passes_rc_stdout_stderr():
    missing = []
    for path in sorted((ROOT / "library").glob("*.py")):
        for call in command_failures(ast.parse(path.read_text())):
            keys = {kw.arg for kw in call.keywords}
            if not {"rc", "stdout", "stderr"} <= keys:
                missing.append("%s:%d" % (path.name, call.lineno))
    assert not missing, missing
