"""What the NVIDIA device plugin would make a node advertise (SIMULATION: k8sim runs no pods).

The real chain: the DaemonSet controller places the plugin's pod on a node whose labels match the
pod's nodeSelector and whose NoSchedule/NoExecute taints the pod tolerates (k8s.io scheduling
docs, "Taints and Tolerations"); the pod needs the NVIDIA container runtime to see the driver
(containerd's default runtime nvidia, as rackforge configures it: the static manifest sets no
runtimeClassName); the plugin then registers nvidia.com/gpu with the kubelet, one device per GPU
NVML enumerates, times the time-slicing replicas of its config file (CONFIG_FILE, api/config/v1
sharing.timeSlicing.resources[].replicas, renameByDefault false), and the kubelet reports it in
the Node's capacity and allocatable. When the plugin's pod goes away the kubelet's count goes to 0.

The plugin's own container needs the driver too: with the toolkit's
accept-nvidia-visible-devices-envvar-when-unprivileged = false the image's NVIDIA_VISIBLE_DEVICES=all
is honoured only in a privileged container (CAP_SYS_ADMIN), so a plugin without it finds no GPU.

With DEVICE_LIST_STRATEGY=cdi-cri the plugin needs NVML all the same (it refuses the CDI strategies
without it) and writes its own CDI spec, whose devices containerd injects only from 1.7.2 on with
enable_cdi. No pod runs here, so that spec is never written and no CDI device is injected: what
the lab shows of CDI is containerd's real config, read by the real containerd 1.7.24.

Here each step is checked against the real files of the node (labels and taints from the API, the
real /etc/containerd/config.toml and /etc/nvidia-container-runtime/config.toml, the real nvidia-smi
over the lab's NVML), never against what rackforge meant to do."""

from __future__ import annotations

import subprocess

RESOURCE = "nvidia.com/gpu"
CRI_V2 = "io.containerd.grpc.v1.cri"
CRI_V3 = "io.containerd.cri.v1.runtime"


def is_plugin(ds):
    for c in ds.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
        if str(c.get("image", "")).split("@")[0].rsplit(":", 1)[0].endswith("/k8s-device-plugin"):
            return c
    return None


def tolerates(tolerations, taint):
    """k8s.io/api/core/v1 Toleration.ToleratesTaint: effect empty or equal; key empty (with Exists)
    or equal; Exists matches any value, Equal (the default operator) the same value."""
    for t in tolerations or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("key") and t["key"] != taint.get("key"):
            continue
        op = t.get("operator") or "Equal"
        if not t.get("key") and op != "Exists":
            continue
        if op == "Exists" or (op == "Equal" and str(t.get("value", "")) == str(taint.get("value", ""))):
            return True
    return False


def default_runtime(config_text):
    """containerd's default runtime from config.toml (version 2 or 3); runc when unset."""
    import tomllib

    cfg = tomllib.loads(config_text)
    plugin = CRI_V3 if cfg.get("version") == 3 else CRI_V2
    return cfg.get("plugins", {}).get(plugin, {}).get("containerd", {}).get("default_runtime_name") or "runc"


def toolkit_ignores_envvar(toolkit_text):
    """The toolkit's accept-nvidia-visible-devices-envvar-when-unprivileged (a top-level key of
    /etc/nvidia-container-runtime/config.toml, true when absent) is false."""
    import tomllib

    if not toolkit_text:
        return False
    return tomllib.loads(toolkit_text).get("accept-nvidia-visible-devices-envvar-when-unprivileged", True) is False


def privileged(container):
    """The toolkit's privileged test (internal/config/image: CAP_SYS_ADMIN in the bounding set):
    a container that is privileged or adds SYS_ADMIN (containerd's CRI puts the added capabilities
    in the bounding set)."""
    sc = container.get("securityContext") or {}
    added = [str(c).upper().replace("CAP_", "") for c in (sc.get("capabilities") or {}).get("add", [])]
    return bool(sc.get("privileged")) or "SYS_ADMIN" in added or "ALL" in added


def why_not_here(ds, node, containerd_text, toolkit_text=None):
    """Why the plugin's pod would not run on this node, or would run blind (None: it runs and sees
    the GPUs)."""
    pod = ds.get("spec", {}).get("template", {}).get("spec", {})
    labels = node.get("metadata", {}).get("labels", {})
    for key, value in (pod.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return "nodeSelector %s=%s does not match the node's labels" % (key, value)
    for taint in node.get("spec", {}).get("taints", []) or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(pod.get("tolerations"), taint):
            return "the pod does not tolerate the taint %s=%s:%s" % (taint.get("key"), taint.get("value", ""), taint.get("effect"))
    if containerd_text is None:
        return "no /etc/containerd/config.toml"
    try:
        runtime = default_runtime(containerd_text)
    except ValueError as exc:
        return "containerd's config.toml cannot be read: %s" % exc
    if runtime != "nvidia":
        return "containerd's default runtime is %s, not nvidia: the plugin's pod cannot see the driver" % runtime
    try:
        ignores = toolkit_ignores_envvar(toolkit_text)
    except ValueError as exc:
        return "the container toolkit's config.toml cannot be read: %s" % exc
    if ignores and not privileged(is_plugin(ds)):
        return (
            "the toolkit ignores NVIDIA_VISIBLE_DEVICES from unprivileged containers and the plugin's has no SYS_ADMIN: NVML finds no GPU"
        )
    return None


def replicas(ds, configmaps):
    """Time-slicing replicas of nvidia.com/gpu from the plugin's config file (1 without one);
    configmaps: {(namespace, name): ConfigMap}."""
    import yaml

    c = is_plugin(ds) or {}
    env = {e.get("name"): e.get("value") for e in c.get("env", [])}
    path = env.get("CONFIG_FILE")
    if not path:
        return 1
    pod, ns = ds["spec"]["template"]["spec"], ds["metadata"].get("namespace", "")
    for m in c.get("volumeMounts", []):
        if not path.startswith(m.get("mountPath", "").rstrip("/") + "/"):
            continue
        vol = next((v for v in pod.get("volumes", []) if v.get("name") == m.get("name")), {})
        cm = configmaps.get((ns, (vol.get("configMap") or {}).get("name")))
        if cm is None:
            return 0  # the pod cannot start without its ConfigMap
        text = (cm.get("data") or {}).get(path[len(m["mountPath"].rstrip("/")) + 1 :])
        if text is None:
            return 0
        cfg = yaml.safe_load(text) or {}
        for r in (cfg.get("sharing") or {}).get("timeSlicing", {}).get("resources", []) or []:
            if r.get("name") == RESOURCE:
                return int(r.get("replicas", 1))
        return 1
    return 0  # CONFIG_FILE names a file the pod does not have: the plugin fails to start


def gpu_uuids():
    """The GPUs NVML enumerates, through the real nvidia-smi (0 when it fails: no driver)."""
    try:
        res = subprocess.run(
            ["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], check=False, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if res.returncode != 0:
        return []
    return [line.strip() for line in res.stdout.splitlines() if line.strip().startswith("GPU-")]


def advertised(daemonsets, configmaps, node, containerd_text, uuids, toolkit_text=None):
    """(count of nvidia.com/gpu, why) this node's kubelet would report."""
    plugins = [ds for ds in daemonsets if is_plugin(ds)]
    if not plugins:
        return 0, "no device plugin DaemonSet"
    reasons = []
    for ds in plugins:
        why = why_not_here(ds, node, containerd_text, toolkit_text)
        if why:
            reasons.append("%s: %s" % (ds["metadata"]["name"], why))
            continue
        return len(uuids) * replicas(ds, configmaps), "%s runs here" % ds["metadata"]["name"]
    return 0, "; ".join(reasons)
