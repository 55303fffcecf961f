"""What rdma_health checks (the RDMA ports, their link, rate, MTU, GIDs, PFC and error counters), as
a function both that module and rackforge_health call: rdma_check(module, params) -> the result dict.
A tool that is missing or fails is a *_not_run finding with its evidence, never a silent pass.
ARGS: the parameters and defaults."""

from __future__ import annotations

import os
import re

from ansible.module_utils.rackforge import C_ENV, read_file, run_concurrently
from ansible.module_utils.rackforge.health import evaluate_rdma
from ansible.module_utils.rackforge.health import not_run as health_not_run
from ansible.module_utils.rackforge.rdma import (
    ParseError,
    parse_ethtool_stats,
    parse_ibstat,
    parse_ibv_devinfo,
    parse_show_gids,
    pfc_enabled_priorities,
)
from ansible.module_utils.rackforge.settings import RANGES

ERROR_COUNTERS = {
    "counters": ("symbol_error", "link_downed", "port_rcv_errors"),
    "hw_counters": ("out_of_buffer", "local_ack_timeout_err"),
}
# mlx5 physical-port counters from `ethtool -S` (Ethernet ports only); the pause-storm counter
# rises when the NIC's pause-storm watchdog stopped a flood of PFC pause frames
ETHTOOL_COUNTERS = ("rx_crc_errors_phy", "link_down_events_phy", "tx_pause_storm_error_events")
# traffic counters, reported (textfile, dashboards) and never judged: PFC pause frames per
# priority (mlx5 `ethtool -S` lists rx/tx_prio<N>_pause for the PFC-enabled priorities) and the
# congestion notifications of RoCE's ECN (the port's hw_counters)
PAUSE_COUNTER = re.compile(r"^(rx|tx)_prio[0-7]_pause$")
TRAFFIC_HW_COUNTERS = ("np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets")


def port_counters(root, ca, group, names):
    """{name: value} of port 1's sysfs counters (counters/ or hw_counters/) that read as a number."""
    out = {}
    for name in names:
        value = read_file(os.path.join(root, "class", "infiniband", ca, "ports", "1", group, name))
        if value is not None and value.isdigit():
            out[name] = int(value)
    return out


ARGS = {
    "expected_count": {"type": "int"},
    "link_layer": {"type": "str", "default": "Ethernet", "choices": ["Ethernet", "InfiniBand"]},
    "rate_gbps": {"type": "int", "default": 0},
    "exclude_netdevs": {"type": "list", "elements": "str", "default": []},
    "lossless_priority": {"type": "int"},
    "sysfs_root": {"type": "path", "default": "/sys"},
    "baseline": {"type": "dict", "default": {}},
}


def rdma_check(module, p):
    low, high = RANGES["priority"]
    if p["lossless_priority"] is not None and not low <= p["lossless_priority"] <= high:
        module.fail_json(msg="lossless_priority must be %d..%d, got %d" % (low, high, p["lossless_priority"]))
    not_run = []  # checks that could not run: findings with their evidence, never a silent pass

    def cannot(check, component, reason, argv=None, rc=None, out="", err=""):
        evidence = {"command": " ".join(argv) if argv else None, "rc": rc, "stdout": out[-2000:], "stderr": err[-2000:]}
        not_run.append(health_not_run(check, component, reason, evidence))

    bins = {name: module.get_bin_path(name) for name in ("ibstat", "ibv_devinfo", "show_gids", "ethtool")}
    if not bins["ibstat"]:
        cannot("rdma", "ibstat", "ibstat is not installed (infiniband-diags)")
        return dict(changed=False, healthy=False, findings=not_run, ports=[], counters={})
    # the three tools at once, then every port's ethtool -S at once
    tools = [[bins[name]] for name in ("ibstat", "ibv_devinfo", "show_gids") if bins[name]]
    runs = dict(zip([argv[0] for argv in tools], run_concurrently(module, tools, environ_update=C_ENV)))
    rc, out, err = runs[bins["ibstat"]]
    try:
        ibstat = parse_ibstat(out)  # rc 255 with an ibpanic line still lists the good CAs
    except ParseError as exc:
        ibstat = {}
        err = "%s\n(parse error: %s)" % (err, exc)
    if not ibstat and (rc != 0 or p["expected_count"]):
        cannot("rdma", "ibstat", "ibstat failed (rc %s) or listed no CA" % rc, [bins["ibstat"]], rc, out, err)
        return dict(changed=False, healthy=False, findings=not_run, ports=[], counters={})

    def read_or_cannot(check, tool, missing, parser, default):
        """What the tool printed, parsed; default and a <check>_not_run finding when it is missing or fails."""
        if not bins[tool]:
            cannot(check, tool, missing)
            return default
        rc, out, err = runs[bins[tool]]
        try:
            if rc != 0:
                raise ParseError("exit status %s" % rc)
            return parser(out)
        except ParseError as exc:
            cannot(check, tool, "%s failed: %s" % (tool, exc), [bins[tool]], rc, out, err)
            return default

    devinfo = read_or_cannot("roce_mtu", "ibv_devinfo", "ibv_devinfo is not installed (ibverbs-utils)", parse_ibv_devinfo, {})
    gids = read_or_cannot("roce_gid", "show_gids", "show_gids is not installed (MLNX_OFED / DOCA ship it)", parse_show_gids, None)
    root = p["sysfs_root"]
    netdev_of, mtus, pause, counters, traffic = {}, {}, {}, {}, {}
    ethtool = bins["ethtool"]
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
        if ca in netdev_of and ibstat[ca]["ports"].get(1, {}).get("link_layer") == "Ethernet" and netdev_of[ca] not in p["exclude_netdevs"]
    ]
    if stats_of and not ethtool:
        cannot("pfc", "ethtool", "ethtool is not installed: PFC and the port counters cannot be read")
    stats_runs = (
        dict(zip(stats_of, run_concurrently(module, [[ethtool, "-S", n] for n in stats_of], environ_update=C_ENV))) if ethtool else {}
    )
    for ca in ibstat:
        found = {}
        netdev = netdev_of.get(ca)
        if netdev in stats_runs:
            rc, out, err = stats_runs[netdev]
            try:
                if rc != 0:
                    raise ParseError("exit status %s" % rc)
                stats = parse_ethtool_stats(out)
                pause[netdev] = pfc_enabled_priorities(stats)
                found.update((name, stats[name]) for name in ETHTOOL_COUNTERS if name in stats)
                traffic[ca] = {name: value for name, value in stats.items() if PAUSE_COUNTER.match(name)}
            except ParseError as exc:
                cannot("pfc", "%s/1 (%s)" % (ca, netdev), "ethtool -S failed: %s" % exc, [ethtool, "-S", netdev], rc, out, err)
        for group, names_ in ERROR_COUNTERS.items():
            found.update(port_counters(root, ca, group, names_))
        traffic.setdefault(ca, {}).update(port_counters(root, ca, "hw_counters", TRAFFIC_HW_COUNTERS))
        counters[ca] = found
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
        pause_prios=pause,
        mtus=mtus,
        gids=gids,
        counters=counters,
        baseline=p["baseline"],
    )
    findings = not_run + findings
    for port in ports:
        port["traffic"] = traffic.get(port["ca"], {})
    return dict(changed=False, healthy=not findings, findings=findings, ports=ports, counters=counters)
