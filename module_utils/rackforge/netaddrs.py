"""Which of a host's addresses lie in a network (pure; no I/O): the node IP of a multi-NIC GPU
node is its one address in the management CIDR, never an RDMA NIC's."""

from __future__ import annotations

import ipaddress


class AddressError(ValueError):
    """A CIDR that is not one, or not exactly one address in it (the message says which)."""


def network(cidr):
    try:
        return ipaddress.ip_network(str(cidr), strict=False)
    except ValueError as exc:
        raise AddressError("%r is not a CIDR: %s" % (cidr, exc)) from exc


def addresses_in(facts, cidr):
    """[{interface, address, mtu}] for every IPv4 address inside cidr, from `ip -j addr show`
    output (a list) or from gathered facts (ansible_facts or hostvars)."""
    net = network(cidr)
    matches = []
    if isinstance(facts, list):
        for link in facts:
            for addr in link.get("addr_info") or []:
                if addr.get("family") == "inet" and ipaddress.ip_address(addr["local"]) in net:
                    matches.append({"interface": link["ifname"], "address": addr["local"], "mtu": link.get("mtu")})
        return matches
    for name in facts.get("interfaces") or facts.get("ansible_interfaces") or []:
        info = facts.get(name.replace("-", "_")) or facts.get("ansible_" + name.replace("-", "_")) or {}
        for addr in [info.get("ipv4") or {}, *(info.get("ipv4_secondaries") or [])]:
            ip = addr.get("address")
            if ip and ipaddress.ip_address(ip) in net:
                matches.append({"interface": name, "address": ip, "mtu": info.get("mtu")})
    return matches


def describe(matches):
    return ", ".join("%(interface)s (%(address)s)" % m for m in matches) or "none"


def the_address_in(facts, cidr):
    """The one {interface, address, mtu} in cidr; AddressError when none or several match."""
    matches = addresses_in(facts, cidr)
    if len(matches) != 1:
        raise AddressError("expected exactly one interface with an address in %s, found %s" % (cidr, describe(matches)))
    return matches[0]
