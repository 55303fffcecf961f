"""rackforge filters: PFC headroom, TCP buffers, DSCP/ToS, address helpers, and the nearest
supported GPU application-clock pair.

The arithmetic lives in module_utils/rackforge/ (netmath.py, gpu.py), shared with the modules
that use it on the node; the address helpers use netaddr.
"""

from __future__ import annotations

import importlib.util
import os

from ansible.errors import AnsibleFilterError

try:
    import netaddr
except ImportError:  # pragma: no cover - requirements.txt installs it
    netaddr = None


def _module_util(name):
    """Load module_utils/rackforge/<name>.py (shared with the modules) beside this directory."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils", "rackforge", name + ".py")
    spec = importlib.util.spec_from_file_location("rackforge_" + name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


NETMATH = _module_util("netmath")
GPU = _module_util("gpu")


def _wrap(fn):
    def filt(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (NETMATH.NetMathError, GPU.GpuSettingError) as exc:
            raise AnsibleFilterError("%s: %s" % (fn.__name__, exc)) from exc

    filt.__name__ = fn.__name__
    return filt


def _need_netaddr():
    if netaddr is None:
        raise AnsibleFilterError("the rackforge address filters need the netaddr Python package on the controller")


def _network(cidr, what):
    _need_netaddr()
    try:
        if "/" not in str(cidr):
            raise ValueError("no prefix length")
        return netaddr.IPNetwork(str(cidr))
    except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("%s: %r is not a CIDR (like 10.0.0.0/16)" % (what, cidr)) from exc


def cidrs_overlap(cidrs):
    """Pairs of CIDRs (from a list, or a dict name -> CIDR) that overlap; [] when none do.

    Each pair is [name_or_cidr, name_or_cidr]; a malformed CIDR fails naming it."""
    items = list(cidrs.items()) if isinstance(cidrs, dict) else [(c, c) for c in cidrs]
    nets = [(name, _network(c, "cidrs_overlap")) for name, c in items]
    found = []
    for i, (name_a, a) in enumerate(nets):
        for name_b, b in nets[i + 1 :]:
            if a.first <= b.last and b.first <= a.last:
                found.append([name_a, name_b])
    return found


def interface_for_cidr(facts, cidr):
    """The interface whose IPv4 address is inside cidr, from gathered facts (ansible_facts or
    hostvars): {"interface": name, "address": ip}. Fails when none or several match, so a
    multi-NIC GPU node never silently picks an RDMA address."""
    net = _network(cidr, "interface_for_cidr")
    names = facts.get("interfaces") or facts.get("ansible_interfaces") or []
    matches = []
    for name in names:
        info = facts.get(name.replace("-", "_")) or facts.get("ansible_" + name.replace("-", "_")) or {}
        addrs = [info.get("ipv4") or {}, *(info.get("ipv4_secondaries") or [])]
        for addr in addrs:
            ip = addr.get("address")
            if ip and netaddr.IPAddress(ip) in net:
                matches.append({"interface": name, "address": ip})
    if len(matches) != 1:
        raise AnsibleFilterError(
            "interface_for_cidr: expected exactly one interface with an address in %s, found %s"
            % (cidr, ", ".join("%(interface)s (%(address)s)" % m for m in matches) or "none")
        )
    return matches[0]


class FilterModule:
    def filters(self):
        return {
            "pfc_headroom": _wrap(NETMATH.pfc_headroom),
            "pfc_lossless_buffer": _wrap(NETMATH.pfc_lossless_buffer),
            "tcp_buffer_sizes": _wrap(NETMATH.tcp_buffer_sizes),
            "dscp_to_tos": _wrap(NETMATH.dscp_to_tos),
            "nearest_clock_pair": _wrap(GPU.nearest_clock_pair),
            "cidrs_overlap": cidrs_overlap,
            "interface_for_cidr": interface_for_cidr,
        }
