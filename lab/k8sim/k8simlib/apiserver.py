"""k8sim's small HTTPS API server on :6443: the k8s-shaped paths the roles and kubectl use (SIMULATION)."""

from __future__ import annotations

import json
import os
import secrets
import ssl
import sys
import time

from k8simlib import certificates, common
from k8simlib.state import State, kubeconfig
from k8simlib.validate import TOKEN_RE, node_restriction


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

        def csrs(self, st, who, rest):
            csrs = st.setdefault("csrs", {})
            if self.command == "POST" and not rest:
                csr = certificates.create(self.body(), who)
                csrs[csr["metadata"]["name"]] = csr
                return self.reply(201, csr)
            if self.command == "GET" and not rest:
                mine = [c for n, c in sorted(csrs.items()) if who == "admin" or c["spec"]["username"] == "system:" + who]
                return self.reply(200, {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequestList", "items": mine})
            csr = csrs.get(rest[0]) if rest else None
            if csr is None or (who != "admin" and csr["spec"]["username"] != "system:" + who):
                return self.status(404, 'certificatesigningrequests.certificates.k8s.io "%s" not found' % (rest[0] if rest else ""))
            if self.command == "GET" and len(rest) == 1:
                return self.reply(200, csr)
            if self.command == "PUT" and rest[1:] == ["approval"] and who == "admin":
                conditions = self.body().get("status", {}).get("conditions") or [{}]
                try:
                    certificates.decide(csr, conditions[-1])
                except ValueError as exc:
                    return self.status(422, str(exc))
                return self.reply(200, csr)
            if self.command == "DELETE" and len(rest) == 1 and who == "admin":
                csrs.pop(rest[0])
                return self.reply(200, {"kind": "Status", "status": "Success"})
            return self.status(403, "certificatesigningrequests: %s %s is forbidden for %s" % (self.command, "/".join(rest), who))

        def body(self):
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n) or b"{}")

        def handle_any(self):
            url = urlparse(self.path)
            parts = [p for p in url.path.split("/") if p]
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            with State() as st:
                if url.path == "/version":
                    return self.reply(
                        200,
                        {"major": common.VERSION.split(".")[0], "minor": common.VERSION.split(".")[1], "gitVersion": "v" + common.VERSION},
                    )
                if url.path == "/api/v1/namespaces/kube-public/configmaps/cluster-info":
                    c = st["cluster"]
                    cfg = kubeconfig(c["server"], c["ca"].encode(), "", "")
                    return self.reply(
                        200, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-info"}, "data": {"kubeconfig": cfg}}
                    )
                who = self.who(st)
                if who is None:
                    return self.status(401, "Unauthorized")
                # kubeadm lets bootstrap tokens read the kubelet's cluster-wide configuration (join writes it)
                if url.path == "/api/v1/namespaces/kube-system/configmaps/kubelet-config" and self.command == "GET":
                    import yaml

                    data = {"kubelet": yaml.safe_dump(st["cluster"].get("kubelet") or {}, sort_keys=False)}
                    return self.reply(200, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kubelet-config"}, "data": data})
                if parts[:4] == ["apis", "certificates.k8s.io", "v1", "certificatesigningrequests"] and who != "bootstrap":
                    return self.csrs(st, who, parts[4:])
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
                    if self.command == "PATCH" and parts[4:] == ["status"]:
                        # the kubelet reports its node's capacity and allocatable (NodeRestriction: its own only)
                        if who not in ("admin", "node:" + name):
                            return self.status(403, 'nodes "%s" is forbidden: a node may only update its own status' % name)
                        status = self.body().get("status", {})
                        for key in ("capacity", "allocatable"):
                            if key in status:
                                nodes[name]["status"][key] = status[key]
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
                if url.path == "/k8sim/v1/objects" and "name" not in q:  # every object of a kind (what a kubelet watches)
                    kind = q.get("kind", "").lower()
                    return self.reply(200, {"items": [o for o in st.get("objects", []) if o["kind"].lower() == kind]})
                if url.path == "/k8sim/v1/objects":
                    for o in st.get("objects", []):
                        if o["kind"].lower() == q.get("kind", "").lower() and o["metadata"]["name"] == q.get("name"):
                            if o["metadata"].get("namespace", "") == q.get("namespace", o["metadata"].get("namespace", "")):
                                if self.command == "DELETE" and who == "admin":
                                    st["objects"].remove(o)
                                    return self.reply(200, {"kind": "Status", "status": "Success"})
                                return self.reply(200, o)
                    return self.status(404, '%s "%s" not found' % (q.get("kind"), q.get("name")))
                return self.status(404, "the server could not find the requested resource (SIMULATED API: %s)" % url.path)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = handle_any

    srv = ThreadingHTTPServer(("0.0.0.0", common.PORT), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(common.PKI, "apiserver.crt"), os.path.join(common.PKI, "apiserver.key"))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.serve_forever()
