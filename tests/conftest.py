"""Make the repo's module_utils importable as ansible.module_utils.rackforge (as Ansible does)."""

from __future__ import annotations

import pathlib
import sys

import ansible.module_utils

ROOT = pathlib.Path(__file__).resolve().parent.parent
ansible.module_utils.__path__.append(str(ROOT / "module_utils"))
sys.path.insert(0, str(ROOT / "library"))
sys.path.insert(0, str(ROOT / "tests"))  # the test oracles beside this file (kube_scheduling)
FIXTURES = ROOT / "tests" / "fixtures" / "realworld"


def fixture(tool, name):
    return (FIXTURES / tool / (name + ".txt")).read_text()


def captures(tool="*"):
    """The capture files of one tool's directory (all directories by default), without their .src.txt."""
    return sorted(p for p in FIXTURES.glob("%s/*.txt" % tool) if not p.name.endswith(".src.txt"))
