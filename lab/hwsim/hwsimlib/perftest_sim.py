"""Simulated perftest ib_write_bw / ib_write_lat, as Debian 12 ships them (perftest 4.5-0.17)
(SIMULATION: no RDMA traffic flows, the lab has no RDMA device).

What is reproduced from perftest's source (linux-rdma/perftest tag v4.5-0.17: write_bw.c,
write_lat.c, perftest_parameters.c ctx_print_test_info, perftest_communication.c):
- the server (no host argument) prints the "Waiting for client to connect" banner and waits on
  TCP port -p (default 18515) for one client; the client connects to HOST:PORT and fails with
  "Couldn't connect to HOST:PORT" when nobody listens; both exchange their QP data over that
  socket (the out-of-band "Data ex. method : Ethernet"), sleep 1 s, then print the test header,
  the local and remote addresses (GID lines with -x), and the result table;
- write_bw: the client measures and prints the row; the server prints the client's row;
  write_lat: both sides print their latency row; -D N runs N seconds (peak bandwidth 0.00);
- a device that does not exist, a port that is not Active, a GID index that is empty fail as
  perftest does, before any connection; on a RoCE port without -x perftest picks the best GID
  itself (get_best_gid_index: IPv4-mapped first, then RoCE v2), and prints it;
- -R (--rdma_cm): the QPs are connected through RDMA-CM, the exchange is "rdma_cm" (no TCP
  socket of perftest's own). The client names the partner by its RoCE address (the IP behind the
  partner's GID, "Please run the same command with the IB/RoCE interface IP"); address resolution
  decides the QPs' device (the NIC whose subnet holds the address), not -d, whose name, MTU and
  link type the banner still prints; the GID lines are the resolved device's. The server binds
  every address and accepts on any rail. --source_ip is, in 4.5, the raw-Ethernet option
  (getopt_long matches it first): checked as an IPv4 address, then unused. An address whose
  route has no RDMA device fails at once with "Received 10 times ADDR_ERROR", one on a rail's
  subnet that nobody answers (or a node that is down) after 10 x 2 s; a partner with no listener
  rejects ("Unexpected CM event bl blka 8", RDMA_CM_EVENT_REJECTED). -T/--tos is only valid
  with -R (perftest exits otherwise) and shows as "TOS    : N"; the server prints "Waiting for
  client rdma_cm QP to connect" in its banner. With -R the address lines have no RKey/VAddr
  (the exchange posts SENDs); ib_write_lat prints "PCIe relax order: OFF".
What is simulated: the numbers. Bandwidth is 98 % of the slower NIC's line rate (100G RoCE
captures in tests/fixtures/realworld/perftest read 98.03 Gb/s) and latency 1.9 us (2-byte RDMA
write, same fabric class), with a small per-run jitter, changed by the faults slow_nic, slow_link
(the path from one NIC to one peer address) and high_latency. Both ends are this simulator: what
they exchange over the socket is the simulated physics (rate, faults), not perftest's wire format.
How the two ends meet (perftest's TCP exchange, RDMA-CM over the simulated fabric) is in
perftest_exchange.py.
"""

from __future__ import annotations

import random
import sys
import time

from hwsimlib.nic import _active_mtu, _cas, _code, _port_attr
from hwsimlib.perftest_exchange import cm_client, cm_server, connect, recv, send, waiting
from hwsimlib.state import faults, profile

LINE = "-" * 87
DEF_PORT = 18515
EFFICIENCY = 0.98
BASE_LAT_US = 1.9
BW_FMT = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
BW_FMT_MB = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
LAT_FMT = (
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]"
    "   99% percentile[usec]   99.9% percentile[usec] "
)
PORT_STATES = {1: "Down", 2: "Init", 3: "Armed", 4: "Active", 5: "Active Defer"}


def _hex(value, width):
    """C's %#0<width>x: "0x..." for non-zero values, plain zero padding for 0."""
    return "0" * width if value == 0 else "%#0*x" % (width, value)


def _parse(args, test):
    opts = {
        "dev": None,
        "ib_port": 1,
        "gid": -1,
        "tclass": None,
        "port": DEF_PORT,
        "duration": None,
        "iters": None,
        "gbits": False,
        "size": None,
        "host": None,
        "rdma_cm": False,
        "tos": None,
        "source_ip": None,
    }
    takes = {
        "-d": "dev",
        "--ib-dev": "dev",
        "-i": "ib_port",
        "--ib-port": "ib_port",
        "-x": "gid",
        "--gid-index": "gid",
        "-p": "port",
        "--port": "port",
        "-D": "duration",
        "--duration": "duration",
        "-n": "iters",
        "--iters": "iters",
        "-s": "size",
        "--size": "size",
    }
    i = 0
    while i < len(args):
        arg = args[i]
        key, eq, value = arg.partition("=")
        if key.startswith("-T") and len(key) > 2 and key[2:].isdigit():  # -T104
            opts["tos"] = int(key[2:])
        elif key in ("--tclass", "-T", "--tos", "--source_ip"):
            if not eq:
                i += 1
                if i >= len(args):
                    return None
                value = args[i]
            if key == "--source_ip":
                # getopt_long matches the raw-Ethernet option source_ip ('j') first: only checked
                if value.count(".") != 3 or not all(x.isdigit() and int(x) < 256 for x in value.split(".")):
                    sys.stderr.write(" Invalid client IP address\n")
                    return None
                opts["source_ip"] = value
            else:
                opts["tclass" if key == "--tclass" else "tos"] = int(value)
        elif arg in ("-R", "--rdma_cm"):
            opts["rdma_cm"] = True
        elif arg in ("-F", "--CPU-freq"):
            pass
        elif arg == "--report_gbits":
            opts["gbits"] = True
        elif key in takes:
            if not eq:
                i += 1
                if i >= len(args):
                    return None
                value = args[i]
            opts[takes[key]] = value if takes[key] == "dev" else int(value)
        elif not arg.startswith("-") and opts["host"] is None:
            opts["host"] = arg
        else:
            sys.stderr.write("%s: unrecognized option '%s'\n Invalid command line. Please check command rerun \n" % (test, arg))
            return None
        i += 1
    if opts["tos"] is not None and not opts["rdma_cm"]:
        sys.stdout.write(" TOS only valid for rdma_cm based QP and RawEth QP \n")  # perftest_parameters.c force_dependecies
        return None
    return opts


def _physics(nic, opts):
    """What this end contributes: its line rate and its faults (the simulated hardware)."""
    mine = [f for f in faults() if f.get("ca") == nic["ca"]]
    slow = 1.0
    for f in mine:
        if f["kind"] == "slow_nic":
            slow = min(slow, float(f.get("factor", 0.5)))
    paths = {f["peer"]: float(f.get("factor", 0.5)) for f in mine if f["kind"] == "slow_link" and f.get("peer")}
    lat_add = sum(float(f.get("us", 6)) for f in mine if f["kind"] == "high_latency")
    return {
        "rate": float(nic["rate"]),
        "slow": slow,
        "paths": paths,
        "lat_add": lat_add,
        "mtu": _active_mtu(nic),
        "seed": random.getrandbits(24),
    }


def _check_device(opts):
    nics = {n["ca"]: n for n in _cas()}
    name = opts["dev"] or (sorted(nics)[0] if nics else None)
    if name not in nics:
        sys.stderr.write("IB device %s not found\n Unable to find the Infiniband/RoCE device\n" % name if name else "No IB devices found\n")
        return None
    nic = nics[name]
    state = _code(_port_attr(nic, "state"))
    if state != 4:
        sys.stderr.write(
            " Port number %d state is %s\n Couldn't set the link layer\n Couldn't get context for the device\n"
            % (opts["ib_port"], PORT_STATES.get(state, "Nop"))
        )
        return None
    if (
        opts["gid"] >= 0
        and _port_attr(nic, "gids/%d" % opts["gid"], "0000:0000:0000:0000:0000:0000:0000:0000").replace(":", "").strip("0") == ""
    ):
        sys.stderr.write(" Failed to query GID index %d\n Couldn't get context for the device\n" % opts["gid"])
        return None
    opts["gid_user"] = opts["gid"] >= 0
    if opts["gid"] < 0 and nic["link_layer"] == "Ethernet":
        opts["gid"] = _best_gid(nic)
    return nic


def _best_gid(nic):
    """get_best_gid_index(): over the port's table, an IPv4-mapped GID beats one that is not, and
    among equals RoCE v2 beats v1; empty entries are skipped (their type cannot be read)."""
    best, best_key = 0, None
    for index in range(256):
        gid = _port_attr(nic, "gids/%d" % index, "")
        if not gid.replace(":", "").strip("0"):
            continue
        key = (gid.lower().startswith("0000:0000:0000:0000:0000:ffff:"), _port_attr(nic, "gid_attrs/types/%d" % index) == "RoCE v2")
        if best_key is None or key > best_key:
            best, best_key = index, key
    return best


def _gid_line(nic, index):
    """PERF_GID_FMT: the 16 bytes of the GID, each printed as %02d (decimal)."""
    gid = _port_attr(nic, "gids/%d" % index).replace(":", "")
    return " GID: " + ":".join("%02d" % int(gid[i : i + 2], 16) for i in range(0, 32, 2))


def _addr(side, ends, write):
    qpn, psn, rkey, vaddr = ends["qpn"], ends["psn"], ends["rkey"], ends["vaddr"]
    line = " %s address: LID %s QPN %s PSN %s" % (side, _hex(0, 4), _hex(qpn, 6), _hex(psn, 6))
    if write:
        line += " RKey %s VAddr %s" % (_hex(rkey, 8), _hex(vaddr, 16))
    return line


def _header(kind, opts, nic, mtu, server):
    out = [LINE, "                    RDMA_Write %s Test" % ("BW" if kind == "bw" else "Latency")]
    out.append(" Dual-port       : OFF\t\tDevice         : %s" % nic["ca"])
    out.append(" Number of qps   : 1\t\tTransport type : IB")
    out.append(" Connection type : RC\t\tUsing SRQ      : OFF")
    # disable_pcir is 0 unless --disable_pcie_relaxed; write_lat.c always sets it (it polls the last byte)
    out.append(" PCIe relax order: %s" % ("ON" if kind == "bw" else "OFF"))
    out.append(" ibv_wr* API     : ON")
    if not server:
        out.append(" TX depth        : %d" % (128 if kind == "bw" else 1))
    if kind == "bw":
        out.append(" CQ Moderation   : 100")
    out.append(" Mtu             : %d[B]" % mtu)
    out.append(" Link type       : %s" % ("Ethernet" if nic["link_layer"] == "Ethernet" else "IB"))
    if opts["gid"] >= 0:
        out.append(" GID index       : %d" % opts["gid"])
    out.append(" Max inline data : %d[B]" % (0 if kind == "bw" else 220))
    out.append(" rdma_cm QPs\t : %s" % ("ON" if opts["rdma_cm"] else "OFF"))
    if not opts["rdma_cm"]:
        out.append(" Data ex. method : Ethernet")
    else:
        line = " Data ex. method : rdma_cm"
        if opts["tos"] is not None:
            line += " \tTOS    : %d" % opts["tos"]
        out.append(line)
        if server:
            out += [LINE, " Waiting for client rdma_cm QP to connect", " Please run the same command with the IB/RoCE interface IP"]
    out.append(LINE)
    return out


def _measure(kind, opts, client, server, client_addr):
    """The simulated result of one run, computed by the client end from both ends' physics."""
    rng = random.Random(client["seed"] * 7919 + server["seed"])
    factor = min(client["slow"], server["slow"], client["paths"].get(opts["host"], 1.0), server["paths"].get(client_addr, 1.0))
    if kind == "bw":
        size = opts["size"] or 65536
        gbps = min(client["rate"], server["rate"]) * EFFICIENCY * factor * rng.uniform(0.997, 1.003)
        if opts["duration"]:
            iters = int(gbps * 1e9 * opts["duration"] / (size * 8))
            peak = 0.0
        else:
            iters = opts["iters"] or 5000
            peak = gbps * rng.uniform(1.0, 1.002)
        return {"size": size, "iters": iters, "peak": peak, "gbps": gbps, "mpps": gbps * 1e9 / (size * 8) / 1e6}
    size = opts["size"] or 2
    typical = (BASE_LAT_US + client["lat_add"] + server["lat_add"]) * rng.uniform(0.98, 1.02)
    return {
        "size": size,
        "iters": opts["iters"] or 1000,
        "t_min": typical * 0.96,
        "t_max": typical * 1.9,
        "t_typical": typical,
        "t_avg": typical * 1.005,
        "t_stdev": typical * 0.02,
        "p99": typical * 1.1,
        "p999": typical * 1.6,
    }


def _bw_row(r, gbits):
    scale = 1.0 if gbits else 1e9 / 8 / (1 << 20)
    return " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f" % (
        r["size"],
        r["iters"],
        r["peak"] * scale,
        r["gbps"] * scale,
        r["mpps"],
    )


def _lat_row(r):
    return " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f" % (
        r["size"],
        r["iters"],
        r["t_min"],
        r["t_max"],
        r["t_typical"],
        r["t_avg"],
        r["t_stdev"],
        r["p99"],
        r["p999"],
    )


def run(test, args):
    kind = "bw" if test.endswith("_bw") else "lat"
    opts = _parse(args, test)
    if opts is None:
        return 1
    profile()
    nic = _check_device(opts)
    if nic is None:
        return 1
    server = opts["host"] is None
    if opts["rdma_cm"]:
        if server:
            waiting()
        got = cm_server(opts) if server else cm_client(opts)
        if not isinstance(got, tuple):
            return got
        # the QPs are on the device address resolution chose; the banner's Device, Mtu and Link
        # type stay those of -d (perftest 4.5 prints ib_devname and checked the link on it)
        cm_nic, conn, peer = got
        if not server:
            opts["host"] = peer  # the path a slow_link fault names is the partner node's address
        if cm_nic["link_layer"] == "Ethernet" and not opts["gid_user"]:
            opts["gid"] = _best_gid(cm_nic)
        dev_nic, nic = nic, cm_nic
    else:
        dev_nic = nic
        conn, _peer = connect(opts)
        if conn is None:
            return 1
    mine = _physics(nic, opts)
    ends = {
        "qpn": random.randrange(0x100, 0xFFFF),
        "psn": random.getrandbits(24),
        "rkey": random.getrandbits(20),
        "vaddr": 0x7F0000000000 + random.getrandbits(36),
    }
    with conn:
        send(conn, {"physics": mine, "ends": ends, "gid": _gid_line(nic, opts["gid"]) if opts["gid"] >= 0 else None})
        theirs = recv(conn)
        if kind == "bw":
            time.sleep(1)  # write_bw.c sleeps 1 s after establishing the connection (write_lat.c does not)
        mtu = min(_active_mtu(dev_nic), theirs["physics"]["mtu"])
        out = _header(kind, opts, dev_nic, mtu, server)
        rdma_fmt = kind == "bw" and not opts["rdma_cm"]  # with -R the exchange's verb is SEND: no RKey/VAddr
        out.append(_addr("local", ends, rdma_fmt))
        if opts["gid"] >= 0:
            out.append(_gid_line(nic, opts["gid"]))
        out.append(_addr("remote", theirs["ends"], rdma_fmt))
        if opts["gid"] >= 0 and theirs.get("gid"):
            out.append(theirs["gid"])
        out += [LINE, (BW_FMT if opts["gbits"] else BW_FMT_MB) if kind == "bw" else LAT_FMT]
        sys.stdout.write("\n".join(out) + "\n")
        sys.stdout.flush()
        if server:
            result = recv(conn)
        else:
            client, srv, client_addr = mine, theirs["physics"], conn.getsockname()[0]
            result = _measure(kind, opts, client, srv, client_addr)
            time.sleep(opts["duration"] or 0.2)
            send(conn, result)
    sys.stdout.write((_bw_row(result, opts["gbits"]) if kind == "bw" else _lat_row(result)) + "\n" + LINE + "\n")
    return 0


def ib_write_bw(args):
    return run("ib_write_bw", args)


def ib_write_lat(args):
    return run("ib_write_lat", args)
