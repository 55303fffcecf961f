"""The kubelet's CPU and topology managers and graceful node shutdown (pure), optional and off by
default: which KubeletConfiguration fields rackforge writes, what a node can hold, and whether a
node's CPU manager checkpoint stands in the way of a policy change.

Facts from Kubernetes (pkg/kubelet/cm/cpumanager, pkg/kubelet/cm/topologymanager,
pkg/kubelet/apis/config/validation, cmd/kubelet/app/server.go; kubernetes.io "Control CPU
Management Policies on the Node", "Control Topology Management Policies on a node", "Node
Shutdowns"):
- cpuManagerPolicy none|static. static needs a non-zero CPU reservation ("[cpumanager] the static
  policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero") and reserves
  ceil(systemReserved.cpu + kubeReserved.cpu) whole CPUs, or exactly reservedSystemCPUs (a cpuset
  such as 0-1,64-65), which then replaces the cpu of both maps in Node Allocatable.
- The kubelet keeps the policy it ran with in /var/lib/kubelet/cpu_manager_state (JSON,
  policyName) and will not start with another one: "configured policy X differs from state
  checkpoint policy Y, please drain this node and delete the CPU manager checkpoint file". So a
  policy change needs the node drained, the kubelet stopped and that file removed.
- topologyManagerPolicy none|best-effort|restricted|single-numa-node, topologyManagerScope
  container|pod: with restricted or single-numa-node a pod is admitted only where the hints of its
  CPUs (static CPU manager) and devices (the device plugins: GPUs, NICs) agree on NUMA nodes. Any
  policy but none fails on a machine with more than 8 NUMA nodes ("unsupported on machines with
  more than 8 NUMA Nodes"; the max-allowable-numa-nodes policy option, not written here, lifts it).
- shutdownGracePeriod and shutdownGracePeriodCriticalPods (durations, the second <= the first):
  the kubelet holds a systemd inhibitor lock and gives pods that long on shutdown."""

from __future__ import annotations

import json
import re

CPU_POLICIES = ("none", "static")
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_SCOPES = ("container", "pod")
CPU_MANAGER_STATE = "/var/lib/kubelet/cpu_manager_state"
# plan()'s settings, each the variable <prefix><name>
SETTINGS = (
    "cpu_manager_policy",
    "reserved_cpus",
    "topology_manager_policy",
    "topology_manager_scope",
    "shutdown_grace_period",
    "shutdown_grace_period_critical_pods",
)
# Go's time.ParseDuration, the units an operator writes for a grace period
DURATION_RE = re.compile(r"^(?:([0-9]+(?:\.[0-9]+)?)(h|m|s|ms))+$")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


class SettingError(ValueError):
    pass


def parse_cpuset(text):
    """Linux cpuset list format ('0-3,8,10-11') -> set of CPU ids; '' -> empty set."""
    out = set()
    for part in str(text).split(",") if str(text).strip() else []:
        m = re.match(r"^\s*([0-9]+)(?:-([0-9]+))?\s*$", part)
        if not m:
            raise SettingError("%r is not a CPU list such as 0-1,64-65" % text)
        low, high = int(m.group(1)), int(m.group(2) if m.group(2) is not None else m.group(1))
        if high < low:
            raise SettingError("%r: range %s runs backwards" % (text, part.strip()))
        out.update(range(low, high + 1))
    return out


def parse_duration(text):
    """'90s', '5m', '1m30s' -> seconds; '0' and '' -> 0."""
    text = str(text).strip()
    if text in ("", "0"):
        return 0.0
    if not DURATION_RE.match(text):
        raise SettingError("%r is not a duration such as 30s, 5m or 1m30s" % text)
    return sum(float(n) * _UNIT[u] for n, u in re.findall(r"([0-9]+(?:\.[0-9]+)?)(ms|h|m|s)", text))


def format_cpuset(ids):
    """{0, 1, 2, 5} -> '0-2,5'."""
    out, run = [], []
    for cpu in sorted(ids):
        if run and cpu == run[-1] + 1:
            run.append(cpu)
            continue
        if run:
            out.append("%d-%d" % (run[0], run[-1]) if len(run) > 1 else str(run[0]))
        run = [cpu]
    if run:
        out.append("%d-%d" % (run[0], run[-1]) if len(run) > 1 else str(run[0]))
    return ",".join(out)


MAX_NUMA_NODES = 8


def plan(settings, cpu_ids, reserved_cpu, prefix="kubernetes_node_", numa_nodes=1):
    """(fields, problems): the KubeletConfiguration fields to write (none of them while every
    manager is at the kubelet's default, so a node without them is left as it was), and what this
    node cannot hold, naming the variable. cpu_ids: the node's online CPU ids (not always 0..n-1).
    settings: cpu_manager_policy, reserved_cpus,
    topology_manager_policy, topology_manager_scope, shutdown_grace_period,
    shutdown_grace_period_critical_pods. reserved_cpu: systemReserved.cpu + kubeReserved.cpu (cores)."""
    fields, problems = {}, []
    policy = settings.get("cpu_manager_policy", "none")
    if policy not in CPU_POLICIES:
        problems.append("%scpu_manager_policy must be one of %s, got %r" % (prefix, ", ".join(CPU_POLICIES), policy))
    try:
        reserved = parse_cpuset(settings.get("reserved_cpus", ""))
    except SettingError as exc:
        problems.append("%sreserved_cpus: %s" % (prefix, exc))
        reserved = set()
    cpu_ids = set(cpu_ids)
    beyond = reserved - cpu_ids
    if beyond:
        problems.append(
            "%sreserved_cpus names CPU %s, which this node does not have (its CPUs: %s)"
            % (prefix, format_cpuset(beyond), format_cpuset(cpu_ids))
        )
    elif reserved and reserved >= cpu_ids:
        problems.append("%sreserved_cpus reserves all %d CPUs of this node: nothing is left for pods" % (prefix, len(cpu_ids)))
    if policy == "static":
        if not reserved and reserved_cpu <= 0:
            problems.append(
                "%scpu_manager_policy static needs CPUs reserved (the kubelet refuses it otherwise): set %sreserved_cpus, "
                "or a cpu in %ssystem_reserved or %skube_reserved" % (prefix, prefix, prefix, prefix)
            )
        fields["cpuManagerPolicy"] = "static"
    if reserved:
        fields["reservedSystemCPUs"] = settings["reserved_cpus"].replace(" ", "")
    topo = settings.get("topology_manager_policy", "none")
    if topo not in TOPOLOGY_POLICIES:
        problems.append("%stopology_manager_policy must be one of %s, got %r" % (prefix, ", ".join(TOPOLOGY_POLICIES), topo))
    elif topo != "none":
        if numa_nodes > MAX_NUMA_NODES:
            problems.append(
                "%stopology_manager_policy %s: the kubelet's topology manager refuses machines with more than %d NUMA nodes, "
                "and this one has %d" % (prefix, topo, MAX_NUMA_NODES, numa_nodes)
            )
        scope = settings.get("topology_manager_scope", "container")
        if scope not in TOPOLOGY_SCOPES:
            problems.append("%stopology_manager_scope must be one of %s, got %r" % (prefix, ", ".join(TOPOLOGY_SCOPES), scope))
        fields["topologyManagerPolicy"] = topo
        fields["topologyManagerScope"] = scope
    grace = {}
    for key, field in (
        ("shutdown_grace_period", "shutdownGracePeriod"),
        ("shutdown_grace_period_critical_pods", "shutdownGracePeriodCriticalPods"),
    ):
        try:
            grace[field] = parse_duration(settings.get(key, "0s"))
        except SettingError as exc:
            problems.append("%s%s: %s" % (prefix, key, exc))
    if len(grace) == 2:
        if grace["shutdownGracePeriodCriticalPods"] > grace["shutdownGracePeriod"]:
            problems.append(
                "%sshutdown_grace_period_critical_pods (%s) must not be longer than %sshutdown_grace_period (%s)"
                % (prefix, settings.get("shutdown_grace_period_critical_pods"), prefix, settings.get("shutdown_grace_period"))
            )
        elif grace["shutdownGracePeriod"] > 0:
            fields["shutdownGracePeriod"] = str(settings["shutdown_grace_period"])
            fields["shutdownGracePeriodCriticalPods"] = str(settings.get("shutdown_grace_period_critical_pods") or "0s")
    return fields, problems


def allocatable_cpu(cpus, reserved_cpu, reserved_cpus_text):
    """Node Allocatable cpu: reservedSystemCPUs, when set, replaces the maps' cpu."""
    reserved = parse_cpuset(reserved_cpus_text)
    return round(cpus - (len(reserved) if reserved else reserved_cpu), 3)


CORRUPT = "(corrupt)"


def read_checkpoint(text):
    """(policyName, exclusive assignments?) of a CPU manager checkpoint: (None, False) without one,
    (CORRUPT, False) for one the kubelet cannot read (it refuses to start: "checkpoint is corrupted")."""
    if text is None:
        return None, False
    try:
        doc = json.loads(text)
    except ValueError:
        return CORRUPT, False
    name = doc.get("policyName") if isinstance(doc, dict) else None
    if not isinstance(name, str):
        return CORRUPT, False
    return name, bool(doc.get("entries"))


def reset_needed(checkpoint_text, wanted, reservation_changes=False):
    """(needed, had, why): whether the checkpoint stands in the way of the kubelet's next start. It
    does when it names another policy or cannot be read, and, under the static policy, when it holds
    exclusive CPU assignments while the reservation changes (the kubelet refuses to start when
    reserved CPUs are not all in the checkpoint's defaultCpuSet: rackforge cannot tell which CPUs
    the kubelet will pick, so any change of the drop-in counts)."""
    had, assigned = read_checkpoint(checkpoint_text)
    if had is None:
        return False, None, ""
    if had == CORRUPT:
        return True, had, "it cannot be read, and the kubelet will not start with it"
    if had != wanted:
        return True, had, "the kubelet will not start with policy %r while it names %r" % (wanted, had)
    if had == "static" and assigned and reservation_changes:
        return True, had, "it holds exclusive CPU assignments, and the reserved CPUs change: the kubelet will not start if they overlap"
    return False, had, ""
