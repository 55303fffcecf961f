"""Network arithmetic shared by the roce_qos module and the filter plugins (pure functions).

PFC headroom follows the mlx5 buffer formula (NVIDIA's "lossless RoCE" buffer guidance):
xoff = (301 + 2.16 * cable_m) * Gbps + 2.72 * MTU bytes, with the speed floored at 40 Gb/s;
the lossless receive buffer must hold xoff + MTU + 128 bytes, in 128-byte cells.
"""

from __future__ import annotations

import math

SPEED_FLOOR_GBPS = 40
CABLE_RANGE_M = (1, 1000)
MTU_RANGE = (1500, 9978)  # mlx5 max_mtu
CELL_BYTES = 128


class NetMathError(ValueError):
    """Bad input: the message names the parameter and the allowed values."""


def _check(name, value, low, high, unit=""):
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise NetMathError("%s must be a number in %s..%s%s, got %r" % (name, low, high, unit, value)) from exc
    if not low <= number <= high:
        raise NetMathError("%s must be in %s..%s%s, got %s" % (name, low, high, unit, value))
    return number


def pfc_headroom(speed_gbps, cable_m=7, mtu=9000):
    """Bytes of xoff headroom a lossless priority needs (mlx5 formula, speed floored at 40G)."""
    speed = _check("speed_gbps", speed_gbps, 1, 1600, " Gb/s")
    cable = _check("cable_m", cable_m, CABLE_RANGE_M[0], CABLE_RANGE_M[1], " m")
    mtu_ = _check("mtu", mtu, MTU_RANGE[0], MTU_RANGE[1], " bytes")
    speed = max(speed, SPEED_FLOOR_GBPS)
    # round first: 2.16 * 7 is 15.120000000000001 in binary floating point
    return math.ceil(round((301 + 2.16 * cable) * speed + 2.72 * mtu_, 6))


def pfc_lossless_buffer(speed_gbps, cable_m=7, mtu=9000):
    """Smallest lossless receive buffer (bytes, whole 128-byte cells): xoff + MTU + 128."""
    need = pfc_headroom(speed_gbps, cable_m, mtu) + int(mtu) + CELL_BYTES
    return math.ceil(need / float(CELL_BYTES)) * CELL_BYTES


def dscp_to_tos(dscp, ecn=2):
    """IP ToS byte for a DSCP value with the ECN bits (2 = ECT(0), what RoCE v2 senders use)."""
    d = int(_check("dscp", dscp, 0, 63))
    e = int(_check("ecn", ecn, 0, 3))
    return (d << 2) | e


def tcp_buffer_sizes(speed_gbps, rtt_ms, floor=16777216, ceiling=2147483647):
    """TCP buffer limits for a link: max = 2 x bandwidth-delay product (ESnet's sizing rule),
    rounded up to a power of two, never below the deployment-guide default (16 MiB) and never
    above 2 GiB - 1 (the largest value the kernel accepts)."""
    speed = _check("speed_gbps", speed_gbps, 1, 1600, " Gb/s")
    rtt = _check("rtt_ms", rtt_ms, 0.001, 1000, " ms")
    bdp = speed * 1e9 / 8 * rtt / 1000.0
    top = 1 << math.ceil(math.log(max(2 * bdp, 1), 2))
    top = int(min(max(top, floor), ceiling))
    return {
        "bdp_bytes": math.ceil(bdp),
        "net.core.rmem_max": top,
        "net.core.wmem_max": top,
        "net.ipv4.tcp_rmem": "4096 87380 %d" % top,
        "net.ipv4.tcp_wmem": "4096 65536 %d" % top,
    }
