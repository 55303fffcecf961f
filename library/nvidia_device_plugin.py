#!/usr/bin/python
"""Ansible module: render the NVIDIA device plugin's manifest for this cluster and apply it when it changed."""

from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_device_plugin
short_description: Render the NVIDIA device plugin's static manifest (pinned, configured, GPU nodes only) and apply it when changed
description:
  - Runs on the control plane. Reads the fetched upstream manifest O(src) (the static
    nvidia-device-plugin.yml of the release), renders it (module_utils/rackforge/device_plugin.py)
    with the image pinned by digest, the plugin's options in its environment, a node selector, a
    toleration for each of the GPU nodes' taints and, with time-slicing, a ConfigMap holding the
    plugin's config file; writes it to O(dest) (staged and renamed) and runs C(kubectl apply) when
    the file changed, the DaemonSet or the plugin's ConfigMap is missing, or the live DaemonSet's
    image, environment, node selector or tolerations or the ConfigMap's data differ from the
    rendered ones (changed by hand).
  - Check mode writes and applies nothing and returns the diff and what would be applied.
  - Needs PyYAML (Debian's python3-yaml) on the control plane to read the manifest.
options:
  src: {description: The upstream manifest as fetched (checksum verified)., type: path, required: true}
  dest: {description: Where the rendered manifest is written., type: path, required: true}
  image: {description: "Image name:tag to run instead of the manifest's (a mirror); empty: the manifest's.", type: str, default: ""}
  image_digest: {description: sha256 digest (64 hex digits) the image is pinned to; empty pins nothing., type: str, default: ""}
  mig_strategy: {description: MIG_STRATEGY., type: str, default: none, choices: [none, single, mixed]}
  device_list_strategy: {description: DEVICE_LIST_STRATEGY., type: str, default: volume-mounts, choices: [envvar, volume-mounts, cdi-cri]}
  device_id_strategy: {description: DEVICE_ID_STRATEGY., type: str, default: uuid, choices: [uuid, index]}
  fail_on_init_error: {description: FAIL_ON_INIT_ERROR., type: bool, default: true}
  time_slicing_replicas: {description: Time-slicing replicas of nvidia.com/gpu (0 = off)., type: int, default: 0}
  node_selector: {description: The labels a node must carry for the plugin to run there., type: dict, required: true}
  taints: {description: "The GPU nodes' taints ([{key, value, effect}]), each tolerated.", type: list, elements: dict, default: []}
  priority_class: {description: priorityClassName of the plugin's pods., type: str, default: system-node-critical}
  kubeconfig: {description: The admin kubeconfig., type: path, default: /etc/kubernetes/admin.conf}
"""

RETURN = r"""
daemonset: {description: "{namespace, name, image} of the rendered DaemonSet.", type: dict, returned: always}
applied: {description: Whether kubectl apply ran (would run, in check mode)., type: bool, returned: always}
reasons: {description: Why it was (would be) applied., type: list, returned: always}
stdout: {description: kubectl apply's output., type: str, returned: when applied}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV, filestage
from ansible.module_utils.rackforge import device_plugin as dp


def _env(container):
    return {e.get("name"): e.get("value") for e in container.get("env", [])}


def drift(live, ds, want):
    """What of the rendered DaemonSet (want: its plugin container) the live one lacks (image,
    environment, node selector, tolerations)."""
    want_pod, have_pod = ds["spec"]["template"]["spec"], live.get("spec", {}).get("template", {}).get("spec", {})
    have = next((c for c in have_pod.get("containers", []) if c.get("name") == want.get("name")), {})
    out = []
    if have.get("image") != want.get("image"):
        out.append("image %s, wanted %s" % (have.get("image"), want.get("image")))
    if _env(have) != _env(want):
        out.append("environment %s, wanted %s" % (json.dumps(_env(have), sort_keys=True), json.dumps(_env(want), sort_keys=True)))
    if (have_pod.get("nodeSelector") or {}) != want_pod.get("nodeSelector"):
        out.append("nodeSelector %s, wanted %s" % (have_pod.get("nodeSelector"), want_pod.get("nodeSelector")))
    missing = [t for t in want_pod.get("tolerations", []) if t not in have_pod.get("tolerations", [])]
    if missing:
        out.append("no tolerations %s" % json.dumps(missing, sort_keys=True))
    return out


def main():
    module = AnsibleModule(
        argument_spec={
            "src": {"type": "path", "required": True},
            "dest": {"type": "path", "required": True},
            "image": {"type": "str", "default": ""},
            "image_digest": {"type": "str", "default": ""},
            "mig_strategy": {"type": "str", "default": "none", "choices": list(dp.MIG_STRATEGIES)},
            "device_list_strategy": {"type": "str", "default": "volume-mounts", "choices": list(dp.DEVICE_LIST_STRATEGIES)},
            "device_id_strategy": {"type": "str", "default": "uuid", "choices": list(dp.DEVICE_ID_STRATEGIES)},
            "fail_on_init_error": {"type": "bool", "default": True},
            "time_slicing_replicas": {"type": "int", "default": 0},
            "node_selector": {"type": "dict", "required": True},
            "taints": {"type": "list", "elements": "dict", "default": []},
            "priority_class": {"type": "str", "default": "system-node-critical"},
            "kubeconfig": {"type": "path", "default": "/etc/kubernetes/admin.conf"},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        import yaml
    except ImportError:
        module.fail_json(msg="nvidia_device_plugin needs PyYAML on the control plane (Debian/Ubuntu: python3-yaml)")
    opts = {k: p[k] for k in ("image", "image_digest", "mig_strategy", "device_list_strategy", "device_id_strategy")}
    opts.update(
        fail_on_init_error=p["fail_on_init_error"],
        time_slicing_replicas=p["time_slicing_replicas"],
        node_selector={str(k): str(v) for k, v in p["node_selector"].items()},
        taints=p["taints"],
        priority_class=p["priority_class"],
    )
    if module.check_mode and not os.path.exists(p["src"]):  # a fresh cluster's preview: nothing fetched yet
        module.exit_json(changed=True, applied=True, reasons=["%s is not fetched yet" % p["src"]], daemonset={})
    try:
        with open(p["src"]) as fh:
            docs = list(yaml.safe_load_all(fh))
        rendered = dp.render(docs, opts)
    except (OSError, yaml.YAMLError, dp.ManifestError) as exc:
        module.fail_json(msg="cannot render the device plugin manifest %s: %s" % (p["src"], exc))
    _, ds, j = dp.find_daemonset(rendered)
    container = ds["spec"]["template"]["spec"]["containers"][j]
    text = "# rendered by rackforge (nvidia_device_plugin) from %s\n---\n%s" % (
        os.path.basename(p["src"]),
        yaml.safe_dump_all(rendered, sort_keys=False, default_flow_style=False, explicit_start=False),
    )
    data = text.encode()
    old = filestage.read_state(p["dest"])
    reasons = []
    if old["data"] != data:
        reasons.append("%s %s" % (p["dest"], "changed" if old["data"] is not None else "is new"))
    meta = ds["metadata"]
    kubectl = module.get_bin_path("kubectl", required=True)
    base = [kubectl, "--kubeconfig", p["kubeconfig"]]

    def live(kind, name, namespace):
        """The object as the API has it, or None when it is not there (--ignore-not-found prints nothing)."""
        rc, out, err = module.run_command(
            [*base, "get", kind, name, "-n", namespace, "--ignore-not-found", "-o", "json"], environ_update=C_ENV
        )
        if rc != 0:
            if module.check_mode:  # a cluster not initialised yet (the preview of a fresh run)
                module.exit_json(changed=True, applied=True, reasons=["the cluster cannot be read yet: %s" % err.strip()], daemonset={})
            module.fail_json(msg="kubectl get %s %s failed" % (kind, name), rc=rc, stdout=out, stderr=err)
        if not out.strip():
            return None
        try:
            return json.loads(out)
        except ValueError:
            module.fail_json(msg="kubectl get %s -o json printed no JSON" % kind, rc=rc, stdout=out, stderr=err)

    have = live("daemonset", meta["name"], meta["namespace"])
    if have is None:
        reasons.append("daemonset %s/%s is not in the cluster" % (meta["namespace"], meta["name"]))
    else:
        reasons.extend("the live daemonset has " + d for d in drift(have, ds, container))
    for cm in (d for d in rendered if d.get("kind") == "ConfigMap"):
        have = live("configmap", cm["metadata"]["name"], cm["metadata"]["namespace"])
        if have is None or (have.get("data") or {}) != cm["data"]:
            reasons.append(
                "configmap %s/%s is %s"
                % (cm["metadata"]["namespace"], cm["metadata"]["name"], "missing" if have is None else "not the rendered one")
            )
    result = {
        "changed": bool(reasons),
        "applied": bool(reasons),
        "reasons": reasons,
        "daemonset": {"namespace": meta["namespace"], "name": meta["name"], "image": container["image"]},
        "diff": {
            "before": (old["data"] or b"").decode(errors="replace"),
            "after": text,
            "before_header": p["dest"],
            "after_header": p["dest"],
        },
    }
    if module.check_mode or not reasons:
        module.exit_json(**result)
    if old["data"] != data:
        dest_dir = os.path.dirname(p["dest"])
        try:
            filestage.commit(
                [{"dest": p["dest"], "data": data, "mode": 0o644, "uid": 0, "gid": 0}], old["missing_dirs"], module.run_command
            )
        except OSError as exc:
            module.fail_json(msg="cannot write %s: %s" % (p["dest"], exc), dir=dest_dir)
    rc, out, err = module.run_command([*base, "apply", "-f", p["dest"]], environ_update=C_ENV)
    if rc != 0:
        # nothing half-applied: the file goes back to what the cluster last accepted, so the next run
        # sees the change again
        if old["data"] is None:
            filestage.remove([p["dest"]])
        elif old["data"] != data:
            filestage.commit(
                [{"dest": p["dest"], "data": old["data"], "mode": old["mode"], "uid": old["uid"], "gid": old["gid"]}],
                [],
                module.run_command,
            )
        module.fail_json(msg="kubectl apply -f %s failed" % p["dest"], rc=rc, stdout=out, stderr=err, reasons=reasons)
    result["stdout"] = out
    module.exit_json(**result)


if __name__ == "__main__":
    main()
