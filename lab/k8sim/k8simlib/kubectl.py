"""The simulated kubectl: get/cordon/uncordon/drain/label/delete/apply against k8sim's API (SIMULATION)."""

from __future__ import annotations

import json
import os
import secrets
import sys
import time

from k8simlib import common
from k8simlib.common import Invalid, _duration, _flag, _pop_flag
from k8simlib.state import api, load_kubeconfig
from k8simlib.validate import label_problems


def kubectl(argv):
    args = list(argv)
    kcfg = _pop_flag(args, "--kubeconfig") or os.environ.get("KUBECONFIG") or os.path.join(common.ETC_K8S, "admin.conf")
    out = _pop_flag(args, "-o")
    if args[:1] == ["version"]:
        print(json.dumps({"clientVersion": {"gitVersion": "v" + common.VERSION}}))
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
    if verb == "get" and args[1:2] in (["csr"], ["certificatesigningrequests"], ["certificatesigningrequest"]):
        path = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
        obj = call("GET", path + ("/" + args[2] if len(args) > 2 else ""))
        if out == "json":
            print(json.dumps(obj, indent=1))
        else:
            for c in obj.get("items", [obj]):
                conds = ",".join(x["type"] for x in c["status"].get("conditions", [])) or "Pending"
                print("%s   %s   %s   %s" % (c["metadata"]["name"], c["spec"].get("signerName"), c["spec"]["username"], conds))
        return 0
    if verb == "certificate" and args[1:2] in (["approve"], ["deny"]):
        kind = "Approved" if args[1] == "approve" else "Denied"
        for name in [a for a in args[2:] if not a.startswith("-")]:
            path = "/apis/certificates.k8s.io/v1/certificatesigningrequests/" + name
            csr = call("GET", path)
            reason = "KubectlApprove" if kind == "Approved" else "KubectlDeny"
            condition = {
                "type": kind,
                "status": "True",
                "reason": reason,
                "message": "This CSR was %s by kubectl certificate %s." % (kind.lower(), args[1]),
            }
            csr["status"]["conditions"] = [*csr["status"].get("conditions", []), condition]
            call("PUT", path + "/approval", csr)
            print("certificatesigningrequest.certificates.k8s.io/%s %s" % (name, kind.lower()))
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
    if verb == "delete" and args[1:2] in (["csr"], ["certificatesigningrequest"], ["certificatesigningrequests"]):
        call("DELETE", "/apis/certificates.k8s.io/v1/certificatesigningrequests/%s" % args[2])
        print('certificatesigningrequest.certificates.k8s.io "%s" deleted' % args[2])
        return 0
    if verb == "delete" and args[1:2] in (["node"], ["nodes"]):
        call("DELETE", "/api/v1/nodes/%s" % args[2])
        print('node "%s" deleted' % args[2])
        return 0
    if verb == "delete" and len(args) >= 3:  # delete KIND NAME [-n NAMESPACE]: an applied object
        ns = args[args.index("-n") + 1] if "-n" in args else ""
        call("DELETE", "/k8sim/v1/objects?kind=%s&name=%s&namespace=%s" % (args[1], args[2], ns))
        print('%s "%s" deleted' % (args[1], args[2]))
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
        try:
            obj = call("GET", "/k8sim/v1/objects?kind=%s&name=%s&namespace=%s" % (args[1], args[2], ns))
        except Invalid as exc:
            if "--ignore-not-found" in args and "not found" in str(exc):
                return 0  # as kubectl get --ignore-not-found: nothing printed, rc 0
            raise
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
