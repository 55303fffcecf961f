"""Simulated nvbandwidth and nccl-tests all_reduce_perf (SIMULATION: no GPU runs a copy).

Formats are those of real captures (tests/fixtures/realworld): nvbandwidth v0.4 as Azure's
health checks print it on an 8x H100 (the Version/Driver preamble, "Device N: name", "Running
<test>.", the GB/s matrix with N/A on the diagonal, "SUM <test> <total>"), and nccl-tests'
single-process layout of the 8x H100 all_reduce capture ("# nThread 1 nGpus N ...", one
"#  Rank" line per GPU with its PCI bus, the out-of-place/in-place table, "# Out of bounds
values : 0 OK", "# Avg bus bandwidth"). tests/unit/test_gpu_bench_sim.py holds the output to
those captures, line by line, and parses both with the product's parsers.

The numbers are simulated from the profile and calibrated on those captures: a device-to-device
copy over NVLink reads 77.6 % of links x per-link GB/s (371 GB/s of 18 x 26.562 on H100), over
PCIe 83.5 % of the link's GB/s (26.3 of 31.5 on gen4 x16, the A6000 capture); all-reduce bus
bandwidth follows the H100 capture's curve (0.80 to 0.99 of links x per-link GB/s from 128 MiB to
4 GiB; 0.7 of the PCIe link without NVLink). Faults: slow_gpu_pair (gpu=A peer=B factor=F) slows
that pair both ways and every all-reduce (the ring crosses it); gpu_missing removes the GPU.
"""

from __future__ import annotations

import os
import random
import socket
import sys

from hwsimlib.state import DRIVER_FILE, faults, installed, present_gpus, profile

NVLINK_COPY = 0.776
PCIE_COPY = 0.835
PCIE_GBS = {3: 0.985, 4: 1.969, 5: 3.938}  # GB/s per lane after encoding
# busbw / (links x GB/s per link) by message size (the 8x H100 all_reduce capture: 382.99 ... 473.60)
NCCL_CURVE = {134217728: 0.801, 268435456: 0.862, 536870912: 0.903, 1073741824: 0.973, 2147483648: 0.980, 4294967296: 0.990}


def _link_gbs(gpu):
    nv = gpu["nvlink"]
    if nv["links"]:
        return nv["links"] * nv["speed_gbps"], NVLINK_COPY
    return PCIE_GBS[gpu["pcie"]["gen"]] * gpu["pcie"]["width"], PCIE_COPY


def _pair_factor(a, b):
    factor = 1.0
    for f in faults("slow_gpu_pair"):
        if {str(a), str(b)} == {str(f.get("gpu")), str(f.get("peer"))}:
            factor = min(factor, float(f.get("factor", 0.5)))
    return factor


def _no_driver():
    if installed(DRIVER_FILE) is None:
        sys.stderr.write("CUDA error: no CUDA-capable device is detected\n")
        return True
    return False


def nvbandwidth(args):
    prof = profile()
    gpu = prof["gpu"]
    test = "device_to_device_memcpy_read_ce"
    if args[:1] in (["-t"], ["--testcase"]) and len(args) == 2:
        test = args[1]
    elif args:
        sys.stderr.write("hwsim nvbandwidth: only '-t <testcase>' is simulated\n")
        return 2
    if test not in ("device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce"):
        sys.stderr.write("ERROR: Testcase %s not found!\n" % test)
        return 1
    if _no_driver():
        return 1
    gpus = present_gpus()
    total, eff = _link_gbs(gpu)
    rng = random.Random()
    version = installed(DRIVER_FILE)
    out = [
        "nvbandwidth Version: v0.4",
        "Built from Git version: v0.4",
        "",
        "NOTE: This tool reports current measured bandwidth on your system.",
        "Additional system-specific tuning may be required to achieve maximal peak bandwidth.",
        "",
        "CUDA Runtime Version: 12020",
        "CUDA Driver Version: 12020",
        "Driver Version: %s" % version,
        "",
    ]
    out += ["Device %d: %s" % (i, gpu["name"]) for i in range(len(gpus))]
    arrow = "->" if "read" in test else "<-"
    out += ["", "Running %s." % test, "memcpy CE GPU(row) %s GPU(column) bandwidth (GB/s)" % arrow]
    out.append(" " + "".join("%10d" % i for i in range(len(gpus))))  # v0.4: unpadded row labels
    summed = 0.0
    for r, a in enumerate(gpus):
        cells = []
        for b in gpus:
            if a == b:
                cells.append("%10s" % "N/A")
                continue
            value = total * eff * _pair_factor(a, b) * rng.uniform(0.997, 1.004)
            summed += round(value, 2)
            cells.append("%10.2f" % value)
        out.append("%d" % r + "".join(cells))
    out += ["", "SUM %s %.2f" % (test, summed), ""]
    sys.stdout.write("\n".join(out))
    return 0


def all_reduce_perf(args):
    prof = profile()
    gpu = prof["gpu"]
    opts = {"-b": "134217728", "-e": "4294967296", "-f": "2", "-g": "1"}
    i = 0
    while i < len(args):
        if args[i] in opts and i + 1 < len(args):
            opts[args[i]] = args[i + 1]
            i += 2
        else:
            sys.stderr.write("hwsim all_reduce_perf: only -b -e -f -g are simulated (got %r)\n" % args[i])
            return 2
    if _no_driver():
        return 1
    ngpus = int(opts["-g"])
    gpus = present_gpus()
    if ngpus > len(gpus):
        sys.stderr.write(
            "%s: Test CUDA failure common.cu:1107 'invalid device ordinal'\n .. %s pid %d: Test failure common.cu:1031\n"
            % (socket.gethostname(), socket.gethostname(), os.getpid())
        )
        return 1
    size, end, step = int(opts["-b"]), int(opts["-e"]), int(opts["-f"])
    total, _ = _link_gbs(gpu)
    slow = min([_pair_factor(a, b) for a in gpus[:ngpus] for b in gpus[:ngpus] if a < b] or [1.0])
    host, pid = socket.gethostname(), os.getpid()
    out = [
        "# nThread 1 nGpus %d minBytes %d maxBytes %d step: %d(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0"
        % (ngpus, size, end, step),
        "#",
        "# Using devices",
    ]
    for rank, g in enumerate(gpus[:ngpus]):
        out.append(
            "#  Rank %2d Group  0 Pid %6d on %10s device %2d [0x%s] %s" % (rank, pid, host, rank, gpu["bus_ids"][g].lower(), gpu["name"])
        )
    out += [
        "#",
        "#                                                              out-of-place                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ",
    ]
    rng = random.Random()
    busbws = []
    while size <= end:
        curve = NCCL_CURVE.get(size, 0.801 if size < 134217728 else 0.990)
        if not gpu["nvlink"]["links"]:
            curve = 0.7 * curve / 0.990
        row = []
        for _ in range(2):
            busbw = total * curve * slow * rng.uniform(0.997, 1.003) if ngpus > 1 else 0.0
            algbw = busbw * ngpus / (2 * (ngpus - 1)) if ngpus > 1 else total * curve
            time_us = size / (algbw * 1e3)
            row.append((time_us, algbw, busbw))
        busbws += [row[0][2], row[1][2]]
        t_fmt = lambda t: ("%7.1f" % t) if t < 1e4 else ("%7.0f" % t)
        out.append(
            "%12d  %12d  %8s  %6s  %6d  %s  %6.2f  %6.2f  %6d  %s  %6.2f  %6.2f  %6d"
            % (size, size // 4, "float", "sum", -1, t_fmt(row[0][0]), row[0][1], row[0][2], 0, t_fmt(row[1][0]), row[1][1], row[1][2], 0)
        )
        size *= step
    out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : %g " % round(sum(busbws) / len(busbws), 3), "#", ""]
    sys.stdout.write("\n".join(out))
    return 0
