"""The simulated kubeadm: init (a real CA, the API server unit), bootstrap tokens, join with real
discovery (SIMULATION)."""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import subprocess
import sys
import time

from k8simlib import common
from k8simlib.common import Invalid, _duration, _flag
from k8simlib.state import State, api, ca_hash, kubeconfig, node_object, openssl, write_private
from k8simlib.validate import BOOTSTRAP_DISCOVERY, DISCOVERY, TOKEN_RE, _unknown, load_docs, validate_cluster, validate_node_registration


def kubeadm(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print("kubeadm (SIMULATED, rackforge lab): init, join, token create|list, version, reset")
        return 0
    cmd, rest = argv[0], argv[1:]
    try:
        if cmd == "version":
            print(
                "v" + common.VERSION
                if "-o" in rest and "short" in rest
                else 'kubeadm version: &version.Info{GitVersion:"v%s"}' % common.VERSION
            )
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
            for path in (
                "etc/kubernetes/kubelet.conf",
                "etc/kubernetes/admin.conf",
                "var/lib/kubelet/kubeadm-flags.env",
                "var/lib/kubelet/config.yaml",
            ):
                if os.path.exists(os.path.join(common.ROOT, path)):
                    os.remove(os.path.join(common.ROOT, path))
            shutil.rmtree(os.path.join(common.KUBELET_DIR, "pki"), ignore_errors=True)  # reset empties /var/lib/kubelet
            return 0
    except Invalid as exc:
        sys.stderr.write("error execution phase %s: %s\n" % (cmd, exc))
        return 1
    sys.stderr.write("kubeadm (SIMULATED): unknown command %r\n" % " ".join(argv))
    return 1


def kubeadm_init(path):
    docs = load_docs(path)
    if "InitConfiguration" not in docs or "ClusterConfiguration" not in docs:
        raise Invalid("%s: init needs an InitConfiguration and a ClusterConfiguration" % path)
    init, cluster = docs["InitConfiguration"], docs["ClusterConfiguration"]
    if os.path.exists(os.path.join(common.ETC_K8S, "admin.conf")):
        raise Invalid("[preflight] /etc/kubernetes/admin.conf already exists (this host is initialised)")
    args, labels = validate_node_registration(init.get("nodeRegistration", {}), "InitConfiguration.nodeRegistration")
    validate_cluster(cluster)
    want = cluster.get("kubernetesVersion", "v" + common.VERSION).lstrip("v")
    if want != common.VERSION:
        raise Invalid("ClusterConfiguration.kubernetesVersion v%s: this kubeadm is v%s" % (want, common.VERSION))
    endpoint = init.get("localAPIEndpoint", {}).get("advertiseAddress")
    if not endpoint:
        raise Invalid("InitConfiguration.localAPIEndpoint.advertiseAddress is required by the stand-in")
    os.makedirs(common.PKI, exist_ok=True)
    ca_key, ca_crt = os.path.join(common.PKI, "ca.key"), os.path.join(common.PKI, "ca.crt")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca_crt, "-days", "3650", "-subj", "/CN=kubernetes")
    key, csr, crt = (os.path.join(common.PKI, "apiserver." + ext) for ext in ("key", "csr", "crt"))
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=kube-apiserver")
    ext = os.path.join(common.PKI, "apiserver.ext")
    with open(ext, "w") as fh:
        fh.write("subjectAltName=IP:%s,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default\n" % endpoint)
    openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-out", crt, "-days", "365", "-extfile", ext)
    for p in (ca_key, key):
        os.chmod(p, 0o600)
    ca_pem = open(ca_crt, "rb").read()
    admin_token, kubelet_token = secrets.token_hex(16), secrets.token_hex(16)
    server = "https://%s:%d" % (endpoint, common.PORT)
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
                # kubeadm init's kubeconfig phase: the control plane's kubelet gets its own identity
                "node_tokens": {name: kubelet_token},
                "nodes": {name: node_object(name, args.get("node-ip", endpoint), labels, taints, role="control-plane")},
                "pods": [],
                "objects": [],
            }
        )
    write_private(os.path.join(common.ETC_K8S, "admin.conf"), kubeconfig(server, ca_pem, "kubernetes-admin", admin_token))
    write_private(os.path.join(common.ETC_K8S, "kubelet.conf"), kubeconfig(server, ca_pem, "system:node:" + name, kubelet_token))
    _write_flags(args, name)
    _write_kubelet_config(docs.get("KubeletConfiguration") or {})
    subprocess.run(["systemctl", "enable", "--now", "k8sim-apiserver.service"], check=False)
    _wait_api(server, ca_pem)
    # kubeadm's kubelet-start phase: the control plane's kubelet (re)starts with its flags
    subprocess.run(["systemctl", "restart", "kubelet.service"], check=False)
    print("Your Kubernetes control-plane has initialized successfully! (SIMULATED, rackforge lab)")
    return 0


def _write_kubelet_config(doc):
    """/var/lib/kubelet/config.yaml, as kubeadm writes it for the kubelet's --config."""
    import yaml

    os.makedirs(common.KUBELET_DIR, exist_ok=True)
    doc = dict({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}, **doc)
    with open(os.path.join(common.KUBELET_DIR, "config.yaml"), "w") as fh:
        yaml.safe_dump(doc, fh, sort_keys=False)


def _write_flags(args, name):
    """kubeadm's kubelet-start phase: the kubelet's flags from nodeRegistration, with
    --hostname-override when the node's name is not the host name."""
    flags = dict(args)
    if name != os.uname().nodename.lower():
        flags["hostname-override"] = name
    os.makedirs(common.KUBELET_DIR, exist_ok=True)
    with open(os.path.join(common.KUBELET_DIR, "kubeadm-flags.env"), "w") as fh:
        fh.write('KUBELET_KUBEADM_ARGS="%s"\n' % " ".join("--%s=%s" % kv for kv in sorted(flags.items())))


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
    kubelet_conf = os.path.join(common.ETC_K8S, "kubelet.conf")
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
    os.makedirs(common.PKI, exist_ok=True)
    with open(os.path.join(common.PKI, "ca.crt"), "wb") as fh:
        fh.write(ca_pem)
    write_private(kubelet_conf, kubeconfig(server, ca_pem, "system:node:" + name, res["metadata"]["annotations"]["k8sim/node-token"]))
    _write_flags(args, name)
    # kubeadm's kubelet-start phase: the cluster's KubeletConfiguration from the kubelet-config ConfigMap
    kubelet_cm = api(server, "GET", "/api/v1/namespaces/kube-system/configmaps/kubelet-config", ca_pem=ca_pem, token=token)
    _write_kubelet_config(yaml.safe_load(kubelet_cm["data"]["kubelet"]) or {})
    subprocess.run(["systemctl", "restart", "kubelet.service"], check=False)
    print("This node has joined the cluster (SIMULATED, rackforge lab): %s at %s" % (name, ip))
    return 0
