from __future__ import annotations

import pytest
from ansible.module_utils.rackforge import rdma as r
from conftest import fixture


def test_ibstat_roce_two_ports_down():
    cas = r.parse_ibstat(fixture("ibstat", "h100-roce-cx7-400g-two-ports-down"))
    assert len(cas) == 12
    down = sorted(ca for ca, v in cas.items() if v["ports"][1]["state"] != "Active")
    assert down == ["mlx5_11", "mlx5_5"]
    assert cas["mlx5_5"]["ports"][1] == {"state": "Down", "physical_state": "Disabled", "rate": 40, "link_layer": "Ethernet"}
    assert cas["mlx5_0"]["ca_type"] == "MT4129" and cas["mlx5_0"]["firmware"] == "28.39.1002"


def test_ibstat_tolerates_ibpanic_tail():
    cas = r.parse_ibstat(fixture("ibstat", "a100-azure-ibpanic-exit255"))
    assert len(cas) == 8 and "mlx5_8" not in cas
    assert {p[1]["link_layer"] for p in (v["ports"] for v in cas.values())} == {"InfiniBand"}


def test_ibstat_space_indented_and_bond():
    cas = r.parse_ibstat(fixture("ibstat", "h100-ib-ndr-plus-bf3-bond-roce"))
    assert "mlx5_bond_0" in cas
    assert cas["mlx5_bond_0"]["ports"][1]["link_layer"] == "Ethernet"
    cas2 = r.parse_ibstat(fixture("ibstat", "h100-ib-cx7-400g-eth-ports-disabled"))
    assert sum(1 for v in cas2.values() if v["ports"][1]["physical_state"] == "Disabled") == 3


def test_ibstatus():
    out = r.parse_ibstatus(fixture("ibstatus", "a100-azure-hdr-all-active"))
    assert out["mlx5_0"][1] == {"state": "ACTIVE", "physical_state": "LinkUp", "rate": 200, "link_layer": "InfiniBand"}


def test_mlnx_qos_trust_dscp_pfc_prio3():
    q = r.parse_mlnx_qos(fixture("mlnx_qos", "trust-dscp-pfc-prio3-cable7"))
    assert q["trust"] == "dscp" and q["cable_len"] == 7
    assert q["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert q["dscp2prio"][26] == 3 and len(q["dscp2prio"]) == 64
    assert q["buffer_size"] is None and q["tcs"][3]["priorities"] == [3]


def test_mlnx_qos_rejects_other_text():
    with pytest.raises(r.ParseError):
        r.parse_mlnx_qos("Netlink error: No such device eth9\n")


def test_ethtool_without_pfc_has_no_prio_pause():
    stats = r.parse_ethtool_stats(fixture("ethtool-S", "cx4lx-mlx5-kernel4.15-ethq-fixture"))
    assert stats["rx_prio0_packets"] == 845715962
    assert r.pfc_enabled_priorities(stats) == []
    assert "rx_global_pause" in stats


# No real capture of these three yet: formats as iproute2's rdma(8), rdma-core's ibv_devinfo and
# MLNX_OFED's show_gids print them (see tests/fixtures/README.md).
RDMA_LINK = """link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1np0
link mlx5_1/1 subnet_prefix fe80:0000:0000:0000 lid 13 sm_lid 1 lmc 0 state ACTIVE physical_state LINK_UP
"""


def test_rdma_link_both_forms():
    assert r.parse_rdma_link(RDMA_LINK) == [
        {"device": "mlx5_0", "port": 1, "state": "ACTIVE", "physical_state": "LINK_UP", "netdev": "ens1np0"},
        {"device": "mlx5_1", "port": 1, "state": "ACTIVE", "physical_state": "LINK_UP", "netdev": None},
    ]


IBV = "hca_id:\tmlx5_0\n\tfw_ver:\t\t\t\t28.39.1002\n\tvendor_part_id:\t\t\t4129\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t1024 (3)\n\t\t\tport_lid:\t\t0\n\t\t\tlink_layer:\t\tEthernet\n"


def test_ibv_devinfo_tabs_and_spaces():
    expected = {
        "mlx5_0": {
            "fw_ver": "28.39.1002",
            "vendor_part_id": 4129,
            "ports": {1: {"state": "PORT_ACTIVE", "active_mtu": 1024, "max_mtu": 4096, "port_lid": 0, "link_layer": "Ethernet"}},
        }
    }
    assert r.parse_ibv_devinfo(IBV) == expected
    assert r.parse_ibv_devinfo(IBV.replace("\t", "    ")) == expected


GIDS = """DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV
---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---
mlx5_0\t1\t0\tfe80:0000:0000:0000:a288:c2ff:fead:eab8\t\t\tv1\tens1np0
mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:0a64:0001\t10.100.0.1  \tv2\tens1np0
n_gids_found=2
"""


def test_show_gids():
    rows = r.parse_show_gids(GIDS)
    assert rows[0]["ipv4"] is None and rows[0]["version"] == "v1"
    assert rows[1] == {
        "device": "mlx5_0",
        "port": 1,
        "index": 3,
        "gid": "0000:0000:0000:0000:0000:ffff:0a64:0001",
        "ipv4": "10.100.0.1",
        "version": "v2",
        "netdev": "ens1np0",
    }
    assert r.parse_show_gids(GIDS.splitlines()[0] + "\nn_gids_found=0\n") == []


def test_ibv_devinfo_empty_state_value_is_not_an_index_error():
    text = IBV.replace("PORT_ACTIVE (4)", "")
    assert r.parse_ibv_devinfo(text)["mlx5_0"]["ports"][1]["state"] == ""


@pytest.mark.parametrize(
    "row",
    [
        "mlx5_0\tx\t0\tfe80:0000:0000:0000:a288:c2ff:fead:eab8\t\t\tv1\tens1np0",
        "mlx5_0\t1\tN/A\tfe80:0000:0000:0000:a288:c2ff:fead:eab8\t\t\tv1\tens1np0",
        "mlx5_0\t\u00b2\t0\tfe80:0000:0000:0000:a288:c2ff:fead:eab8\t\t\tv1\tens1np0",  # isdigit() but not int()
    ],
)
def test_show_gids_non_numeric_port_or_index_is_parse_error(row):
    with pytest.raises(r.ParseError):
        r.parse_show_gids(GIDS.splitlines()[0] + "\n" + row + "\n")
