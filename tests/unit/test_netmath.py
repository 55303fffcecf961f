"""The network filters: the PFC headroom ground-truth table, buffers, TCP sizing, addresses."""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
from ansible.errors import AnsibleFilterError

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "filter_plugins"))
import rackforge as rackforge_net

F = rackforge_net.FilterModule().filters()

# The mlx5 kernel's xoff (en/port_buffer.c calculate_xoff, integer arithmetic):
# (301 + 216 * cable_m // 100) * max(Gb/s, 40) + 272 * MTU // 100, worked out by hand for this
# table: e.g. 25G, 3 m, 4200: (301 + 6) * 40 + 11424 = 23704; 400G, 30 m, 9000: (301 + 64) * 400
# + 24480 = 170480 (the guide's float formula says 170800: the kernel truncates 2.16 * 30).
HEADROOM = {
    (25, 3): (23704, 36760),
    (25, 7): (24064, 37120),
    (25, 30): (26024, 39080),
    (25, 100): (32104, 45160),
    (100, 3): (42124, 55180),
    (100, 7): (43024, 56080),
    (100, 30): (47924, 60980),
    (100, 100): (63124, 76180),
    (200, 3): (72824, 85880),
    (200, 7): (74624, 87680),
    (200, 30): (84424, 97480),
    (200, 100): (114824, 127880),
    (400, 3): (134224, 147280),
    (400, 7): (137824, 150880),
    (400, 30): (157424, 170480),
    (400, 100): (218224, 231280),
}


@pytest.mark.parametrize(("speed", "cable", "mtu"), [(s, c, m) for (s, c) in HEADROOM for m in (4200, 9000)])
def test_pfc_headroom_ground_truth(speed, cable, mtu):
    assert F["pfc_headroom"](speed, cable, mtu) == HEADROOM[(speed, cable)][mtu == 9000]


def test_speed_is_floored_at_40g():
    assert F["pfc_headroom"](10, 7, 9000) == F["pfc_headroom"](40, 7, 9000) == F["pfc_headroom"](25, 7, 9000)


def test_defaults_are_7m_and_mtu_9000():
    assert F["pfc_headroom"](100) == 56080


def test_lossless_buffer_is_the_kernel_minimum_in_384_byte_units():
    # xoff + max(max_mtu, 9216) + 128: 56080 + 9216 + 128 = 65424 -> 171 x 384 = 65664
    assert F["pfc_lossless_buffer"](100, 7, 9000) == 65664
    # a ConnectX port's max_mtu 9978: 56080 + 9978 + 128 = 66186 -> 173 x 384 = 66432
    assert F["pfc_lossless_buffer"](100, 7, 9000, 9978) == 66432
    # a veth's max_mtu 65535 (the lab's netdevs): 56080 + 65535 + 128 = 121743 -> 318 x 384 = 122112
    assert F["pfc_lossless_buffer"](100, 7, 9000, 65535) == 122112
    # below 9216 the kernel still reserves 9216
    assert F["pfc_lossless_buffer"](100, 7, 9000, 1500) == F["pfc_lossless_buffer"](100, 7, 9000)
    for cable in (3, 30, 100, 999):
        need = F["pfc_lossless_buffer"](400, cable, 9000, 9978)
        assert need % 128 == 0 and need % 96 == 0
        assert 0 <= need - (F["pfc_headroom"](400, cable, 9000) + 9978 + 128) < 384


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ((100, 0, 9000), "cable_m must be in 1..999 m, got 0"),
        ((100, 1000, 9000), "cable_m must be in 1..999 m, got 1000"),
        ((100, 7, 900), "mtu must be in 1500..9978 bytes, got 900"),
        (("fast", 7, 9000), "speed_gbps must be a number"),
    ],
)
def test_bad_input_names_the_parameter(args, needle):
    with pytest.raises(AnsibleFilterError, match=needle):
        F["pfc_headroom"](*args)


def test_bad_max_mtu_names_the_parameter():
    with pytest.raises(AnsibleFilterError, match=re.escape("max_mtu must be in 68..65535 bytes, got 70000")):
        F["pfc_lossless_buffer"](100, 7, 9000, 70000)


def test_dscp_to_tos():
    assert F["dscp_to_tos"](26) == 106  # RoCE v2 default DSCP 26 with ECT(0)
    assert F["dscp_to_tos"](48, 0) == 192
    with pytest.raises(AnsibleFilterError, match=re.escape("dscp must be in 0..63, got 64")):
        F["dscp_to_tos"](64)


def test_tcp_buffer_sizes_from_bdp():
    # 400 Gb/s x 1 ms = 50 MB BDP -> 2 x BDP = 100 MB -> 128 MiB
    big = F["tcp_buffer_sizes"](400, 1)
    assert big["bdp_bytes"] == 50_000_000 and big["net.core.rmem_max"] == 134217728
    assert big["net.ipv4.tcp_rmem"] == "4096 87380 134217728"
    # a small BDP never drops below the deployment-guide default of 16 MiB
    small = F["tcp_buffer_sizes"](25, 0.1)
    assert small["net.core.wmem_max"] == 16777216 and small["net.ipv4.tcp_wmem"] == "4096 65536 16777216"
    # and never above what the kernel accepts
    assert F["tcp_buffer_sizes"](400, 200)["net.core.rmem_max"] == 2147483647


def test_cidr_overlap_problems_name_the_first_setting_of_each_pair_and_skip_malformed_ones():
    assert F["cidr_overlap_problems"]({"a": "10.0.0.0/16", "b": "10.1.0.0/16", "c": ["192.168.0.0/24"]}) == []
    named = {"pod": "10.244.0.0/16", "service": "10.96.0.0/12", "rdma": ["10.1.0.0/24", "10.244.8.0/24"], "bad": "10.0.0.300/8"}
    assert F["cidr_overlap_problems"](named, "must be disjoint") == [
        {"variable": "pod", "value": "10.244.0.0/16", "problem": "overlaps rdma 10.244.8.0/24 (must be disjoint)"}
    ]
    # an item of a list is named with its index
    assert F["cidr_overlap_problems"]({"rdma": ["10.0.0.0/8"], "node": "10.89.77.0/24"})[0]["variable"] == "rdma[0]"


FACTS = {
    "interfaces": ["lo", "eno1", "ens1np0", "ens2np0"],
    "lo": {"ipv4": {"address": "127.0.0.1"}},
    "eno1": {"ipv4": {"address": "192.0.2.11"}},
    "ens1np0": {"ipv4": {"address": "10.200.0.11"}},
    "ens2np0": {"ipv4": {"address": "10.200.1.11"}, "ipv4_secondaries": [{"address": "10.201.0.11"}]},
}


def test_interface_for_cidr_picks_the_management_nic():
    assert F["interface_for_cidr"](FACTS, "192.0.2.0/24") == {"interface": "eno1", "address": "192.0.2.11", "mtu": None}
    assert F["interface_for_cidr"](FACTS, "10.201.0.0/24")["interface"] == "ens2np0"


# `ip -j addr show` on a GPU node (the shape the roles read instead of gathering network facts)
IP_J = [
    {"ifname": "lo", "mtu": 65536, "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]},
    {
        "ifname": "eno1",
        "mtu": 1500,
        "addr_info": [{"family": "inet", "local": "192.0.2.11", "prefixlen": 24}, {"family": "inet6", "local": "fe80::1"}],
    },
    {"ifname": "ens1np0", "mtu": 9000, "addr_info": [{"family": "inet", "local": "10.201.0.11", "prefixlen": 24}]},
    {"ifname": "ens2np0", "mtu": 9000, "addr_info": []},
]


def test_interface_for_cidr_reads_ip_json_with_the_mtu():
    assert F["interface_for_cidr"](IP_J, "192.0.2.0/24") == {"interface": "eno1", "address": "192.0.2.11", "mtu": 1500}
    assert F["interfaces_in_cidr"](IP_J, "10.0.0.0/8") == ["ens1np0 (10.201.0.11)"]
    assert F["interfaces_in_cidr"](IP_J, "0.0.0.0/0") == ["lo (127.0.0.1)", "eno1 (192.0.2.11)", "ens1np0 (10.201.0.11)"]
    with pytest.raises(AnsibleFilterError, match="found none"):
        F["interface_for_cidr"](IP_J, "172.16.0.0/12")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("10.244.0.0/16", ""),
        ("10.244.0.0/33", "is not a CIDR"),
        ("10.244.1.0/16", "has host bits set (the network is 10.244.0.0/16)"),
        ("10.244.0.0", "with a prefix length"),
        ("fd00::/64", "not an IPv4 CIDR"),
        ("eth0", "is not a CIDR"),
    ],
)
def test_cidr_problem_names_the_variable(value, problem):
    msg = F["cidr_problem"](value, "kubernetes_control_plane_pod_cidr")
    assert (msg == "") if not problem else (problem in msg and msg.startswith("kubernetes_control_plane_pod_cidr: "))


def test_k8s_labels_follow_the_kubelet_rules():
    assert F["k8s_label_value"]("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
    assert F["k8s_label_value"]("NVIDIA A100-PCIE-40GB") == "NVIDIA-A100-PCIE-40GB"
    ok = {"nvidia.com/gpu.count": "8", "rackforge.io/pool": "inference", "node.kubernetes.io/instance-type": "hgx", "a": ""}
    assert F["k8s_label_problems"](ok) == []
    bad = F["k8s_label_problems"]({"node-role.kubernetes.io/gpu": "", "x/-bad": "v", "k": "has space", "long": "x" * 64})
    assert len(bad) == 4 and "NodeRestriction" in bad[0]


def test_interface_for_cidr_refuses_ambiguity_and_absence():
    with pytest.raises(AnsibleFilterError, match=re.escape("found ens1np0 (10.200.0.11), ens2np0 (10.200.1.11)")):
        F["interface_for_cidr"](FACTS, "10.200.0.0/16")
    with pytest.raises(AnsibleFilterError, match="found none"):
        F["interface_for_cidr"](FACTS, "172.16.0.0/12")
