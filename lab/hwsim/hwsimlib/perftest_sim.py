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
RDMA-CM's fabric is simulated too: $HWSIM_ETC/fabric.json ({RoCE address: the owning node's
address}, written by the lab for its own nodes) is where an address's ARP answer comes from, and
the simulated exchange goes to that node's address (the lab's network only); the fault
rdma_cm_unresolved makes a NIC's address answer no resolution (verbs with a GID still work).
"""

from __future__ import annotations

import json
import os
import random
import socket
import sys
import time

from hwsimlib.nic import _active_mtu, _cas, _code, _port_attr
from hwsimlib.state import ETC, faults, load_json, nic_faulted, profile
from hwsimlib.sysfs import nic_ipv4

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
CM_TAIL = " Unable to perform rdma_%s function\n Unable to init the socket connection\n"
ADDR_ERROR = "Received 10 times ADDR_ERROR\n"  # NUM_OF_RETRIES (10) rdma_resolve_addr calls of 2000 ms
REJECTED = "Unexpected CM event bl blka 8\n"  # RDMA_CM_EVENT_REJECTED: no listener on that port


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


def _fabric():
    """{RoCE address: the address of the node that answers for it} (the simulated fabric's ARP)."""
    return load_json(os.path.join(ETC, "fabric.json"), {})


def _owner(ip):
    """This node's NIC whose RoCE address is `ip`, or None."""
    return next((n for n in _cas() if ip and nic_ipv4(n) == ip), None)


def _route(dest):
    """This node's NIC whose RoCE subnet (/24) holds `dest` (the route's device), or None."""
    net = dest.rsplit(".", 1)[0] + "." if dest and dest.count(".") == 3 else None
    return next((n for n in _cas() if net and (nic_ipv4(n) or "").startswith(net)), None)


def _cm_fail(side, message):
    sys.stderr.write(message + CM_TAIL % side)
    return 1


def _cm_client(opts):
    """rdma_client_connect(): resolve the address with no source (perftest 4.5's --source_ip is
    the raw-Ethernet option -j, stored and never used here, so routing picks the device), then
    connect to the node that answers for it. (nic, conn, peer address) or an exit status."""
    nic, peer = _route(opts["host"]), _fabric().get(opts["host"])
    if nic is None:
        # the route leaves through a netdev without an RDMA device (the management NIC's default
        # route): each resolution fails at once
        return _cm_fail("client", ADDR_ERROR)
    if peer is None or nic_faulted("rdma_cm_unresolved", nic):
        time.sleep(20)  # on a rail's subnet, nobody answers ARP: 10 resolutions of 2000 ms each
        return _cm_fail("client", ADDR_ERROR)
    try:
        source = os.environ.get("HWSIM_LISTEN_ADDR")
        conn = socket.create_connection((peer, opts["port"]), timeout=5, source_address=(source, 0) if source else None)
    except ConnectionRefusedError:
        return _cm_fail("client", REJECTED)  # the node is there, nobody listens on that port
    except OSError:
        time.sleep(15)  # the node is down: its ARP never answers
        return _cm_fail("client", ADDR_ERROR)
    conn.settimeout(None)
    _send(conn, {"cm": opts["host"]})
    answer = _recv(conn)
    if answer.get("cm") != "accept":
        conn.close()
        if answer.get("cm") == "unresolved":
            time.sleep(20)
            return _cm_fail("client", ADDR_ERROR)
        return _cm_fail("client", REJECTED)
    return nic, conn, peer


def _cm_server(opts):
    """rdma_server_connect(): bind the port on every address (perftest 4.5 binds no source),
    listen, and accept the first connection request for an address this node answers for, on
    whichever rail it arrives. (nic, conn, peer) or an exit status."""
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((os.environ.get("HWSIM_LISTEN_ADDR", "0.0.0.0"), opts["port"]))
    lsock.listen(4)
    try:
        while True:
            conn, peer = lsock.accept()
            try:
                want = _recv(conn).get("cm")
            except (OSError, ValueError):
                conn.close()
                continue
            mine = _owner(want)
            if mine is None or nic_faulted("rdma_cm_unresolved", mine):
                _send(conn, {"cm": "unresolved"})  # nobody here answers the address resolution
            elif _code(_port_attr(mine, "state")) != 4:
                _send(conn, {"cm": "reject"})
            else:
                _send(conn, {"cm": "accept"})
                return mine, conn, peer[0]
            conn.close()
    finally:
        lsock.close()


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


def _send(conn, data):
    conn.sendall((json.dumps(data) + "\n").encode())


def _recv(conn):
    """One message (a JSON line). Read a byte at a time: the next message may follow at once on
    the same socket and must stay there for the next call."""
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(1)
        if not chunk:
            raise OSError("peer closed the connection")
        buf += chunk
    return json.loads(buf)


def _connect(opts):
    server = opts["host"] is None
    if server:
        sys.stdout.write(
            "\n************************************\n* Waiting for client to connect... *\n************************************\n"
        )
        sys.stdout.flush()
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # a lab node has its own network namespace; tests that run several simulated nodes on one
        # host give each a loopback address of its own instead (HWSIM_LISTEN_ADDR)
        lsock.bind((os.environ.get("HWSIM_LISTEN_ADDR", "0.0.0.0"), opts["port"]))
        lsock.listen(1)
        conn, peer = lsock.accept()
        lsock.close()
        return conn, peer[0]
    try:
        source = os.environ.get("HWSIM_LISTEN_ADDR")
        conn = socket.create_connection((opts["host"], opts["port"]), timeout=5, source_address=(source, 0) if source else None)
    except OSError:
        sys.stderr.write(
            "Couldn't connect to %s:%d\nUnable to open file descriptor for socket connection Unable to init the socket connection\n"
            % (opts["host"], opts["port"])
        )
        return None, None
    conn.settimeout(None)
    return conn, opts["host"]


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
            sys.stdout.write(
                "\n************************************\n* Waiting for client to connect... *\n************************************\n"
            )
            sys.stdout.flush()
        got = _cm_server(opts) if server else _cm_client(opts)
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
        conn, _peer = _connect(opts)
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
        _send(conn, {"physics": mine, "ends": ends, "gid": _gid_line(nic, opts["gid"]) if opts["gid"] >= 0 else None})
        theirs = _recv(conn)
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
            result = _recv(conn)
        else:
            client, srv, client_addr = mine, theirs["physics"], conn.getsockname()[0]
            result = _measure(kind, opts, client, srv, client_addr)
            time.sleep(opts["duration"] or 0.2)
            _send(conn, result)
    sys.stdout.write((_bw_row(result, opts["gbits"]) if kind == "bw" else _lat_row(result)) + "\n" + LINE + "\n")
    return 0


def ib_write_bw(args):
    return run("ib_write_bw", args)


def ib_write_lat(args):
    return run("ib_write_lat", args)
