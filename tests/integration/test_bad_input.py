"""Bad input is refused before the first change: site.yml fails in the preflight or Kubernetes
validation play with a message naming the variable and the allowed values, and every host is
left exactly as it was (checksums of /etc, the simulator state and the Kubernetes stand-in's
state, changed=0 everywhere). A node setting fails the nodes; a cluster-wide one (CIDRs,
Calico) fails every host, the control plane too (when every GPU node fails the first play the
run ends there; the control plane then refuses it in a run of its own)."""

from __future__ import annotations

import json

import pytest
from conftest import node_state, on_node, playbook

CASES = [
    ({"rdma_roce_lossless_priority": 8}, "rdma_roce_lossless_priority = 8: must be 0..7"),
    ({"rdma_roce_cable_len_m": 0}, "rdma_roce_cable_len_m = 0: must be 1..999"),
    ({"rdma_roce_cable_len_m": 5000}, "rdma_roce_cable_len_m = 5000: must be 1..999"),
    ({"rdma_roce_cable_len_m": "seven"}, 'rdma_roce_cable_len_m = "seven": must be an integer'),
    ({"rdma_roce_mtu": 900}, "rdma_roce_mtu = 900: must be 1500..9978"),
    ({"rdma_roce_cable_len_m": 1000}, "rdma_roce_cable_len_m = 1000: must be 1..999"),  # the mlx5 kernel ignores >= 1000 m
    ({"rdma_roce_cnp_priority": 3}, "rdma_roce_cnp_priority = 3: must differ from rdma_roce_lossless_priority 3"),
    ({"rdma_roce_dscp": 40}, "rdma_roce_dscp = 40: goes to priority 5 but rdma_roce_lossless_priority is 3"),
    (
        {"rdma_roce_buffer_mode": "manual", "rdma_roce_lossless_buffer_bytes": 60000},
        "rdma_roce_lossless_buffer_bytes = 60000: cannot hold the PFC headroom",
    ),
    (
        {"rdma_roce_module_options": {"ib_uverbs": {"disable_raw_qp": 0}}},
        "rdma_roce_module_options.ib_uverbs: unknown parameter(s) disable_raw_qp; ib_uverbs has no parameters at all",
    ),
    (
        {"rdma_roce_module_options": {"ib_core": {"netns_mod": 0}}},
        "unknown parameter(s) netns_mod; ib_core has send_queue_size, recv_queue_size, netns_mode, force_mr",
    ),
    ({"network_tuning_default_qdisc": "red"}, 'network_tuning_default_qdisc = "red": must be one of fq, fq_codel, pfifo_fast, cake'),
    ({"network_tuning_buffers": "huge"}, 'network_tuning_buffers = "huge": must be one of defaults, bdp'),
    ({"model_storage_mount_point": "/etc/models"}, 'model_storage_mount_point = "/etc/models": must not be /etc or under it'),
    (
        {"model_storage_nfs_options": ["ro", "hard", "nconnect=32"]},
        'model_storage_nfs_options = ["ro", "hard", "nconnect=32"]: nconnect=32 is out of range (1..16)',
    ),
    ({"model_storage_nfs_server": "nfs_1"}, 'model_storage_nfs_server = "nfs_1": must be an IP address or a host name'),
    ({"model_storage_namespace": "Inference"}, 'model_storage_namespace = "Inference": must be a DNS-1123 label'),
    ({"monitoring_listen_address": "eth0"}, 'monitoring_listen_address = "eth0": must be an IP address'),
    ({"monitoring_node_exporter_port": 70000}, "monitoring_node_exporter_port = 70000: must be 1..65535"),
    ({"nvidia_driver_version": ""}, 'nvidia_driver_version = "": must not be empty (an exact X.Y.Z version)'),
    (
        {
            "gpu_tuning_clock_policy": "strict",
            "gpu_tuning_models": {},
            "gpu_tuning_settings": {"application_clocks": {"memory": 1500, "graphics": 1500}},
        },
        "gpu_tuning_settings: application_clocks (memory 1500, graphics 1500) MHz is not a supported pair on GPU 0",
    ),
    ({"gpu_tuning_models": {}, "gpu_tuning_settings": {"power_limit": 900}}, "gpu_tuning_settings: power_limit 900.0 W is outside"),
    ({"gpu_tuning_models": {}, "gpu_tuning_settings": {"power_limit": 50}}, "gpu_tuning_settings: power_limit 50.0 W is outside"),
    ({"gpu_tuning_settings": {"clocks": 1}}, "takes only application_clocks, locked_clocks, power_limit (unknown: clocks)"),
    ({"gpu_tuning_clock_policy": "closest"}, 'gpu_tuning_clock_policy = "closest": must be one of strict, nearest'),
    (
        {"gpu_tuning_schedules": [{"name": "night", "on_calendar": "*-*-* 22:00:00", "settings": {"power_limit": 5000}}]},
        "gpu_tuning_schedules[night].settings: power_limit 5000.0 W is outside",
    ),
    ({"host_firewall_enabled": True}, "host_firewall_scrape_sources = []: must not be empty"),
    (
        {"nvidia_driver_install_method": "tarball"},
        'nvidia_driver_install_method = "tarball": must be one of package, runfile, preinstalled',
    ),
    # settings that got past the validation plays before (each was tried on a fresh node)
    (
        {"rackforge_hw_profile": "hgx-h100-8gpuX"},
        'rackforge_hw_profile = "hgx-h100-8gpuX": must name an entry of rackforge_hardware_profiles',
    ),
    ({"rdma_roce_ecn": "maybe"}, 'rdma_roce_ecn = "maybe": must be true or false'),
    ({"health_checks_enforce": "yes please"}, 'health_checks_enforce = "yes please": must be true or false'),
    ({"gpu_tuning_settings": {"application_clocks": "fast"}}, 'gpu_tuning_settings.application_clocks = "fast": must be a mapping'),
    ({"preflight_min_memory_gb": -1}, "preflight_min_memory_gb = -1: must be >= 0"),
    (
        {"monitoring_scrape_labels": {"bad label": "x"}},
        'monitoring_scrape_labels key "bad label" = "bad label": must be a Prometheus label name',
    ),
    ({"nvidia_driver_version": "550.127"}, 'nvidia_driver_version = "550.127": must be an exact X.Y.Z version'),
    (
        {"rdma_roce_lossles_priority": 3},
        "rdma_roce_lossles_priority: is not a variable of any rackforge role: did you mean rdma_roce_lossless_priority?",
    ),
    # Kubernetes: node settings
    ({"kubernetes_node_version": "1.29.9"}, 'kubernetes_node_version = "1.29.9": must be 1.30.0 or later'),
    ({"kubernetes_node_control_plane_host": ""}, 'kubernetes_node_control_plane_host = "": must not be empty'),
    ({"kubernetes_node_control_plane_host": "cp-nope"}, "(one of lab-cp1), got 'cp-nope'"),
    (
        {"kubernetes_node_network_cidr": "192.168.250.0/24"},
        "must match exactly one interface address on lab-node1 (the node IP); found none",
    ),
    # the multi-NIC trap: a CIDR that also covers the RDMA NICs' addresses
    (
        {
            "kubernetes_node_network_cidr": "10.0.0.0/8",
            "kubernetes_control_plane_pod_cidr": "172.16.0.0/16",
            "kubernetes_control_plane_service_cidr": "172.17.0.0/16",
            "kubernetes_control_plane_rdma_cidrs": [],
        },
        "found eth0 (10.89.77.11), ens1np0 (10.201.0.11)",
        "nodes",
        # the moved pod/service networks are valid for the control plane: only the nodes run
        ["--limit", "gpu_nodes"],
    ),
    (
        {"kubernetes_node_taints": [{"key": "gpu", "effect": "NoRun"}]},
        'kubernetes_node_taints[0].effect = "NoRun": must be one of NoSchedule',
    ),
    (
        {"kubernetes_node_labels": {"node-role.kubernetes.io/gpu": ""}},
        "a kubelet may not set kubernetes.io/k8s.io labels (NodeRestriction)",
    ),
    (
        {"kubernetes_node_repo_key_checksum": ""},
        'kubernetes_node_repo_key_checksum = "": must not be empty (a sha256 in 64 lowercase hex digits)',
    ),
    # the kubelet's reservations, checked against the node's own memory (library/kubelet_reservation_facts.py)
    (
        {"kubernetes_node_system_reserved": {"memory": "4Ti"}, "kubernetes_node_kube_reserved": {}, "kubernetes_node_eviction_hard": {}},
        "kubernetes_node_eviction_hard reserve 4096.1 GiB of this node's",
    ),
    (
        {"kubernetes_node_eviction_hard": {"memory.avail": "1Gi"}},
        "kubernetes_node_eviction_hard: 'memory.avail' is not one of memory.available",
    ),
    ({"kubernetes_node_kube_reserved": {"memory": "2GB"}}, "kubernetes_node_kube_reserved.memory: '2GB' is not a Kubernetes quantity"),
    ({"container_runtime_kernel_modules": ["overlay", "br_netfiltr"]}, "this kernel has no module br_netfiltr"),
    (
        {"container_runtime_default_runtime": "kata"},
        'container_runtime_default_runtime = "kata": must be one of auto, runc, nvidia (the runtimes this host registers)',
    ),
    # Kubernetes: cluster-wide settings stop every host
    (
        {"kubernetes_control_plane_pod_cidr": "10.89.0.0/16"},
        'kubernetes_control_plane_pod_cidr = "10.89.0.0/16": overlaps kubernetes_node_network_cidr 10.89.77.0/24',
        "all",
    ),
    (
        {"kubernetes_control_plane_service_cidr": "10.201.0.0/20"},
        'kubernetes_control_plane_service_cidr = "10.201.0.0/20": overlaps kubernetes_control_plane_rdma_cidrs 10.201.0.0/16',
        "all",
    ),
    (
        {"kubernetes_control_plane_pod_cidr": "10.244.0.0/33"},
        'kubernetes_control_plane_pod_cidr = "10.244.0.0/33": must be a network in CIDR form',
        "all",
    ),
    ({"kubernetes_control_plane_pod_cidr": "10.244.1.0/16"}, '"10.244.1.0/16": has host bits set (the network is 10.244.0.0/16)', "all"),
    (
        {"calico_encapsulation": "GRE"},
        'calico_encapsulation = "GRE": must be one of VXLANCrossSubnet, VXLAN, IPIPCrossSubnet, IPIP, None',
        "all",
    ),
    ({"calico_operator_manifest_checksum": ""}, 'calico_operator_manifest_checksum = "": must not be empty', "all"),
    ({"kubernetes_control_plane_gpu_weight": "heavy"}, 'kubernetes_control_plane_gpu_weight = "heavy": must be an integer', "all"),
    # the device plugin: cluster-wide too (the control plane applies it, the nodes' join gate reads it)
    (
        {"nvidia_device_plugin_mig_strategy": "all"},
        'nvidia_device_plugin_mig_strategy = "all": must be one of none, single, mixed',
        "all",
    ),
    (
        {"nvidia_device_plugin_device_list_strategy": "envvar"},
        'nvidia_device_plugin_device_list_strategy = "envvar": must be volume-mounts or cdi-cri while container_runtime_nvidia_isolation is true',
        "all",
    ),
    ({"nvidia_device_plugin_time_slicing_replicas": 1}, "nvidia_device_plugin_time_slicing_replicas = 1: must be 2..64 or 0", "all"),
    ({"nvidia_device_plugin_image_digest": ""}, 'nvidia_device_plugin_image_digest = "": must not be empty', "all"),
    (
        {"container_runtime_nvidia_isolation": False},
        'nvidia_device_plugin_device_list_strategy = "cdi-cri": must be envvar while container_runtime_nvidia_isolation is false',
        "all",
    ),
    # the lab's plugin is on cdi-cri: a containerd whose CDI is not required would drop its devices
    (
        {"kubernetes_node_topology_manager_policy": "single-numa-node"},
        'kubernetes_node_topology_manager_policy = "single-numa-node": must be none or best-effort while the CPU manager policy is none',
        "all",
    ),
    # (on the GPU nodes: the control plane runs no plugin and keeps Debian 12's containerd)
    (
        {"container_runtime_cdi": "auto"},
        'container_runtime_cdi = "auto": must be "true" while the device plugin hands out GPUs as CDI devices',
    ),
    (
        {"container_runtime_package_version": "1.7.24~ds1-6"},
        'container_runtime_package_version = "1.7.24~ds1-6": must be empty or an upstream version',
        "all",
    ),
]
CONTROL_PLANE = "lab-cp1"


def test_there_are_at_least_30_cases():
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=[next(iter(c[0])) + "=" + json.dumps(c[0][next(iter(c[0]))]) for c in CASES])
def test_bad_input_fails_before_any_change(converged, gpu_nodes, case):
    extra, needle, fails, args = (*case, *("nodes", [])[len(case) - 2 :])
    hosts = [*gpu_nodes, CONTROL_PLANE]
    before = {n: node_state(n) for n in hosts}
    res = playbook("site.yml", "-e", json.dumps(extra), *args)
    assert res.returncode != 0
    assert needle in " ".join(res.stdout.split()), res.stdout[-3000:]
    assert "TASK [nvidia_driver : Install" not in res.stdout  # stopped in a validation play
    assert all(res.recap[n]["failed"] == 1 for n in gpu_nodes), res.recap
    assert all(res.recap.get(n, {}).get("changed", 0) == 0 for n in hosts), res.recap
    if fails == "all":
        # a cluster-wide setting stops the control plane too: in validate_kubernetes' play, or,
        # when every GPU node already failed the settings check (the run ends there, before any
        # play of the control plane), in its own settings check when the run reaches it alone
        if CONTROL_PLANE in res.recap:
            assert res.recap[CONTROL_PLANE]["failed"] == 1, res.recap
        else:
            alone = playbook("site.yml", "-e", json.dumps(extra), "--limit", CONTROL_PLANE)
            assert alone.returncode != 0 and alone.recap[CONTROL_PLANE] == dict(alone.recap[CONTROL_PLANE], failed=1, changed=0)
            assert needle in " ".join(alone.stdout.split()), alone.stdout[-3000:]
    assert {n: node_state(n) for n in hosts} == before


# the on-demand playbooks check their own settings: run alone, nothing of site.yml's preflight
# stands before them, and a bad threshold or Xid policy must stop them before any check or test
ON_DEMAND = [
    ("playbooks/health_check.yml", {"health_checks_drain_xids": [79, 0]}, "health_checks_drain_xids[1] = 0: must be 1..999"),
    ("playbooks/health_check.yml", {"health_checks_drain_xids": [79, 79]}, "health_checks_drain_xids = [79, 79]: must not repeat 79"),
    ("playbooks/fabric_acceptance.yml", {"fabric_acceptance_min_fraction": 1.5}, "fabric_acceptance_min_fraction = 1.5: must be 0.05..1.0"),
    (
        "playbooks/fabric_acceptance.yml",
        {"fabric_acceptance_max_latency_us": 0},
        "fabric_acceptance_max_latency_us = 0.0: must be 0.1..1000",
    ),
    (
        "playbooks/fabric_acceptance.yml",
        {"fabric_acceptance_hardware": {}},
        "fabric_acceptance_hardware = {}: must not be empty (a mapping, the node's hardware profile",
    ),
]


@pytest.mark.parametrize(("play", "extra", "needle"), ON_DEMAND, ids=[p.split("/")[-1] + ":" + next(iter(e)) for p, e, _ in ON_DEMAND])
def test_on_demand_playbooks_refuse_bad_settings_before_any_check(converged, gpu_nodes, play, extra, needle):
    before = {n: node_state(n) for n in gpu_nodes}
    res = playbook(play, "-e", json.dumps(extra))
    assert res.returncode != 0
    assert needle in " ".join(res.stdout.split()), res.stdout[-3000:]
    assert all(res.recap[n]["failed"] == 1 and res.recap[n]["changed"] == 0 for n in gpu_nodes), res.recap
    assert "TASK [health_checks : Read the GPU state" not in res.stdout and "TASK [fabric_acceptance : Mark" not in res.stdout
    assert {n: node_state(n) for n in gpu_nodes} == before


# the monitoring hosts' settings: checked in preflight.yml's play for them, before any change
MONITORING_CASES = [
    (
        {"monitoring_server_receivers": [{"name": "ops", "type": "pagerduty"}]},
        "monitoring_server_receivers[0].type: 'pagerduty'; allowed: webhook, email, slack",
    ),
    (
        {"monitoring_server_receivers": [{"name": "ops", "type": "webhook", "url": "hxxp://token@x/"}]},
        "monitoring_server_receivers[0].url: a webhook receiver needs an http(s) URL",
    ),
    (
        {"monitoring_server_alert_for": {"RackforgeNVLinkDwn": "1m"}},
        "monitoring_server_alert_for: 'RackforgeNVLinkDwn' is not an alert of the rules",
    ),
    ({"monitoring_server_retention_time": "15 days"}, 'monitoring_server_retention_time = "15 days": must be a Prometheus duration'),
    ({"monitoring_server_listen_address": "eth0"}, 'monitoring_server_listen_address = "eth0": must be an IP address'),
    ({"monitoring_server_external_labels": {"__replica__": "a"}}, "must be a Prometheus label name"),
]
MONITORING_FILES = (
    "/etc/prometheus/prometheus.yml",
    "/etc/prometheus/alertmanager.yml",
    "/etc/default/prometheus",
    "/etc/default/prometheus-alertmanager",
)


@pytest.mark.parametrize("extra, needle", MONITORING_CASES, ids=[next(iter(c[0])) for c in MONITORING_CASES])
def test_bad_monitoring_settings_stop_the_monitoring_hosts_before_any_change(converged, extra, needle):
    mons = ["lab-mon1", "lab-mon2"]

    def state():
        return {m: on_node(m, "sha256sum", *MONITORING_FILES).stdout for m in mons}

    before = state()
    res = playbook("site.yml", "-e", json.dumps(extra), "--limit", "monitoring_hosts")
    assert res.returncode != 0
    assert needle in " ".join(res.stdout.split()), res.stdout[-3000:]
    assert "hxxp://token@x/" not in res.stdout  # a URL's value is never printed
    assert "TASK [monitoring_server : Install" not in res.stdout  # stopped in the validation play
    assert all(res.recap[m]["failed"] == 1 and res.recap[m]["changed"] == 0 for m in mons), res.recap
    assert state() == before
