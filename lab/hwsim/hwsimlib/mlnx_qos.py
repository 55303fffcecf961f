"""Simulated mlnx_qos (SIMULATION) over a simulated mlx5 kernel.

No kernel here has an mlx5 netdev, so the real mlnx_qos (Mellanox/mlnx-tools, python/mlnx_qos)
cannot run: this module reproduces what it does, from its source, in two layers:

- `Mlx5Port`: what the mlx5 driver's DCB netlink handlers (en_dcbnl.c), its manual buffer code
  (en/port_buffer.c) and MLNX_OFED's qos/buffer_size and qos/prio2buffer sysfs handlers
  (en_sysfs.c) do with a request: PFC, cable length, the DSCP app table and trust state, ETS,
  receive buffers with the lossless-buffer rule (ENOMEM, logged to $HWSIM_RUN/kmsg).
- `mlnx_qos()`: the tool's own flow over that port: optparse options and messages, the order in
  which it sends things to the kernel, its error paths (messages on stdout, rc 1; optparse's on
  stderr, rc 2; a Python TypeError traceback where the tool concatenates a str and an OSError)
  and its output layout, per released version (HWSIM_MLNX_QOS_VERSION, default the current one).

Files: hwsimlib/mlx5_port.py (`Mlx5Port`, the kernel), mlnx_qos_netlink.py (netlink as the tool
sees it), mlnx_qos_tool.py (one run's steps), mlnx_qos_print.py (the output layout) and this one
(the releases, their options, the entry point).

Every fact and its source line is in lab/hwsim/MLNX_QOS.md; tests/unit/test_mlnx_qos_fidelity.py
holds each claimed version's output to real captures, line for line.
"""

from __future__ import annotations

import optparse
import os
import sys

from hwsimlib.mlnx_qos_tool import Tool
from hwsimlib.mlx5_port import Mlx5Port, qos_profile
from hwsimlib.nic import nic_by_netdev
from hwsimlib.state import nic_state

# mlnx-tools releases modelled here (their tags in Mellanox/mlnx-tools). A version is "claimed"
# only where a real capture holds its layout (tests/unit/test_mlnx_qos_fidelity.py).
#   default_prio  prints "default priority:" and takes --defltprio (a60252a .. 374d9b5)
#   total         the key after the 8 buffer sizes (a60252a: total_size, b8c08c5: max_buffer_size)
#   total_sysfs   the total is printed on the MLNX_OFED sysfs path too (af4851e)
#   sysfs_both    --buffer_size with --prio2buffer writes both sysfs files (until af4851e: only
#                 buffer_size after it)
#   tc_sorted     TCs printed in sorted order (d477a17); otherwise in the order the priorities
#                 first name them, which under Python 2 (4.x on RHEL 7) is sorted too
#   split_pfc     --cable_len and --pfc are sent separately, each keeping the other's current
#                 value (83b87d9); before, --cable_len alone sent PFC off
#   specific_pfc  -F/--specific_pfc and -P/--get_pfc exist (227c7ab)
#   strict_except `except Exception` + the EPERM check (7022290); before, bare `except:` also
#                 caught the tool's own sys.exit(1)
VERSIONS = {
    "4.6": {
        "tag": "v4.6.0",
        "default_prio": False,
        "total": None,
        "total_sysfs": False,
        "sysfs_both": True,
        "tc_sorted": True,
        "split_pfc": False,
        "specific_pfc": False,
        "strict_except": False,
        "cable_max": 1000,
        "dscp_append": False,
    },
    "5.2": {
        "tag": "v5.2.0",
        "default_prio": True,
        "total": "total_size",
        "total_sysfs": False,
        "sysfs_both": True,
        "tc_sorted": False,
        "split_pfc": False,
        "specific_pfc": False,
        "strict_except": False,
        "cable_max": 0xFFFF,
        "dscp_append": True,
    },
    "24.04": {
        "tag": "v24.04.0",
        "default_prio": True,
        "total": "max_buffer_size",
        "total_sysfs": True,
        "sysfs_both": False,
        "tc_sorted": True,
        "split_pfc": True,
        "specific_pfc": False,
        "strict_except": False,
        "cable_max": 0xFFFF,
        "dscp_append": True,
    },
    "24.10": {
        "tag": "v24.10.0",
        "default_prio": True,
        "total": "max_buffer_size",
        "total_sysfs": True,
        "sysfs_both": False,
        "tc_sorted": True,
        "split_pfc": False,  # v24.10.0 was cut from a branch without 83b87d9
        "specific_pfc": False,
        "strict_except": False,
        "cable_max": 0xFFFF,
        "dscp_append": True,
    },
    "25.07": {
        "tag": "v25.07.0",
        "default_prio": False,
        "total": "max_buffer_size",
        "total_sysfs": True,
        "sysfs_both": False,
        "tc_sorted": True,
        "split_pfc": True,
        "specific_pfc": True,
        "strict_except": True,
        "cable_max": 0xFFFF,
        "dscp_append": True,
    },
}
DEFAULT_VERSION = "25.07"


def version():
    v = os.environ.get("HWSIM_MLNX_QOS_VERSION", DEFAULT_VERSION)
    if v not in VERSIONS:
        sys.stderr.write("hwsim: HWSIM_MLNX_QOS_VERSION=%s is not modelled; one of %s\n" % (v, ", ".join(VERSIONS)))
        sys.exit(2)
    return VERSIONS[v]


def _parser(v):
    """The tool's options (names, destinations, actions) per version; help texts are ours."""
    parser = optparse.OptionParser(usage="%prog -i <interface> [options]", version="%prog 1.2", prog="mlnx_qos")
    add = parser.add_option
    add("-f", "--pfc", dest="pfc", metavar="LIST", help="PFC per priority 0..7 (8 comma separated 0/1)")
    if v["specific_pfc"]:
        add("-F", "--specific_pfc", dest="specific_pfc", metavar="LIST", help="PFC for some priorities (x keeps one)")
        add("-P", "--get_pfc", dest="get_pfc", help="print the PFC state of one priority")
    add("-p", "--prio_tc", dest="prio_tc", metavar="LIST", help="priority to TC map (8 values)")
    add("-s", "--tsa", dest="tsa", metavar="LIST", help="strict, ets or vendor for each TC")
    add("-t", "--tcbw", dest="tc_bw", metavar="LIST", help="minimal bandwidth %% of each ETS TC")
    add("-r", "--ratelimit", dest="ratelimit", metavar="LIST", help="rate limit of each TC in Gb/s")
    add("-d", "--dcbx", dest="dcbx", help="os, fw or get")
    add("--trust", dest="trust", help="pcp or dscp")
    add("--dscp2prio", dest="dscp2prio", action="append" if v["dscp_append"] else "store", help="set,DSCP,PRIO / del,DSCP,PRIO / flush")
    if v["default_prio"]:
        add("--defltprio", dest="defltprio", help="set,PRIO or del,PRIO")
    add("--cable_len", dest="cable_len", help="cable length (m) for the xoff/xon thresholds")
    add("--prio2buffer", dest="prio2buffer", metavar="LIST", help="priority to receive buffer map")
    add("--buffer_size", dest="buffer_size", metavar="LIST", help="receive buffer sizes (bytes)")
    add("-i", "--interface", dest="intf", help="interface name")
    add("-a", action="store_true", dest="printall", default=False, help="show all TCs")
    return parser


def mlnx_qos(args):
    v = version()
    parser = _parser(v)
    try:
        options, rest = parser.parse_args(args)
    except SystemExit as exc:  # optparse: usage and error on stderr, rc 2 (0 for -h/--version)
        return exc.code or 0
    tool = Tool(v, parser, options)
    if rest:
        tool.out("Bad arguments")
        parser.print_usage(sys.stdout)
        return 1
    if options.intf is None:
        tool.out("Interface name is required")
        parser.print_usage(sys.stdout)
        return 1
    nic = nic_by_netdev(options.intf)
    port = Mlx5Port(nic, nic_state()) if nic is not None else None
    sysfs_buffers = nic is not None and qos_profile(nic)["driver"] == "mlnx_ofed"
    try:
        return tool.run(port, sysfs_buffers)
    except SystemExit as exc:
        sys.stdout.flush()
        return exc.code if isinstance(exc.code, int) else 1
