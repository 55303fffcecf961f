"""host_firewall's rule file, rendered with the role's template and checked by the real nft
(`nft -c`, in a network namespace of its own: the machine's own rules are never touched)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT

SETTINGS = {
    "host_firewall_scrape_ports": [9100, 9400],
    "host_firewall_scrape_sources": ["10.89.77.1/32", "192.0.2.0/28"],
    "host_firewall_kubelet_ports": [10250],
    "host_firewall_kubelet_sources": ["10.89.77.10/32"],
}

PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - ansible.builtin.template:
        src: {src}
        dest: {dest}
        mode: "0600"
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fw")
    (tmp / "play.yml").write_text(PLAY.format(src=ROOT / "roles/host_firewall/templates/firewall.nft.j2", dest=tmp / "rules.nft"))
    (tmp / "vars.yml").write_text(yaml.safe_dump({**SETTINGS, "host_firewall_file": "/etc/rackforge/firewall.nft"}))
    res = subprocess.run(
        [
            "ansible-playbook",
            "-i",
            "localhost,",
            str(tmp / "play.yml"),
            "-e",
            "@%s" % (tmp / "vars.yml"),
            "-e",
            "ansible_python_interpreter=" + sys.executable,
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return (tmp / "rules.nft").read_text()


def test_rules_allow_only_the_listed_sources_on_the_listed_ports(rendered):
    lines = [ln.strip() for ln in rendered.splitlines()]
    assert "tcp dport { 9100, 9400 } ip saddr { 10.89.77.1/32, 192.0.2.0/28 } accept" in lines
    assert lines.index("tcp dport { 9100, 9400 } ip saddr { 10.89.77.1/32, 192.0.2.0/28 } accept") < lines.index(
        "tcp dport { 9100, 9400 } drop"
    )
    assert "tcp dport { 10250 } ip saddr { 10.89.77.10/32 } accept" in lines and "tcp dport { 10250 } drop" in lines
    assert "type filter hook input priority filter - 10; policy accept;" in lines  # nothing else is blocked
    assert "flush ruleset" not in rendered  # other tables (Calico, kube-proxy) are left alone


@pytest.mark.skipif(
    shutil.which("nft") is None or shutil.which("unshare") is None, reason="nft (apt nftables, scripts/setup.sh) not installed"
)
def test_nft_accepts_the_rules_twice_in_a_throwaway_netns(rendered, tmp_path):
    rules = tmp_path / "rules.nft"
    rules.write_text(rendered)
    # load it twice (the reload path) and list it, all inside a new network namespace
    script = f"nft -f {rules} && nft -f {rules} && nft list table inet rackforge_filter"
    res = subprocess.run(["unshare", "--net", "sh", "-c", script], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert "tcp dport { 9100, 9400 } ip saddr { 10.89.77.1, 192.0.2.0/28 } accept" in res.stdout
