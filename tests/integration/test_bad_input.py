"""Bad input is refused before the first change: site.yml fails in the preflight play with a
message naming the variable and the allowed values, and every node is left exactly as it was
(checksums of /etc and the simulator state, changed=0 everywhere)."""

from __future__ import annotations

import json

import pytest
from conftest import node_state, playbook

CASES = [
    ({"rdma_roce_lossless_priority": 8}, "rdma_roce_lossless_priority and rdma_roce_cnp_priority must be 0..7"),
    ({"rdma_roce_cable_len_m": 0}, "rdma_roce_cable_len_m 1..1000 m (got 0)"),
    ({"rdma_roce_cable_len_m": 5000}, "rdma_roce_cable_len_m 1..1000 m (got 5000)"),
    ({"rdma_roce_cable_len_m": "seven"}, "rdma_roce_cable_len_m 1..1000 m (got seven)"),
    ({"rdma_roce_mtu": 900}, "rdma_roce_mtu 1500..9978 (got 900)"),
    ({"rdma_roce_dscp": 40}, "rdma_roce_dscp 40 goes to priority 5 but rdma_roce_lossless_priority is 3"),
    (
        {"rdma_roce_buffer_mode": "manual", "rdma_roce_lossless_buffer_bytes": 60000},
        "rdma_roce_lossless_buffer_bytes 60000 cannot hold the PFC headroom",
    ),
    (
        {"rdma_roce_module_options": {"ib_uverbs": {"disable_raw_qp": 0}}},
        "rdma_roce_module_options.ib_uverbs: unknown parameter(s) disable_raw_qp; ib_uverbs has no parameters at all",
    ),
    (
        {"rdma_roce_module_options": {"ib_core": {"netns_mod": 0}}},
        "unknown parameter(s) netns_mod; ib_core has send_queue_size, recv_queue_size, netns_mode, force_mr",
    ),
    ({"network_tuning_default_qdisc": "red"}, "network_tuning_default_qdisc one of fq, fq_codel, pfifo_fast, cake (got red)"),
    ({"network_tuning_buffers": "huge"}, "network_tuning_buffers defaults|bdp (got huge)"),
    ({"monitoring_listen_address": "eth0"}, 'monitoring_listen_address must be an IP address (got "eth0")'),
    ({"monitoring_node_exporter_port": 70000}, "must be 1..65535 (got 70000"),
    ({"nvidia_driver_version": ""}, "nvidia_driver_version must be set to an exact version of branch 550"),
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
    ({"gpu_tuning_settings": {"clocks": 1}}, "gpu_tuning_settings, gpu_tuning_models[model] and schedule settings take only"),
    ({"gpu_tuning_clock_policy": "closest"}, "gpu_tuning_clock_policy strict or nearest (got closest)"),
    (
        {"gpu_tuning_schedules": [{"name": "night", "on_calendar": "*-*-* 22:00:00", "settings": {"power_limit": 5000}}]},
        "gpu_tuning_schedules[night].settings: power_limit 5000.0 W is outside",
    ),
]


@pytest.mark.parametrize(("extra", "needle"), CASES, ids=[next(iter(c[0])) + "=" + json.dumps(c[0][next(iter(c[0]))]) for c in CASES])
def test_bad_input_fails_before_any_change(converged, gpu_nodes, extra, needle):
    before = {n: node_state(n) for n in gpu_nodes}
    res = playbook("site.yml", "-e", json.dumps(extra))
    assert res.returncode != 0
    assert needle in " ".join(res.stdout.split()), res.stdout[-3000:]
    assert "TASK [nvidia_driver : Install" not in res.stdout  # stopped in the preflight play
    assert all(res.recap[n]["changed"] == 0 and res.recap[n]["failed"] == 1 for n in gpu_nodes)
    assert {n: node_state(n) for n in gpu_nodes} == before
