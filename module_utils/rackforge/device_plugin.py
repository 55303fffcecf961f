"""The NVIDIA k8s-device-plugin's static manifest, rendered for a rackforge cluster (pure: data in,
data out; library/nvidia_device_plugin.py reads and writes the files and talks to the API).

Facts from NVIDIA/k8s-device-plugin (deployments/static/nvidia-device-plugin.yml, cmd/nvidia-device-plugin
main.go, api/config/v1): the manifest is one DaemonSet in kube-system whose container runs the image
nvcr.io/nvidia/k8s-device-plugin:<tag>; the plugin takes its options from the environment
(MIG_STRATEGY none|single|mixed, DEVICE_LIST_STRATEGY envvar|volume-mounts|cdi-annotations|cdi-cri,
DEVICE_ID_STRATEGY uuid|index, FAIL_ON_INIT_ERROR, CONFIG_FILE) and, from CONFIG_FILE, a config of
version v1 whose sharing.timeSlicing.resources[] gives each resource's replicas. With time-slicing
and renameByDefault false the resource keeps its name (nvidia.com/gpu) and a node advertises
GPUs x replicas of it. MIG strategy single advertises nvidia.com/gpu (one per MIG device); mixed
advertises nvidia.com/mig-<profile> for the MIG devices and nvidia.com/gpu for the GPUs without MIG.

The plugin's own container reaches the driver through the image's NVIDIA_VISIBLE_DEVICES=all. With
the toolkit's accept-nvidia-visible-devices-envvar-when-unprivileged = false (rackforge's GPU
isolation) the toolkit honours that variable only in a container whose capability bounding set
holds CAP_SYS_ADMIN (its "privileged" test), and the static manifest drops every capability: the
plugin would see no GPU. The project's helm chart adds SYS_ADMIN whenever the plugin hands out
devices as volume mounts (requiresCapSysAdmin, upstream issue #856); so does render()."""

from __future__ import annotations

import copy
import hashlib
import json
import re

CONFIG_DIR = "/etc/nvidia-device-plugin"
CONFIG_NAME = "nvidia-device-plugin-config"
CONFIG_KEY = "config.yaml"
CHECKSUM_ANNOTATION = "rackforge.io/device-plugin-config-sha256"
MIG_STRATEGIES = ("none", "single", "mixed")
# cdi-cri needs containerd's CDI (CRI CDIDevices, read from containerd 1.7.2 on, with enable_cdi):
# Debian 12's containerd 1.6.20 has none, so the role's rules ask for container_runtime_cdi: true,
# which fails on such a containerd. cdi-annotations is not offered: containerd's CRI does not read
# the annotations, only the nvidia runtime in CDI mode does, and rackforge runs it in legacy mode.
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-cri")
# with cdi-cri the plugin writes its own CDI spec (kind k8s.device-plugin.nvidia.com/gpu) into
# /var/run/cdi, which must be the host's for containerd to find it, and generates it from the driver
# files it finds under its driver root mounted at /driver-root (cmd/nvidia-device-plugin flags
# --driver-root, --driver-root-ctr-path; the helm chart mounts both the same way). The spec's hooks
# call the host's /usr/bin/nvidia-ctk, the plugin's default --nvidia-cdi-hook-path, which the
# container toolkit installs.
CDI_VOLUMES = (
    ("cdi-root", {"hostPath": {"path": "/var/run/cdi", "type": "DirectoryOrCreate"}}, {"mountPath": "/var/run/cdi"}),
    ("driver-root", {"hostPath": {"path": "/", "type": "Directory"}}, {"mountPath": "/driver-root", "readOnly": True}),
)
DEVICE_ID_STRATEGIES = ("uuid", "index")


class ManifestError(ValueError):
    pass


def _is_plugin(container):
    return str(container.get("image", "")).split("@")[0].rsplit(":", 1)[0].endswith("/k8s-device-plugin")


def find_daemonset(docs):
    """(index, DaemonSet, container index) of the device plugin in the manifest's documents."""
    found = []
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict) or doc.get("kind") != "DaemonSet":
            continue
        containers = doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
        for j, c in enumerate(containers):
            if _is_plugin(c):
                found.append((i, doc, j))
    if len(found) != 1:
        raise ManifestError(
            "the manifest must hold exactly one DaemonSet whose container runs .../k8s-device-plugin; found %d" % len(found)
        )
    return found[0]


def plugin_config(mig_strategy, replicas):
    """The plugin's config file (api/config/v1), or None when nothing needs one (no time-slicing)."""
    if not replicas:
        return None
    return {
        "version": "v1",
        "flags": {"migStrategy": mig_strategy},
        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": int(replicas)}]}},
    }


def tolerations_for(taints):
    """A toleration for each taint of kubernetes_node_taints ({key, value?, effect})."""
    out = []
    for t in taints or []:
        tol = {"key": t["key"], "effect": t["effect"]}
        if t.get("value") not in (None, ""):
            tol.update(operator="Equal", value=str(t["value"]))
        else:
            tol["operator"] = "Exists"
        out.append(tol)
    return out


def image_ref(manifest_image, image, digest):
    """The image the DaemonSet runs, pinned by digest: the manifest's (or the override's) name and
    tag, then @sha256:<digest>."""
    ref = (image or manifest_image).split("@")[0]
    return "%s@sha256:%s" % (ref, digest) if digest else ref


def _set_env(container, values):
    env = [e for e in container.get("env", []) if e.get("name") not in values]
    env.extend({"name": k, "value": v} for k, v in values.items())
    container["env"] = env


def render(docs, opts):
    """The manifest's documents as they are applied. opts: image (override, "" = the manifest's),
    image_digest, mig_strategy, device_list_strategy, device_id_strategy, fail_on_init_error,
    time_slicing_replicas (0 = off), node_selector {label: value}, taints [kubernetes_node_taints],
    priority_class. The input is not changed."""
    problems = option_problems(opts)
    if problems:
        raise ManifestError("; ".join(problems))
    # a ConfigMap of ours from an earlier rendering goes; it is made again below when still wanted
    docs = copy.deepcopy([d for d in docs if d and not (d.get("kind") == "ConfigMap" and d.get("metadata", {}).get("name") == CONFIG_NAME)])
    i, ds, j = find_daemonset(docs)
    ns = ds.setdefault("metadata", {}).get("namespace") or "kube-system"
    ds["metadata"]["namespace"] = ns
    pod = ds.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
    c = pod["containers"][j]
    c["image"] = image_ref(c["image"], opts.get("image", ""), opts.get("image_digest", ""))
    env = {
        "MIG_STRATEGY": opts["mig_strategy"],
        "DEVICE_LIST_STRATEGY": opts["device_list_strategy"],
        "DEVICE_ID_STRATEGY": opts["device_id_strategy"],
        "FAIL_ON_INIT_ERROR": "true" if opts["fail_on_init_error"] else "false",
    }
    config = plugin_config(opts["mig_strategy"], opts.get("time_slicing_replicas", 0))
    ours = {CONFIG_NAME} | {name for name, _, _ in CDI_VOLUMES}
    volumes = [v for v in pod.get("volumes", []) if v.get("name") not in ours]
    mounts = [m for m in c.get("volumeMounts", []) if m.get("name") not in ours]
    annotations = ds["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})
    annotations.pop(CHECKSUM_ANNOTATION, None)
    extra = []
    if config:
        text = dump_yaml_like(config)
        env["CONFIG_FILE"] = "%s/%s" % (CONFIG_DIR, CONFIG_KEY)
        extra.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": CONFIG_NAME, "namespace": ns},
                "data": {CONFIG_KEY: text},
            }
        )
        volumes.append({"name": CONFIG_NAME, "configMap": {"name": CONFIG_NAME}})
        mounts.append({"name": CONFIG_NAME, "mountPath": CONFIG_DIR, "readOnly": True})
        # a changed config rolls the pods (a ConfigMap change alone restarts nothing)
        annotations[CHECKSUM_ANNOTATION] = hashlib.sha256(text.encode()).hexdigest()
    if not annotations:
        ds["spec"]["template"]["metadata"].pop("annotations")
    if opts["device_list_strategy"] == "cdi-cri":
        env["NVIDIA_DRIVER_ROOT"] = "/"
        for name, source, mount in CDI_VOLUMES:
            volumes.append(dict(source, name=name))
            mounts.append(dict(mount, name=name))
    c["env"] = [e for e in c.get("env", []) if e.get("name") not in ("CONFIG_FILE", "NVIDIA_DRIVER_ROOT")]
    _set_env(c, env)
    # the plugin's own container reaches NVML through the image's NVIDIA_VISIBLE_DEVICES=all, which the
    # toolkit (with rackforge's isolation) honours only where CAP_SYS_ADMIN is in the bounding set;
    # the CDI strategies need NVML too (the plugin refuses them without it)
    if opts["device_list_strategy"] in ("volume-mounts", "cdi-cri"):
        c["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN"]}}
    c["volumeMounts"] = mounts
    pod["volumes"] = volumes
    pod["nodeSelector"] = dict(opts["node_selector"])
    tolerations = list(pod.get("tolerations", []))
    for tol in tolerations_for(opts.get("taints")):
        if tol not in tolerations:
            tolerations.append(tol)
    pod["tolerations"] = tolerations
    if opts.get("priority_class"):
        pod["priorityClassName"] = opts["priority_class"]
    return extra + docs[:i] + [ds] + docs[i + 1 :]


def dump_yaml_like(obj):
    """JSON text (JSON is YAML): stable, so its checksum only changes when the config does."""
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def option_problems(opts):
    out = []
    if opts.get("mig_strategy") not in MIG_STRATEGIES:
        out.append("nvidia_device_plugin_mig_strategy must be one of %s, got %r" % (", ".join(MIG_STRATEGIES), opts.get("mig_strategy")))
    if opts.get("device_list_strategy") not in DEVICE_LIST_STRATEGIES:
        out.append(
            "nvidia_device_plugin_device_list_strategy must be one of %s, got %r"
            % (", ".join(DEVICE_LIST_STRATEGIES), opts.get("device_list_strategy"))
        )
    if opts.get("device_id_strategy") not in DEVICE_ID_STRATEGIES:
        out.append(
            "nvidia_device_plugin_device_id_strategy must be one of %s, got %r"
            % (", ".join(DEVICE_ID_STRATEGIES), opts.get("device_id_strategy"))
        )
    r = opts.get("time_slicing_replicas", 0)
    if not isinstance(r, int) or isinstance(r, bool) or not (r == 0 or 2 <= r <= 64):
        out.append("nvidia_device_plugin_time_slicing_replicas must be 0 (off) or 2..64, got %r" % (r,))
    digest = opts.get("image_digest", "")
    if digest and (len(digest) != 64 or any(ch not in "0123456789abcdef" for ch in digest)):
        out.append("nvidia_device_plugin_image_digest must be 64 lower-case hex digits (the sha256 after @sha256:), got %r" % digest)
    if not opts.get("node_selector"):
        out.append("nvidia_device_plugin_node_selector must name at least one label (the plugin belongs on GPU nodes only)")
    return out


# a MIG profile as nvidia-smi -L and the plugin name it: [<C>c.]<G>g.<memory>gb[+<attribute>...];
# the C part is printed only where a compute instance has fewer slices than its GPU instance
MIG_PROFILE_RE = re.compile(r"^(?:(\d+)c\.)?(\d+)g\.\d+gb(?:\+[a-z0-9]+)*$")


def expected_resources(gpus, replicas, mig_strategy="none", mig=()):
    """What the plugin advertises on a node, as ({resource: count}, None), or ({}, why) where the
    plugin refuses the node's MIG layout (it then fails to start and advertises nothing).

    gpus: the GPUs the health check counted; mig: per GPU {"index", "enabled", "devices": [MIG
    profiles as nvidia-smi -L prints them]} (nvidia_gpu_info's `mig`). The rules are the plugin's
    (internal/rm/device_map.go, internal/rm/rm.go AddDefaultResourcesToConfig):
    - none: every GPU is one nvidia.com/gpu, MIG or not;
    - single: the GPUs with MIG off are nvidia.com/gpu, and so is every MIG device; refused when a
      MIG GPU has no MIG devices, when the MIG devices are of more than one profile, or when GPUs
      with MIG off and MIG devices are both present ("the same migEnabled value");
    - mixed: the GPUs with MIG off are nvidia.com/gpu; each MIG device is nvidia.com/mig-<profile>
      ('+' in the profile read as '.'); only GPU-instance profiles (compute slices = GPU slices) are
      resources, a device of another profile makes the plugin fail.
    Time-slicing replicas apply to nvidia.com/gpu, the one resource plugin_config() shares."""
    rep = int(replicas) if replicas else 1
    if mig_strategy == "none":
        return {"nvidia.com/gpu": int(gpus) * rep}, None
    enabled = [g for g in mig if g.get("enabled")]
    whole = int(gpus) - len(enabled)
    profiles = [d for g in enabled for d in g.get("devices") or []]
    if mig_strategy == "single":
        empty = [str(g["index"]) for g in enabled if not g.get("devices")]
        if empty:
            return {}, "GPU %s has MIG enabled and no MIG devices (migStrategy single needs MIG devices on every MIG GPU)" % ", ".join(
                empty
            )
        kinds = sorted(set(profiles))
        if len(kinds) > 1:
            return {}, "its MIG devices are of more than one profile (%s); migStrategy single needs one" % ", ".join(kinds)
        if profiles and whole:
            return {}, "%d GPU(s) have MIG off and %d on; migStrategy single needs the same MIG mode on every GPU" % (whole, len(enabled))
        return {"nvidia.com/gpu": (len(profiles) if profiles else whole) * rep}, None
    out = {"nvidia.com/gpu": whole * rep}
    for profile in profiles:
        m = MIG_PROFILE_RE.match(profile)
        if not m or (m.group(1) and m.group(1) != m.group(2)):
            return {}, "MIG device profile %s is not a GPU-instance profile (migStrategy mixed advertises only those)" % profile
        name = "nvidia.com/mig-" + profile.replace("+", ".")
        out[name] = out.get(name, 0) + 1
    return out, None
