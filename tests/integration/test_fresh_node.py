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


def _env(tmp):
    # the fresh node's report and scrape target stay out of the shared lab's reports/
    return dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        RACKFORGE_REPORT_DIR=str(tmp / "reports"),
        RACKFORGE_PROMETHEUS_DIR=str(tmp / "prometheus"),
    )


def test_check_mode_on_a_fresh_node_lists_the_changes_and_makes_none(fresh_node, tmp_path):
    before = node_state(fresh_node)
    env = _env(tmp_path)
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


RUNFILE = ["-e", "nvidia_driver_install_method=runfile"]


def fresh_playbook(tmp, *args):
    env = _env(tmp)
    res = subprocess.run(
        ["ansible-playbook", "-i", str(ROOT / "inventories" / "lab" / "fresh.yml"), "site.yml", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    m = re.search(r"^%s\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)" % FRESH, res.stdout, re.M)
    res.changed, res.failed = (int(m.group(1)), int(m.group(2))) if m else (None, None)
    return res


def test_runfile_checksum_mismatch_fails_naming_the_url_and_changes_nothing(fresh_node, tmp_path):
    before = node_state(fresh_node)
    res = fresh_playbook(tmp_path, *RUNFILE, "-e", "nvidia_driver_runfile_sha256=" + "0" * 64)
    assert res.returncode != 0 and res.failed == 1
    out = " ".join(res.stdout.split())
    assert "nvidia_driver_runfile_url http://10.89.77.2/vendor/runfile/NVIDIA-Linux-x86_64-550.127.05.run could not be fetched" in out
    assert "does not match nvidia_driver_runfile_sha256 " + "0" * 64 in out
    assert res.changed == 0 and node_state(fresh_node) == before


def test_runfile_install_on_a_fresh_node_then_skipped(fresh_node, tmp_path):
    first = fresh_playbook(tmp_path, *RUNFILE)
    assert first.returncode == 0, first.stdout[-3000:]
    smi = subprocess.run(["podman", "exec", "rackforge-lab-" + fresh_node, "nvidia-smi", "-L"], capture_output=True, text=True, check=True)
    assert smi.stdout.count("NVIDIA H100 80GB HBM3") == 8
    pkgs = subprocess.run(
        ["podman", "exec", "rackforge-lab-" + fresh_node, "dpkg-query", "-W", "-f", "${Package} ${Version} ${Status}\\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "nvidia-driver-550" not in pkgs  # the driver came from the runfile
    assert "nvidia-fabricmanager-550 550.127.05-1 hold ok installed" in pkgs  # at the runfile's version, held
    again = fresh_playbook(tmp_path, *RUNFILE)
    assert again.returncode == 0 and again.changed == 0, again.stdout[-3000:]
    assert "TASK [nvidia_driver : Run the NVIDIA installer" in again.stdout and "skipping: [%s]" % fresh_node in again.stdout
