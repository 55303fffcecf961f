"""Would kube-scheduler place this pod on this node? The filter plugins that decide it for a
node alone, as kube-scheduler v1.31 implements them (pkg/scheduler/framework/plugins):

- NodeUnschedulable: a cordoned node (spec.unschedulable) takes only pods that tolerate the
  taint node.kubernetes.io/unschedulable:NoSchedule.
- NodeName: spec.nodeName, when set, is the node's name.
- NodeAffinity: every spec.nodeSelector pair is one of the node's labels, and one of the
  required nodeSelectorTerms matches (a term: all its matchExpressions/matchFields; In, NotIn,
  Exists, DoesNotExist, Gt, Lt; NotIn and DoesNotExist hold where the label is absent).
- TaintToleration: every NoSchedule/NoExecute taint is tolerated (k8s.io/api core/v1
  Toleration.ToleratesTaint: an empty effect matches every effect, an empty key with Exists
  matches every key, Exists matches every value, Equal or empty compares the value).
- NodeResourcesFit: the pod's requests (the larger of its containers' sum and its largest init
  container, plus overhead; a container limit without a request is its request, as the API
  server defaults it) fit the node's allocatable minus what its pods already request, and one
  more pod fits the node's `pods`.

A test oracle for the rackforge tests (the lab has no scheduler); the reasons read as
kube-scheduler's FailedScheduling messages name them."""

from __future__ import annotations

from ansible.module_utils.rackforge.kubelet import parse_quantity

UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def tolerates(toleration, taint):
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return toleration.get("value", "") == taint.get("value", "")
    return False


def _expression_matches(expr, labels):
    key, op, values = expr["key"], expr["operator"], expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        try:
            have, want = int(labels[key]), int(values[0])
        except (KeyError, IndexError, ValueError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def _term_matches(term, node):
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:  # an empty term matches no node
        return False
    labels = node["metadata"].get("labels") or {}
    node_fields = {"metadata.name": node["metadata"]["name"]}
    return all(_expression_matches(e, labels) for e in exprs) and all(_expression_matches(f, node_fields) for f in fields)


def _requests(container):
    resources = container.get("resources") or {}
    out = {k: parse_quantity(v) for k, v in (resources.get("limits") or {}).items()}
    out.update({k: parse_quantity(v) for k, v in (resources.get("requests") or {}).items()})
    return out


def pod_requests(spec):
    total = {}
    for c in spec.get("containers") or []:
        for k, v in _requests(c).items():
            total[k] = total.get(k, 0) + v
    for c in spec.get("initContainers") or []:
        for k, v in _requests(c).items():
            total[k] = max(total.get(k, 0), v)
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, 0) + parse_quantity(v)
    return total


def unfit(spec, node, requested=None, pods=0):
    """The reasons the scheduler would not place a pod of this spec on the node ([] = it fits).
    requested: what the node's pods already request (resource -> number); pods: how many run."""
    reasons = []
    tolerations = spec.get("tolerations") or []
    node_spec = node.get("spec") or {}
    if node_spec.get("unschedulable") and not any(tolerates(t, UNSCHEDULABLE_TAINT) for t in tolerations):
        reasons.append("node(s) were unschedulable")
    if spec.get("nodeName") and spec["nodeName"] != node["metadata"]["name"]:
        reasons.append("node(s) didn't match the requested node name")
    labels = node["metadata"].get("labels") or {}
    selector_ok = all(labels.get(k) == v for k, v in (spec.get("nodeSelector") or {}).items())
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        selector_ok = selector_ok and any(_term_matches(t, node) for t in required.get("nodeSelectorTerms") or [])
    if not selector_ok:
        reasons.append("node(s) didn't match Pod's node affinity/selector")
    for taint in node_spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(tolerates(t, taint) for t in tolerations):
            value = taint.get("value")
            reasons.append("node(s) had untolerated taint {%s%s}" % (taint["key"], ": %s" % value if value else ""))
    allocatable = {k: parse_quantity(v) for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()}
    requested = requested or {}
    if pods + 1 > allocatable.get("pods", 0):
        reasons.append("Too many pods")
    for resource, amount in sorted(pod_requests(spec).items()):
        if amount and amount > allocatable.get(resource, 0) - requested.get(resource, 0):
            reasons.append("Insufficient %s" % resource)
    return reasons
