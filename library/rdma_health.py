#!/usr/bin/python
from __future__ import annotations

DOCUMENTATION = r"""
module: rdma_health
short_description: Check the RDMA ports a node is expected to have (read-only)
description:
  - Reads C(ibstat), C(ibv_devinfo), C(show_gids) (when installed), C(ethtool -S) and the sysfs tree
    under O(sysfs_root), and compares the ports of the expected link layer (minus management
    interfaces) with the expectations. Spare ports of another link layer are ignored on purpose.
options:
  expected_count:
    description: RDMA ports that must be present.
    type: int
  link_layer:
    description: Link layer of the RDMA fabric.
    type: str
    default: Ethernet
    choices: [Ethernet, InfiniBand]
  rate_gbps:
    description: Expected port rate (Gb/s); 0 skips the check.
    type: int
    default: 0
  exclude_netdevs:
    description: Interfaces that are not part of the RDMA fabric (management NIC).
    type: list
    elements: str
    default: []
  lossless_priority:
    description: Priority that must have PFC enabled (RoCE only); omit to skip.
    type: int
  sysfs_root:
    description: sysfs root (netdev MTUs, port counters).
    type: path
    default: /sys
  baseline:
    description: Port error counters from an earlier healthy run, {ca -> {counter -> value}}.
    type: dict
    default: {}
author: rackforge
"""

EXAMPLES = r"""
- name: Check 8x 400G RoCE ports
  rdma_health:
    expected_count: 8
    rate_gbps: 400
    exclude_netdevs: [ens9f0np0]
    lossless_priority: 3
"""

RETURN = r"""
healthy:
  description: No findings.
  returned: always
  type: bool
findings:
  description: Findings naming NIC and port (check, component, expected, observed, message).
  returned: always
  type: list
  elements: dict
ports:
  description: The ports checked, with state, rate, active MTU, PFC priorities and a per-port verdict.
  returned: always
  type: list
  elements: dict
counters:
  description: Port error counters now (use as the next baseline).
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV, read_file, run_concurrently
from ansible.module_utils.rackforge.health import evaluate_rdma
from ansible.module_utils.rackforge.rdma import (
    ParseError,
    parse_ethtool_stats,
    parse_ibstat,
    parse_ibv_devinfo,
    parse_show_gids,
    pfc_enabled_priorities,
)

ERROR_COUNTERS = {
    "counters": ("symbol_error", "link_downed", "port_rcv_errors"),
    "hw_counters": ("out_of_buffer", "local_ack_timeout_err"),
}
# mlx5 physical-port counters from `ethtool -S` (Ethernet ports only); the pause-storm counter
# rises when the NIC's pause-storm watchdog stopped a flood of PFC pause frames
ETHTOOL_COUNTERS = ("rx_crc_errors_phy", "link_down_events_phy", "tx_pause_storm_error_events")


def main():
    module = AnsibleModule(
        argument_spec={
            "expected_count": {"type": "int"},
            "link_layer": {"type": "str", "default": "Ethernet", "choices": ["Ethernet", "InfiniBand"]},
            "rate_gbps": {"type": "int", "default": 0},
            "exclude_netdevs": {"type": "list", "elements": "str", "default": []},
            "lossless_priority": {"type": "int"},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "baseline": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["lossless_priority"] is not None and not 0 <= p["lossless_priority"] <= 7:
        module.fail_json(msg="lossless_priority must be 0..7, got %d" % p["lossless_priority"])
    ibstat_bin = module.get_bin_path("ibstat", required=True)
    devinfo_bin = module.get_bin_path("ibv_devinfo", required=True)
    show_gids = module.get_bin_path("show_gids")
    # the three tools at once, then every port's ethtool -S at once
    tools = [[ibstat_bin], [devinfo_bin]] + ([[show_gids]] if show_gids else [])
    (rc, out, err), (rc_dev, out_dev, _err_dev), *gid_run = run_concurrently(module, tools, environ_update=C_ENV)
    try:
        ibstat = parse_ibstat(out)  # rc 255 with an ibpanic line still lists the good CAs
        if rc != 0 and not ibstat:
            module.fail_json(msg="ibstat failed: %s" % (out + err).strip(), rc=rc, stdout=out, stderr=err)
        devinfo = parse_ibv_devinfo(out_dev) if rc_dev == 0 else {}
        gids = parse_show_gids(gid_run[0][1]) if gid_run and gid_run[0][0] == 0 else None
        root = p["sysfs_root"]
        netdev_of, mtus, pause, counters = {}, {}, {}, {}
        ethtool = module.get_bin_path("ethtool")
        for ca in ibstat:
            netdir = os.path.join(root, "class", "infiniband", ca, "device", "net")
            names = sorted(os.listdir(netdir)) if os.path.isdir(netdir) else []
            if names:
                netdev_of[ca] = names[0]
                mtu = read_file(os.path.join(root, "class", "net", names[0], "mtu"))
                mtus[names[0]] = int(mtu) if mtu and mtu.isdigit() else None
        # ethtool -S on the Ethernet ports that are not excluded
        stats_of = [
            netdev_of[ca]
            for ca in ibstat
            if ca in netdev_of
            and ethtool
            and ibstat[ca]["ports"].get(1, {}).get("link_layer") == "Ethernet"
            and netdev_of[ca] not in p["exclude_netdevs"]
        ]
        stats_runs = dict(zip(stats_of, run_concurrently(module, [[ethtool, "-S", n] for n in stats_of], environ_update=C_ENV)))
        for ca in ibstat:
            found = {}
            rc, out, _err = stats_runs.get(netdev_of.get(ca), (None, "", ""))
            if rc == 0:
                stats = parse_ethtool_stats(out)
                pause[netdev_of[ca]] = pfc_enabled_priorities(stats)
                found.update((name, stats[name]) for name in ETHTOOL_COUNTERS if name in stats)
            for group, names_ in ERROR_COUNTERS.items():
                for name in names_:
                    value = read_file(os.path.join(root, "class", "infiniband", ca, "ports", "1", group, name))
                    if value is not None and value.isdigit():
                        found[name] = int(value)
            counters[ca] = found
    except ParseError as exc:
        module.fail_json(msg="could not parse RDMA tool output: %s" % exc)
    expected = {
        "count": p["expected_count"],
        "link_layer": p["link_layer"],
        "rate": p["rate_gbps"],
        "exclude_netdevs": p["exclude_netdevs"],
        "lossless_priority": p["lossless_priority"] if p["link_layer"] == "Ethernet" else None,
    }
    findings, ports = evaluate_rdma(
        ibstat,
        devinfo,
        netdev_of,
        expected,
        pause_prios=pause if ethtool else None,
        mtus=mtus,
        gids=gids,
        counters=counters,
        baseline=p["baseline"],
    )
    module.exit_json(changed=False, healthy=not findings, findings=findings, ports=ports, counters=counters)


if __name__ == "__main__":
    main()
