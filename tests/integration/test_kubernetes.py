"""Kubernetes in the lab (SIMULATED control plane and kubelet, lab/k8sim; real containerd):
merge-not-clobber of containerd's config, only healthy nodes join, joins are idempotent and
sliceable, and no join token reaches the output or a log."""

from __future__ import annotations

import json

import pytest
import tomllib
import yaml
from conftest import ROOT, node_state, not_idempotent, on_node, playbook
from kube_scheduling import unfit

CP = "lab-cp1"
CRI = "io.containerd.grpc.v1.cri"


def api_nodes():
    """{name: (InternalIP, labels, taints)} as the control plane recorded them."""
    out = on_node(CP, "kubectl", "get", "nodes", "-o", "json").stdout
    return {
        n["metadata"]["name"]: (n["status"]["addresses"][0]["address"], n["metadata"]["labels"], n["spec"].get("taints", []))
        for n in json.loads(out)["items"]
    }


def unjoin(node):
    """Take a node out of the cluster as an operator would: kubeadm reset, delete the Node."""
    on_node(node, "kubeadm", "reset", "-f")
    on_node(CP, "kubectl", "delete", "node", node)


def tokens():
    state = json.loads(on_node(CP, "cat", "/var/lib/k8sim/state.json").stdout)
    return [(t["id"], t["secret"]) for t in state["tokens"]]


def containerd_pid(node):
    pid = on_node(node, "systemctl", "show", "-p", "MainPID", "--value", "containerd").stdout.strip()
    assert pid not in ("", "0"), "containerd is not running on %s" % node
    return pid


def test_a_runtime_added_by_hand_survives_and_drift_is_repaired(converged):
    node = "lab-node1"
    path = "/etc/containerd/config.toml"
    original = on_node(node, "cat", path).stdout
    cfg = tomllib.loads(original)
    hand = original.replace("SystemdCgroup = true", "SystemdCgroup = false", 1)
    hand += '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]\nruntime_type = "io.containerd.kata.v2"\n'
    on_node(node, "python3", "-c", "import sys; open(%r, 'w').write(sys.argv[1])" % path, hand)
    pid = containerd_pid(node)
    try:
        res = playbook("playbooks/runtime.yml", "--limit", node, "--diff")
        assert res.returncode == 0 and res.recap[node]["changed"] >= 1, res.stdout[-2000:]
        assert containerd_pid(node) != pid  # restarted: the repaired config is the one it runs
        after = tomllib.loads(on_node(node, "cat", path).stdout)
        runtimes = after["plugins"][CRI]["containerd"]["runtimes"]
        assert runtimes["kata"] == {"runtime_type": "io.containerd.kata.v2"}  # kept
        assert runtimes["runc"]["options"]["SystemdCgroup"] is True  # repaired
        assert runtimes["nvidia"] == cfg["plugins"][CRI]["containerd"]["runtimes"]["nvidia"]
        assert on_node(node, "systemctl", "is-active", "containerd").stdout.strip() == "active"
        again = playbook("playbooks/runtime.yml", "--limit", node)
        assert again.returncode == 0 and again.recap[node]["changed"] == 0, not_idempotent(again)
    finally:
        on_node(node, "python3", "-c", "import sys; open(%r, 'w').write(sys.argv[1])" % path, original)


def test_gpu_isolation_set_back_when_changed_by_hand(converged):
    node = "lab-node2"
    path = "/etc/nvidia-container-runtime/config.toml"
    original = on_node(node, "cat", path).stdout
    opened = original.replace(
        "accept-nvidia-visible-devices-envvar-when-unprivileged = false", "accept-nvidia-visible-devices-envvar-when-unprivileged = true"
    )
    assert opened != original
    on_node(node, "python3", "-c", "import sys; open(%r, 'w').write(sys.argv[1])" % path, opened)
    pid = containerd_pid(node)
    try:
        check = playbook("playbooks/runtime.yml", "--limit", node, "--check", "--diff")
        assert check.returncode == 0 and check.recap[node]["changed"] == 1, check.stdout[-2000:]
        assert "+accept-nvidia-visible-devices-envvar-when-unprivileged = false" in check.stdout
        assert on_node(node, "cat", path).stdout == opened  # check mode wrote nothing
        res = playbook("playbooks/runtime.yml", "--limit", node)
        assert res.returncode == 0 and res.recap[node]["changed"] == 1, res.stdout[-2000:]
        assert on_node(node, "cat", path).stdout == original
        assert containerd_pid(node) == pid  # the runtime reads the file per container: no restart
    finally:
        on_node(node, "python3", "-c", "import sys; open(%r, 'w').write(sys.argv[1])" % path, original)


def test_an_unhealthy_node_is_not_joined_and_joins_once_healthy_without_leaking_its_token(converged, faulted):
    node = "lab-node3"
    before = api_nodes()[node]
    unjoin(node)
    faulted(node, "rdma_port_down", "ca=mlx5_1")
    res = playbook("playbooks/kubernetes.yml", "--limit", "%s,%s" % (node, CP), "-vv")
    assert res.returncode != 0 and res.recap[node]["failed"] == 1
    assert "%s: UNHEALTHY, excluded:" % node in " ".join(res.stdout.split())
    assert node not in api_nodes()
    assert on_node(node, "test", "-e", "/etc/kubernetes/kubelet.conf", check=False).returncode != 0
    on_node(node, "/usr/local/sbin/hwsim", "fault", "clear")
    res = playbook("playbooks/kubernetes.yml", "--limit", "%s,%s" % (node, CP), "-vv")
    assert res.returncode == 0 and res.recap[node]["changed"] >= 1, res.stdout[-3000:]
    assert api_nodes()[node][0] == before[0] == "10.89.77.13"
    assert api_nodes()[node][1:] == before[1:]
    # the token was made for this join; neither it nor its secret appears anywhere
    made = tokens()
    assert made
    logs = on_node(CP, "journalctl", "--no-pager", "-o", "cat").stdout + on_node(node, "journalctl", "--no-pager", "-o", "cat").stdout
    for tid, secret in made:
        assert secret not in res.stdout and secret not in res.stderr
        assert secret not in logs
        assert "%s.%s" % (tid, secret) not in res.stdout
    assert on_node(node, "test", "-e", "/etc/kubernetes/rackforge-join.yaml", check=False).returncode != 0
    again = playbook("playbooks/kubernetes.yml", "--limit", "%s,%s" % (node, CP))
    assert again.returncode == 0 and all(r["changed"] == 0 for r in again.recap.values()), not_idempotent(again)


def test_site_in_two_limit_slices_gives_the_same_end_state_as_one_run(converged, gpu_nodes):
    whole = api_nodes()
    for node in gpu_nodes:
        unjoin(node)
    assert set(api_nodes()) == {CP}
    first = playbook("site.yml", "--limit", "%s,%s" % (gpu_nodes[0], CP))
    second = playbook("site.yml", "--limit", ",".join(gpu_nodes[1:]))  # the control plane is outside this slice
    assert first.returncode == 0 and second.returncode == 0, (first.stdout[-2000:], second.stdout[-2000:])
    assert CP not in second.recap
    assert api_nodes() == whole


@pytest.fixture
def slice_inventory(tmp_path):
    """An AWX job slice: an inventory holding one node only (no control plane, no other nodes)."""
    lab_inv = (ROOT / "inventories" / "lab" / "hosts.yml").read_text()
    hosts = yaml.safe_load(lab_inv)["all"]["children"]["gpu_nodes"]["hosts"]
    inv_dir = tmp_path / "slice"
    inv_dir.mkdir()
    (inv_dir / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {"lab-node2": hosts["lab-node2"]}}}}}))
    (inv_dir / "group_vars").symlink_to(ROOT / "inventories" / "lab" / "group_vars")
    return inv_dir / "hosts.yml"


def test_node_preparation_runs_in_a_slice_that_holds_only_its_own_host(converged, slice_inventory):
    res = playbook("playbooks/prepare.yml", inventory=slice_inventory)
    assert res.returncode == 0, res.stdout[-3000:]
    assert set(res.recap) == {"lab-node2"} and res.recap["lab-node2"]["changed"] == 0


def test_a_drifted_hardware_label_is_corrected_from_the_control_plane(converged):
    node = "lab-node1"
    on_node(CP, "kubectl", "label", "node", node, "--overwrite", "nvidia.com/gpu.count=7")
    assert api_nodes()[node][1]["nvidia.com/gpu.count"] == "7"
    # check mode: the one label that differs, in the diff, and nothing relabelled
    dry = playbook("playbooks/join.yml", "--limit", node, "--check", "--diff")
    assert dry.returncode == 0, dry.stdout[-3000:]
    assert "-nvidia.com/gpu.count=7\n+nvidia.com/gpu.count=8" in dry.stdout, dry.stdout[-3000:]
    assert api_nodes()[node][1]["nvidia.com/gpu.count"] == "7"
    res = playbook("playbooks/join.yml", "--limit", node)
    assert res.returncode == 0 and res.recap[node]["changed"] >= 1, res.stdout[-3000:]
    task = res.stdout[res.stdout.index("TASK [kubernetes_node : Keep the labels of a joined node") :].split("\nTASK [", 1)[0]
    assert "changed: [%s -> %s" % (node, CP) in task, task
    assert api_nodes()[node][1]["nvidia.com/gpu.count"] == "8"
    again = playbook("playbooks/join.yml", "--limit", node)
    assert again.returncode == 0 and again.recap[node]["changed"] == 0


def test_a_reimaged_node_stops_before_any_change_and_rejoins_when_told(converged):
    """A host reinstalled from scratch (no kubelet.conf) whose Node object is still in the cluster:
    kubeadm join would refuse it ('a Node with name ... already exists', as the stand-in's join
    does after real kubeadm's kubelet-start check). rackforge stops first and says what to do, or,
    with kubernetes_node_rejoin_reimaged, deletes the stale object and joins again."""
    node = "lab-node3"
    before = api_nodes()[node]
    on_node(
        node,
        "sh",
        "-c",
        "systemctl stop kubelet; rm -rf /etc/kubernetes/kubelet.conf /etc/kubernetes/pki /var/lib/kubelet/kubeadm-flags.env",
    )
    state = node_state(node)
    res = playbook("playbooks/kubernetes.yml", "--limit", "%s,%s" % (node, CP))
    out = " ".join(res.stdout.split())
    assert res.returncode != 0 and res.recap[node]["failed"] == 1 and res.recap[node]["changed"] == 0
    assert "the cluster already has node/%s, but this host has not joined" % node in out
    assert "Set kubernetes_node_rejoin_reimaged: true" in out and "TASK [kubernetes_node : Join]" not in res.stdout
    assert node_state(node) == state and api_nodes()[node] == before
    res = playbook("playbooks/kubernetes.yml", "--limit", "%s,%s" % (node, CP), "-e", "kubernetes_node_rejoin_reimaged=true")
    assert res.returncode == 0, res.stdout[-3000:]
    assert "TASK [kubernetes_node : Delete the stale Node object of this re-imaged host" in res.stdout
    assert on_node(node, "test", "-e", "/etc/kubernetes/kubelet.conf", check=False).returncode == 0
    assert api_nodes()[node] == before  # registered again with the same address, labels and taints
    again = playbook("playbooks/kubernetes.yml", "--limit", "%s,%s" % (node, CP))
    assert again.returncode == 0 and all(r["changed"] == 0 for r in again.recap.values()), not_idempotent(again)


PLUGIN = "nvidia-device-plugin-daemonset"


def gpus_advertised(node):
    """(allocatable nvidia.com/gpu, unschedulable, the gate's label) of a Node, as the API has it."""
    n = json.loads(on_node(CP, "kubectl", "get", "node", node, "-o", "json").stdout)
    return (
        int(n["status"].get("allocatable", {}).get("nvidia.com/gpu", 0)),
        bool(n["spec"].get("unschedulable")),
        n["metadata"]["labels"].get("rackforge.io/gpu-gate"),
    )


def wait_for_gpus(node, count, timeout=60):
    """The stand-in kubelet re-reads every 3 s: wait until the node advertises count GPUs."""
    import time

    deadline = time.time() + timeout
    while gpus_advertised(node)[0] != count:
        assert time.time() < deadline, "%s advertises %s, not %d nvidia.com/gpu" % (node, gpus_advertised(node), count)
        time.sleep(1)


def real_gpus(node):
    """The GPUs the real nvidia-smi enumerates on the node (over the lab NVML)."""
    out = on_node(node, "nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader").stdout
    return len([line for line in out.splitlines() if line.strip()])


def test_every_gpu_node_advertises_its_gpus_through_the_device_plugin(converged, gpu_nodes):
    ds = json.loads(on_node(CP, "kubectl", "get", "daemonset", PLUGIN, "-n", "kube-system", "-o", "json").stdout)
    pod = ds["spec"]["template"]["spec"]
    image = pod["containers"][0]["image"]
    assert image.startswith("nvcr.io/nvidia/k8s-device-plugin:v0.20.0@sha256:") and len(image.split("@sha256:")[1]) == 64
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in pod["tolerations"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    # the lab runs the plugin on CDI (lab/inventory_vars: Debian 13's real containerd 1.7.24, CDI on)
    assert env["DEVICE_LIST_STRATEGY"] == "cdi-cri" and env["MIG_STRATEGY"] == "none" and env["NVIDIA_DRIVER_ROOT"] == "/"
    volumes = {v["name"]: v.get("hostPath") for v in pod["volumes"]}
    assert volumes["cdi-root"] == {"path": "/var/run/cdi", "type": "DirectoryOrCreate"} and volumes["driver-root"]["path"] == "/"
    # the toolkit's isolation (real config on the nodes) hides the GPUs from a plugin without SYS_ADMIN
    assert pod["containers"][0]["securityContext"] == {"capabilities": {"add": ["SYS_ADMIN"]}}
    for node in gpu_nodes:  # and each node's real containerd injects CDI devices
        dump = on_node(node, "containerd", "config", "dump").stdout
        assert "enable_cdi = true" in dump and on_node(node, "containerd", "--version").stdout.split()[2] == "1.7.24~ds1", node
    # the control plane runs no plugin: Debian 12's own containerd from its own sources, which auto leaves without CDI
    assert on_node(CP, "containerd", "--version").stdout.split()[2] == "1.6.20~ds1"
    assert "enable_cdi" not in on_node(CP, "containerd", "config", "dump").stdout
    for node in gpu_nodes:
        assert gpus_advertised(node) == (real_gpus(node), False, None), node
        assert real_gpus(node) in (4, 8)
    assert gpus_advertised(CP)[0] == 0  # no GPUs, no hardware label: the plugin does not run there


def test_a_node_whose_gpus_are_not_advertised_is_cordoned_and_let_back_once_they_are(converged, tmp_path):
    node = "lab-node2"
    gpus = real_gpus(node)
    on_node(CP, "kubectl", "delete", "daemonset", PLUGIN, "-n", "kube-system")
    try:
        wait_for_gpus(node, 0)
        limit = "%s,%s" % (node, CP)
        res = playbook("playbooks/join.yml", "--limit", limit, "-e", "nvidia_device_plugin_gate_timeout=10", report_dir=tmp_path)
        assert res.returncode != 0 and res.recap[node]["failed"] == 1, res.stdout[-3000:]
        assert "advertises 0 nvidia.com/gpu, expected %d" % gpus in res.stdout
        assert gpus_advertised(node) == (0, True, "cordoned")
        # the finding is in the fleet report and the node's textfile metrics
        (entry,) = [n for n in json.loads((tmp_path / "fleet.json").read_text())["nodes"] if n["host"] == node]
        assert entry["status"] == "unhealthy" and [f["check"] for f in entry["health"]["findings"]] == ["kubernetes_gpu_gate"]
        assert entry["health"]["findings"][0]["observed"] == "Ready, 0 nvidia.com/gpu allocatable"
        assert "rackforge_node_healthy 0" in on_node(node, "cat", "/var/lib/prometheus/node-exporter/rackforge.prom").stdout
        # the control plane play applies the plugin again; the next join run lets the node back
        res = playbook("playbooks/control_plane.yml", "--limit", CP)
        assert res.returncode == 0 and res.recap[CP]["changed"] >= 1, res.stdout[-3000:]
        wait_for_gpus(node, gpus)
        res = playbook("playbooks/join.yml", "--limit", "%s,%s" % (node, CP))
        assert res.returncode == 0 and res.recap[node]["changed"] >= 1, res.stdout[-3000:]
        assert gpus_advertised(node) == (gpus, False, None)
    finally:
        playbook("playbooks/kubernetes.yml", "--limit", "%s,%s" % (node, CP))
    again = playbook("playbooks/kubernetes.yml", "--limit", "%s,%s" % (node, CP))
    assert again.returncode == 0 and all(r["changed"] == 0 for r in again.recap.values()), not_idempotent(again)


def test_the_lab_kubelet_advertises_nothing_without_the_nvidia_runtime_and_runtime_yml_repairs_it(converged):
    node = "lab-node3"
    path = "/etc/containerd/config.toml"
    original = on_node(node, "cat", path).stdout
    assert 'default_runtime_name = "nvidia"' in original
    on_node(
        node,
        "python3",
        "-c",
        "import sys; open(%r, 'w').write(sys.argv[1])" % path,
        original.replace('default_runtime_name = "nvidia"', 'default_runtime_name = "runc"'),
    )
    try:
        wait_for_gpus(node, 0)
        res = playbook("playbooks/runtime.yml", "--limit", node)
        assert res.returncode == 0 and res.recap[node]["changed"] >= 1, res.stdout[-2000:]
        assert on_node(node, "cat", path).stdout == original
        wait_for_gpus(node, real_gpus(node))
    finally:
        on_node(node, "python3", "-c", "import sys; open(%r, 'w').write(sys.argv[1])" % path, original)


def test_the_seed_inference_pod_fits_every_joined_gpu_node_and_no_other(converged, gpu_nodes):
    """The seed's Deployment (examples/inference) against the Node objects the lab's nodes
    registered (labels, taints, allocatable from the device plugin stand-in), through
    kube-scheduler's filters (tests/kube_scheduling.py; the stand-in API server has no scheduler).
    CPU and memory are left out: the lab's nodes are 2-CPU containers, where a 32-CPU replica
    never fits; tests/unit/test_inference_example.py compares them on an HGX server's numbers."""
    docs = list(yaml.safe_load_all((ROOT / "examples" / "inference" / "deployment.yaml").read_text()))
    spec = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    nodes = {n["metadata"]["name"]: n for n in json.loads(on_node(CP, "kubectl", "get", "nodes", "-o", "json").stdout)["items"]}
    lab_sized = {"Insufficient cpu", "Insufficient memory"}
    for name in gpu_nodes:
        assert [r for r in unfit(spec, nodes[name]) if r not in lab_sized] == [], name
    # the control plane: no GPU labels, no nvidia.com/gpu
    assert "node(s) didn't match Pod's node affinity/selector" in unfit(spec, nodes[CP])
    # a cordoned GPU node (what the join gate leaves a node it keeps out) takes nothing
    cordoned = dict(nodes[gpu_nodes[0]], spec=dict(nodes[gpu_nodes[0]]["spec"], unschedulable=True))
    assert "node(s) were unschedulable" in unfit(spec, cordoned)
