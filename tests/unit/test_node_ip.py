"""kubelet_reservation_facts with network_cidr: the node IP is the one address in the management
CIDR, published as the public fact rackforge_node_ip beside the kubelet's reservations; none or
several is an error naming what was found, before the reservations are read."""

from __future__ import annotations

import json

import kubelet_reservation_facts
import pytest
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
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "meminfo").write_text("MemTotal:       263921068 kB\n")
    (proc / "cpuinfo").write_text("".join("processor\t: %d\n\n" % i for i in range(64)))
    monkeypatch.setattr(kubelet_reservation_facts.AnsibleModule, "get_bin_path", lambda self, name, **kw: str(ip))
    args = {"network_cidr": cidr, "host": "node1", "proc_root": str(proc), "sys_root": str(tmp_path / "nosys")}
    with patch_module_args(args), pytest.raises(SystemExit):
        kubelet_reservation_facts.main()
    return json.loads(capsys.readouterr().out)


def test_the_management_address_becomes_the_fact(tmp_path, monkeypatch, capsys):
    res = run(tmp_path, monkeypatch, capsys, "192.0.2.0/24")
    assert res["ansible_facts"]["rackforge_node_ip"] == {"interface": "eno1", "address": "192.0.2.11", "mtu": 1500, "cidr": "192.0.2.0/24"}
    assert res["ansible_facts"]["rackforge_kubelet_reservations"]["capacity"]["cpu"] == 64  # the same call sized the kubelet's


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
