"""Simulated mlnx_qos (SIMULATION)."""

from __future__ import annotations

import os
import sys

from hwsimlib.nic import nic_by_netdev
from hwsimlib.state import RUN, nic_state, pfc_effective, save_json


def mlnx_qos_print(nic, st):
    out = ["DCBX mode: OS controlled", "Priority trust state: %s" % st["trust"]]
    if st["trust"] == "dscp":
        out.append("dscp2prio mapping:")
        for prio in range(8):
            dscps = sorted((int(d) for d, p in st["dscp2prio"].items() if p == prio), reverse=True)
            out.append("        prio:%d dscp:%s" % (prio, "".join("%02d," % d for d in dscps)))
    out.append("Receive buffer size (bytes): %s" % ",".join(str(b) for b in st["buffer_size"]) + ",")
    out.append("Cable len: %d" % st["cable_len"])
    pfc = pfc_effective(nic, st)
    out += [
        "PFC configuration:",
        "        priority    0   1   2   3   4   5   6   7",
        "        enabled     " + "   ".join(str(v) for v in pfc) + "   ",
        "        buffer      " + "   ".join(str(v) for v in st["prio2buffer"]) + "   ",
    ]
    tc_of = {0: 1, 1: 0}
    for tc in range(8):
        prios = [p for p in range(8) if tc_of.get(p, p) == tc]
        out.append("tc: %d ratelimit: unlimited, tsa: vendor" % tc)
        out.append("         priority:  " + " ".join(str(p) for p in prios))
    return "\n".join(out) + "\n"


def mlnx_qos(args):
    if "-i" not in args:
        sys.stderr.write("Usage: mlnx_qos -i <interface> [options]\n")
        return 2
    netdev = args[args.index("-i") + 1]
    nic = nic_by_netdev(netdev)
    if nic is None:
        sys.stderr.write("Netlink error: No such device %s\n" % netdev)
        return 1
    state = nic_state()
    st = state[nic["ca"]]

    def opt(name):
        for i, a in enumerate(args):
            if a == name and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(name + "="):
                return a.split("=", 1)[1]
        return None

    changed = False
    trust = opt("--trust")
    if trust is not None:
        if trust not in ("pcp", "dscp"):
            sys.stderr.write("Invalid trust state %s\n" % trust)
            return 1
        st["trust"] = trust
        changed = True
    pfc = opt("--pfc") or opt("-f")
    if pfc is not None:
        vals = [int(v) for v in pfc.split(",")]
        if len(vals) != 8 or any(v not in (0, 1) for v in vals):
            sys.stderr.write("PFC must be 8 comma separated 0/1 values\n")
            return 1
        st["pfc"] = vals
        changed = True
    cable = opt("--cable_len")
    if cable is not None:
        st["cable_len"] = int(cable)
        changed = True
    bufsize = opt("--buffer_size")
    if bufsize is not None:
        vals = [int(v) for v in bufsize.split(",")]
        if len(vals) != 8 or sum(vals) > 262016:
            sys.stderr.write("Buffer sizes must be 8 values summing to at most 262016 bytes\n")
            return 1
        st["buffer_size"] = vals
        changed = True
    p2b = opt("--prio2buffer")
    if p2b is not None:
        st["prio2buffer"] = [int(v) for v in p2b.split(",")]
        changed = True
    dscp = opt("--dscp2prio")
    if dscp is not None:
        action, _, pair = dscp.partition(",")
        d, _, p = pair.partition(",")
        if action == "set":
            st["dscp2prio"][str(int(d))] = int(p)
            changed = True
    if changed:
        save_json(os.path.join(RUN, "nic.json"), state)
    sys.stdout.write(mlnx_qos_print(nic, st))
    return 0
