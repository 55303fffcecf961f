"""The formats k8sim reads, checked as kubeadm's and the kubelet's strict decoders check them (SIMULATION
stand-in; the field lists are the real APIs')."""

from __future__ import annotations

import os
import re

from k8simlib import common
from k8simlib.common import Invalid


def _fields(*names):
    return set(names)


HOST_PATH_MOUNT = _fields("name", "hostPath", "mountPath", "readOnly", "pathType")
ARG = _fields("name", "value")
COMPONENT = {"extraArgs": ("args", None), "extraVolumes": ("list", HOST_PATH_MOUNT), "extraEnvs": ("list", None)}
TAINT = _fields("key", "value", "effect", "timeAdded")
NODE_REGISTRATION = _fields(
    "name", "criSocket", "taints", "kubeletExtraArgs", "ignorePreflightErrors", "imagePullPolicy", "imagePullSerial"
)
# kubeadm.k8s.io/v1beta4 (https://kubernetes.io/docs/reference/config-api/kubeadm-config.v1beta4/)
KUBEADM = {
    "InitConfiguration": _fields(
        "apiVersion",
        "kind",
        "bootstrapTokens",
        "dryRun",
        "nodeRegistration",
        "localAPIEndpoint",
        "certificateKey",
        "skipPhases",
        "patches",
        "timeouts",
    ),
    "ClusterConfiguration": _fields(
        "apiVersion",
        "kind",
        "etcd",
        "networking",
        "kubernetesVersion",
        "controlPlaneEndpoint",
        "apiServer",
        "controllerManager",
        "scheduler",
        "dns",
        "proxy",
        "certificatesDir",
        "imageRepository",
        "featureGates",
        "clusterName",
        "encryptionAlgorithm",
        "certificateValidityPeriod",
        "caCertificateValidityPeriod",
    ),
    "JoinConfiguration": _fields(
        "apiVersion", "kind", "dryRun", "nodeRegistration", "caCertPath", "discovery", "controlPlane", "skipPhases", "patches", "timeouts"
    ),
}
DISCOVERY = _fields("bootstrapToken", "file", "tlsBootstrapToken")
BOOTSTRAP_DISCOVERY = _fields("token", "apiServerEndpoint", "caCertHashes", "unsafeSkipCAVerification")
NETWORKING = _fields("serviceSubnet", "podSubnet", "dnsDomain")
# kubelet.config.k8s.io/v1beta1: the fields a GPU node's kubelet is commonly given (a subset of
# the ~100 the real type has: the stand-in refuses what it does not know, naming it)
KUBELET = _fields(
    "apiVersion",
    "kind",
    "cgroupDriver",
    "containerRuntimeEndpoint",
    "failSwapOn",
    "memorySwap",
    "maxPods",
    "podPidsLimit",
    "serverTLSBootstrap",
    "rotateCertificates",
    "systemReserved",
    "kubeReserved",
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "clusterDNS",
    "clusterDomain",
    "authentication",
    "authorization",
    "staticPodPath",
    "resolvConf",
    "topologyManagerPolicy",
    "topologyManagerScope",
    "cpuManagerPolicy",
    "memoryManagerPolicy",
    "reservedSystemCPUs",
    "reservedMemory",
    "featureGates",
    "shutdownGracePeriod",
    "shutdownGracePeriodCriticalPods",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "logging",
    "healthzBindAddress",
    "healthzPort",
    "readOnlyPort",
    "address",
    "port",
    "tlsMinVersion",
    "tlsCipherSuites",
    "containerLogMaxSize",
    "containerLogMaxFiles",
    "serializeImagePulls",
    "maxParallelImagePulls",
)
CGROUP_DRIVERS = ("systemd", "cgroupfs")
SCHEDULER = _fields(
    "apiVersion",
    "kind",
    "parallelism",
    "leaderElection",
    "clientConnection",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "profiles",
    "extenders",
    "delayCacheUntilActive",
)
SCORING_TYPES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS1123_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
TOKEN_RE = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
# kubelet --node-labels: kubernetes.io / k8s.io keys it may set itself (NodeRestriction)
KUBELET_LABELS = {
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
}


def _unknown(obj, allowed, where):
    if not isinstance(obj, dict):
        raise Invalid("%s: expected a mapping, got %r" % (where, obj))
    extra = sorted(set(obj) - allowed)
    if extra:
        raise Invalid(
            "%s: unknown field(s) %s (strict decoding; known: %s)"
            % (where, ", ".join('"%s"' % e for e in extra), ", ".join(sorted(allowed)))
        )


def _args(value, where):
    """v1beta4 turned extraArgs/kubeletExtraArgs from a map into a list of {name, value}."""
    if isinstance(value, dict):
        raise Invalid("%s: v1beta4 wants a list of {name, value}, not a map (the v1beta3 format)" % where)
    if not isinstance(value, list):
        raise Invalid("%s: expected a list of {name, value}" % where)
    out = {}
    for i, item in enumerate(value):
        _unknown(item, ARG, "%s[%d]" % (where, i))
        if not isinstance(item.get("name"), str) or not isinstance(item.get("value"), str):
            raise Invalid("%s[%d]: name and value must be strings" % (where, i))
        out[item["name"]] = item["value"]
    return out


def label_problems(labels):
    bad = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if not NAME_RE.match(name) or len(name) > 63 or (prefix and (len(prefix) > 253 or not DNS1123_RE.match(prefix))):
            bad.append("%s: invalid label key" % key)
        if value and (len(value) > 63 or not NAME_RE.match(value)):
            bad.append("%s=%s: invalid label value (at most 63 of [A-Za-z0-9._-], alphanumeric at both ends)" % (key, value))
    return bad


def node_restriction(labels):
    """Labels a kubelet may not set on its own Node (the NodeRestriction admission plugin)."""
    refused = []
    for key in labels:
        prefix = key.rpartition("/")[0]
        k8s_ns = prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io") or prefix == "k8s.io" or prefix.endswith(".k8s.io")
        allowed_ns = prefix in ("kubelet.kubernetes.io", "node.kubernetes.io") or prefix.endswith(
            (".kubelet.kubernetes.io", ".node.kubernetes.io")
        )
        if k8s_ns and not allowed_ns and key not in KUBELET_LABELS:
            refused.append(key)
    return refused


def validate_taints(taints, where):
    if not isinstance(taints, list):
        raise Invalid("%s: expected a list" % where)
    for i, t in enumerate(taints):
        _unknown(t, TAINT, "%s[%d]" % (where, i))
        if t.get("effect") not in EFFECTS:
            raise Invalid("%s[%d].effect: %r is not one of %s" % (where, i, t.get("effect"), ", ".join(EFFECTS)))
        problems = label_problems({t.get("key", ""): t.get("value", "")})
        if problems:
            raise Invalid("%s[%d]: %s" % (where, i, "; ".join(problems)))


def validate_node_registration(nr, where):
    _unknown(nr, NODE_REGISTRATION, where)
    args = _args(nr.get("kubeletExtraArgs", []), where + ".kubeletExtraArgs")
    validate_taints(nr.get("taints", []), where + ".taints")
    if "name" in nr and not DNS1123_RE.match(nr["name"]):
        raise Invalid("%s.name: %r is not a DNS-1123 subdomain" % (where, nr["name"]))
    labels = parse_labels(args.get("node-labels", ""))
    problems = label_problems(labels)
    if problems:
        raise Invalid("%s.kubeletExtraArgs node-labels: %s" % (where, "; ".join(problems)))
    refused = node_restriction(labels)
    if refused:
        raise Invalid(
            "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [%s]; --node-labels in the "
            "'kubernetes.io' namespace must begin with an allowed prefix (kubelet.kubernetes.io, node.kubernetes.io) "
            "or be in the specifically allowed set" % " ".join(refused)
        )
    if "node-ip" in args and not re.match(r"^\d+\.\d+\.\d+\.\d+$", args["node-ip"]):
        raise Invalid("%s.kubeletExtraArgs node-ip: %r is not an IPv4 address" % (where, args["node-ip"]))
    return args, labels


def parse_labels(text):
    labels = {}
    for item in [x for x in text.split(",") if x]:
        key, sep, value = item.partition("=")
        if not sep:
            raise Invalid("--node-labels: %r is not key=value" % item)
        labels[key] = value
    return labels


def validate_kubelet(doc):
    _unknown(doc, KUBELET, "KubeletConfiguration")
    if doc.get("cgroupDriver", "systemd") not in CGROUP_DRIVERS:
        raise Invalid("KubeletConfiguration.cgroupDriver: %r is not one of %s" % (doc["cgroupDriver"], ", ".join(CGROUP_DRIVERS)))


def validate_scheduler(doc):
    if doc.get("apiVersion") != "kubescheduler.config.k8s.io/v1" or doc.get("kind") != "KubeSchedulerConfiguration":
        raise Invalid("scheduler config: expected kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration")
    _unknown(doc, SCHEDULER, "KubeSchedulerConfiguration")
    for i, prof in enumerate(doc.get("profiles", [])):
        _unknown(prof, _fields("schedulerName", "plugins", "pluginConfig"), "profiles[%d]" % i)
        for j, pc in enumerate(prof.get("pluginConfig", [])):
            _unknown(pc, _fields("name", "args"), "profiles[%d].pluginConfig[%d]" % (i, j))
            if pc.get("name") != "NodeResourcesFit":
                continue
            args = pc.get("args", {})
            _unknown(args, _fields("ignoredResources", "ignoredResourceGroups", "scoringStrategy"), "NodeResourcesFitArgs")
            strat = args.get("scoringStrategy", {})
            _unknown(strat, _fields("type", "resources", "requestedToCapacityRatio"), "NodeResourcesFitArgs.scoringStrategy")
            if strat.get("type") not in SCORING_TYPES:
                raise Invalid(
                    "NodeResourcesFitArgs.scoringStrategy.type: %r is not one of %s" % (strat.get("type"), ", ".join(SCORING_TYPES))
                )
            for res in strat.get("resources", []):
                _unknown(res, _fields("name", "weight"), "scoringStrategy.resources")
                if not isinstance(res.get("weight"), int) or not 1 <= res["weight"] <= 100:
                    raise Invalid("scoringStrategy.resources %s: weight must be an integer 1..100" % res.get("name"))


def load_docs(path):
    import yaml

    with open(path) as fh:
        docs = [d for d in yaml.safe_load_all(fh) if d is not None]
    by_kind = {}
    for doc in docs:
        kind, api = doc.get("kind"), doc.get("apiVersion")
        if kind in KUBEADM:
            if api != "kubeadm.k8s.io/v1beta4":
                raise Invalid("%s: apiVersion %r; this kubeadm (v%s) reads kubeadm.k8s.io/v1beta4" % (kind, api, common.VERSION))
            _unknown(doc, KUBEADM[kind], kind)
        elif kind == "KubeletConfiguration":
            if api != "kubelet.config.k8s.io/v1beta1":
                raise Invalid("KubeletConfiguration: apiVersion %r, expected kubelet.config.k8s.io/v1beta1" % api)
            validate_kubelet(doc)
        elif kind == "KubeProxyConfiguration":
            pass
        else:
            raise Invalid("%s: unknown kind %r (apiVersion %r)" % (path, kind, api))
        if kind in by_kind:
            raise Invalid("%s: more than one %s" % (path, kind))
        by_kind[kind] = doc
    return by_kind


def validate_cluster(cfg):
    _unknown(cfg.get("networking", {}), NETWORKING, "ClusterConfiguration.networking")
    for comp in ("apiServer", "controllerManager", "scheduler"):
        spec = cfg.get(comp, {})
        allowed = set(COMPONENT) | ({"certSANs"} if comp == "apiServer" else set())
        _unknown(spec, allowed, "ClusterConfiguration.%s" % comp)
        args = _args(spec.get("extraArgs", []), "ClusterConfiguration.%s.extraArgs" % comp)
        for i, vol in enumerate(spec.get("extraVolumes", [])):
            _unknown(vol, HOST_PATH_MOUNT, "ClusterConfiguration.%s.extraVolumes[%d]" % (comp, i))
        if comp == "scheduler" and "config" in args:
            mounted = {v.get("hostPath"): v.get("mountPath") for v in spec.get("extraVolumes", [])}
            if args["config"] not in mounted.values():
                raise Invalid(
                    "ClusterConfiguration.scheduler: --config %s is not mounted into the scheduler (extraVolumes)" % args["config"]
                )
            host = next(h for h, m in mounted.items() if m == args["config"])
            import yaml

            try:
                with open(os.path.join(common.ROOT, host.lstrip("/"))) as fh:
                    validate_scheduler(yaml.safe_load(fh))
            except OSError as exc:
                raise Invalid("scheduler config %s: %s" % (host, exc)) from exc
