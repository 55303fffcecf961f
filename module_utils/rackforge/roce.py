"""Lossless RoCE v2 port planning (pure): what `mlnx_qos` and sysfs/configfs must change so a
port has trust DSCP, PFC on the lossless priority only, ECN on that priority, CNP marking,
the PFC buffer for its speed and cable, RDMA-CM RoCE v2 with the default ToS, and the MTU.
"""

from __future__ import annotations

import os
import re

from ansible.module_utils.rackforge.netmath import pfc_headroom, pfc_lossless_buffer


class PlanError(ValueError):
    """The request cannot be met on this port; nothing has been changed."""


def sysfs_paths(sysfs_root, configfs_root, ca, netdev, prio):
    net = os.path.join(sysfs_root, "class", "net", netdev)
    cm = os.path.join(configfs_root, "rdma_cm", ca, "ports", "1")
    return {
        "ecn_np": os.path.join(net, "ecn", "roce_np", "enable", str(prio)),
        "ecn_rp": os.path.join(net, "ecn", "roce_rp", "enable", str(prio)),
        "cnp_dscp": os.path.join(net, "ecn", "roce_np", "cnp_dscp"),
        "cnp_priority": os.path.join(net, "ecn", "roce_np", "cnp_802p_prio"),
        "mtu": os.path.join(net, "mtu"),
        "traffic_class": os.path.join(sysfs_root, "class", "infiniband", ca, "tc", "1", "traffic_class"),
        "roce_mode": os.path.join(cm, "default_roce_mode"),
        "roce_tos": os.path.join(cm, "default_roce_tos"),
    }


def read_value(key, raw):
    """Normalise a sysfs/configfs value for comparison (None when the file is absent)."""
    if raw is None:
        return None
    raw = raw.strip()
    if key == "roce_mode":
        return raw
    if key == "traffic_class":  # MLNX_OFED prints "Global tclass=106"; empty when unset
        m = re.search(r"(\d+)\s*$", raw)
        return int(m.group(1)) if m else -1
    return int(raw) if raw.lstrip("-").isdigit() else None


def plan_port(qos, sysfs, want, speed_gbps):
    """Plan one port.

    qos: parse_mlnx_qos() of the port now; sysfs: {key: current value or None when the file is
    absent} for the keys of sysfs_paths(); want: the module's desired settings.
    Returns {"mlnx_args": [...] only the differing options, "full_args": [...] every option
    (for the boot unit), "writes": {key: value} differing sysfs values, "full_writes": every
    sysfs value, "unsupported": [key, ...], "before": {...}, "after": {...},
    "headroom": bytes, "lossless_buffer": bytes or None}.
    Raises PlanError when the buffer request cannot hold the headroom or the port buffer.
    """
    prio = want["lossless_priority"]
    before, after, args, full, writes, full_writes, unsupported = {}, {}, [], [], {}, {}, []

    def mlnx(key, option, value, current, render):
        before[key] = current
        after[key] = value
        full.extend([option, render(value)])
        if current != value:
            args.extend([option, render(value)])

    mlnx("trust", "--trust", want["trust"], qos.get("trust"), str)
    pfc = [1 if p == prio else 0 for p in range(8)] if want["pfc"] else [0] * 8
    mlnx("pfc", "--pfc", pfc, qos.get("pfc"), lambda v: ",".join(str(x) for x in v))
    headroom = pfc_headroom(speed_gbps, want["cable_len_m"], want["mtu"] or 9000)
    lossless = None
    if qos.get("cable_len") is not None:
        mlnx("cable_len", "--cable_len", want["cable_len_m"], qos.get("cable_len"), str)
    else:
        unsupported.append("cable_len")
    if want["buffer_mode"] == "manual":
        if not qos.get("buffer_size"):
            raise PlanError("buffer_mode manual: this mlnx_qos prints no receive buffer sizes (firmware/tool too old)")
        total = sum(qos["buffer_size"])
        need = pfc_lossless_buffer(speed_gbps, want["cable_len_m"], want["mtu"] or 9000)
        lossless = want["lossless_buffer_bytes"] or need
        if lossless < need:
            raise PlanError(
                "lossless_buffer_bytes %d cannot hold the PFC headroom: %d Gb/s, %d m, MTU %d need at least %d bytes"
                % (lossless, speed_gbps, want["cable_len_m"], want["mtu"] or 9000, need)
            )
        if lossless > total:
            raise PlanError("lossless buffer of %d bytes does not fit the port's %d-byte receive buffer" % (lossless, total))
        sizes = [total - lossless, lossless] + [0] * 6
        mlnx("buffer_size", "--buffer_size", sizes, qos.get("buffer_size"), lambda v: ",".join(str(x) for x in v))
        p2b = [1 if p == prio else 0 for p in range(8)]
        mlnx("prio2buffer", "--prio2buffer", p2b, qos.get("prio2buffer"), lambda v: ",".join(str(x) for x in v))

    desired = {
        "ecn_np": 1 if want["ecn"] else 0,
        "ecn_rp": 1 if want["ecn"] else 0,
        "cnp_dscp": want["cnp_dscp"],
        "cnp_priority": want["cnp_priority"],
        "mtu": want["mtu"],
        "traffic_class": want["traffic_class"],
        "roce_mode": want["roce_mode"],
        "roce_tos": want["rdma_cm_tos"],
    }
    for key, value in desired.items():
        if value is None:
            continue
        current = sysfs.get(key)
        if current is None:
            unsupported.append(key)
            continue
        before[key] = current
        after[key] = value
        full_writes[key] = value
        if current != value:
            writes[key] = value
    return {
        "mlnx_args": args,
        "full_args": full,
        "writes": writes,
        "full_writes": full_writes,
        "unsupported": unsupported,
        "before": before,
        "after": after,
        "headroom": headroom,
        "lossless_buffer": lossless,
    }
