"""Lossless RoCE v2 port planning (pure): what `mlnx_qos` and sysfs/configfs must change so a
port has trust DSCP, PFC on the lossless priority only, ECN on that priority, CNP marking,
the PFC buffer for its speed and cable, RDMA-CM RoCE v2 with the default ToS, and the MTU.

How mlnx_qos (Mellanox/mlnx-tools python/mlnx_qos) and the mlx5 kernel handle what is sent decides the calls:
- `--cable_len` always travels with `--pfc`: before mlnx-tools 24.04 (and in 24.10) a
  `--cable_len` alone also sent PFC off.
- `--buffer_size` and `--prio2buffer` never share a call: on MLNX_OFED's sysfs path mlnx_qos
  then writes only the sizes; on the netlink path the kernel applies the priority map first and
  refuses it (ENOMEM) when the buffer it now makes lossless is still too small.
- every call keeps each lossless buffer at or above the kernel's minimum, xoff + max(netdev
  max_mtu, 9216) + 128 bytes, at the cable length in force: the calls are ordered so that it
  holds after each one (the kernel checks each call on its own).
"""

from __future__ import annotations

import itertools
import json
import os
import re

from ansible.module_utils.rackforge.netmath import (
    CELL_BYTES,
    MINIMUM_MAX_MTU,
    buffer_units,
    pfc_headroom,
    pfc_lossless_buffer,
)

LOSSLESS_BUFFER = 1  # the receive buffer the lossless priority maps to in manual mode


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


def link_max_mtu(text, netdev):
    """The netdev's max_mtu from `ip -d -j link show dev NETDEV` (iproute2 JSON)."""
    try:
        links = json.loads(text)
        for link in links:
            if link.get("ifname") == netdev and isinstance(link.get("max_mtu"), int):
                return link["max_mtu"]
    except (ValueError, AttributeError, TypeError):
        pass
    raise PlanError("%s: `ip -d -j link show dev %s` reports no max_mtu (needed for the mlx5 lossless buffer minimum)" % (netdev, netdev))


def _lists(values):
    return ",".join(str(x) for x in values)


def _buffer_order(speed, mtu, max_mtu, now, target, steps):
    """The steps ("sizes", "prio2buffer", "pfc") in an order after each of which every lossless
    buffer holds the kernel minimum at the cable length then in force; "pfc_off" first when no
    order does (PFC is then off while the buffers change). None when even that fails."""

    def threshold(cable):
        return pfc_headroom(speed, cable, mtu) + max(max_mtu, MINIMUM_MAX_MTU) + CELL_BYTES

    def holds(state):
        lossless = {state["p2b"][p] for p in range(8) if state["pfc"][p]}
        return all(state["sizes"][b] >= threshold(state["cable"]) for b in lossless)

    def walk(order):
        state = dict(now)
        for step in order:
            if step == "pfc_off":
                state = dict(state, pfc=[0] * 8)
            elif step == "pfc":  # the kernel applies the cable length, then the PFC change
                state = dict(state, cable=target["cable"])
                if not holds(state):
                    return False
                state = dict(state, pfc=target["pfc"])
            else:
                key = "sizes" if step == "sizes" else "p2b"
                state = dict(state, **{key: target[key]})
            if not holds(state):
                return False
        return True

    for order in itertools.permutations(steps):  # sizes, prio2buffer, pfc: the preferred order
        if walk(order):
            return list(order)
    fallback = ["pfc_off", *[s for s in steps if s != "pfc"], "pfc"]
    return fallback if walk(fallback) else None


def plan_port(qos, sysfs, want, speed_gbps, max_mtu=None):
    """Plan one port.

    qos: parse_mlnx_qos() of the port now; sysfs: {key: current value or None when the file is
    absent} for the keys of sysfs_paths(); want: the module's desired settings; max_mtu: the
    netdev's max_mtu (manual buffer mode needs it).
    Returns {"calls": [[mlnx_qos args], ..] the differing settings in the order to send them,
    "boot_calls": [[..], ..] everything, in the order for a freshly booted port, "order": step
    names, "writes": {key: value} differing sysfs values, "full_writes": every sysfs value,
    "unsupported": [key, ...], "before": {...}, "after": {...}, "headroom": bytes,
    "lossless_buffer": bytes or None}.
    Raises PlanError when the buffer request cannot be met.
    """
    prio = want["lossless_priority"]
    before, after, unsupported = {}, {}, []
    differs = set()

    def track(key, value, current):
        before[key] = current
        after[key] = value
        if current != value:
            differs.add(key)

    track("trust", want["trust"], qos.get("trust"))
    pfc = [1 if p == prio else 0 for p in range(8)] if want["pfc"] else [0] * 8
    track("pfc", pfc, qos.get("pfc"))
    cable_known = qos.get("cable_len") is not None
    if cable_known:
        track("cable_len", want["cable_len_m"], qos.get("cable_len"))
    else:
        unsupported.append("cable_len")
    mtu_now = sysfs.get("mtu") if isinstance(sysfs.get("mtu"), int) and sysfs.get("mtu") > 0 else None
    # the kernel takes the netdev's MTU of the moment, and checks again when the MTU changes
    mtu = max(m for m in (mtu_now, want["mtu"], 1500) if m)
    mtu = min(mtu, 9978)
    headroom = pfc_headroom(speed_gbps, want["cable_len_m"], mtu)

    pfc_call = ["--pfc", _lists(pfc)] + (["--cable_len", str(want["cable_len_m"])] if cable_known else [])
    trust_call = ["--trust", want["trust"]]
    lossless, order, calls = None, [], []
    buffer_calls = {}
    if want["buffer_mode"] == "manual":
        if not qos.get("buffer_size"):
            raise PlanError("buffer_mode manual: this mlnx_qos prints no receive buffer sizes (firmware/tool too old)")
        if max_mtu is None:
            raise PlanError("buffer_mode manual: the netdev's max_mtu is unknown")
        need = pfc_lossless_buffer(speed_gbps, want["cable_len_m"], mtu, max_mtu)
        lossless = need
        if want.get("lossless_buffer_bytes"):
            lossless = buffer_units(want["lossless_buffer_bytes"])
            if lossless < need:
                values = (want["lossless_buffer_bytes"], headroom, max_mtu, MINIMUM_MAX_MTU, CELL_BYTES)
                values += (speed_gbps, want["cable_len_m"], mtu, need)
                raise PlanError(
                    "lossless_buffer_bytes %d cannot hold the PFC headroom: the mlx5 kernel refuses a lossless buffer below "
                    "xoff %d + max(max_mtu %d, %d) + %d bytes at %d Gb/s, %d m, MTU %d: use at least %d (a multiple of 384)" % values
                )
        budget = sum(qos["buffer_size"])
        if lossless > budget:
            raise PlanError(
                "lossless buffer of %d bytes does not fit the port's %d-byte receive buffer (the sum of its buffer sizes now%s)"
                % (lossless, budget, "; max_buffer_size=%d" % qos["buffer_total"] if qos.get("buffer_total") else "")
            )
        sizes = [0] * 8
        sizes[LOSSLESS_BUFFER] = lossless
        sizes[0] = budget - lossless
        p2b = [LOSSLESS_BUFFER if p == prio else 0 for p in range(8)]
        track("buffer_size", sizes, qos.get("buffer_size"))
        track("prio2buffer", p2b, qos.get("prio2buffer"))
        buffer_calls = {"sizes": ["--buffer_size", _lists(sizes)], "prio2buffer": ["--prio2buffer", _lists(p2b)]}
        steps = [s for s, key in (("sizes", "buffer_size"), ("prio2buffer", "prio2buffer")) if key in differs]
        if differs & {"pfc", "cable_len"}:
            steps.append("pfc")
        if steps:
            current_cable = qos["cable_len"] if cable_known else want["cable_len_m"]
            now = {"pfc": qos.get("pfc") or [0] * 8, "p2b": qos.get("prio2buffer") or [0] * 8, "sizes": qos["buffer_size"]}
            now["cable"] = current_cable
            target = {"pfc": pfc, "p2b": p2b, "sizes": sizes, "cable": want["cable_len_m"]}
            order = _buffer_order(speed_gbps, mtu, max_mtu, now, target, steps)
            if order is None:
                raise PlanError("no order of mlnx_qos calls keeps every lossless buffer at the mlx5 minimum")
        boot_calls = [buffer_calls["sizes"], buffer_calls["prio2buffer"], trust_call + pfc_call]
    else:
        if differs & {"pfc", "cable_len"}:
            order = ["pfc"]
        boot_calls = [trust_call + pfc_call]
    for step in order:
        if step == "pfc_off":
            calls.append(["--pfc", _lists([0] * 8)])
        elif step == "pfc":
            calls.append((trust_call if "trust" in differs else []) + pfc_call)
        else:
            calls.append(buffer_calls[step])
    if "trust" in differs and "pfc" not in order:
        calls.insert(0, trust_call)

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
    writes, full_writes = {}, {}
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
        "calls": calls,
        "mlnx_args": [arg for call in calls for arg in call],
        "boot_calls": boot_calls,
        "order": order,
        "writes": writes,
        "full_writes": full_writes,
        "unsupported": unsupported,
        "before": before,
        "after": after,
        "headroom": headroom,
        "lossless_buffer": lossless,
    }
