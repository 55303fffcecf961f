"""The rackforge_settings action plugin run by a real ansible-playbook on the controller (it never
connects to a host): a rule whose `when` reads another role's setting applies when the role is
checked alone; a derived variable that cannot be rendered is a problem; a no_log setting's value
is never printed."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
# what an operator must set for the device plugin (the pins), here any well-formed sha256
PINS = {"nvidia_device_plugin_image_digest": "a" * 64, "nvidia_device_plugin_manifest_checksum": "b" * 64}


def check(tmp_path, task, extra):
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [{"name": "check", "rackforge_settings": task, "vars": extra.pop("vars", {})}],
        }
    ]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    res = subprocess.run(
        ["ansible-playbook", "-i", "localhost,", "-c", "local", "-e", json.dumps(extra), str(tmp_path / "play.yml")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    result = json.loads(res.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return result, res.stdout + res.stderr


def test_a_rule_reading_another_roles_setting_applies_when_its_role_is_checked_alone(tmp_path):
    result, _out = check(tmp_path, {"roles": ["nvidia_device_plugin"]}, dict(PINS, container_runtime_nvidia_isolation=False))
    assert result.get("failed"), result
    assert (
        'nvidia_device_plugin_device_list_strategy = "volume-mounts": must be envvar while container_runtime_nvidia_isolation is false'
        in result["msg"]
    )
    ok, _out = check(
        tmp_path,
        {"roles": ["nvidia_device_plugin"]},
        dict(PINS, container_runtime_nvidia_isolation=False, nvidia_device_plugin_device_list_strategy="envvar"),
    )
    assert not ok.get("failed"), ok["msg"]
    # with the plugin off, its strategy does not matter
    off, _out = check(
        tmp_path, {"roles": ["nvidia_device_plugin"]}, {"container_runtime_nvidia_isolation": False, "nvidia_device_plugin_enabled": False}
    )
    assert not off.get("failed"), off["msg"]


def test_a_derived_variable_that_cannot_render_is_a_problem_and_secrets_are_not_printed(tmp_path):
    url = "hxxp://T0KEN@relay/"
    extra = {
        "monitoring_server_receivers": [{"name": "ops", "type": "webhook", "url": url}],
        "monitoring_server_listen_address": "127.0.0.1",
        "vars": {"derived_probe": "{{ {'receivers': monitoring_server_receivers} | rackforge_alertmanager_config }}"},
    }
    result, out = check(tmp_path, {"roles": ["monitoring_server"], "derived": ["derived_probe"]}, extra)
    assert result.get("failed") and "derived_probe: cannot be rendered" in result["msg"], result
    assert "T0KEN" not in out
    # a type problem of a no_log setting names it, without its value
    result, out = check(
        tmp_path,
        {"roles": ["monitoring_server"]},
        {"monitoring_server_receivers": "T0KEN", "monitoring_server_listen_address": "127.0.0.1"},
    )
    assert result.get("failed") and "monitoring_server_receivers: must be" in result["msg"], result["msg"]
    assert "T0KEN" not in out


def test_cdi_cri_needs_containerds_cdi_on_gpu_nodes_and_a_repository_needs_its_pinned_key(tmp_path):
    # a GPU node (the NVIDIA runtime on, the default) whose containerd CDI is only "auto": Debian 12's
    # 1.6.20 would be left without it and drop the plugin's CDI devices; container_runtime names it
    # ("true" as -e nvidia_device_plugin_enabled=true gives it: the rule reads it as the tasks' | bool does)
    result, _out = check(
        tmp_path,
        {"roles": ["container_runtime"]},
        {"nvidia_device_plugin_device_list_strategy": "cdi-cri", "nvidia_device_plugin_enabled": "true"},
    )
    assert (
        result.get("failed")
        and 'container_runtime_cdi = "auto": must be "true" while the device plugin hands out GPUs as CDI devices' in result["msg"]
    ), result["msg"]
    # the static CPU manager drops GPUs the hook injected (volume mounts, the default strategy)
    result, _out = check(tmp_path, {"roles": ["kubernetes_node"]}, {"kubernetes_node_cpu_manager_policy": "static"})
    assert result.get("failed") and 'kubernetes_node_cpu_manager_policy = "static": must be none while the device plugin' in result["msg"]
    # the control plane runs no plugin: its containerd may stay as it is
    ok, _out = check(
        tmp_path,
        {"roles": ["container_runtime", "nvidia_device_plugin"]},
        dict(PINS, nvidia_device_plugin_device_list_strategy="cdi-cri", container_runtime_nvidia_runtime=False),
    )
    assert not ok.get("failed"), ok["msg"]
    ok, _out = check(
        tmp_path,
        {"roles": ["container_runtime", "nvidia_device_plugin"]},
        dict(PINS, nvidia_device_plugin_device_list_strategy="cdi-cri", container_runtime_cdi="true"),
    )
    assert not ok.get("failed"), ok["msg"]
    # a repository without its key's checksum is refused before anything is fetched
    repo = {
        "name": "containerd",
        "url": "https://download.docker.com/linux/debian",
        "suite": "bookworm",
        "key_url": "https://download.docker.com/linux/debian/gpg",
    }
    result, _out = check(
        tmp_path, {"roles": ["container_runtime"]}, {"container_runtime_repository": repo, "container_runtime_package_version": "1.7.27-1"}
    )
    assert result.get("failed") and "container_runtime_repository" in result["msg"] and "needs key_checksum" in result["msg"], result["msg"]
    assert "container_runtime_package_version" in result["msg"]  # a Debian revision is not an upstream version


# the node's hardware profile the RoCE role reads (any 400 Gb/s NIC)
RDMA = {"rdma_roce_hardware": {"rdma_nic_count": 8, "rdma_rate_gbps": 400}}


def test_checks_across_settings_name_the_variable_and_run_only_once_its_own_rules_pass(tmp_path):
    # a `that` check: the CNP priority must differ from the lossless one
    result, _out = check(tmp_path, {"roles": ["rdma_roce"]}, dict(RDMA, rdma_roce_cnp_priority=3, rdma_roce_lossless_priority=3))
    assert result.get("failed") and "rdma_roce_cnp_priority = 3: must differ from rdma_roce_lossless_priority 3" in result["msg"], result
    # a `when` turns it off: with trust pcp the DSCP is not mapped by the default dscp2prio map
    ok, _out = check(tmp_path, {"roles": ["rdma_roce"]}, dict(RDMA, rdma_roce_dscp=40, rdma_roce_trust="pcp"))
    assert not ok.get("failed"), ok["msg"]
    bad, _out = check(tmp_path, {"roles": ["rdma_roce"]}, dict(RDMA, rdma_roce_dscp=40))
    assert "rdma_roce_dscp = 40: goes to priority 5 but rdma_roce_lossless_priority is 3" in bad["msg"], bad["msg"]
    # a value its own rule refuses is reported once, by that rule (the check would read nonsense)
    bad, _out = check(tmp_path, {"roles": ["rdma_roce"]}, dict(RDMA, rdma_roce_cnp_priority=9))
    assert "rdma_roce_cnp_priority = 9: must be 0..7" in bad["msg"] and "must differ" not in bad["msg"], bad["msg"]
    # a `problems` check (a filter's list): the networks overlap, named by the first of each pair
    nets = {"kubernetes_control_plane_service_cidr": "10.201.0.0/20", "kubernetes_control_plane_rdma_cidrs": ["10.201.0.0/16"]}
    bad, _out = check(tmp_path, {"roles": ["kubernetes_control_plane"]}, dict(nets, kubernetes_node_network_cidr="10.89.77.0/24"))
    assert (
        'kubernetes_control_plane_service_cidr = "10.201.0.0/20": overlaps kubernetes_control_plane_rdma_cidrs 10.201.0.0/16' in bad["msg"]
    )
    # a `problems` check with a variable: each text a problem of it (a kubelet may not set a kubernetes.io label)
    node = {
        "kubernetes_node_network_cidr": "10.89.77.0/24",
        "kubernetes_node_repo_key_checksum": "c" * 64,
        "kubernetes_node_control_plane_host": "cp1",
        "kubernetes_node_api_endpoint": "cp1:6443",
    }
    bad, _out = check(tmp_path, {"roles": ["kubernetes_node"]}, dict(node, kubernetes_node_labels={"node-role.kubernetes.io/gpu": ""}))
    assert 'kubernetes_node_labels = {"node-role.kubernetes.io/gpu": ""}: node-role.kubernetes.io/gpu: a kubelet may not set' in bad["msg"]
    ok, _out = check(
        tmp_path,
        {"roles": ["kubernetes_node"]},
        dict(node, kubernetes_node_taints=[{"key": "node-role.kubernetes.io/gpu", "effect": "NoSchedule"}]),
    )
    assert not ok.get("failed"), ok["msg"]  # NodeRestriction does not apply to taints
