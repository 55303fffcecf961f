"""Kubelet serving CSRs: the rules that approve a node's own request and refuse forged ones, on
requests made by the real openssl (the text parsed is the real `openssl req -noout -text`), and
the module's calls to kubectl (a fake kubectl holding the API's CSR list)."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess

import pytest
from ansible.module_utils.rackforge import csr as rules
from module_helper import call_module

NODE = {"name": "gpu-node-7", "address": "10.89.77.17"}


def make_request(tmp_path, subject, sans, key_type="ec"):
    key = tmp_path / "key.pem"
    algo = ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"] if key_type == "ec" else ["-algorithm", "RSA"]
    subprocess.run(["openssl", "genpkey", *algo, "-out", str(key)], check=True, capture_output=True)
    cmd = ["openssl", "req", "-new", "-key", str(key), "-subj", subject]
    if sans:
        cmd += ["-addext", "subjectAltName=" + sans]
    return subprocess.run(cmd, check=True, capture_output=True).stdout


def text_of(pem):
    return subprocess.run(["openssl", "req", "-noout", "-text"], input=pem, check=True, capture_output=True).stdout.decode()


def api_csr(pem, username="system:node:gpu-node-7", usages=("digital signature", "server auth"), name="csr-abc12"):
    return {
        "metadata": {"name": name},
        "spec": {
            "request": base64.b64encode(pem).decode(),
            "signerName": rules.SIGNER,
            "username": username,
            "groups": ["system:nodes", "system:authenticated"] if username.startswith("system:node:") else ["system:authenticated"],
            "usages": list(usages),
        },
        "status": {},
    }


def test_parse_the_real_openssl_text(tmp_path):
    pem = make_request(tmp_path, "/O=system:nodes/CN=system:node:gpu-node-7", "DNS:gpu-node-7,IP:10.89.77.17,email:x@example.org")
    assert rules.parse_openssl_req_text(text_of(pem)) == {
        "cn": "system:node:gpu-node-7",
        "o": ["system:nodes"],
        "dns": ["gpu-node-7"],
        "ip": ["10.89.77.17"],
        "other_sans": ["email:x@example.org"],
    }
    with pytest.raises(rules.CSRParseError):
        rules.parse_openssl_req_text("Certificate:\n    Data:\n")


@pytest.mark.parametrize("key_type", ["ec", "rsa"])
def test_the_nodes_own_request_is_approved(tmp_path, key_type):
    pem = make_request(tmp_path, "/O=system:nodes/CN=system:node:gpu-node-7", "DNS:gpu-node-7,IP:10.89.77.17", key_type)
    usages = ("digital signature", "server auth") + (("key encipherment",) if key_type == "rsa" else ())
    assert rules.judge(api_csr(pem, usages=usages), rules.parse_openssl_req_text(text_of(pem)), NODE) == []


@pytest.mark.parametrize(
    ("subject", "sans", "username", "usages", "needle"),
    [
        # another node asking for this node's name (a compromised node's credentials)
        (
            "/O=system:nodes/CN=system:node:gpu-node-7",
            "DNS:gpu-node-7,IP:10.89.77.17",
            "system:node:gpu-node-8",
            None,
            "requested by system:node:gpu-node-8",
        ),
        # the node asking for an address that is not its management address (a service VIP)
        (
            "/O=system:nodes/CN=system:node:gpu-node-7",
            "DNS:gpu-node-7,IP:10.96.0.1",
            None,
            None,
            "IP addresses ['10.96.0.1'] are not exactly [10.89.77.17]",
        ),
        ("/O=system:nodes/CN=system:node:gpu-node-7", "DNS:gpu-node-7,DNS:kubernetes.default,IP:10.89.77.17", None, None, "DNS names"),
        ("/O=system:masters/CN=system:node:gpu-node-7", "DNS:gpu-node-7,IP:10.89.77.17", None, None, "O=system:masters"),
        ("/O=system:nodes/CN=system:node:gpu-node-7", "DNS:gpu-node-7,IP:10.89.77.17", None, ("client auth",), "usages client auth"),
        (
            "/O=system:nodes/CN=system:node:gpu-node-7",
            "DNS:gpu-node-7,IP:10.89.77.17,URI:spiffe://x",
            None,
            None,
            "other subject alternative names URI:spiffe://x",
        ),
        (
            "/O=system:nodes/CN=system:node:gpu-node-7",
            "DNS:gpu-node-7,IP:10.89.77.17",
            "kubernetes-admin",
            None,
            "requested by kubernetes-admin",
        ),
    ],
)
def test_forged_requests_are_refused_with_the_reason(tmp_path, subject, sans, username, usages, needle):
    pem = make_request(tmp_path, subject, sans)
    kwargs = {k: v for k, v in (("username", username), ("usages", usages)) if v}
    reasons = rules.judge(api_csr(pem, **kwargs), rules.parse_openssl_req_text(text_of(pem)), NODE)
    assert any(needle in r for r in reasons), reasons


def test_the_node_a_request_speaks_for():
    names = {"gpu-node-7": {}}
    assert rules.requester_node({"spec": {"username": "system:node:gpu-node-7"}}, {"cn": "x"}, names) == "gpu-node-7"
    assert rules.requester_node({"spec": {"username": "kubernetes-admin"}}, {"cn": "system:node:gpu-node-7"}, names) == "gpu-node-7"
    assert rules.requester_node({"spec": {"username": "system:node:other"}}, {"cn": "system:node:other"}, names) is None
    assert rules.decided({"status": {"conditions": [{"type": "Approved", "status": "True"}]}}) == "Approved"
    assert rules.decided({"status": {}}) is None


def run_module(tmp_path, monkeypatch, capsys, items, nodes, check_mode=False):
    import kubelet_serving_csr

    calls = tmp_path / "calls"
    kubectl = tmp_path / "kubectl"
    (tmp_path / "csrs.json").write_text(json.dumps({"items": items}))
    kubectl.write_text(
        '#!/bin/sh\necho "$@" >> %s\ncase "$3 $4" in \'get csr\') cat %s;; *) echo ok;; esac\n' % (calls, tmp_path / "csrs.json")
    )
    kubectl.chmod(0o755)
    tools = {"kubectl": str(kubectl), "openssl": shutil.which("openssl")}  # the real openssl reads the requests
    monkeypatch.setattr(kubelet_serving_csr.AnsibleModule, "get_bin_path", lambda self, name, **kw: tools[name])
    args = {"nodes": nodes, "kubeconfig": "/admin.conf", "timeout": 1}
    res = call_module(kubelet_serving_csr, args, capsys, check_mode)
    return res, (calls.read_text().splitlines() if calls.exists() else [])


def test_module_approves_the_own_denies_the_forged_and_leaves_others(tmp_path, monkeypatch, capsys):
    own = make_request(tmp_path, "/O=system:nodes/CN=system:node:gpu-node-7", "DNS:gpu-node-7,IP:10.89.77.17")
    forged = make_request(tmp_path, "/O=system:nodes/CN=system:node:gpu-node-7", "DNS:gpu-node-7,IP:10.89.77.99")
    other = make_request(tmp_path, "/O=system:nodes/CN=system:node:elsewhere", "DNS:elsewhere")
    done = dict(api_csr(own, name="csr-old"), status={"conditions": [{"type": "Approved", "status": "True"}], "certificate": "x"})
    items = [
        api_csr(own, name="csr-own"),
        api_csr(forged, name="csr-forged", username="system:node:gpu-node-8"),
        api_csr(other, name="csr-other", username="system:node:elsewhere"),
        done,
    ]
    res, calls = run_module(tmp_path, monkeypatch, capsys, items, [dict(NODE, wait=True)])
    assert res["changed"] and res["approved"] == [{"name": "csr-own", "node": "gpu-node-7"}] and res["missing"] == []
    assert [d["name"] for d in res["denied"]] == ["csr-forged"]
    assert any("requested by system:node:gpu-node-8" in r for r in res["denied"][0]["reasons"])
    assert "--kubeconfig /admin.conf certificate approve csr-own" in calls
    assert "--kubeconfig /admin.conf certificate deny csr-forged" in calls
    assert not any("csr-other" in c or "csr-old" in c for c in calls)  # another node's, and a settled one
    # the warning the run prints is checked in tests/integration/test_kubelet_certificates.py: in one
    # pytest process ansible-core's module warnings are not reliably returned per call


def test_module_in_check_mode_changes_nothing_and_names_a_missing_request(tmp_path, monkeypatch, capsys):
    own = make_request(tmp_path, "/O=system:nodes/CN=system:node:gpu-node-7", "DNS:gpu-node-7,IP:10.89.77.17")
    res, calls = run_module(
        tmp_path,
        monkeypatch,
        capsys,
        [api_csr(own, name="csr-own")],
        [dict(NODE, wait=True), {"name": "gpu-node-9", "address": "10.0.0.9", "wait": True}],
        check_mode=True,
    )
    assert res["approved"] == [{"name": "csr-own", "node": "gpu-node-7"}] and res["missing"] == ["gpu-node-9"]
    assert not any("certificate" in c for c in calls)
