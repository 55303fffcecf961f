"""Check mode as a gate on a never-converged node: site.yml --check --diff runs to the end, lists
what it would change, and changes nothing."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from conftest import ROOT, lab, node_state

FRESH = "lab-fresh1"


@pytest.fixture(scope="module")
def fresh_node():
    lab("fresh", FRESH)
    try:
        yield FRESH
    finally:
        lab("fresh", FRESH, "--remove")


def test_check_mode_on_a_fresh_node_lists_the_changes_and_makes_none(fresh_node):
    before = node_state(fresh_node)
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    res = subprocess.run(
        ["ansible-playbook", "-i", str(ROOT / "inventories" / "lab" / "fresh.yml"), "site.yml", "--check", "--diff"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-3000:]
    changed = int(re.search(r"^%s\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0" % fresh_node, res.stdout, re.M).group(1))
    assert changed >= 10
    out = " ".join(res.stdout.split())
    assert "would install nvidia-driver-550, nvidia-fabricmanager-550 at 550.127.05" in out
    assert "+run /usr/local/sbin/mlnx_qos -i ens1np0 --trust dscp --pfc 0,0,0,1,0,0,0,0" in res.stdout
    assert "+net.ipv4.tcp_rmem = 4096 87380 134217728" in res.stdout
    assert "UNHEALTHY (check mode: the state before this run" in out
    assert node_state(fresh_node) == before
