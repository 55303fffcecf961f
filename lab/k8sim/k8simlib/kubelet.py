"""The simulated kubelet (SIMULATION): it loads its configuration as the real one does (--config,
then every *.conf of --config-dir in lexical order, each a whole KubeletConfiguration document,
maps merged key by key and lists replaced, kubernetes.io "Kubelet Configuration Directory
Merging"), refuses what the real one refuses (a reservation of an unknown resource, an unknown
eviction signal, a value that is not a quantity) by exiting non-zero, and reports the Node's
capacity and allocatable (upstream's formula: capacity - kubeReserved - systemReserved - the hard
memory eviction threshold) to the API server. It runs no containers."""

from __future__ import annotations

import glob
import os
import re
import sys
import time

from k8simlib import common, cpumanager
from k8simlib.common import Invalid

# cmd/kubelet/app/server.go parseResourceList: "cannot reserve %q resource"
RESERVABLE = ("cpu", "memory", "ephemeral-storage", "pid")
# pkg/kubelet/eviction/api/types.go: the signals a Linux kubelet knows (the product's module_utils
# has its own list; this one stays apart, so the stand-in does not agree with it by construction)
SIGNALS = (
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
# resource.Quantity's suffixes (k8s.io/apimachinery/pkg/api/resource/suffix.go)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_QTY = re.compile(r"^([+-]?[0-9.]+)(([eE][+-]?[0-9]+)|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


def quantity(text, where):
    m = _QTY.match(str(text))
    if not m or m.group(1).count(".") > 1 or m.group(1) in (".", "+", "-"):
        raise Invalid("%s: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'" % where)
    suffix = m.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return float(m.group(1)) * 10 ** int(suffix[1:])
    return float(m.group(1)) * _BINARY.get(suffix, _DECIMAL.get(suffix, 1))


def merge(base, patch):
    """RFC 7386 merge: maps key by key, everything else (lists included) replaced."""
    out = dict(base)
    for key, value in patch.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_config(argv):
    import yaml

    from k8simlib.validate import validate_kubelet

    args = list(argv)
    main, conf_dir = common._pop_flag(args, "--config"), common._pop_flag(args, "--config-dir")
    cfg = {}
    paths = ([main] if main and os.path.exists(main) else []) + (sorted(glob.glob(os.path.join(conf_dir, "*.conf"))) if conf_dir else [])
    if conf_dir and not os.path.isdir(conf_dir):
        raise Invalid("failed to load kubelet config: --config-dir %s is not a directory" % conf_dir)
    for path in paths:
        with open(path) as fh:
            doc = yaml.safe_load(fh) or {}
        if doc.get("apiVersion") != "kubelet.config.k8s.io/v1beta1" or doc.get("kind") != "KubeletConfiguration":
            raise Invalid(
                "failed to load kubelet config file %s: apiVersion/kind must be kubelet.config.k8s.io/v1beta1 KubeletConfiguration" % path
            )
        validate_kubelet(doc)
        cfg = merge(cfg, doc)
    for field in ("systemReserved", "kubeReserved"):
        for name, value in (cfg.get(field) or {}).items():
            if name not in RESERVABLE:
                raise Invalid('failed to parse %s: cannot reserve "%s" resource' % (field, name))
            if quantity(value, "%s.%s" % (field, name)) < 0:
                raise Invalid("failed to parse %s: resource quantity for %r cannot be negative: %s" % (field, name, value))
    for signal, value in (cfg.get("evictionHard") or {}).items():
        if signal not in SIGNALS:
            raise Invalid("failed to parse evictionHard: unsupported eviction signal %s" % signal)
        if not str(value).endswith("%"):
            quantity(value, "evictionHard.%s" % signal)
    return cfg, paths


def node_resources(cfg, meminfo_text, cpus):
    mem = next(int(line.split()[1]) * 1024 for line in meminfo_text.splitlines() if line.startswith("MemTotal:"))
    pods = int(cfg.get("maxPods", 110))

    def reserved(resource):
        if resource == "cpu":  # reservedSystemCPUs, where set, replaces the maps' cpu
            return cpumanager.reserved_cpu(cfg, quantity)
        return sum(quantity((cfg.get(f) or {}).get(resource, 0), f) for f in ("systemReserved", "kubeReserved"))

    hard = str((cfg.get("evictionHard") or {}).get("memory.available", "100Mi"))
    hard_bytes = mem * float(hard[:-1]) / 100 if hard.endswith("%") else quantity(hard, "evictionHard.memory.available")
    alloc_mem = max(0, int(mem - reserved("memory") - hard_bytes))
    alloc_cpu = max(0, round(cpus * 1000 - reserved("cpu") * 1000))
    capacity = {"cpu": str(cpus), "memory": "%dKi" % (mem // 1024), "pods": str(pods)}
    allocatable = {"cpu": "%dm" % alloc_cpu, "memory": "%dKi" % (alloc_mem // 1024), "pods": str(pods)}
    return capacity, allocatable


def _identity(argv):
    """(server, ca, token, node name) from the kubelet's kubeconfig. The name: kubeadm's
    --hostname-override (nodeRegistration.name), the kubeconfig's system:node: user, or the host
    name (the control plane, whose stand-in kubelet uses admin.conf)."""
    import base64

    import yaml

    path = os.path.join(common.ETC_K8S, "kubelet.conf")
    if not os.path.exists(path):
        path = os.path.join(common.ETC_K8S, "admin.conf")
    with open(path) as fh:
        cfg = yaml.safe_load(fh)
    server = cfg["clusters"][0]["cluster"]["server"]
    ca = base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"])
    user = cfg["users"][0]["name"]
    name = common._pop_flag(list(argv), "--hostname-override") or (user[len("system:node:") :] if user.startswith("system:node:") else "")
    return server, ca, cfg["users"][0]["user"]["token"], name or os.uname().nodename.lower()


CONTAINERD_CONFIG = "/etc/containerd/config.toml"
TOOLKIT_CONFIG = "/etc/nvidia-container-runtime/config.toml"


def _read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def report_loop(ident, capacity, allocatable, interval=3):
    """Report the node's capacity and allocatable, with the nvidia.com/gpu the device plugin would
    register (k8simlib/deviceplugin.py), every few seconds: PATCHed when it changes, as the real
    kubelet's node status updates carry a device plugin's resources."""
    from k8simlib import deviceplugin
    from k8simlib.state import api

    server, ca, token, name = ident

    def call(method, path, body=None):
        return api(server, method, path, ca_pem=ca, token=token, body=body)

    said = None
    while True:
        try:
            node = call("GET", "/api/v1/nodes/%s" % name)
            daemonsets = call("GET", "/k8sim/v1/objects?kind=DaemonSet")["items"]
            cms = {
                (c["metadata"].get("namespace", ""), c["metadata"]["name"]): c
                for c in call("GET", "/k8sim/v1/objects?kind=ConfigMap")["items"]
            }
            count, why = deviceplugin.advertised(
                daemonsets, cms, node, _read(CONTAINERD_CONFIG), deviceplugin.gpu_uuids(), _read(TOOLKIT_CONFIG)
            )
            cap, alloc = dict(capacity), dict(allocatable)
            if count:
                cap[deviceplugin.RESOURCE] = alloc[deviceplugin.RESOURCE] = str(count)
            if (count, why) != said:
                print("kubelet (SIMULATED): %s %d (%s)" % (deviceplugin.RESOURCE, count, why))
                sys.stdout.flush()
                said = (count, why)
            status = node.get("status", {})
            if status.get("capacity") != cap or status.get("allocatable") != alloc:
                call("PATCH", "/api/v1/nodes/%s/status" % name, {"status": {"capacity": cap, "allocatable": alloc}})
        except (OSError, Invalid, KeyError, ValueError) as exc:
            print("kubelet (SIMULATED): node status not updated: %s" % exc)
            sys.stdout.flush()
        time.sleep(interval)


def serving_certificate(ident, node_ip):
    """serverTLSBootstrap: the kubelet's certificate manager asks for its serving certificate with
    an ECDSA P-256 key, subject O=system:nodes, CN=system:node:<name>, SANs its host name and its
    addresses (here the Hostname and the InternalIP it registers), usages digital signature and
    server auth (pkg/kubelet/certificate); it waits for the signed certificate and keeps it as
    pki/kubelet-server-current.pem. Returns when it has one; a denied or failed request is retried
    after a pause, as the real manager backs off."""
    import base64
    import subprocess

    from k8simlib.state import api

    server, ca, token, name = ident
    pki = os.path.join(common.KUBELET_DIR, "pki")
    current = os.path.join(pki, "kubelet-server-current.pem")
    if os.path.exists(current):
        return
    os.makedirs(pki, exist_ok=True)
    key = os.path.join(pki, "kubelet-server.key.tmp")
    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key], check=True, capture_output=True
    )
    sans = "DNS:%s" % name + (",IP:%s" % node_ip if node_ip else "")
    req = subprocess.run(
        ["openssl", "req", "-new", "-key", key, "-subj", "/O=system:nodes/CN=system:node:%s" % name, "-addext", "subjectAltName=" + sans],
        check=True,
        capture_output=True,
    ).stdout
    body = {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"generateName": "csr-"},
        "spec": {
            "request": base64.b64encode(req).decode(),
            "signerName": "kubernetes.io/kubelet-serving",
            "usages": ["digital signature", "server auth"],
        },
    }
    while True:
        try:
            csr = api(server, "POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests", ca_pem=ca, token=token, body=body)
        except (OSError, Invalid):
            time.sleep(5)
            continue
        print("kubelet (SIMULATED): certificate signing request %s (kubelet-serving) created" % csr["metadata"]["name"])
        sys.stdout.flush()
        while True:
            time.sleep(2)
            try:
                csr = api(
                    server,
                    "GET",
                    "/apis/certificates.k8s.io/v1/certificatesigningrequests/" + csr["metadata"]["name"],
                    ca_pem=ca,
                    token=token,
                )
            except (OSError, Invalid):
                continue
            if csr["status"].get("certificate"):
                stamp = time.strftime("%Y-%m-%d-%H-%M-%S")
                path = os.path.join(pki, "kubelet-server-%s.pem" % stamp)
                with open(path, "wb") as fh:
                    fh.write(base64.b64decode(csr["status"]["certificate"]) + open(key, "rb").read())
                os.chmod(path, 0o600)
                os.symlink(os.path.basename(path), current + ".tmp")
                os.replace(current + ".tmp", current)
                os.remove(key)
                print("kubelet (SIMULATED): serving certificate %s issued" % path)
                return
            if any(c.get("type") in ("Denied", "Failed") for c in csr["status"].get("conditions", [])):
                print(
                    "kubelet (SIMULATED): certificate signing request %s not signed: %s"
                    % (csr["metadata"]["name"], csr["status"]["conditions"])
                )
                sys.stdout.flush()
                time.sleep(30)
                break


def kubelet(argv):
    if argv[:1] in (["--version"], ["version"]):
        print("Kubernetes v" + common.VERSION)
        return 0
    conf = os.path.join(common.ETC_K8S, "kubelet.conf")
    if not os.path.exists(conf) and not os.path.exists(os.path.join(common.ETC_K8S, "admin.conf")):
        sys.stderr.write("kubelet (SIMULATED): %s not found: this node has not joined a cluster yet\n" % conf)
        return 1
    try:
        cfg, paths = load_config(argv)
        cpumanager.start(cfg, os.cpu_count() or 1, quantity)
    except Invalid as exc:
        sys.stderr.write("kubelet (SIMULATED): %s\n" % exc)
        return 1
    with open("/proc/meminfo") as fh:
        capacity, allocatable = node_resources(cfg, fh.read(), os.cpu_count() or 1)
    print("kubelet (SIMULATED, rackforge lab): running with %s; config from %s" % (" ".join(argv), ", ".join(paths) or "defaults"))
    print("kubelet (SIMULATED): capacity %s, allocatable %s" % (capacity, allocatable))
    sys.stdout.flush()
    ident = _identity(argv)
    import threading

    threading.Thread(target=report_loop, args=(ident, capacity, allocatable), daemon=True).start()
    if cfg.get("serverTLSBootstrap"):
        serving_certificate(ident, common._pop_flag(list(argv), "--node-ip"))
    while True:
        time.sleep(3600)
