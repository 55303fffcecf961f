"""k8sim's cluster state (/var/lib/k8sim/state.json, the stand-in's "etcd"), certificates and kubeconfigs,
the Node objects it records, and its API client (SIMULATION)."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request

from k8simlib import common
from k8simlib.common import Invalid


class State:
    def __enter__(self):
        os.makedirs(os.path.dirname(common.STATE), exist_ok=True)
        self.lock = open(common.STATE + ".lock", "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        try:
            with open(common.STATE) as fh:
                self.text = fh.read()
            self.data = json.loads(self.text)
        except (OSError, ValueError):
            self.text, self.data = None, {}
        return self.data

    def __exit__(self, *exc):
        # written only when a request changed it: the kubelets poll every few seconds
        if exc[0] is None and json.dumps(self.data, indent=1, sort_keys=True) != self.text:
            tmp = common.STATE + ".tmp"
            with open(tmp, "w") as fh:
                json.dump(self.data, fh, indent=1, sort_keys=True)
            os.replace(tmp, common.STATE)
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
    os_release = dict(line.split("=", 1) for line in _read(os.path.join(common.ROOT, "etc/os-release")).splitlines() if "=" in line)
    return {
        "machineID": _read(os.path.join(common.ROOT, "etc/machine-id")),
        "systemUUID": _read("/sys/class/dmi/id/product_uuid") or _read(os.path.join(common.ROOT, "etc/machine-id")),
        "bootID": _read("/proc/sys/kernel/random/boot_id"),
        "kernelVersion": os.uname().release,
        "osImage": os_release.get("PRETTY_NAME", "Linux").strip('"'),
        "containerRuntimeVersion": _containerd_version(),
        "kubeletVersion": "v" + common.VERSION,
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
