"""The simulated kubelet's CPU manager, topology manager and shutdown settings (SIMULATION), as
the real kubelet treats them at start, written from its sources (pkg/kubelet/cm/cpumanager
cpu_manager.go and state/state_checkpoint.go, pkg/kubelet/apis/config/validation/validation.go,
cmd/kubelet/app/server.go), not from rackforge's module:

- the topology manager's policy and scope must be known values, shutdownGracePeriodCriticalPods
  must not exceed shutdownGracePeriod: otherwise "invalid configuration" and no start;
- cpuManagerPolicy static with no CPU reserved fails ("the static policy requires
  systemreserved.cpu + kubereserved.cpu to be greater than zero"); reservedSystemCPUs, when set,
  is the reservation (server.go overwrites the maps' cpu with its size);
- the policy is kept in <root-dir>/cpu_manager_state; a kubelet configured with another policy
  than the checkpoint's refuses to start, naming the drain and the file. A new checkpoint is
  written at the first start (its checksum is not the kubelet's: nothing here verifies it).
It assigns no CPUs: no pod runs in the lab."""

from __future__ import annotations

import json
import os
import re

from k8simlib import common
from k8simlib.common import Invalid

TOPOLOGY_POLICIES = ("best-effort", "none", "restricted", "single-numa-node")
TOPOLOGY_SCOPES = ("container", "pod")
CHECKPOINT = os.path.join(common.KUBELET_DIR, "cpu_manager_state")


def _duration(text, field):
    text = str(text)
    if text in ("0", ""):
        return 0.0
    parts = re.findall(r"([0-9]+(?:\.[0-9]+)?)(ns|us|ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise Invalid("failed to load kubelet config: %s: time: invalid duration %r" % (field, text))
    unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * unit[u] for n, u in parts)


def cpuset_size(text):
    size = 0
    for part in str(text).split(","):
        m = re.match(r"^([0-9]+)(?:-([0-9]+))?$", part.strip())
        if not m:
            raise Invalid("failed to parse reservedSystemCPUs %r" % text)
        size += int(m.group(2) or m.group(1)) - int(m.group(1)) + 1
    return size


def reserved_cpu(cfg, quantity):
    """The CPUs reserved for Node Allocatable: reservedSystemCPUs' size where set, else the maps' cpu."""
    if cfg.get("reservedSystemCPUs"):
        return float(cpuset_size(cfg["reservedSystemCPUs"]))
    return sum(quantity((cfg.get(f) or {}).get("cpu", 0), f) for f in ("systemReserved", "kubeReserved"))


def start(cfg, cpus, quantity, checkpoint=CHECKPOINT):
    """Check the managers' settings and the checkpoint as the kubelet does at start (raises Invalid)."""
    policy = cfg.get("topologyManagerPolicy", "none")
    if policy not in TOPOLOGY_POLICIES:
        raise Invalid(
            "invalid configuration: topologyManagerPolicy (--topology-manager-policy) %r must be one of: %s"
            % (policy, list(TOPOLOGY_POLICIES))
        )
    scope = cfg.get("topologyManagerScope", "container")
    if scope not in TOPOLOGY_SCOPES:
        raise Invalid(
            "invalid configuration: topologyManagerScope (--topology-manager-scope) %r must be one of: %s" % (scope, list(TOPOLOGY_SCOPES))
        )
    grace = _duration(cfg.get("shutdownGracePeriod", "0s"), "shutdownGracePeriod")
    critical = _duration(cfg.get("shutdownGracePeriodCriticalPods", "0s"), "shutdownGracePeriodCriticalPods")
    if critical > grace:
        raise Invalid(
            "invalid configuration: shutdownGracePeriodCriticalPods %s must be <= shutdownGracePeriod %s"
            % (cfg.get("shutdownGracePeriodCriticalPods"), cfg.get("shutdownGracePeriod"))
        )
    cpu_policy = cfg.get("cpuManagerPolicy", "none")
    if cpu_policy not in ("none", "static"):
        raise Invalid('failed to run Kubelet: new cpu manager: unknown policy: "%s"' % cpu_policy)
    if cpu_policy == "static" and reserved_cpu(cfg, quantity) <= 0:
        raise Invalid(
            "failed to run Kubelet: [cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero"
        )
    if os.path.exists(checkpoint):
        try:
            with open(checkpoint) as fh:
                doc = json.load(fh)
            had = doc["policyName"]
        except (ValueError, KeyError, TypeError) as exc:
            raise Invalid("failed to run Kubelet: could not restore state from checkpoint: checkpoint is corrupted (%s)" % exc) from exc
        if had != cpu_policy:
            raise Invalid(
                "failed to run Kubelet: could not restore state from checkpoint: configured policy %s differs from state checkpoint "
                "policy %s, please drain this node and delete the CPU manager checkpoint file %s before restarting Kubelet"
                % (json.dumps(cpu_policy), json.dumps(had), json.dumps(checkpoint))
            )
        return
    os.makedirs(os.path.dirname(checkpoint), exist_ok=True)
    default = "0-%d" % (cpus - 1) if cpu_policy == "static" else ""
    with open(checkpoint, "w") as fh:
        json.dump({"policyName": cpu_policy, "defaultCpuSet": default, "checksum": 0}, fh)
