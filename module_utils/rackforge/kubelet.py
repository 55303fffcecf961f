"""Kubelet resource reservations (pure): Kubernetes quantities, rackforge's sizing of
systemReserved, kubeReserved and evictionHard from a node's memory and CPUs, and the Node
Allocatable they leave. The arithmetic is upstream's ("Reserve Compute Resources for System
Daemons", kubernetes.io): allocatable = capacity - kubeReserved - systemReserved - the hard
eviction threshold (memory only). No I/O here; the kubelet_reservation_facts module reads the
node and writes nothing.
"""

from __future__ import annotations

import re

KIB, MIB, GIB = 1024, 1024**2, 1024**3

# k8s.io/apimachinery resource.Quantity, the forms an operator writes (no exponents)
QUANTITY_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
SUFFIX = {
    None: 1,
    "m": 0.001,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": KIB,
    "Mi": MIB,
    "Gi": GIB,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "Ei": 1024**6,
}
QUANTITY_FORMS = "a Kubernetes quantity such as 2Gi, 1500Mi, 500m or 2"

# what kubeReserved/systemReserved may name (kubelet: cpu, memory, ephemeral-storage, pid)
RESERVED_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pid")
# the hard eviction signals of a Linux kubelet (pkg/kubelet/eviction/api)
EVICTION_SIGNALS = (
    "memory.available",
    "allocatableMemory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
)
# The kubelet applies its default hard thresholds only when evictionHard is not set at all: a
# map that names memory.available alone leaves the disk signals at zero (kubernetes.io, "Node-
# pressure Eviction"). rackforge therefore writes them out with the kubelet's default values.
KUBELET_DEFAULT_EVICTION = {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%",
    "imagefs.available": "15%",
    "imagefs.inodesFree": "5%",
}
KUBELET_DEFAULT_MAX_PODS = 110


class QuantityError(ValueError):
    pass


def parse_quantity(text):
    """'2Gi' -> 2147483648.0, '500m' -> 0.5, '2' -> 2.0; QuantityError on anything else."""
    m = QUANTITY_RE.match(str(text).strip())
    if not m:
        raise QuantityError("%r is not %s" % (text, QUANTITY_FORMS))
    return float(m.group(1)) * SUFFIX[m.group(2)]


def cpu_tiers_millicores(cpus):
    """The tiered CPU reservation GKE and EKS document: 6 % of the first core, 1 % of the second,
    0.5 % of the next two and 0.25 % of every core above four (in millicores)."""
    tiers = ((1, 60), (1, 10), (2, 5), (float("inf"), 2.5))
    left, total = float(cpus), 0.0
    for width, per_core in tiers:
        take = min(left, width)
        total += take * per_core
        left -= take
        if left <= 0:
            break
    return int(total)


def _clamp(value, low, high):
    return max(low, min(high, value))


def sized(mem_bytes, cpus, max_pods=KUBELET_DEFAULT_MAX_PODS):
    """rackforge's defaults (`auto`) for one node. Sized from whole GiB, so MemTotal moving by a
    few MiB between boots does not rewrite the file and restart the kubelet.

    - kubeReserved: the tiered CPU share, and memory 255 MiB + 11 MiB per pod the node may run
      (EKS's formula; the kubelet and containerd grow with the pods they manage).
    - systemReserved: the tiered CPU share, and 1 % of memory, at least 1 GiB, at most 16 GiB (the
      OS, sshd, journald, nvidia-persistenced, the fabric manager, DCGM and the exporters).
    - evictionHard: memory.available 0.5 % of memory, at least 500 MiB, at most 8 GiB (a model
      load allocates gigabytes within a second on a 2 TB node; the kubelet's 100 Mi is one
      allocation away from the kernel's OOM killer), and the kubelet's own disk defaults.
    """
    gib = int(mem_bytes // GIB)
    cpu = "%dm" % cpu_tiers_millicores(cpus)
    return {
        "systemReserved": {"cpu": cpu, "memory": "%dMi" % _clamp(gib * 1024 // 100, 1024, 16 * 1024)},
        "kubeReserved": {"cpu": cpu, "memory": "%dMi" % (255 + 11 * max_pods)},
        "evictionHard": dict(KUBELET_DEFAULT_EVICTION, **{"memory.available": "%dMi" % _clamp(gib * 1024 // 200, 500, 8 * 1024)}),
    }


def _check_map(variable, value, allowed, percent_ok):
    problems = []
    if not isinstance(value, dict):
        return ["%s: %r is neither 'auto' nor a map of %s" % (variable, value, ", ".join(allowed))]
    for key, qty in sorted(value.items()):
        if key not in allowed:
            problems.append("%s: %r is not one of %s" % (variable, key, ", ".join(allowed)))
            continue
        text = str(qty)
        if percent_ok and re.match(r"^[0-9]+(\.[0-9]+)?%$", text):
            if not 0 < float(text[:-1]) < 100:
                problems.append("%s.%s: %s is not a percentage between 0 and 100" % (variable, key, text))
            continue
        try:
            if parse_quantity(text) <= 0 and not percent_ok:
                problems.append("%s.%s: %s reserves nothing (leave the key out instead)" % (variable, key, text))
        except QuantityError:
            forms = QUANTITY_FORMS + (" or a percentage like 10%" if percent_ok else "")
            problems.append("%s.%s: %r is not %s" % (variable, key, qty, forms))
    return problems


def _bytes(qty, capacity):
    text = str(qty)
    if text.endswith("%"):
        return capacity * float(text[:-1]) / 100
    return parse_quantity(text)


VARIABLES = ("system_reserved", "kube_reserved", "eviction_hard")


def plan(mem_bytes, cpus, system_reserved, kube_reserved, eviction_hard, prefix="", max_pods=KUBELET_DEFAULT_MAX_PODS):
    """Each of the three is 'auto' (sized()) or a map; an evictionHard map is laid over the
    kubelet's default thresholds (so naming memory.available alone keeps the disk ones). Problems
    name the variable, prefix + system_reserved etc. Returns (plan, problems): plan has
    systemReserved, kubeReserved, evictionHard, capacity and allocatable ({memory: bytes, cpu:
    cores}) and reserved (the same, summed, the eviction threshold included)."""
    sys_var, kube_var, evict_var = (prefix + v for v in VARIABLES)
    sys_val, kube_val, evict_val = system_reserved, kube_reserved, eviction_hard
    auto = sized(mem_bytes, cpus, max_pods)
    chosen, problems = {}, []
    for field, variable, value, allowed, percent_ok in (
        ("systemReserved", sys_var, sys_val, RESERVED_RESOURCES, False),
        ("kubeReserved", kube_var, kube_val, RESERVED_RESOURCES, False),
        ("evictionHard", evict_var, evict_val, EVICTION_SIGNALS, True),
    ):
        if value == "auto":
            chosen[field] = auto[field]
            continue
        found = _check_map(variable, value, allowed, percent_ok)
        problems.extend(found)
        given = {k: str(v) for k, v in value.items()} if not found else {}
        chosen[field] = dict(KUBELET_DEFAULT_EVICTION, **given) if field == "evictionHard" else given
    if problems:
        return None, problems
    reserved_mem = sum(_bytes(m.get("memory", 0), mem_bytes) for m in (chosen["systemReserved"], chosen["kubeReserved"]))
    evict_mem = _bytes(chosen["evictionHard"].get("memory.available", 0), mem_bytes)
    reserved_cpu = sum(parse_quantity(m.get("cpu", 0)) for m in (chosen["systemReserved"], chosen["kubeReserved"]))
    allocatable = {"memory": int(mem_bytes - reserved_mem - evict_mem), "cpu": round(cpus - reserved_cpu, 3)}
    names = "%s, %s and %s" % (sys_var, kube_var, evict_var)
    if allocatable["memory"] <= 0:
        problems.append(
            "%s reserve %.1f GiB of this node's %.1f GiB of memory: nothing is left for pods"
            % (names, (reserved_mem + evict_mem) / GIB, mem_bytes / GIB)
        )
    if allocatable["cpu"] <= 0:
        problems.append("%s and %s reserve %g CPUs of this node's %d: nothing is left for pods" % (sys_var, kube_var, reserved_cpu, cpus))
    if problems:
        return None, problems
    return (
        dict(
            chosen,
            capacity={"memory": int(mem_bytes), "cpu": cpus},
            reserved={"memory": int(reserved_mem + evict_mem), "cpu": round(reserved_cpu, 3)},
            allocatable=allocatable,
        ),
        [],
    )


def meminfo_total(text):
    """MemTotal from /proc/meminfo, in bytes (what the kubelet's cadvisor reports as capacity)."""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            if len(parts) == 3 and parts[1].isdigit() and parts[2] == "kB":
                return int(parts[1]) * KIB
    raise QuantityError("no 'MemTotal: <n> kB' line in /proc/meminfo")


def config_document(plan_, header, scalars=None):
    """The drop-in KubeletConfiguration (kubelet --config-dir): apiVersion and kind are required
    in every drop-in file; empty maps are left out (so the kubelet keeps its own default); scalars
    (the managers' fields, module_utils/rackforge/kubelet_managers.py) follow in a fixed order."""
    import json

    lines = ["# " + line for line in header.splitlines()]
    lines += ["apiVersion: kubelet.config.k8s.io/v1beta1", "kind: KubeletConfiguration"]
    for field in ("systemReserved", "kubeReserved", "evictionHard"):
        if plan_[field]:
            lines.append("%s:" % field)
            lines += ["  %s: %s" % (k, json.dumps(v)) for k, v in sorted(plan_[field].items())]
    lines += ["%s: %s" % (k, json.dumps(v)) for k, v in (scalars or {}).items()]
    return "\n".join(lines) + "\n"
