"""Pure parsers for RDMA/RoCE tool output (no I/O).

Public, stable API (names and return shapes do not change):

- parse_ibstat(text) -> dict[str, dict]
- parse_ibv_devinfo(text) -> dict[str, dict]
- parse_rdma_link(text) -> list[dict]
- parse_show_gids(text) -> list[dict]

Further helpers: parse_mlnx_qos, parse_ethtool_stats, parse_ibstatus.
Tested on real captures (tests/fixtures/realworld) and on a simulator's output.
"""

from __future__ import annotations

import re


class ParseError(ValueError):
    """Raised when text is not the tool output the parser expects."""


def _int(value, default=0):
    m = re.match(r"^\s*(-?\d+)", value or "")
    return int(m.group(1)) if m else default


def parse_ibstat(text):
    """Parse `ibstat` (tabs or spaces).

    {ca: {"ca_type": str, "firmware": str,
          "ports": {int: {"state": str, "physical_state": str, "rate": int, "link_layer": str}}}}
    A trailing `ibpanic:` line (ibstat exits 255 after a device vanished) is ignored; the CAs
    printed before it are returned.
    """
    cas = {}
    ca = None
    port = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("ibpanic:") or line.startswith("ibwarn:"):
            continue
        m = re.match(r"^CA '([^']+)'$", line)
        if m:
            ca = {"ca_type": "", "firmware": "", "ports": {}}
            cas[m.group(1)] = ca
            port = None
            continue
        if ca is None:
            raise ParseError("ibstat: text before the first CA line: %r" % line)
        m = re.match(r"^Port (\d+):$", line)
        if m:
            port = {"state": "", "physical_state": "", "rate": 0, "link_layer": ""}
            ca["ports"][int(m.group(1))] = port
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ParseError("ibstat: unexpected line %r" % line)
        key, value = key.strip(), value.strip()
        if port is None:
            if key == "CA type":
                ca["ca_type"] = value
            elif key == "Firmware version":
                ca["firmware"] = value
            continue
        if key == "State":
            port["state"] = value
        elif key == "Physical state":
            port["physical_state"] = value
        elif key == "Rate":
            port["rate"] = _int(value)
        elif key == "Link layer":
            port["link_layer"] = value
    return cas


def parse_ibv_devinfo(text):
    """Parse `ibv_devinfo` (tabs or spaces).

    {hca_id: {"fw_ver": str, "vendor_part_id": int,
              "ports": {int: {"state": str, "active_mtu": int, "max_mtu": int, "port_lid": int,
                              "link_layer": str}}}}
    state is the name without its number ("PORT_ACTIVE"); MTUs are bytes (4096).
    """
    devices = {}
    dev = None
    port = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            dev = {"fw_ver": "", "vendor_part_id": 0, "ports": {}}
            devices[value] = dev
            port = None
            continue
        if dev is None:
            if key.startswith("No IB devices"):
                return {}
            raise ParseError("ibv_devinfo: text before the first hca_id: %r" % line)
        if key == "port":
            port = {"state": "", "active_mtu": 0, "max_mtu": 0, "port_lid": 0, "link_layer": ""}
            dev["ports"][_int(value)] = port
            continue
        if port is None:
            if key == "fw_ver":
                dev["fw_ver"] = value
            elif key == "vendor_part_id":
                dev["vendor_part_id"] = _int(value)
            continue
        if key == "state":
            port["state"] = value.split()[0] if value else ""
        elif key in ("active_mtu", "max_mtu", "port_lid"):
            port[key] = _int(value)
        elif key == "link_layer":
            port["link_layer"] = value
    return devices


def parse_rdma_link(text):
    """Parse `rdma link show` (iproute2), Ethernet and InfiniBand forms.

    [{"device": str, "port": int, "state": str, "physical_state": str, "netdev": str | None}]
    """
    links = []
    for raw in text.splitlines():
        words = raw.split()
        if len(words) < 2 or words[0] != "link":
            continue
        device, _, port = words[1].partition("/")
        attrs = {}
        i = 2
        while i + 1 < len(words):
            attrs[words[i]] = words[i + 1]
            i += 2
        links.append(
            {
                "device": device,
                "port": _int(port),
                "state": attrs.get("state", ""),
                "physical_state": attrs.get("physical_state", ""),
                "netdev": attrs.get("netdev"),
            }
        )
    return links


IPV4_MAPPED_RE = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")


def parse_show_gids(text):
    """Parse MLNX_OFED's `show_gids` table.

    [{"device", "port": int, "index": int, "gid", "ipv4": str | None, "version": "v1"|"v2",
      "netdev"}]; an empty table gives [].
    """
    rows = []
    for raw in text.splitlines():
        cells = raw.split()
        if not cells or cells[0] in ("DEV", "---") or cells[0].startswith("n_gids_found"):
            continue
        if len(cells) == 6 and IPV4_MAPPED_RE.match(cells[4]):
            dev, port, index, gid, ipv4, version = cells[:6]
            netdev = None
        elif len(cells) == 7:
            dev, port, index, gid, ipv4, version, netdev = cells
        elif len(cells) == 6:
            dev, port, index, gid, version, netdev = cells
            ipv4 = None
        elif len(cells) == 5:
            dev, port, index, gid, version = cells
            ipv4 = netdev = None
        else:
            raise ParseError("show_gids: unexpected row %r" % raw)
        if version not in ("v1", "v2"):
            raise ParseError("show_gids: version %r is neither v1 nor v2 in %r" % (version, raw))
        if not (re.match(r"^[0-9]+$", port) and re.match(r"^[0-9]+$", index)):
            raise ParseError("show_gids: port %r or GID index %r is not a number in %r" % (port, index, raw))
        rows.append(
            {
                "device": dev,
                "port": int(port),
                "index": int(index),
                "gid": gid,
                "ipv4": ipv4,
                "version": version,
                "netdev": netdev,
            }
        )
    return rows


_MQ_TOTAL = re.compile(r"^(total_size|max_buffer_size)=([0-9]+)$")
_MQ_DSCP_ROW = re.compile(r"^prio:([0-7]) dscp:((?:[0-9]{1,2},)*)$")
_MQ_TC_ROW = re.compile(r"^tc: ([0-7]) ratelimit: ([^,]+), tsa: ([a-z]+)(?:, bw: ([0-9]+)%)?$")


def _mq_row(line, what, count, allowed):
    """The `count` numbers after a row's label (PFC `enabled`/`buffer` rows), each in allowed."""
    cells = line.split()[1:]
    if len(cells) != count or not all(re.match(r"^[0-9]+$", c) and int(c) in allowed for c in cells):
        raise ParseError("mlnx_qos: %s row is not %d values in %s..%s: %r" % (what, count, min(allowed), max(allowed), line))
    return [int(c) for c in cells]


def _mq_buffers(line):
    """`Receive buffer size (bytes): b0,..,b7,` + `total_size=N` (mlnx-tools 5.2-23.04) or
    `max_buffer_size=N` (23.07 on); before 5.2 nothing follows the last comma."""
    cells = line.split(":", 1)[1].strip().split(",")
    sizes, total = cells[:8], None
    rest = [c for c in cells[8:] if c]
    if len(sizes) != 8 or not all(re.match(r"^[0-9]+$", c) for c in sizes) or len(rest) > 1:
        raise ParseError("mlnx_qos: receive buffer row is not 8 sizes (and the port total): %r" % line)
    if rest:
        m = _MQ_TOTAL.match(rest[0])
        if not m:
            raise ParseError("mlnx_qos: unexpected %r after the 8 receive buffer sizes in %r" % (rest[0], line))
        total = int(m.group(2))
    return [int(c) for c in sizes], total


def parse_mlnx_qos(text):
    """Parse `mlnx_qos -i <if>` output, every layout mlnx-tools has printed (tabs or spaces).

    {"dcbx_mode": str | None, "trust": str | None, "dscp2prio": {dscp: prio},
     "default_priority": [prio, ..], "cable_len": int | None, "pfc": [0|1 x 8] | None,
     "buffer_size": [int x 8] | None, "buffer_total": int | None, "prio2buffer": [int x 8] | None,
     "tcs": {tc: {"ratelimit", "tsa", "bw", "priorities": [..]}}}
    buffer_total is the port's total (`max_buffer_size=`, `total_size=`), None where this
    mlnx_qos prints none; the buffer keys are None where it prints no buffer rows (MLNX_OFED
    before 4.6, or "Buffers commands are not supported on your system"). The tool's own notes
    ("... is not supported on your system", the lldpad warning) are skipped. Raises ParseError
    (only) when a row it knows is malformed or neither a trust state nor PFC is found.
    """
    out = {
        "dcbx_mode": None,
        "trust": None,
        "dscp2prio": {},
        "default_priority": [],
        "cable_len": None,
        "pfc": None,
        "buffer_size": None,
        "buffer_total": None,
        "prio2buffer": None,
        "tcs": {},
    }
    section = None
    tc = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("DCBX mode:"):
            out["dcbx_mode"] = line.split(":", 1)[1].strip()
        elif line.startswith("Priority trust state:"):
            out["trust"] = line.split(":", 1)[1].strip()
            section = None
        elif line == "dscp2prio mapping:":
            section = "dscp2prio"
        elif line == "default priority:":
            section = "default"
        elif line.startswith("Receive buffer size"):
            out["buffer_size"], out["buffer_total"] = _mq_buffers(line)
            section = None
        elif line.startswith("Cable len:"):
            value = line.split(":", 1)[1].strip()
            if not re.match(r"^[0-9]+$", value):
                raise ParseError("mlnx_qos: cable length is not a number: %r" % line)
            out["cable_len"] = int(value)
            section = None
        elif line == "PFC configuration:":
            section = "pfc"
        elif line.startswith("prio:") and section == "dscp2prio":
            m = _MQ_DSCP_ROW.match(line)
            if not m or not all(int(d) < 64 for d in filter(None, m.group(2).split(","))):
                raise ParseError("mlnx_qos: bad dscp2prio row %r" % line)
            for dscp in filter(None, m.group(2).split(",")):
                out["dscp2prio"][int(dscp)] = int(m.group(1))
        elif line.startswith("prio:") and section == "default":
            m = re.match(r"^prio:([0-7])$", line)
            if not m:
                raise ParseError("mlnx_qos: bad default priority row %r" % line)
            out["default_priority"].append(int(m.group(1)))
        elif line.startswith("prio:"):
            raise ParseError("mlnx_qos: a prio row outside the dscp2prio and default priority sections: %r" % line)
        elif section == "pfc" and line.split()[0] == "enabled":
            out["pfc"] = _mq_row(line, "PFC enabled", 8, range(2))
        elif section == "pfc" and line.split()[0] == "buffer":
            out["prio2buffer"] = _mq_row(line, "PFC buffer", 8, range(8))
        elif section == "pfc" and line.split()[0] == "priority":
            continue  # the header row: priority 0 1 .. 7
        elif line.startswith("tc:"):
            m = _MQ_TC_ROW.match(line)
            if not m:
                raise ParseError("mlnx_qos: bad tc row %r" % line)
            tc = {"ratelimit": m.group(2), "tsa": m.group(3), "bw": int(m.group(4)) if m.group(4) else None, "priorities": []}
            out["tcs"][int(m.group(1))] = tc
            section = "tc"
        elif line.startswith("priority:") and section == "tc":
            cells = line.split(":", 1)[1].split()
            if not cells or not all(re.match(r"^[0-7]$", c) for c in cells):
                raise ParseError("mlnx_qos: bad priority row %r under a tc row" % line)
            tc["priorities"].extend(int(c) for c in cells)
    if out["trust"] is None and out["pfc"] is None:
        raise ParseError("mlnx_qos: neither a trust state nor a PFC configuration found")
    return out


def parse_ethtool_stats(text):
    """Parse `ethtool -S <if>` into {counter: int}; the "NIC statistics:" header is optional."""
    stats = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.endswith("statistics:"):
            continue
        key, sep, value = line.rpartition(":")
        if not sep:
            raise ParseError("ethtool -S: unexpected line %r" % line)
        try:
            stats[key.strip()] = int(value.strip())
        except ValueError as exc:
            raise ParseError("ethtool -S: non-numeric counter in %r" % line) from exc
    return stats


def pfc_enabled_priorities(stats):
    """Priorities whose per-priority pause counters exist in `ethtool -S` (mlx5 lists
    rx_prio<N>_pause only for PFC-enabled priorities)."""
    prios = set()
    for key in stats:
        m = re.match(r"^rx_prio(\d)_pause$", key)
        if m:
            prios.add(int(m.group(1)))
    return sorted(prios)


def parse_ibstatus(text):
    """Parse `ibstatus`: {device: {port: {"state", "physical_state", "rate": int, "link_layer"}}}."""
    out = {}
    port = None
    for raw in text.splitlines():
        line = raw.strip()
        m = re.match(r"^Infiniband device '([^']+)' port (\d+) status:$", line)
        if m:
            port = {"state": "", "physical_state": "", "rate": 0, "link_layer": ""}
            out.setdefault(m.group(1), {})[int(m.group(2))] = port
            continue
        if port is None or ":" not in line:
            continue
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "state":
            port["state"] = value.split(":")[-1].strip()
        elif key == "phys state":
            port["physical_state"] = value.split(":")[-1].strip()
        elif key == "rate":
            port["rate"] = _int(value)
        elif key == "link_layer":
            port["link_layer"] = value
    return out
