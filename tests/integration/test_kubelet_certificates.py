"""Kubelet serving certificates on a converged lab: every kubelet (serverTLSBootstrap) got a
certificate signed by the cluster CA for exactly its name and management address, approved by
rackforge's kubelet_serving_csr on the control plane; a forged request (a node asking for
another node's address) is denied and the run says why. The certificates API, the kubelet's
request and the signer are the stand-in's (lab/k8sim, SIMULATED, with the real openssl); the
approval decision is the product's."""

from __future__ import annotations

import json
import subprocess

from conftest import not_idempotent, on_node, playbook

CP = "lab-cp1"
CURRENT = "/var/lib/kubelet/pki/kubelet-server-current.pem"
IPS = {"lab-cp1": "10.89.77.10", "lab-node1": "10.89.77.11", "lab-node2": "10.89.77.12", "lab-node3": "10.89.77.13"}

# a CSR posted with the node's own credentials (its kubelet.conf), as a compromised node could
FORGE = r"""
import base64, json, ssl, subprocess, sys, urllib.request, yaml
cfg = yaml.safe_load(open("/etc/kubernetes/kubelet.conf"))
ca = base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "/tmp/forged.key"], check=True)
pem = subprocess.run(["openssl", "req", "-new", "-key", "/tmp/forged.key", "-subj", "/O=system:nodes/CN=system:node:" + sys.argv[1],
                      "-addext", "subjectAltName=DNS:%s,IP:%s" % (sys.argv[1], sys.argv[2])], check=True, capture_output=True).stdout
body = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": "rackforge-test-forged"},
        "spec": {"request": base64.b64encode(pem).decode(), "signerName": "kubernetes.io/kubelet-serving",
                 "usages": ["digital signature", "server auth"]}}
req = urllib.request.Request(cfg["clusters"][0]["cluster"]["server"] + "/apis/certificates.k8s.io/v1/certificatesigningrequests",
                             data=json.dumps(body).encode(), method="POST",
                             headers={"Authorization": "Bearer " + cfg["users"][0]["user"]["token"], "Content-Type": "application/json"})
ctx = ssl.create_default_context(cadata=ca); ctx.check_hostname = False
print(json.load(urllib.request.urlopen(req, context=ctx))["spec"]["username"])
"""


def csrs():
    return {c["metadata"]["name"]: c for c in json.loads(on_node(CP, "kubectl", "get", "csr", "-o", "json").stdout)["items"]}


def test_every_kubelet_has_a_serving_certificate_for_exactly_its_name_and_address(converged, gpu_nodes):
    for node in [*gpu_nodes, CP]:
        on_node(node, "openssl", "verify", "-CAfile", "/etc/kubernetes/pki/ca.crt", CURRENT)
        sans = on_node(node, "openssl", "x509", "-in", CURRENT, "-noout", "-ext", "subjectAltName").stdout
        assert sans.split("\n", 1)[1].strip() == "DNS:%s, IP Address:%s" % (node, IPS[node]), sans
        usage = on_node(node, "openssl", "x509", "-in", CURRENT, "-noout", "-ext", "extendedKeyUsage").stdout
        assert "TLS Web Server Authentication" in usage
    # each was approved through the API, by rackforge, as the node's own
    issued = [c for c in csrs().values() if c["status"].get("certificate")]
    assert {c["spec"]["username"] for c in issued} >= {"system:node:" + n for n in [*gpu_nodes, CP]}
    assert all(c["status"]["conditions"][0]["reason"] == "KubectlApprove" for c in issued)


def test_a_forged_request_is_denied_with_the_reason_and_the_nodes_keep_theirs(converged):
    # lab-node2 asks for a certificate naming lab-node1's address
    res = subprocess.run(
        ["podman", "exec", "-i", "rackforge-lab-lab-node2", "python3", "-", "lab-node2", IPS["lab-node1"]],
        input=FORGE,
        capture_output=True,
        text=True,
        check=True,
    )
    assert res.stdout.strip() == "system:node:lab-node2"  # the API server recorded who asked
    try:
        run = playbook("playbooks/join.yml", "--limit", "lab-node2")
        assert run.returncode == 0, run.stdout[-3000:]
        text = " ".join((run.stdout + run.stderr).split())  # ansible prints warnings on stderr
        assert "denied rackforge-test-forged (kubelet-serving for lab-node2)" in text, run.stdout[-3000:]
        assert "IP addresses ['10.89.77.11'] are not exactly [10.89.77.12]" in text
        forged = csrs()["rackforge-test-forged"]
        assert [c["type"] for c in forged["status"]["conditions"]] == ["Denied"] and "certificate" not in forged["status"]
        # nothing else changed: a second run finds nothing to approve or deny
        again = playbook("playbooks/join.yml", "--limit", "lab-node2")
        assert again.returncode == 0 and again.recap["lab-node2"]["changed"] == 0, not_idempotent(again)
    finally:
        on_node(CP, "kubectl", "delete", "csr", "rackforge-test-forged", check=False)
    # the node keeps the certificate it had
    on_node("lab-node2", "openssl", "verify", "-CAfile", "/etc/kubernetes/pki/ca.crt", CURRENT)
