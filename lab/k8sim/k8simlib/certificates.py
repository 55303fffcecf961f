"""The certificates API of the stand-in (SIMULATION): CertificateSigningRequests as the API server
keeps them (the requester's identity set by the server, never by the client), approval and
denial, and the kubernetes.io/kubelet-serving signer of kube-controller-manager, which signs an
approved request with the cluster CA only if it has the form upstream's signer requires
(pkg/apis/certificates ValidateKubeletServingCSR: O=system:nodes, CN=system:node:..., at least one
DNS or IP SAN and no e-mail or URI, usages server auth with digital signature / key encipherment)
and otherwise marks it Failed. It checks the form only: whether the names are the node's is the
approver's job (rackforge's kubelet_serving_csr module). The CSR is read with the real openssl."""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import tempfile

from k8simlib import common
from k8simlib.state import now

SERVING = "kubernetes.io/kubelet-serving"
USAGES = {"digital signature", "key encipherment", "server auth"}


def create(body, who):
    """A new CSR object from a client's body; who is the authenticated identity."""
    meta = body.get("metadata", {})
    name = meta.get("name") or (meta.get("generateName") or "csr-") + secrets.token_hex(3)
    node = who[len("node:") :] if who.startswith("node:") else None
    spec = dict(body.get("spec", {}))
    spec["username"] = "system:node:" + node if node else "kubernetes-admin"
    spec["groups"] = ["system:nodes", "system:authenticated"] if node else ["kubeadm:cluster-admins", "system:authenticated"]
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name, "creationTimestamp": now()},
        "spec": spec,
        "status": {},
    }


def _openssl(*args, data=None):
    return subprocess.run(["openssl", *args], input=data, capture_output=True, check=False)


def form_problems(csr):
    """Why upstream's kubelet-serving signer would refuse this request ([] = it signs)."""
    pem = base64.b64decode(csr["spec"].get("request", ""))
    subj = _openssl("req", "-noout", "-subject", "-nameopt", "RFC2253", data=pem)
    if subj.returncode != 0:
        return ["the request is not a PEM certificate request"]
    parts = dict(p.split("=", 1) for p in subj.stdout.decode().strip().removeprefix("subject=").split(",") if "=" in p)
    problems = []
    if parts.get("O") != "system:nodes" or not parts.get("CN", "").startswith("system:node:"):
        problems.append("subject must be O=system:nodes, CN=system:node:<name>")
    ext = _openssl("req", "-noout", "-text", "-reqopt", "no_header,no_version,no_subject,no_pubkey,no_sigdump", data=pem).stdout.decode()
    lines = ext.splitlines()
    at = next((i for i, line in enumerate(lines) if "Subject Alternative Name" in line), None)
    entries = [e.strip() for e in lines[at + 1].split(",") if e.strip()] if at is not None and at + 1 < len(lines) else []
    if not any(e.startswith(("DNS:", "IP Address:")) for e in entries):
        problems.append("DNS or IP subjectAltName is required")
    if any(e.startswith(("email:", "URI:")) for e in entries):
        problems.append("email and URI subjectAltNames are not allowed")
    usages = set(csr["spec"].get("usages") or [])
    if "server auth" not in usages or usages - USAGES:
        problems.append("usages must be server auth with digital signature or key encipherment")
    return problems


def sign(csr):
    """kube-controller-manager's csrsigning for an approved kubelet-serving CSR: status.certificate,
    or a Failed condition saying why."""
    problems = form_problems(csr)
    if problems:
        csr["status"].setdefault("conditions", []).append(
            {
                "type": "Failed",
                "status": "True",
                "reason": "SignerValidationFailure",
                "message": "; ".join(problems),
                "lastUpdateTime": now(),
            }
        )
        return
    with tempfile.TemporaryDirectory() as tmp:
        req, ext = os.path.join(tmp, "req.pem"), os.path.join(tmp, "ext.cnf")
        with open(req, "wb") as fh:
            fh.write(base64.b64decode(csr["spec"]["request"]))
        with open(ext, "w") as fh:
            fh.write("extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\nbasicConstraints=critical,CA:FALSE\n")
        res = _openssl(
            "x509", "-req", "-in", req, "-CA", os.path.join(common.PKI, "ca.crt"), "-CAkey", os.path.join(common.PKI, "ca.key"),
            "-CAcreateserial", "-days", "365", "-copy_extensions", "copyall", "-extfile", ext,
        )  # fmt: skip
    if res.returncode != 0:
        csr["status"].setdefault("conditions", []).append(
            {"type": "Failed", "status": "True", "reason": "SigningError", "message": res.stderr.decode()[-300:], "lastUpdateTime": now()}
        )
        return
    csr["status"]["certificate"] = base64.b64encode(res.stdout).decode()


def decide(csr, condition):
    """Approve or deny (the /approval subresource); signing follows approval."""
    kind = condition.get("type")
    if kind not in ("Approved", "Denied"):
        raise ValueError("conditions[].type: %r is not Approved or Denied" % kind)
    if any(c.get("type") in ("Approved", "Denied") for c in csr["status"].get("conditions", [])):
        raise ValueError("the CSR is already %s" % csr["status"]["conditions"][0]["type"])
    csr["status"].setdefault("conditions", []).append(dict(condition, status="True", lastUpdateTime=now()))
    if kind == "Approved" and csr["spec"].get("signerName") == SERVING:
        sign(csr)
