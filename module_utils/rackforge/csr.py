"""Kubelet serving certificate requests (pure): what `openssl req -noout -text` says about a CSR,
and whether a kubernetes.io/kubelet-serving CSR is one rackforge approves.

The kubelet asks for its serving certificate when serverTLSBootstrap is on; Kubernetes signs
approved kubelet-serving CSRs but approves none by itself, because the signer checks only the
form (O=system:nodes, CN=system:node:..., DNS/IP SANs, the usages), never that the names are the
node's. rackforge approves a CSR only when the requester the API server authenticated is the node
itself, the subject is that node, and the SANs are exactly its name and its management address.
"""

from __future__ import annotations

import ipaddress
import re

SIGNER = "kubernetes.io/kubelet-serving"
# k8s.io/kubernetes pkg/apis/certificates: a kubelet-serving CSR needs server auth and may add these
ALLOWED_USAGES = frozenset(("digital signature", "key encipherment", "server auth"))


class CSRParseError(ValueError):
    pass


def parse_openssl_req_text(text):
    """`openssl req -noout -text` -> {"cn", "o": [..], "dns": [..], "ip": [..], "other_sans": [..]}."""
    subject = re.search(r"^\s*Subject:\s*(.*)$", text, re.M)
    if not subject or "Certificate Request:" not in text:
        raise CSRParseError("not the text of a certificate request (no 'Certificate Request:' and 'Subject:' lines)")
    fields = {}
    for part in re.split(r",\s*(?=[A-Za-z]+\s*=)", subject.group(1).strip()):
        key, sep, value = part.partition("=")
        if sep:
            fields.setdefault(key.strip(), []).append(value.strip())
    dns, ips, other = [], [], []
    san = re.search(r"X509v3 Subject Alternative Name:.*?\n\s*(.+)$", text, re.M)
    if san:
        for entry in [e.strip() for e in san.group(1).split(",") if e.strip()]:
            kind, _, value = entry.partition(":")
            if kind == "DNS":
                dns.append(value)
            elif kind == "IP Address":
                ips.append(value)
            else:
                other.append(entry)
    return {"cn": (fields.get("CN") or [None])[0], "o": fields.get("O", []), "dns": dns, "ip": ips, "other_sans": other}


def decided(csr):
    """The condition that settled this CSR (Approved, Denied, Failed), or None while pending."""
    for cond in (csr.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Approved", "Denied", "Failed") and cond.get("status", "True") == "True":
            return cond["type"]
    return None


def judge(csr, request, node):
    """csr: the API object; request: parse_openssl_req_text() of its spec.request; node: {name,
    address}. Returns the reasons to refuse it ([] = approve)."""
    name, spec = node["name"], csr.get("spec", {})
    want_user = "system:node:" + name
    reasons = []
    if spec.get("signerName") != SIGNER:
        reasons.append("signer %s is not %s" % (spec.get("signerName"), SIGNER))
    if spec.get("username") != want_user:
        reasons.append("requested by %s, not by the node itself (%s)" % (spec.get("username"), want_user))
    if "system:nodes" not in (spec.get("groups") or []):
        reasons.append("the requester is not in the group system:nodes")
    if request["cn"] != want_user or request["o"] != ["system:nodes"]:
        reasons.append("subject CN=%s, O=%s is not CN=%s, O=system:nodes" % (request["cn"], ",".join(request["o"]), want_user))
    usages = set(spec.get("usages") or [])
    if "server auth" not in usages or usages - ALLOWED_USAGES:
        reasons.append("usages %s are not server auth with digital signature/key encipherment" % ", ".join(sorted(usages)))
    if sorted(request["dns"]) != [name]:
        reasons.append("DNS names %s are not exactly [%s]" % (request["dns"], name))
    try:
        ips = sorted(str(ipaddress.ip_address(ip)) for ip in request["ip"])
    except ValueError:
        ips = request["ip"]
    if ips != [str(ipaddress.ip_address(node["address"]))]:
        reasons.append("IP addresses %s are not exactly [%s] (the node's management address)" % (request["ip"], node["address"]))
    if request["other_sans"]:
        reasons.append("other subject alternative names %s" % ", ".join(request["other_sans"]))
    return reasons


def requester_node(csr, request, names):
    """The node (one of names) a CSR speaks for: its requester's, else the one its subject claims."""
    user = csr.get("spec", {}).get("username") or ""
    for candidate in (user, request.get("cn") or ""):
        if candidate.startswith("system:node:") and candidate[len("system:node:") :] in names:
            return candidate[len("system:node:") :]
    return None
