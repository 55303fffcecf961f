"""rackforge_node_ip_facts: the node IP is the one address in the management CIDR, published as
the public fact rackforge_node_ip; none or several is an error naming what was found."""

from __future__ import annotations

import json

import pytest
import rackforge_node_ip_facts
from ansible.module_utils.testing import patch_module_args

# `ip -j addr show` of a multi-NIC GPU node (the management NIC and two RDMA NICs)
IP_J = [
    {"ifname": "lo", "mtu": 65536, "addr_info": [{"family": "inet", "local": "127.0.0.1"}]},
    {"ifname": "eno1", "mtu": 1500, "addr_info": [{"family": "inet", "local": "192.0.2.11"}, {"family": "inet6", "local": "fe80::1"}]},
    {"ifname": "ens1np0", "mtu": 9000, "addr_info": [{"family": "inet", "local": "10.201.0.11"}]},
    {"ifname": "ens2np0", "mtu": 9000, "addr_info": [{"family": "inet", "local": "10.201.1.11"}]},
]


def run(tmp_path, monkeypatch, capsys, cidr):
    ip = tmp_path / "ip"
    ip.write_text("#!/bin/sh\ncat <<'EOF'\n%s\nEOF\n" % json.dumps(IP_J))
    ip.chmod(0o755)
    monkeypatch.setattr(rackforge_node_ip_facts.AnsibleModule, "get_bin_path", lambda self, name, **kw: str(ip))
    with patch_module_args({"cidr": cidr, "source": "kubernetes_node_network_cidr", "host": "node1"}), pytest.raises(SystemExit):
        rackforge_node_ip_facts.main()
    return json.loads(capsys.readouterr().out)


def test_the_management_address_becomes_the_fact(tmp_path, monkeypatch, capsys):
    res = run(tmp_path, monkeypatch, capsys, "192.0.2.0/24")
    assert res["ansible_facts"]["rackforge_node_ip"] == {"interface": "eno1", "address": "192.0.2.11", "mtu": 1500, "cidr": "192.0.2.0/24"}


@pytest.mark.parametrize(
    ("cidr", "found"), [("10.0.0.0/8", "found ens1np0 (10.201.0.11), ens2np0 (10.201.1.11)"), ("172.16.0.0/12", "found none")]
)
def test_none_or_several_is_an_error_naming_them(tmp_path, monkeypatch, capsys, cidr, found):
    res = run(tmp_path, monkeypatch, capsys, cidr)
    assert res["failed"] and res[
        "msg"
    ] == "kubernetes_node_network_cidr %s must match exactly one interface address on node1 (the node IP); %s" % (
        cidr,
        found,
    )
