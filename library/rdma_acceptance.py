#!/usr/bin/python
from __future__ import annotations

DOCUMENTATION = r"""
module: rdma_acceptance
short_description: Run this node's side of the pairwise RoCE/IB acceptance with perftest (read-only)
description:
  - Every node of the acceptance runs this module at the same time (the playbook starts it with
    C(async) and C(poll=0), so no node waits for a fork). Each computes the same plan from
    O(nodes), acceptance.pair_rounds (a rack-interleaved ring, O(N) pairs in 2-3 rounds), and in each round
    either serves (C(ib_write_bw)/C(ib_write_lat) without a host) or, as the pair's first node,
    connects to its partner's O(nodes[].address) and measures. Rail n (the n-th RDMA device of the
    link layer, management interfaces excluded, in natural order) is tested against the partner's
    rail n, all rails at once on ports O(port)+n.
  - Each test runs O(repeats) times; the verdict uses the median (acceptance.rdma_pair_verdict):
    bandwidth of the largest message >= O(min_fraction) of the slower end's line rate, latency of
    the smallest message < O(max_latency_us). RoCE runs use the port's RoCE v2 IPv4 GID
    (C(-x)) and the lossless priority's traffic class (C(--tclass)); their out-of-band exchange
    goes over the node address (perftest's default TCP exchange).
  - With O(rdma_cm) on RoCE, each rail then runs C(ib_write_lat -R) once more, its QPs connected
    through RDMA-CM as UCX, NVMe-oF and storage clients connect theirs, with the lossless
    traffic class as its ToS (C(--tos)): the client connects to the partner's RoCE address of
    that rail, read from the GID perftest printed for the partner in the bandwidth run, and the
    route decides the device; the run counts only when perftest's local GID is this rail's
    address (a route through another NIC is a problem, not a pass). A pair whose verbs pass but
    whose addresses do not resolve (ARP, routes, an address missing on a rail) fails with the
    finding C(rdma_cm). InfiniBand rails are not run through RDMA-CM (they would need IPoIB
    addresses, which rackforge does not set).
  - Changes nothing on the node; a run that cannot start (no such device, no RoCE v2 GID, the
    partner never connecting) is recorded with its evidence. Every node must have C(rails) and
    C(rate_gbps) in O(nodes), else the module fails before any run.
options:
  node:
    description: This node's name in O(nodes).
    type: str
    required: true
  nodes:
    description: Every node of the acceptance, C({name, address, rack, rails, rate_gbps}).
    type: list
    elements: dict
    required: true
  link_layer:
    description: Link layer of the fabric.
    type: str
    default: Ethernet
    choices: [Ethernet, InfiniBand]
  exclude_netdevs:
    description: Interfaces that are not rails (management NICs).
    type: list
    elements: str
    default: []
  sysfs_root:
    description: sysfs root (RDMA devices, GIDs).
    type: path
    default: /sys
  traffic_class:
    description: IP traffic class of the test traffic (DSCP x 4: 104 for the lossless DSCP 26).
    type: int
  port:
    description: First TCP port of perftest's exchange (rail n uses O(port)+n).
    type: int
    default: 18515
  duration:
    description: Seconds per bandwidth run (perftest C(-D)).
    type: int
    default: 5
  repeats:
    description: Runs per test and rail before a verdict.
    type: int
    default: 3
  rdma_cm:
    description: On RoCE, also connect each rail through RDMA-CM (C(ib_write_lat -R)) once per pair.
    type: bool
    default: true
  min_fraction:
    description: Bandwidth floor as a fraction of line rate.
    type: float
    default: 0.9
  max_latency_us:
    description: Latency ceiling (microseconds).
    type: float
    default: 5.0
  connect_timeout:
    description:
      - Seconds a run waits for its partner (a server for its client, a client retrying a partner not yet listening).
      - The first run of round n may wait until O(start_epoch) + n x the round budget
        (O(connect_timeout) + (2 x O(repeats) + 1) x (O(duration) + 10) + 30 s, the 1 for the RDMA-CM run):
        a partner still in its previous round is waited for.
    type: int
    default: 60
  start_epoch:
    description: The acceptance's start (UNIX time), the same on every node (the playbook sets it once); default now.
    type: float
author: rackforge
"""

RETURN = r"""
pairs:
  description: The pairs this node measured (as client), one per rail, with C(bw_gbps), C(lat_us), C(ok), C(findings), evidence.
  returned: always
  type: list
served:
  description: The pairs this node served, one per rail, with C(ok) and the evidence of a run that failed.
  returned: always
  type: list
rails:
  description: This node's rails, C({ca, netdev, gid_index, address}) (address, the IPv4 address of that GID).
  returned: always
  type: list
"""

import os
import re
import subprocess
import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge.acceptance import pair_rounds, rdma_pair_verdict
from ansible.module_utils.rackforge.perftest import ParseError, gid_addresses, parse_perftest

TESTS = ("ib_write_bw", "ib_write_lat")
CM = "rdma_cm"  # the run of ib_write_lat -R
# a partner not listening yet: perftest's TCP exchange, and RDMA-CM's REJECTED event (8)
NOT_LISTENING = ("Couldn't connect to", "Unexpected CM event bl blka 8")


def _read(path):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def _natural(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def discover_rails(sysfs_root, link_layer, exclude):
    """The node's rails in natural order: [{ca, netdev, gid_index, address}] (gid_index: the RoCE v2
    GID of an IPv4 address on RoCE, None on InfiniBand or when the port has none; address: that
    GID's IPv4 address)."""
    base = os.path.join(sysfs_root, "class", "infiniband")
    rails = []
    for ca in sorted(os.listdir(base) if os.path.isdir(base) else [], key=_natural):
        port = os.path.join(base, ca, "ports", "1")
        if (_read(os.path.join(port, "link_layer")) or "") != link_layer:
            continue
        gids = os.path.join(port, "gids")
        netdev, gid_index, address = None, None, None
        for index in sorted((int(i) for i in os.listdir(gids)) if os.path.isdir(gids) else []):
            gid = _read(os.path.join(gids, str(index))) or ""
            ndev = _read(os.path.join(port, "gid_attrs", "ndevs", str(index)))
            netdev = netdev or ndev
            ipv4 = gid.lower().startswith("0000:0000:0000:0000:0000:ffff:")
            if ipv4 and _read(os.path.join(port, "gid_attrs", "types", str(index))) == "RoCE v2" and gid_index is None:
                gid_index = index
                quad = gid.replace(":", "")[-8:]
                address = ".".join(str(int(quad[i : i + 2], 16)) for i in range(0, 8, 2))
        if netdev in exclude:
            continue
        roce = link_layer == "Ethernet"
        rails.append({"ca": ca, "netdev": netdev, "gid_index": gid_index if roce else None, "address": address if roce else None})
    return rails


class Runner:
    def __init__(self, module, p, rails):
        self.p, self.rails = p, rails
        self.bins = {t: module.get_bin_path(t) for t in TESTS}
        self.env = dict(os.environ, **C_ENV)

    def argv(self, test, rail, index, host):
        p = self.p
        argv = [self.bins[test if test != CM else "ib_write_lat"], "-d", rail["ca"], "-i", "1", "-F", "-p", str(p["port"] + index)]
        if test == CM:
            # RDMA-CM chooses the device and GID by the route, and takes the traffic class from the
            # ToS (--tclass is not used). No source address: perftest 4.5's --source_ip is the
            # raw-Ethernet option and binds nothing, so the verdict checks the device the route chose.
            argv += ["-R"]
            if p["traffic_class"] is not None:
                argv.append("--tos=%d" % p["traffic_class"])
            return argv + ([host] if host else [])
        if rail["gid_index"] is not None:
            argv += ["-x", str(rail["gid_index"])]
        if p["traffic_class"] is not None:
            argv.append("--tclass=%d" % p["traffic_class"])
        if test == "ib_write_bw":
            argv += ["--report_gbits", "-D", str(p["duration"])]
        return argv + ([host] if host else [])

    def one(self, argv, timeout):
        try:
            res = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=max(1, timeout), check=False)
            return res.returncode, res.stdout, res.stderr
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout or b""  # bytes even with text=True
            return None, out.decode("utf-8", "replace") if isinstance(out, bytes) else out, "timed out after %d s" % timeout

    def rail(self, index, peer, serve, deadline):
        """All runs of one rail against one partner: [(test, rc, stdout, stderr, argv)]; stops at
        the first run that did not happen (the partner never came, the device failed).

        `deadline` (time.time()) ends the round's first connection: the same absolute moment on
        every node (start_epoch + round x budget), so a partner still busy in its previous round,
        even with a stalled rail, is waited for, and a stall never shifts the next round."""
        p, rail = self.p, self.rails[index] if index < len(self.rails) else None
        if rail is None:
            return [(None, None, "", "this node has no rail %d (it has %d)" % (index, len(self.rails)))]
        if p["link_layer"] == "Ethernet" and rail["gid_index"] is None:
            return [(None, None, "", "%s has no RoCE v2 GID with an IPv4 address (no address on %s?)" % (rail["ca"], rail["netdev"]))]
        missing = [t for t in TESTS if not self.bins[t]]
        if missing:
            return [(None, None, "", "%s not installed (the perftest package)" % ", ".join(missing))]
        runs = []
        first = True
        plan = [(t, p["repeats"]) for t in TESTS] + ([(CM, 1)] if cm_due(p) else [])
        for test, count in plan:
            for _ in range(count):
                host = None if serve else peer["address"]
                if test == CM and not serve:
                    host = gid_addresses(runs[0][2])["remote"]  # the partner's RoCE address, from the first bandwidth run
                    if host is None:
                        runs.append((None, None, "", "the partner's RoCE address is not in perftest's output (no IPv4 GID printed for it)"))
                        return runs
                argv = self.argv(test, rail, index, host)
                until = deadline if first else time.time() + p["connect_timeout"]
                if serve:
                    rc, out, err = self.one(argv, until - time.time() + p["duration"] + 30)
                else:
                    while True:
                        rc, out, err = self.one(argv, p["duration"] + 60)
                        if rc == 0 or not any(m in err for m in NOT_LISTENING) or time.time() > until:
                            break
                        time.sleep(0.25)
                first = False
                runs.append((test, rc, out, err, " ".join(argv)))
                if rc != 0:
                    return runs
        return runs


def cm_due(p):
    """Whether each rail also runs through RDMA-CM (RoCE only: see the module's description)."""
    return bool(p["rdma_cm"]) and p["link_layer"] == "Ethernet"


def round_budget(p):
    """Seconds one round may take at most: the first connection's wait, then every run (perftest
    sleeps 1 s after connecting; a bandwidth run lasts `duration`) with its connection retries."""
    return p["connect_timeout"] + (2 * p["repeats"] + (1 if cm_due(p) else 0)) * (p["duration"] + 10) + 30


def _evidence(runs):
    return [{"command": r[4], "rc": r[1], "stdout": r[2][-1500:], "stderr": r[3][-1500:]} for r in runs if len(r) == 5 and r[1] != 0] or (
        [{"rc": None, "stderr": runs[0][3]}] if runs and len(runs[0]) == 4 else []
    )


def verdict(runs, line_rate, p, rail_address=None):
    parsed = {t: [] for t in (*TESTS, CM)}
    problems = []
    for run in runs:
        if len(run) != 5:
            problems.append(run[3])
            continue
        test, rc, out, err, _ = run
        if rc != 0:
            label = "ib_write_lat -R (RDMA-CM)" if test == CM else test
            problems.append("%s failed (rc %s): %s" % (label, rc, (err or out).strip()[-300:]))
            continue
        try:
            result = parse_perftest(out)
            local = gid_addresses(out)["local"] if test == CM else rail_address
            if local != rail_address:
                problems.append(
                    "ib_write_lat -R (RDMA-CM) connected from %s, not from this rail's address %s: the route to the partner's "
                    "RoCE address leaves through another NIC" % (local, rail_address)
                )
                continue
            parsed[test].append(result)
        except ParseError as exc:
            problems.append("%s printed what does not parse: %s" % (test, exc))
    cm_runs = parsed[CM] if cm_due(p) else None
    result = rdma_pair_verdict(parsed["ib_write_bw"], parsed["ib_write_lat"], line_rate, p["min_fraction"], p["max_latency_us"], cm_runs)
    result["runs"] = {t: len(v) for t, v in parsed.items() if t != CM or cm_runs is not None}
    result["problems"] = problems
    return result


def _rail_into(results, runner, index, peer, serve, deadline):
    results[index] = runner.rail(index, peer, serve, deadline)


def main():
    module = AnsibleModule(
        argument_spec={
            "node": {"type": "str", "required": True},
            "nodes": {"type": "list", "elements": "dict", "required": True},
            "link_layer": {"type": "str", "default": "Ethernet", "choices": ["Ethernet", "InfiniBand"]},
            "exclude_netdevs": {"type": "list", "elements": "str", "default": []},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "traffic_class": {"type": "int"},
            "port": {"type": "int", "default": 18515},
            "duration": {"type": "int", "default": 5},
            "repeats": {"type": "int", "default": 3},
            "rdma_cm": {"type": "bool", "default": True},
            "min_fraction": {"type": "float", "default": 0.9},
            "max_latency_us": {"type": "float", "default": 5.0},
            "connect_timeout": {"type": "int", "default": 60},
            "start_epoch": {"type": "float"},
        },
        supports_check_mode=True,
    )
    p = module.params
    by_name = {n["name"]: n for n in p["nodes"]}
    if p["node"] not in by_name:
        module.fail_json(msg="rdma_acceptance: node %r is not in nodes (%s)" % (p["node"], ", ".join(sorted(by_name))))
    unknown = sorted(n for n, e in by_name.items() if not int(e.get("rails") or 0) or not float(e.get("rate_gbps") or 0))
    if unknown:
        module.fail_json(
            msg="rdma_acceptance: rails and rate_gbps are required for every node (fabric_acceptance_hardware.rdma_nic_count and "
            "rdma_rate_gbps, from the hardware profile); missing for %s" % ", ".join(unknown)
        )
    start = p["start_epoch"] or time.time()
    budget = round_budget(p)
    rounds = pair_rounds(sorted(by_name), {n: by_name[n].get("rack") or "" for n in by_name})
    rails = discover_rails(p["sysfs_root"], p["link_layer"], set(p["exclude_netdevs"]))
    runner = Runner(module, p, rails)
    me = by_name[p["node"]]
    pairs, served = [], []
    for number, pairs_of_round in enumerate(rounds, start=1):
        mine = [(a, b) for a, b in pairs_of_round if p["node"] in (a, b)]
        if not mine:
            continue
        a, b = mine[0]
        serve = p["node"] == b
        peer = by_name[a if serve else b]
        count = min(int(me["rails"]), int(peer["rails"]))
        results = [None] * count
        deadline = start + number * budget
        threads = [threading.Thread(target=_rail_into, args=(results, runner, i, peer, serve, deadline)) for i in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        line_rate = min(float(me["rate_gbps"]), float(peer["rate_gbps"]))
        for index, runs in enumerate(results):
            entry = {"a": a, "b": b, "round": number, "rail": index, "ca": rails[index]["ca"] if index < len(rails) else None}
            if serve:
                entry["ok"] = all(len(r) == 5 and r[1] == 0 for r in runs)
                entry["evidence"] = _evidence(runs)
                served.append(entry)
            else:
                entry.update(verdict(runs, line_rate, p, rails[index]["address"] if index < len(rails) else None))
                entry["line_rate_gbps"] = line_rate
                if not entry["ok"]:
                    entry["evidence"] = _evidence(runs)
                pairs.append(entry)
    module.exit_json(changed=False, pairs=pairs, served=served, rails=rails, rounds=[[list(x) for x in r] for r in rounds])


if __name__ == "__main__":
    main()
