"""Make the repo's module_utils importable as ansible.module_utils.rackforge (as Ansible does)."""

from __future__ import annotations

import pathlib
import sys

import ansible.module_utils
import pytest

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


@pytest.fixture
def k8sim_kubelet(monkeypatch):
    """The lab's simulated kubelet (lab/k8sim/k8simlib/kubelet.py), its package loaded afresh."""
    monkeypatch.syspath_prepend(str(ROOT / "lab" / "k8sim"))
    for name in [m for m in sys.modules if m.startswith("k8simlib")]:
        monkeypatch.delitem(sys.modules, name)
    from k8simlib import kubelet

    return kubelet
