"""rackforge filters: PFC headroom, TCP buffers, DSCP/ToS, address helpers, and the nearest
supported GPU application-clock pair.

The arithmetic lives in module_utils/rackforge/ (netmath.py, gpu.py), shared with the modules
that use it on the node; the address helpers use netaddr.
"""

from __future__ import annotations

import importlib.util
import os
import re

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


def cidr_overlap_problems(named, why="must be disjoint"):
    """The overlaps among networks, as settings problems: `named` maps a variable to its CIDR or
    list of CIDRs; each overlapping pair is one {variable, value, problem} on the first of the
    two ("overlaps <other variable> <other CIDR> (<why>)"). A malformed CIDR is skipped: its own
    format rule names it."""
    _need_netaddr()
    nets = []
    for var, value in named.items():
        many = isinstance(value, (list, tuple))
        for i, cidr in enumerate(value if many else [value]):
            if cidr_problem(cidr, var) == "":
                nets.append(("%s[%d]" % (var, i) if many else var, var, str(cidr), netaddr.IPNetwork(str(cidr))))
    found = []
    for i, (path_a, _var_a, cidr_a, a) in enumerate(nets):
        for _path_b, var_b, cidr_b, b in nets[i + 1 :]:
            if a.first <= b.last and b.first <= a.last:
                found.append({"variable": path_a, "value": cidr_a, "problem": "overlaps %s %s (%s)" % (var_b, cidr_b, why)})
    return found


ADDRS = _module_util("netaddrs")


def interface_for_cidr(facts, cidr):
    """The interface whose IPv4 address is inside cidr: {"interface", "address", "mtu"}.

    facts: the output of `ip -j addr show` (a list) or gathered facts (ansible_facts or
    hostvars). Fails when none or several match, so a multi-NIC GPU node never silently picks an
    RDMA address (module_utils/rackforge/netaddrs.py decides; the node IP itself comes from the
    kubelet_reservation_facts module)."""
    try:
        return ADDRS.the_address_in(facts, cidr)
    except ADDRS.AddressError as exc:
        raise AnsibleFilterError("interface_for_cidr: %s" % exc) from exc


def interfaces_in_cidr(facts, cidr):
    """Every "interface (address)" with an IPv4 address in cidr (for asserts that must name
    what they found instead of raising)."""
    try:
        return ["%(interface)s (%(address)s)" % m for m in ADDRS.addresses_in(facts, cidr)]
    except ADDRS.AddressError as exc:
        raise AnsibleFilterError("interfaces_in_cidr: %s" % exc) from exc


def cidr_problem(value, name):
    """'' for a valid IPv4 CIDR (network address, prefix length), else a message naming the variable."""
    try:
        net = netaddr.IPNetwork(str(value))
    except (netaddr.AddrFormatError, ValueError, TypeError):
        return "%s: %r is not a CIDR (like 10.244.0.0/16)" % (name, value)
    if net.version != 4 or "/" not in str(value):
        return "%s: %r is not an IPv4 CIDR with a prefix length (like 10.244.0.0/16)" % (name, value)
    if net.ip != net.network:
        return "%s: %r has host bits set (the network is %s)" % (name, value, net.cidr)
    return ""


_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# kubernetes.io / k8s.io keys a kubelet may set on its own Node (NodeRestriction admission)
_KUBELET_OWN = (
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
)


def k8s_label_problems(labels):
    """Why each label cannot be registered by a kubelet: syntax (key prefix/name, value), and
    the NodeRestriction rule on kubernetes.io/k8s.io keys; [] when all are fine."""
    problems = []
    for key, value in (labels or {}).items():
        prefix, _, name = str(key).rpartition("/")
        if len(name) > 63 or not _LABEL_NAME.match(name) or (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))):
            problems.append("%s: invalid label key ([prefix/]name, name at most 63 of [A-Za-z0-9._-])" % key)
        value = "" if value is None else str(value)
        if value and (len(value) > 63 or not _LABEL_NAME.match(value)):
            problems.append("%s=%s: invalid label value (at most 63 of [A-Za-z0-9._-], alphanumeric at both ends)" % (key, value))
        k8s = prefix in ("kubernetes.io", "k8s.io") or prefix.endswith((".kubernetes.io", ".k8s.io"))
        own_ns = ("kubelet.kubernetes.io", "node.kubernetes.io")
        own = prefix in own_ns or prefix.endswith(tuple("." + ns for ns in own_ns))
        if k8s and not own and key not in _KUBELET_OWN:
            problems.append("%s: a kubelet may not set kubernetes.io/k8s.io labels (NodeRestriction); use your own prefix" % key)
    return problems


def k8s_label_value(value):
    """A free text (a GPU product name) as a label value, as GPU feature discovery does:
    'NVIDIA H100 80GB HBM3' -> 'NVIDIA-H100-80GB-HBM3'."""
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", str(value)).strip("-_.")
    return text[:63].rstrip("-_.")


class FilterModule:
    def filters(self):
        return {
            "pfc_headroom": _wrap(NETMATH.pfc_headroom),
            "pfc_lossless_buffer": _wrap(NETMATH.pfc_lossless_buffer),
            "tcp_buffer_sizes": _wrap(NETMATH.tcp_buffer_sizes),
            "dscp_to_tos": _wrap(NETMATH.dscp_to_tos),
            "nearest_clock_pair": _wrap(GPU.nearest_clock_pair),
            "cidr_overlap_problems": cidr_overlap_problems,
            "interfaces_in_cidr": interfaces_in_cidr,
            "cidr_problem": cidr_problem,
            "k8s_label_problems": k8s_label_problems,
            "k8s_label_value": k8s_label_value,
            "interface_for_cidr": interface_for_cidr,
        }
