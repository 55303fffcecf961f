"""How the simulated perftest's two ends meet (SIMULATION; perftest_sim.py runs the tests).

From perftest 4.5-0.17's perftest_communication.c: without -R the server prints the "Waiting for
client to connect" banner and accepts one client on TCP port -p; the client connects to HOST:PORT
or fails with "Couldn't connect to HOST:PORT". With -R (RDMA-CM) there is no socket of
perftest's own: the client resolves the partner's RoCE address (the route's device, not -d),
and the server accepts on any rail (rdma_client_connect / rdma_server_connect); the failures are
perftest's ("Received 10 times ADDR_ERROR" after 10 resolutions of 2000 ms, "Unexpected CM
event bl blka 8" when nobody listens).

RDMA-CM's fabric is simulated: $HWSIM_ETC/fabric.json ({RoCE address: the owning node's
address}, written by the lab for its own nodes) is where an address's ARP answer comes from, and
the simulated exchange goes to that node's address (the lab's network only); the fault
rdma_cm_unresolved makes a NIC's address answer no resolution (verbs with a GID still work).
Both ends are the simulator: the messages (JSON lines) carry the simulated physics, not
perftest's wire format.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

from hwsimlib.nic import _cas, _code, _port_attr
from hwsimlib.state import ETC, load_json, nic_faulted
from hwsimlib.sysfs import nic_ipv4

CM_TAIL = " Unable to perform rdma_%s function\n Unable to init the socket connection\n"
ADDR_ERROR = "Received 10 times ADDR_ERROR\n"  # NUM_OF_RETRIES (10) rdma_resolve_addr calls of 2000 ms
REJECTED = "Unexpected CM event bl blka 8\n"  # RDMA_CM_EVENT_REJECTED: no listener on that port


def waiting():
    """The server's banner before it accepts (printed at once: the client waits for the port)."""
    sys.stdout.write("\n************************************\n* Waiting for client to connect... *\n************************************\n")
    sys.stdout.flush()


def send(conn, data):
    conn.sendall((json.dumps(data) + "\n").encode())


def recv(conn):
    """One message (a JSON line). Read a byte at a time: the next message may follow at once on
    the same socket and must stay there for the next call."""
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(1)
        if not chunk:
            raise OSError("peer closed the connection")
        buf += chunk
    return json.loads(buf)


def _listen(port, backlog):
    """A listening socket on the port. A lab node has its own network namespace; tests that run
    several simulated nodes on one host give each a loopback address of its own instead
    (HWSIM_LISTEN_ADDR), which is also the source address it dials from (_dial)."""
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((os.environ.get("HWSIM_LISTEN_ADDR", "0.0.0.0"), port))
    lsock.listen(backlog)
    return lsock


def _dial(host, port):
    """A connection to host:port from this node's address (HWSIM_LISTEN_ADDR where set), blocking
    once connected; raises OSError as socket.create_connection does."""
    source = os.environ.get("HWSIM_LISTEN_ADDR")
    conn = socket.create_connection((host, port), timeout=5, source_address=(source, 0) if source else None)
    conn.settimeout(None)
    return conn


def connect(opts):
    server = opts["host"] is None
    if server:
        waiting()
        lsock = _listen(opts["port"], 1)
        conn, peer = lsock.accept()
        lsock.close()
        return conn, peer[0]
    try:
        conn = _dial(opts["host"], opts["port"])
    except OSError:
        sys.stderr.write(
            "Couldn't connect to %s:%d\nUnable to open file descriptor for socket connection Unable to init the socket connection\n"
            % (opts["host"], opts["port"])
        )
        return None, None
    return conn, opts["host"]


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


def cm_client(opts):
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
        conn = _dial(peer, opts["port"])
    except ConnectionRefusedError:
        return _cm_fail("client", REJECTED)  # the node is there, nobody listens on that port
    except OSError:
        time.sleep(15)  # the node is down: its ARP never answers
        return _cm_fail("client", ADDR_ERROR)
    send(conn, {"cm": opts["host"]})
    answer = recv(conn)
    if answer.get("cm") != "accept":
        conn.close()
        if answer.get("cm") == "unresolved":
            time.sleep(20)
            return _cm_fail("client", ADDR_ERROR)
        return _cm_fail("client", REJECTED)
    return nic, conn, peer


def cm_server(opts):
    """rdma_server_connect(): bind the port on every address (perftest 4.5 binds no source),
    listen, and accept the first connection request for an address this node answers for, on
    whichever rail it arrives. (nic, conn, peer) or an exit status."""
    lsock = _listen(opts["port"], 4)
    try:
        while True:
            conn, peer = lsock.accept()
            try:
                want = recv(conn).get("cm")
            except (OSError, ValueError):
                conn.close()
                continue
            mine = _owner(want)
            if mine is None or nic_faulted("rdma_cm_unresolved", mine):
                send(conn, {"cm": "unresolved"})  # nobody here answers the address resolution
            elif _code(_port_attr(mine, "state")) != 4:
                send(conn, {"cm": "reject"})
            else:
                send(conn, {"cm": "accept"})
                return mine, conn, peer[0]
            conn.close()
    finally:
        lsock.close()
