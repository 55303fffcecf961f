"""Network arithmetic shared by the roce_qos module and the filter plugins (pure functions).

PFC headroom is the mlx5 driver's own (drivers/net/ethernet/mellanox/mlx5/core/en/port_buffer.c,
calculate_xoff, in the kernel's integer arithmetic): xoff = (301 + 216 * cable_m / 100) * Mb/s /
1000 + 272 * MTU / 100, with the speed floored at 40 Gb/s. A lossless receive buffer smaller than
xoff + max(netdev max_mtu, 9216) + one buffer cell makes the kernel refuse the change with ENOMEM
(update_xoff_threshold); the mlx5 kernel ignores a cable length of 1000 m or more.
"""

from __future__ import annotations

import math

SPEED_FLOOR_GBPS = 40
CABLE_RANGE_M = (1, 999)  # MLX5E_MAX_CABLE_LENGTH is 1000: the kernel ignores longer ones
MTU_RANGE = (1500, 9978)  # mlx5 max_mtu
MAX_MTU_RANGE = (68, 65535)  # any netdev's max_mtu (ETH_MIN_MTU..ETH_MAX_MTU)
MINIMUM_MAX_MTU = 9216  # port_buffer.c: the kernel uses max(netdev max_mtu, this)
CELL_BYTES = 128  # the default buffer cell (1 << MLX5E_BUFFER_CELL_SHIFT), the largest reported
# Buffer sizes rackforge asks for are whole multiples of this: a whole number of cells for the
# 128-byte cell and for the 96-byte cell some ports report (their sizes are multiples of 96), so
# the register (which counts cells) stores exactly what was asked and reads it back unchanged.
BUFFER_UNIT_BYTES = 384


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
    """Bytes of xoff headroom the mlx5 kernel reserves for a lossless buffer (calculate_xoff)."""
    speed = _check("speed_gbps", speed_gbps, 1, 1600, " Gb/s")
    cable = int(_check("cable_m", cable_m, CABLE_RANGE_M[0], CABLE_RANGE_M[1], " m"))
    mtu_ = int(_check("mtu", mtu, MTU_RANGE[0], MTU_RANGE[1], " bytes"))
    speed_mbps = int(max(speed, SPEED_FLOOR_GBPS) * 1000)
    return (301 + 216 * cable // 100) * speed_mbps // 1000 + 272 * mtu_ // 100


def buffer_units(nbytes):
    """nbytes rounded up to whole BUFFER_UNIT_BYTES."""
    return math.ceil(int(nbytes) / float(BUFFER_UNIT_BYTES)) * BUFFER_UNIT_BYTES


def pfc_lossless_buffer(speed_gbps, cable_m=7, mtu=9000, max_mtu=MINIMUM_MAX_MTU):
    """Smallest lossless receive buffer the mlx5 kernel accepts, in whole 384-byte units:
    xoff + max(max_mtu, 9216) + 128. max_mtu is the netdev's (`ip -d -j link show`); the
    default 9216 gives the floor every port needs."""
    headroom = pfc_headroom(speed_gbps, cable_m, mtu)
    top = int(_check("max_mtu", max_mtu, MAX_MTU_RANGE[0], MAX_MTU_RANGE[1], " bytes"))
    return buffer_units(headroom + max(top, MINIMUM_MAX_MTU) + CELL_BYTES)


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
