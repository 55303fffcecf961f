"""Pure parsers for RDMA/RoCE tool output (no I/O).

Public, stable API (names and return shapes do not change):

- parse_ibstat(text) -> dict[str, dict]
- parse_ibv_devinfo(text) -> dict[str, dict]
- parse_rdma_link(text) -> list[dict]
- parse_show_gids(text) -> list[dict]

Further helpers: parse_mlnx_qos, parse_ethtool_stats, parse_ibstatus.
Tested on real captures (tests/fixtures/realworld) and on the lab simulator's output.
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
            port["state"] = value.split()[0]
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


def parse_mlnx_qos(text):
    """Parse `mlnx_qos -i <if>` output.

    {"dcbx_mode": str | None, "trust": str | None, "dscp2prio": {dscp: prio},
     "cable_len": int | None, "pfc": [0|1 x 8], "buffer_size": [int] | None,
     "prio2buffer": [int] | None, "tcs": {tc: {"ratelimit", "tsa", "bw", "priorities": [..]}}}
    Older mlnx_qos prints no buffer rows: those keys are then None.
    """
    out = {
        "dcbx_mode": None,
        "trust": None,
        "dscp2prio": {},
        "cable_len": None,
        "pfc": None,
        "buffer_size": None,
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
        elif line.startswith("dscp2prio mapping:"):
            section = "dscp2prio"
        elif line.startswith("Cable len:"):
            out["cable_len"] = _int(line.split(":", 1)[1], None)
            section = None
        elif line.startswith("PFC configuration:"):
            section = "pfc"
        elif line.startswith("Receive buffer size"):
            cells = line.split(":", 1)[1].replace(",", " ").split()
            out["buffer_size"] = [int(v) for v in cells]
        elif line.startswith("prio:") and section == "dscp2prio":
            m = re.match(r"^prio:(\d+) dscp:([0-9,]*)$", line)
            if not m:
                raise ParseError("mlnx_qos: bad dscp2prio row %r" % line)
            for dscp in filter(None, m.group(2).split(",")):
                out["dscp2prio"][int(dscp)] = int(m.group(1))
        elif line.startswith("enabled") and section == "pfc":
            out["pfc"] = [int(v) for v in line.split()[1:9]]
        elif line.startswith("buffer") and section == "pfc":
            out["prio2buffer"] = [int(v) for v in line.split()[1:9]]
        elif line.startswith("tc:"):
            m = re.match(r"^tc: (\d+) ratelimit: ([^,]+), tsa: (\w+)(?:, bw: (\d+)%)?", line)
            if not m:
                raise ParseError("mlnx_qos: bad tc row %r" % line)
            tc = {"ratelimit": m.group(2), "tsa": m.group(3), "bw": _int(m.group(4), None), "priorities": []}
            out["tcs"][int(m.group(1))] = tc
            section = "tc"
        elif line.startswith("priority:") and section == "tc" and tc is not None:
            tc["priorities"].extend(int(v) for v in line.split(":", 1)[1].split())
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
