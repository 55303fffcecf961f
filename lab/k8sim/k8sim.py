#!/usr/bin/python3
"""rackforge lab Kubernetes stand-in (SIMULATION: no kubelet, no containers, no real API server).

kubeadm and kubelet are not packaged for Debian and cannot run in the lab's containers, so the lab
mirror ships stand-in `kubeadm`, `kubelet` and `kubectl` packages that call this one program.
What it does for real:
  - parses and validates the files the roles render against the real formats (kubeadm
    InitConfiguration/ClusterConfiguration/JoinConfiguration v1beta4, KubeletConfiguration
    v1beta1, KubeSchedulerConfiguration v1), unknown fields rejected, as kubeadm's strict decoder does;
  - `kubeadm init` makes a real CA (openssl) and serves a small HTTPS API on :6443 (the
    k8s-shaped paths the roles and kubectl use: /version, the kube-public cluster-info
    ConfigMap, /api/v1/nodes, pods, evictions);
  - bootstrap tokens with a TTL; `kubeadm join` does the real discovery (cluster-info fetched
    without trust, the CA public key pinned by the sha256 in caCertHashes) and registers the
    Node with its node IP, labels (NodeRestriction rules) and taints;
  - `kubectl` get/cordon/uncordon/drain/label/apply against that API.
What it does not: schedule, run pods, network. State: /var/lib/k8sim/state.json on the
control-plane host (the "etcd").
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import re
import secrets
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

VERSION = os.environ.get("K8SIM_VERSION_OVERRIDE") or "@VERSION@"  # replaced by the mirror build
ROOT = os.environ.get("K8SIM_ROOT", "/")
STATE = os.path.join(ROOT, "var/lib/k8sim/state.json")
ETC_K8S = os.path.join(ROOT, "etc/kubernetes")
PKI = os.path.join(ETC_K8S, "pki")
KUBELET_DIR = os.path.join(ROOT, "var/lib/kubelet")
PORT = 6443


class Invalid(Exception):
    pass


# ----------------------------------------------------------------------------- formats
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
                raise Invalid("%s: apiVersion %r; this kubeadm (v%s) reads kubeadm.k8s.io/v1beta4" % (kind, api, VERSION))
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
                with open(os.path.join(ROOT, host.lstrip("/"))) as fh:
                    validate_scheduler(yaml.safe_load(fh))
            except OSError as exc:
                raise Invalid("scheduler config %s: %s" % (host, exc)) from exc


# ----------------------------------------------------------------------------- state
class State:
    def __enter__(self):
        os.makedirs(os.path.dirname(STATE), exist_ok=True)
        self.lock = open(STATE + ".lock", "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        try:
            with open(STATE) as fh:
                self.data = json.load(fh)
        except (OSError, ValueError):
            self.data = {}
        return self.data

    def __exit__(self, *exc):
        if exc[0] is None:
            tmp = STATE + ".tmp"
            with open(tmp, "w") as fh:
                json.dump(self.data, fh, indent=1, sort_keys=True)
            os.replace(tmp, STATE)
        fcntl.flock(self.lock, fcntl.LOCK_UN)
        self.lock.close()


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def openssl(*args, inp=None):
    res = subprocess.run(["openssl", *args], input=inp, capture_output=True, check=False)
    if res.returncode != 0:
        raise Invalid("openssl %s: %s" % (args[0], res.stderr.decode(errors="replace").strip()))
    return res.stdout


def ca_hash(ca_pem):
    """sha256 of the CA's DER SubjectPublicKeyInfo: kubeadm's discovery-token-ca-cert-hash."""
    pub = openssl("x509", "-noout", "-pubkey", inp=ca_pem)
    der = openssl("pkey", "-pubin", "-outform", "DER", inp=pub)
    return "sha256:" + hashlib.sha256(der).hexdigest()


def kubeconfig(server, ca_pem, user, token):
    import yaml

    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "kubernetes", "cluster": {"server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()}}
            ],
            "contexts": [{"name": "%s@kubernetes" % user, "context": {"cluster": "kubernetes", "user": user}}],
            "current-context": "%s@kubernetes" % user,
            "users": [{"name": user, "user": {"token": token}}],
        },
        sort_keys=False,
    )


def write_private(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(path, 0o600)


def _read(path, default=""):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return default


def _containerd_version():
    try:
        out = subprocess.run(["containerd", "--version"], capture_output=True, text=True, check=False).stdout.split()
    except OSError:
        return "containerd://none"
    return "containerd://" + (out[2] if len(out) > 2 else "unknown")


def node_info():
    """status.nodeInfo as a kubelet reports it, from this host."""
    os_release = dict(line.split("=", 1) for line in _read(os.path.join(ROOT, "etc/os-release")).splitlines() if "=" in line)
    return {
        "machineID": _read(os.path.join(ROOT, "etc/machine-id")),
        "systemUUID": _read("/sys/class/dmi/id/product_uuid") or _read(os.path.join(ROOT, "etc/machine-id")),
        "bootID": _read("/proc/sys/kernel/random/boot_id"),
        "kernelVersion": os.uname().release,
        "osImage": os_release.get("PRETTY_NAME", "Linux").strip('"'),
        "containerRuntimeVersion": _containerd_version(),
        "kubeletVersion": "v" + VERSION,
        "kubeProxyVersion": "",
        "operatingSystem": "linux",
        "architecture": "amd64",
    }


def node_object(name, ip, labels, taints, role=None):
    base = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    if role:
        base["node-role.kubernetes.io/%s" % role] = ""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {**base, **labels}, "creationTimestamp": now()},
        "spec": {"taints": taints} if taints else {},
        "status": {
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "SIMULATED kubelet (rackforge lab)"}],
            "nodeInfo": node_info(),
        },
    }


# ----------------------------------------------------------------------------- kubeadm
def kubeadm(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print("kubeadm (SIMULATED, rackforge lab): init, join, token create|list, version, reset")
        return 0
    cmd, rest = argv[0], argv[1:]
    try:
        if cmd == "version":
            print("v" + VERSION if "-o" in rest and "short" in rest else 'kubeadm version: &version.Info{GitVersion:"v%s"}' % VERSION)
            return 0
        if cmd == "init":
            return kubeadm_init(_flag(rest, "--config"))
        if cmd == "join":
            return kubeadm_join(_flag(rest, "--config"))
        if cmd == "token" and rest[:1] == ["create"]:
            return kubeadm_token_create(_flag(rest, "--ttl", "24h0m0s"))
        if cmd == "token" and rest[:1] == ["list"]:
            with State() as st:
                for t in st.get("tokens", []):
                    print("%s.<hidden>  expires %s" % (t["id"], time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t["expires"]))))
            return 0
        if cmd == "reset":
            subprocess.run(["systemctl", "stop", "kubelet.service"], check=False)
            for path in ("etc/kubernetes/kubelet.conf", "etc/kubernetes/admin.conf", "var/lib/kubelet/kubeadm-flags.env"):
                if os.path.exists(os.path.join(ROOT, path)):
                    os.remove(os.path.join(ROOT, path))
            return 0
    except Invalid as exc:
        sys.stderr.write("error execution phase %s: %s\n" % (cmd, exc))
        return 1
    sys.stderr.write("kubeadm (SIMULATED): unknown command %r\n" % " ".join(argv))
    return 1


def _flag(args, name, default=None):
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    if default is None:
        raise Invalid("%s is required" % name)
    return default


def _pop_flag(args, name):
    """Remove `name value` or `name=value` from args; the value, or None."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            value = args[i + 1]
            del args[i : i + 2]
            return value
        if a.startswith(name + "="):
            del args[i]
            return a.split("=", 1)[1]
    return None


def _duration(text):
    total, found = 0, False
    for num, unit in re.findall(r"(\d+)([hms])", text):
        total += int(num) * {"h": 3600, "m": 60, "s": 1}[unit]
        found = True
    if not found or re.sub(r"\d+[hms]", "", text):
        raise Invalid("invalid duration %r" % text)
    return total


def kubeadm_init(path):
    docs = load_docs(path)
    if "InitConfiguration" not in docs or "ClusterConfiguration" not in docs:
        raise Invalid("%s: init needs an InitConfiguration and a ClusterConfiguration" % path)
    init, cluster = docs["InitConfiguration"], docs["ClusterConfiguration"]
    if os.path.exists(os.path.join(ETC_K8S, "admin.conf")):
        raise Invalid("[preflight] /etc/kubernetes/admin.conf already exists (this host is initialised)")
    args, labels = validate_node_registration(init.get("nodeRegistration", {}), "InitConfiguration.nodeRegistration")
    validate_cluster(cluster)
    want = cluster.get("kubernetesVersion", "v" + VERSION).lstrip("v")
    if want != VERSION:
        raise Invalid("ClusterConfiguration.kubernetesVersion v%s: this kubeadm is v%s" % (want, VERSION))
    endpoint = init.get("localAPIEndpoint", {}).get("advertiseAddress")
    if not endpoint:
        raise Invalid("InitConfiguration.localAPIEndpoint.advertiseAddress is required by the stand-in")
    os.makedirs(PKI, exist_ok=True)
    ca_key, ca_crt = os.path.join(PKI, "ca.key"), os.path.join(PKI, "ca.crt")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca_crt, "-days", "3650", "-subj", "/CN=kubernetes")
    key, csr, crt = (os.path.join(PKI, "apiserver." + ext) for ext in ("key", "csr", "crt"))
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=kube-apiserver")
    ext = os.path.join(PKI, "apiserver.ext")
    with open(ext, "w") as fh:
        fh.write("subjectAltName=IP:%s,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default\n" % endpoint)
    openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-out", crt, "-days", "365", "-extfile", ext)
    for p in (ca_key, key):
        os.chmod(p, 0o600)
    ca_pem = open(ca_crt, "rb").read()
    admin_token = secrets.token_hex(16)
    server = "https://%s:%d" % (endpoint, PORT)
    name = init.get("nodeRegistration", {}).get("name") or os.uname().nodename
    taints = init.get("nodeRegistration", {}).get("taints", [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])
    with State() as st:
        st.clear()
        st.update(
            {
                "cluster": {
                    "server": server,
                    "ca": ca_pem.decode(),
                    "init": init,
                    "cluster": cluster,
                    "kubelet": docs.get("KubeletConfiguration"),
                },
                "admin_token": admin_token,
                "tokens": [],
                "node_tokens": {},
                "nodes": {name: node_object(name, args.get("node-ip", endpoint), labels, taints, role="control-plane")},
                "pods": [],
                "objects": [],
            }
        )
    write_private(os.path.join(ETC_K8S, "admin.conf"), kubeconfig(server, ca_pem, "kubernetes-admin", admin_token))
    subprocess.run(["systemctl", "enable", "--now", "k8sim-apiserver.service"], check=False)
    _wait_api(server, ca_pem)
    print("Your Kubernetes control-plane has initialized successfully! (SIMULATED, rackforge lab)")
    return 0


def _wait_api(server, ca_pem, timeout=20):
    deadline = time.time() + timeout
    while True:
        try:
            api(server, "GET", "/version", ca_pem=ca_pem)
            return
        except (OSError, Invalid):
            if time.time() > deadline:
                raise Invalid("the API server at %s did not answer within %ds" % (server, timeout)) from None
            time.sleep(0.3)


def kubeadm_token_create(ttl):
    seconds = _duration(ttl)
    tid, secret = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(6)), secrets.token_hex(8)
    with State() as st:
        if "cluster" not in st:
            raise Invalid("this host is not an initialised control plane (no kubeadm init)")
        st["tokens"] = [t for t in st.get("tokens", []) if t["expires"] > time.time()]
        st["tokens"].append({"id": tid, "secret": secret, "expires": time.time() + seconds, "usages": ["authentication", "signing"]})
    print("%s.%s" % (tid, secret))
    return 0


def kubeadm_join(path):
    docs = load_docs(path)
    if set(docs) - {"JoinConfiguration"}:
        raise Invalid("%s: join takes only a JoinConfiguration (got %s)" % (path, ", ".join(sorted(docs))))
    join = docs.get("JoinConfiguration")
    if not join:
        raise Invalid("%s: no JoinConfiguration" % path)
    kubelet_conf = os.path.join(ETC_K8S, "kubelet.conf")
    if os.path.exists(kubelet_conf):
        raise Invalid("[preflight] /etc/kubernetes/kubelet.conf already exists (this node has joined)")
    args, labels = validate_node_registration(join.get("nodeRegistration", {}), "JoinConfiguration.nodeRegistration")
    disc = join.get("discovery", {})
    _unknown(disc, DISCOVERY, "JoinConfiguration.discovery")
    bt = disc.get("bootstrapToken")
    if not bt:
        raise Invalid("JoinConfiguration.discovery.bootstrapToken is required by the stand-in")
    _unknown(bt, BOOTSTRAP_DISCOVERY, "JoinConfiguration.discovery.bootstrapToken")
    token = disc.get("tlsBootstrapToken") or bt.get("token", "")
    if not TOKEN_RE.match(bt.get("token", "")) or not TOKEN_RE.match(token):
        raise Invalid('the bootstrap token does not match the format "[a-z0-9]{6}.[a-z0-9]{16}"')
    hashes = bt.get("caCertHashes") or []
    if not hashes and not bt.get("unsafeSkipCAVerification"):
        raise Invalid("discovery.bootstrapToken: caCertHashes is empty and unsafeSkipCAVerification is not set")
    server = "https://%s" % bt["apiServerEndpoint"]
    # discovery: cluster-info without trust, then pin the CA's public key
    info = api(server, "GET", "/api/v1/namespaces/kube-public/configmaps/cluster-info", ca_pem=None)
    import yaml

    cfg = yaml.safe_load(info["data"]["kubeconfig"])
    ca_pem = base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"])
    found = ca_hash(ca_pem)
    if hashes and found not in hashes:
        raise Invalid('cluster CA found in cluster-info ConfigMap is invalid: none of the public keys "%s" are pinned' % found)
    name = join.get("nodeRegistration", {}).get("name") or os.uname().nodename
    ip = args.get("node-ip")
    if not ip:
        raise Invalid("the stand-in needs kubeletExtraArgs node-ip (the address the node registers)")
    # kubeadm's kubelet-start phase (cmd/kubeadm/app/cmd/phases/join/kubelet.go): a Ready Node of the same
    # name stops the join with this message; a missing one (404) is fine
    try:
        existing = api(server, "GET", "/api/v1/nodes/%s" % name, ca_pem=ca_pem, token=token)
    except Invalid:
        existing = None
    if existing and any(c.get("type") == "Ready" and c.get("status") == "True" for c in existing.get("status", {}).get("conditions", [])):
        raise Invalid(
            'error execution phase kubelet-start: a Node with name "%s" and status "Ready" already exists in the cluster. '
            "You must delete the existing Node or change the name of this new joining Node" % name
        )
    node = node_object(name, ip, labels, join.get("nodeRegistration", {}).get("taints", []))
    res = api(server, "POST", "/api/v1/nodes", ca_pem=ca_pem, token=token, body=node)
    os.makedirs(PKI, exist_ok=True)
    with open(os.path.join(PKI, "ca.crt"), "wb") as fh:
        fh.write(ca_pem)
    write_private(kubelet_conf, kubeconfig(server, ca_pem, "system:node:" + name, res["metadata"]["annotations"]["k8sim/node-token"]))
    os.makedirs(KUBELET_DIR, exist_ok=True)
    with open(os.path.join(KUBELET_DIR, "kubeadm-flags.env"), "w") as fh:
        fh.write('KUBELET_KUBEADM_ARGS="%s"\n' % " ".join("--%s=%s" % kv for kv in sorted(args.items())))
    subprocess.run(["systemctl", "restart", "kubelet.service"], check=False)
    print("This node has joined the cluster (SIMULATED, rackforge lab): %s at %s" % (name, ip))
    return 0


# ----------------------------------------------------------------------------- API client
def api(server, method, path, ca_pem=None, token=None, body=None):
    ctx = ssl.create_default_context()
    if ca_pem is None:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.load_verify_locations(cadata=ca_pem.decode() if isinstance(ca_pem, bytes) else ca_pem)
        ctx.check_hostname = False  # the serving cert names IPs; verified by the chain
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server + path, data=data, method=method)
    req.add_header("Content-Type", "application/merge-patch+json" if method == "PATCH" else "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            msg = json.loads(exc.read()).get("message")
        except ValueError:
            msg = exc.reason
        raise Invalid("%s %s: %s (HTTP %d)" % (method, path, msg, exc.code)) from None


def load_kubeconfig(path):
    import yaml

    with open(path) as fh:
        cfg = yaml.safe_load(fh)
    cluster = cfg["clusters"][0]["cluster"]
    return cluster["server"], base64.b64decode(cluster["certificate-authority-data"]), cfg["users"][0]["user"]["token"]


# ----------------------------------------------------------------------------- kubectl
def kubectl(argv):
    args = list(argv)
    kcfg = _pop_flag(args, "--kubeconfig") or os.environ.get("KUBECONFIG") or os.path.join(ETC_K8S, "admin.conf")
    out = _pop_flag(args, "-o")
    if args[:1] == ["version"]:
        print(json.dumps({"clientVersion": {"gitVersion": "v" + VERSION}}))
        return 0
    try:
        server, ca, token = load_kubeconfig(kcfg)

        def call(method, path, body=None):
            return api(server, method, path, ca_pem=ca, token=token, body=body)

        return _kubectl(args, out, call)
    except (Invalid, OSError, KeyError) as exc:
        sys.stderr.write("error: %s\n" % exc)
        return 1


def _kubectl(args, out, call):
    verb = args[0] if args else ""
    if len(args) > 1 and "/" in args[1] and not args[1].startswith("-"):  # TYPE/NAME, as kubectl takes it
        args = [verb, *args[1].split("/", 1), *args[2:]]
    if verb == "get" and args[1:2] in (["nodes"], ["node"], ["no"]):
        ignore_missing = "--ignore-not-found" in args
        args = [a for a in args if a != "--ignore-not-found"]
        try:
            obj = call("GET", "/api/v1/nodes/%s" % args[2]) if len(args) > 2 else call("GET", "/api/v1/nodes")
        except Invalid as exc:
            if ignore_missing and "not found" in str(exc):
                return 0  # as kubectl get --ignore-not-found: nothing printed, rc 0
            raise
        if out == "name":
            print("\n".join("node/" + n["metadata"]["name"] for n in obj.get("items", [obj])))
            return 0
        if out == "json":
            print(json.dumps(obj, indent=1))
        else:
            for n in obj.get("items", [obj]):
                sched = ",SchedulingDisabled" if n["spec"].get("unschedulable") else ""
                print("%s   Ready%s   %s" % (n["metadata"]["name"], sched, n["status"]["addresses"][0]["address"]))
        return 0
    if verb in ("cordon", "uncordon"):
        call("PATCH", "/api/v1/nodes/%s" % args[1], {"spec": {"unschedulable": verb == "cordon"}})
        print("node/%s %sed" % (args[1], verb))
        return 0
    if verb == "label" and args[1:2] in (["node"], ["nodes"]):
        labels = {}
        for kv in args[3:]:
            if kv.startswith("--"):
                continue
            if kv.endswith("-") and "=" not in kv:
                labels[kv[:-1]] = None
            else:
                key, _, value = kv.partition("=")
                labels[key] = value
        problems = label_problems({k: v for k, v in labels.items() if v is not None})
        if problems:
            raise Invalid("; ".join(problems))
        call("PATCH", "/api/v1/nodes/%s" % args[2], {"metadata": {"labels": labels}})
        print("node/%s labeled" % args[2])
        return 0
    if verb == "delete" and args[1:2] in (["node"], ["nodes"]):
        call("DELETE", "/api/v1/nodes/%s" % args[2])
        print('node "%s" deleted' % args[2])
        return 0
    if verb == "k8sim-add-pod":  # SIMULATION: put a workload on a node (NODE NAMESPACE/NAME [--daemonset] [--pdb-refusals N])
        refusals = int(_flag(args, "--pdb-refusals", "0"))
        pod = sim_pod(args[1], args[2], daemonset="--daemonset" in args)
        call("POST", "/k8sim/v1/pods", {"pod": pod, "pdb_refusals": refusals})
        print("pod/%s added on %s (SIMULATED)" % (args[2], args[1]))
        return 0
    if verb == "get" and args[1:2] == ["pods"]:
        sel = (
            "?fieldSelector=spec.nodeName%%3D%s" % _flag(args, "--field-selector").split("=", 1)[1]
            if "--field-selector" in " ".join(args)
            else ""
        )
        obj = call("GET", "/api/v1/pods" + sel)
        print(json.dumps(obj, indent=1) if out == "json" else "\n".join(p["metadata"]["name"] for p in obj["items"]))
        return 0
    if verb == "drain":
        return _drain(args[1], args, call)
    if verb == "apply" and "-f" in args:
        import yaml

        with open(args[args.index("-f") + 1]) as fh:
            docs = [d for d in yaml.safe_load_all(fh) if d]
        for d in docs:
            if not d.get("apiVersion") or not d.get("kind") or not d.get("metadata", {}).get("name"):
                raise Invalid("apply: every object needs apiVersion, kind and metadata.name")
        res = call("POST", "/k8sim/v1/apply", {"items": docs})
        for line in res["results"]:
            print(line)
        return 0
    if verb == "get" and len(args) >= 3:
        ns = args[args.index("-n") + 1] if "-n" in args else ""
        obj = call("GET", "/k8sim/v1/objects?kind=%s&name=%s&namespace=%s" % (args[1], args[2], ns))
        print(json.dumps(obj, indent=1) if out == "json" else "%s/%s" % (obj["kind"], obj["metadata"]["name"]))
        return 0
    raise Invalid("kubectl (SIMULATED): unsupported command %r" % " ".join(args))


def _drain(node, args, call):
    timeout = _duration(_flag(args, "--timeout", "0s")) if any(a.startswith("--timeout") for a in args) else 0
    call("PATCH", "/api/v1/nodes/%s" % node, {"spec": {"unschedulable": True}})
    deadline = time.time() + timeout if timeout else None
    while True:
        pods = call("GET", "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s" % node)["items"]
        daemon = [p for p in pods if any(o["kind"] == "DaemonSet" for o in p["metadata"].get("ownerReferences", []))]
        todo = [p for p in pods if p not in daemon or "--ignore-daemonsets" not in args]
        if not todo:
            print("node/%s drained" % node)
            return 0
        for p in todo:
            meta = p["metadata"]
            try:
                call("POST", "/api/v1/namespaces/%s/pods/%s/eviction" % (meta["namespace"], meta["name"]), {"kind": "Eviction"})
                print("pod/%s evicted" % meta["name"])
            except Invalid as exc:
                sys.stderr.write("error when evicting pods/%s: %s (will retry after 1s)\n" % (meta["name"], exc))
        if deadline and time.time() > deadline:
            sys.stderr.write("error: unable to drain node %s: global timeout reached\n" % node)
            return 1
        time.sleep(1)


def _json_patch_to_merge(ops):
    """The JSON-patch ops clients send for a node (add/replace/remove of one path) as a merge patch."""
    merge = {}
    for op in ops:
        keys = [k.replace("~1", "/").replace("~0", "~") for k in op["path"].strip("/").split("/")]
        cur = merge
        for k in keys[:-1]:
            cur = cur.setdefault(k, {})
        cur[keys[-1]] = None if op["op"] == "remove" else op.get("value")
    return merge


def sim_pod(node, ref, daemonset=False):
    """A Pod object as the API returns it (SIMULATION: nothing runs it)."""
    namespace, _, name = ref.partition("/")
    owner = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet" if daemonset else "ReplicaSet",
        "name": name.rsplit("-", 1)[0],
        "uid": secrets.token_hex(8),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": [{**owner, "controller": True}]},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.invalid/sim:1"}]},
        "status": {"phase": "Running"},
    }


# ----------------------------------------------------------------------------- API server
def apiserver(_argv):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs, urlparse

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *a):  # journald gets one line per request, without tokens
            sys.stderr.write("%s %s\n" % (self.command, self.path.split("?")[0]))

        def reply(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def status(self, code, msg):
            self.reply(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": msg, "code": code})

        def who(self, st):
            auth = self.headers.get("Authorization", "")
            token = auth[7:] if auth.startswith("Bearer ") else ""
            if token and token == st.get("admin_token"):
                return "admin"
            for name, t in st.get("node_tokens", {}).items():
                if token == t:
                    return "node:" + name
            m = TOKEN_RE.match(token)
            if m and any(t["id"] == m.group(1) and t["secret"] == m.group(2) and t["expires"] > time.time() for t in st.get("tokens", [])):
                return "bootstrap"
            return None

        def body(self):
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n) or b"{}")

        def handle_any(self):
            url = urlparse(self.path)
            parts = [p for p in url.path.split("/") if p]
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            with State() as st:
                if url.path == "/version":
                    return self.reply(200, {"major": VERSION.split(".")[0], "minor": VERSION.split(".")[1], "gitVersion": "v" + VERSION})
                if url.path == "/api/v1/namespaces/kube-public/configmaps/cluster-info":
                    c = st["cluster"]
                    cfg = kubeconfig(c["server"], c["ca"].encode(), "", "")
                    return self.reply(
                        200, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-info"}, "data": {"kubeconfig": cfg}}
                    )
                who = self.who(st)
                if who is None:
                    return self.status(401, "Unauthorized")
                # discovery, as client libraries (kubernetes.core's dynamic client) read it
                if url.path == "/api":
                    return self.reply(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
                if url.path == "/apis":
                    return self.reply(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
                if url.path == "/api/v1":
                    resources = [
                        {"name": "nodes", "namespaced": False, "kind": "Node", "verbs": ["get", "list", "patch", "delete", "create"]},
                        {"name": "pods", "namespaced": True, "kind": "Pod", "verbs": ["get", "list"]},
                        {"name": "pods/eviction", "namespaced": True, "kind": "Eviction", "verbs": ["create"]},
                    ]
                    return self.reply(200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": resources})
                nodes = st.setdefault("nodes", {})
                if parts[:3] == ["api", "v1", "nodes"]:
                    if self.command == "POST" and len(parts) == 3:
                        node = self.body()
                        name = node["metadata"]["name"]
                        if name in nodes:
                            return self.status(409, 'nodes "%s" already exists' % name)
                        refused = node_restriction(node["metadata"].get("labels", {}))
                        if refused and who != "admin":
                            return self.status(403, "NodeRestriction: may not set labels %s" % ", ".join(refused))
                        node_token = secrets.token_hex(16)
                        st.setdefault("node_tokens", {})[name] = node_token
                        nodes[name] = node
                        return self.reply(201, {**node, "metadata": {**node["metadata"], "annotations": {"k8sim/node-token": node_token}}})
                    # kubeadm grants bootstrap tokens get on nodes (ClusterRole kubeadm:get-nodes, 1.18+): join checks the name first
                    if who == "bootstrap" and not (self.command == "GET" and len(parts) == 4):
                        return self.status(403, "bootstrap tokens may only register a node or read one")
                    if self.command == "GET" and len(parts) == 3:
                        return self.reply(200, {"apiVersion": "v1", "kind": "NodeList", "items": [nodes[n] for n in sorted(nodes)]})
                    name = parts[3] if len(parts) > 3 else ""
                    if name not in nodes:
                        return self.status(404, 'nodes "%s" not found' % name)
                    if self.command == "GET":
                        return self.reply(200, nodes[name])
                    if self.command == "PATCH":
                        patch = self.body()
                        node = nodes[name]
                        if isinstance(patch, list):  # application/json-patch+json
                            patch = _json_patch_to_merge(patch)
                        for key, value in patch.get("metadata", {}).get("labels", {}).items():
                            if value is None:
                                node["metadata"]["labels"].pop(key, None)
                            else:
                                node["metadata"]["labels"][key] = value
                        for key, value in patch.get("spec", {}).items():
                            if value is None or value is False:
                                node["spec"].pop(key, None)
                            else:
                                node["spec"][key] = value
                        return self.reply(200, node)
                    if self.command == "DELETE":
                        nodes.pop(name)
                        return self.reply(200, {"kind": "Status", "status": "Success"})
                if who == "bootstrap":
                    return self.status(403, "bootstrap tokens may only register a node")
                pods = st.setdefault("pods", [])
                if url.path == "/api/v1/pods":
                    sel = q.get("fieldSelector", "")
                    node = sel.split("=", 1)[1] if sel.startswith("spec.nodeName=") else None
                    items = [p for p in pods if node in (None, p["spec"]["nodeName"])]
                    return self.reply(200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items})
                if len(parts) >= 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods":
                    pod = next((p for p in pods if (p["metadata"]["namespace"], p["metadata"]["name"]) == (parts[3], parts[5])), None)
                    if pod is None:
                        return self.status(404, 'pods "%s" not found' % parts[5])
                    if len(parts) == 6 and self.command == "GET":
                        return self.reply(200, pod)
                    if len(parts) == 7 and parts[6] == "eviction" and self.command == "POST":
                        sim = st.setdefault("pod_sim", {})
                        key = "%s/%s" % (parts[3], parts[5])
                        if sim.get(key, 0) > 0:  # a PodDisruptionBudget says not now
                            sim[key] -= 1
                            return self.status(429, "Cannot evict pod as it would violate the pod's disruption budget.")
                        pods.remove(pod)
                        return self.reply(201, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": pod["metadata"]})
                if url.path == "/k8sim/v1/pods" and who == "admin" and self.command == "POST":
                    req = self.body()
                    pods.append(req["pod"])
                    st.setdefault("pod_sim", {})["%s/%s" % (req["pod"]["metadata"]["namespace"], req["pod"]["metadata"]["name"])] = req.get(
                        "pdb_refusals", 0
                    )
                    return self.reply(201, req["pod"])
                if url.path == "/k8sim/v1/apply" and who == "admin":
                    results = []
                    objects = st.setdefault("objects", [])
                    for obj in self.body()["items"]:
                        ident = (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
                        old = next(
                            (o for o in objects if (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) == ident), None
                        )
                        verb = "created" if old is None else ("unchanged" if old == obj else "configured")
                        if old is not None:
                            objects.remove(old)
                        objects.append(obj)
                        results.append("%s/%s %s" % (obj["kind"].lower(), obj["metadata"]["name"], verb))
                    return self.reply(200, {"results": results})
                if url.path == "/k8sim/v1/objects":
                    for o in st.get("objects", []):
                        if o["kind"].lower() == q.get("kind", "").lower() and o["metadata"]["name"] == q.get("name"):
                            if o["metadata"].get("namespace", "") == q.get("namespace", o["metadata"].get("namespace", "")):
                                return self.reply(200, o)
                    return self.status(404, '%s "%s" not found' % (q.get("kind"), q.get("name")))
                return self.status(404, "the server could not find the requested resource (SIMULATED API: %s)" % url.path)

        do_GET = do_POST = do_PATCH = do_DELETE = handle_any

    srv = ThreadingHTTPServer(("0.0.0.0", PORT), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(PKI, "apiserver.crt"), os.path.join(PKI, "apiserver.key"))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.serve_forever()


# ----------------------------------------------------------------------------- kubelet
def kubelet(argv):
    if argv[:1] in (["--version"], ["version"]):
        print("Kubernetes v" + VERSION)
        return 0
    conf = os.path.join(ETC_K8S, "kubelet.conf")
    if not os.path.exists(conf) and not os.path.exists(os.path.join(ETC_K8S, "admin.conf")):
        sys.stderr.write("kubelet (SIMULATED): %s not found: this node has not joined a cluster yet\n" % conf)
        return 1
    print("kubelet (SIMULATED, rackforge lab): running with %s" % " ".join(argv))
    sys.stdout.flush()
    while True:
        time.sleep(3600)


def main():
    prog = os.path.basename(sys.argv[0])
    argv = sys.argv[1:]
    if prog in ("k8sim", "k8sim.py") and argv:
        prog, argv = argv[0], argv[1:]
    tools = {"kubeadm": kubeadm, "kubectl": kubectl, "kubelet": kubelet, "apiserver": apiserver}
    if prog not in tools:
        sys.stderr.write("k8sim: call as one of %s\n" % ", ".join(tools))
        return 2
    return tools[prog](argv) or 0


if __name__ == "__main__":
    sys.exit(main())
