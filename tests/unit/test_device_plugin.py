"""The NVIDIA device plugin: the manifest as rendered (module_utils/rackforge/device_plugin.py), the
nvidia_device_plugin module's read-decide-act (the join gate's decisions: test_gpu_gate.py), and
the rendered DaemonSet taken through the lab kubelet's model of where the plugin's pod runs and what
it advertises (lab/k8sim/k8simlib/deviceplugin.py, written from the Kubernetes and plugin sources,
not from the renderer)."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
import yaml
from ansible.module_utils.rackforge import device_plugin as dp
from conftest import ROOT
from module_helper import call_module

sys.path.insert(0, str(ROOT / "lab" / "k8sim"))
sys.path.insert(0, str(ROOT / "lab" / "mirror"))
from k8simlib import deviceplugin as sim
from mirror_k8s import DEVICE_PLUGIN

TAINTS = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
OPTS = {
    "image": "",
    "image_digest": "a" * 64,
    "mig_strategy": "none",
    "device_list_strategy": "volume-mounts",
    "device_id_strategy": "uuid",
    "fail_on_init_error": True,
    "time_slicing_replicas": 0,
    "node_selector": {"nvidia.com/gpu.present": "true"},
    "taints": TAINTS,
    "priority_class": "system-node-critical",
}
CONTAINERD_NVIDIA = textwrap.dedent(
    """\
    version = 2
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "nvidia"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
    """
)
UUIDS = ["GPU-%08d-0000-0000-0000-000000000000" % i for i in range(8)]


def upstream():
    return list(yaml.safe_load_all(DEVICE_PLUGIN))


def gpu_node(labels=None, taints=TAINTS):
    return {
        "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.present": "true"} if labels is None else labels},
        "spec": {"taints": taints},
    }


def split(docs):
    daemonsets = [d for d in docs if d["kind"] == "DaemonSet"]
    cms = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in docs if d["kind"] == "ConfigMap"}
    return daemonsets, cms


def plugin(docs):
    return dp.find_daemonset(docs)[1]["spec"]["template"]["spec"]


def test_the_rendered_daemonset_is_pinned_configured_and_only_for_gpu_nodes():
    src = upstream()
    docs = dp.render(src, OPTS)
    assert src == upstream()  # the input is not changed
    pod = plugin(docs)
    c = pod["containers"][0]
    assert c["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0@sha256:" + "a" * 64
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env == {
        "FAIL_ON_INIT_ERROR": "true",
        "MIG_STRATEGY": "none",
        "DEVICE_LIST_STRATEGY": "volume-mounts",
        "DEVICE_ID_STRATEGY": "uuid",
    }
    assert [e["name"] for e in c["env"]].count("FAIL_ON_INIT_ERROR") == 1  # replaced, not added twice
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["priorityClassName"] == "system-node-critical"
    assert c["volumeMounts"] == [{"name": "kubelet-device-plugins-dir", "mountPath": "/var/lib/kubelet/device-plugins"}]
    # the toolkit's isolation honours the image's NVIDIA_VISIBLE_DEVICES only with CAP_SYS_ADMIN
    assert c["securityContext"] == {"capabilities": {"add": ["SYS_ADMIN"]}}
    envvar = plugin(dp.render(upstream(), dict(OPTS, device_list_strategy="envvar")))["containers"][0]
    assert envvar["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}  # upstream's
    assert [d["kind"] for d in docs] == ["DaemonSet"]  # no time-slicing: no ConfigMap
    assert dp.render(docs, OPTS) == docs  # rendering the rendered changes nothing


def test_cdi_cri_gives_the_plugin_the_hosts_spec_dir_and_driver_root_and_switching_back_removes_them():
    # as the upstream helm chart does for cdi-cri with nvidiaDriverRoot "/": the plugin writes its spec
    # (k8s.device-plugin.nvidia.com/gpu) where containerd reads it and finds the driver at /driver-root
    docs = dp.render(upstream(), dict(OPTS, device_list_strategy="cdi-cri"))
    pod = plugin(docs)
    c = pod["containers"][0]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["DEVICE_LIST_STRATEGY"] == "cdi-cri" and env["NVIDIA_DRIVER_ROOT"] == "/"
    assert {"name": "cdi-root", "mountPath": "/var/run/cdi"} in c["volumeMounts"]
    assert {"name": "driver-root", "mountPath": "/driver-root", "readOnly": True} in c["volumeMounts"]
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["cdi-root"]["hostPath"] == {"path": "/var/run/cdi", "type": "DirectoryOrCreate"}
    assert vols["driver-root"]["hostPath"] == {"path": "/", "type": "Directory"}
    # the plugin needs NVML for CDI (it refuses the strategy without): under isolation that takes SYS_ADMIN
    assert c["securityContext"] == {"capabilities": {"add": ["SYS_ADMIN"]}}
    assert dp.render(docs, dict(OPTS, device_list_strategy="cdi-cri")) == docs  # stable
    assert dp.render(docs, OPTS) == dp.render(upstream(), OPTS)  # back to volume-mounts: nothing of CDI left


def test_an_image_override_keeps_the_digest_pin_and_drops_an_old_one():
    docs = dp.render(upstream(), dict(OPTS, image="registry.example.org/nvidia/k8s-device-plugin:v0.20.0"))
    assert plugin(docs)["containers"][0]["image"] == "registry.example.org/nvidia/k8s-device-plugin:v0.20.0@sha256:" + "a" * 64
    again = dp.render(docs, dict(OPTS, image_digest="b" * 64))
    assert plugin(again)["containers"][0]["image"] == "registry.example.org/nvidia/k8s-device-plugin:v0.20.0@sha256:" + "b" * 64


def test_time_slicing_is_a_config_file_the_pod_mounts_and_a_change_rolls_the_pods():
    docs = dp.render(upstream(), dict(OPTS, time_slicing_replicas=4))
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    assert cm["metadata"] == {"name": dp.CONFIG_NAME, "namespace": "kube-system"}
    cfg = yaml.safe_load(cm["data"][dp.CONFIG_KEY])
    assert cfg == {
        "version": "v1",
        "flags": {"migStrategy": "none"},
        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
    }
    pod = plugin(docs)
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["CONFIG_FILE"] == "/etc/nvidia-device-plugin/config.yaml"
    assert {"name": dp.CONFIG_NAME, "mountPath": "/etc/nvidia-device-plugin", "readOnly": True} in pod["containers"][0]["volumeMounts"]
    ann = dp.find_daemonset(docs)[1]["spec"]["template"]["metadata"]["annotations"][dp.CHECKSUM_ANNOTATION]
    other = dp.render(upstream(), dict(OPTS, time_slicing_replicas=8))
    assert dp.find_daemonset(other)[1]["spec"]["template"]["metadata"]["annotations"][dp.CHECKSUM_ANNOTATION] != ann
    off = dp.render(docs, OPTS)  # turning it off removes the ConfigMap, mount, env and annotation
    assert [d["kind"] for d in off] == ["DaemonSet"] and off == dp.render(upstream(), OPTS)


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"mig_strategy": "all"}, "nvidia_device_plugin_mig_strategy must be one of none, single, mixed"),
        (
            {"device_list_strategy": "cdi-annotations"},
            "nvidia_device_plugin_device_list_strategy must be one of envvar, volume-mounts, cdi-cri",
        ),
        ({"device_id_strategy": "serial"}, "nvidia_device_plugin_device_id_strategy"),
        ({"time_slicing_replicas": 1}, "must be 0 (off) or 2..64"),
        ({"time_slicing_replicas": 65}, "must be 0 (off) or 2..64"),
        ({"image_digest": "sha256:" + "a" * 64}, "nvidia_device_plugin_image_digest must be 64 lower-case hex digits"),
        ({"node_selector": {}}, "nvidia_device_plugin_node_selector must name at least one label"),
    ],
)
def test_bad_options_are_refused_naming_the_variable(change, needle):
    with pytest.raises(dp.ManifestError) as exc:
        dp.render(upstream(), dict(OPTS, **change))
    assert needle in str(exc.value)


def test_a_manifest_without_exactly_one_plugin_daemonset_is_refused():
    ds = upstream()[0]
    with pytest.raises(dp.ManifestError, match="found 0"):
        dp.render([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}], OPTS)
    with pytest.raises(dp.ManifestError, match="found 2"):
        dp.render([ds, ds], OPTS)


# the rendered manifest through the lab kubelet's model (its rules come from the Kubernetes docs and
# the plugin's sources, in lab/k8sim/k8simlib/deviceplugin.py)


def test_the_rendered_plugin_runs_on_a_tainted_gpu_node_and_advertises_every_gpu():
    daemonsets, cms = split(dp.render(upstream(), OPTS))
    assert sim.advertised(daemonsets, cms, gpu_node(), CONTAINERD_NVIDIA, UUIDS) == (8, "nvidia-device-plugin-daemonset runs here")
    daemonsets, cms = split(dp.render(upstream(), dict(OPTS, time_slicing_replicas=4)))
    assert sim.advertised(daemonsets, cms, gpu_node(), CONTAINERD_NVIDIA, UUIDS)[0] == 32
    assert sim.advertised(daemonsets, {}, gpu_node(), CONTAINERD_NVIDIA, UUIDS)[0] == 0  # its ConfigMap missing: the pod cannot start


def test_the_upstream_manifest_as_is_would_not_tolerate_a_taint_with_another_effect():
    taints = [{"key": "rackforge.io/gpu", "value": "yes", "effect": "NoExecute"}]
    count, why = sim.advertised(upstream(), {}, gpu_node(taints=taints), CONTAINERD_NVIDIA, UUIDS)
    assert count == 0 and "does not tolerate the taint rackforge.io/gpu=yes:NoExecute" in why
    daemonsets, cms = split(dp.render(upstream(), dict(OPTS, taints=taints)))
    assert sim.advertised(daemonsets, cms, gpu_node(taints=taints), CONTAINERD_NVIDIA, UUIDS)[0] == 8


def test_the_plugin_advertises_nothing_where_it_cannot_run():
    daemonsets, cms = split(dp.render(upstream(), OPTS))
    count, why = sim.advertised(daemonsets, cms, gpu_node(labels={}), CONTAINERD_NVIDIA, UUIDS)
    assert count == 0 and "nodeSelector nvidia.com/gpu.present=true" in why
    runc = CONTAINERD_NVIDIA.replace('default_runtime_name = "nvidia"', 'default_runtime_name = "runc"')
    count, why = sim.advertised(daemonsets, cms, gpu_node(), runc, UUIDS)
    assert count == 0 and "default runtime is runc" in why
    assert sim.advertised([], {}, gpu_node(), CONTAINERD_NVIDIA, UUIDS) == (0, "no device plugin DaemonSet")
    assert sim.advertised(daemonsets, cms, gpu_node(), CONTAINERD_NVIDIA, UUIDS[:7])[0] == 7  # a GPU fell off the bus


def test_under_gpu_isolation_only_a_plugin_with_sys_admin_sees_the_gpus():
    isolation = "accept-nvidia-visible-devices-envvar-when-unprivileged = false\naccept-nvidia-visible-devices-as-volume-mounts = true\n"
    # the upstream manifest as it is drops every capability: the toolkit ignores its NVIDIA_VISIBLE_DEVICES
    count, why = sim.advertised(
        split(dp.render(upstream(), dict(OPTS, device_list_strategy="envvar")))[0], {}, gpu_node(), CONTAINERD_NVIDIA, UUIDS, isolation
    )
    assert count == 0 and "has no SYS_ADMIN" in why
    daemonsets, cms = split(dp.render(upstream(), OPTS))  # volume-mounts: SYS_ADMIN added
    assert sim.advertised(daemonsets, cms, gpu_node(), CONTAINERD_NVIDIA, UUIDS, isolation)[0] == 8
    assert sim.advertised(upstream(), {}, gpu_node(), CONTAINERD_NVIDIA, UUIDS, "")[0] == 8  # no isolation: the envvar is honoured


def test_containerd_default_runtime_in_config_versions_2_and_3():
    assert sim.default_runtime(CONTAINERD_NVIDIA) == "nvidia"
    v3 = 'version = 3\n[plugins."io.containerd.cri.v1.runtime".containerd]\ndefault_runtime_name = "nvidia"\n'
    assert sim.default_runtime(v3) == "nvidia"
    assert sim.default_runtime("version = 2\n") == "runc"


@pytest.mark.parametrize(
    "toleration, ok",
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}, True),
        ({"key": "nvidia.com/gpu", "value": "present"}, True),  # Equal is the default operator; no effect matches all
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent", "effect": "NoSchedule"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"operator": "Exists"}, True),  # an empty key with Exists tolerates everything
        ({"value": "present"}, False),  # an empty key needs Exists
    ],
)
def test_toleration_matching_follows_kubernetes(toleration, ok):
    assert sim.tolerates([toleration], TAINTS[0]) is ok


# the nvidia_device_plugin module (a fake kubectl holding the live DaemonSet)


def fake_kubectl(tmp_path, live=None, apply_rc=0):
    calls, state = tmp_path / "calls", tmp_path / "live.json"
    if live is not None:
        state.write_text(json.dumps(live))
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(
        textwrap.dedent(
            """\
            #!/bin/sh
            echo "$@" >> {calls}
            case "$3" in
              get) [ -f {state} ] && cat {state}; exit 0;;  # --ignore-not-found: nothing printed when absent
              apply) [ {rc} = 0 ] || {{ echo 'error: refused' >&2; exit {rc}; }}; echo "daemonset.apps/nvidia-device-plugin-daemonset configured";;
            esac
            """
        ).format(calls=calls, state=state, rc=apply_rc)
    )
    kubectl.chmod(0o755)
    return kubectl, calls


def run_plugin_module(tmp_path, monkeypatch, capsys, kubectl, check_mode=False, **opts):
    import nvidia_device_plugin

    src = tmp_path / "upstream.yml"
    src.write_text(DEVICE_PLUGIN)
    monkeypatch.setattr(nvidia_device_plugin.AnsibleModule, "get_bin_path", lambda self, name, **kw: str(kubectl))
    monkeypatch.setattr(nvidia_device_plugin.filestage.os, "chown", lambda *a: None)
    args = {k: v for k, v in dict(OPTS, **opts).items()}
    args.update(src=str(src), dest=str(tmp_path / "out" / "plugin.yml"), kubeconfig="/admin.conf")
    return call_module(nvidia_device_plugin, args, capsys, check_mode)


def test_module_applies_a_new_manifest_then_nothing_then_repairs_drift(tmp_path, monkeypatch, capsys):
    kubectl, calls = fake_kubectl(tmp_path)
    res = run_plugin_module(tmp_path, monkeypatch, capsys, kubectl, check_mode=True)
    assert res["changed"] and not (tmp_path / "out" / "plugin.yml").exists()
    assert not any(" apply " in line for line in calls.read_text().splitlines())  # check mode applies nothing
    res = run_plugin_module(tmp_path, monkeypatch, capsys, kubectl)
    assert res["changed"] and "daemonset kube-system/nvidia-device-plugin-daemonset is not in the cluster" in res["reasons"]
    assert calls.read_text().splitlines()[-1] == "--kubeconfig /admin.conf apply -f %s" % (tmp_path / "out" / "plugin.yml")
    written = [d for d in yaml.safe_load_all((tmp_path / "out" / "plugin.yml").read_text()) if d]
    assert written == dp.render(upstream(), OPTS)
    # the cluster now holds it (as the API returns it, with fields of its own)
    live = json.loads(json.dumps(written[0]))
    live["status"] = {"numberReady": 1}
    (tmp_path / "live.json").write_text(json.dumps(live))
    res = run_plugin_module(tmp_path, monkeypatch, capsys, kubectl)
    assert not res["changed"] and res["reasons"] == []
    live["spec"]["template"]["spec"]["containers"][0]["image"] = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    (tmp_path / "live.json").write_text(json.dumps(live))
    res = run_plugin_module(tmp_path, monkeypatch, capsys, kubectl)
    assert res["changed"] and res["reasons"][0].startswith("the live daemonset has image nvcr.io/nvidia/k8s-device-plugin:v0.20.0, wanted")


def test_module_puts_the_file_back_when_the_cluster_refuses_it(tmp_path, monkeypatch, capsys):
    kubectl, _ = fake_kubectl(tmp_path, apply_rc=1)
    res = run_plugin_module(tmp_path, monkeypatch, capsys, kubectl)
    assert res["failed"] and res["rc"] == 1 and "refused" in res["stderr"]
    assert not (tmp_path / "out" / "plugin.yml").exists()  # the next run sees the change again


def test_expected_resources_without_mig():
    assert dp.expected_resources(8, 0) == ({"nvidia.com/gpu": 8}, None)
    assert dp.expected_resources(8, 4) == ({"nvidia.com/gpu": 32}, None)
