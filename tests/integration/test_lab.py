"""site.yml on the shared lab: converges, is idempotent, is honest in check mode, and fails fast
and cleanly on bad hardware or unhealthy nodes while the healthy ones carry on."""

from __future__ import annotations

import json

from conftest import node_state, playbook


def test_second_run_changes_nothing(converged, gpu_nodes):
    again = playbook("site.yml")
    assert again.returncode == 0, again.stdout[-3000:]
    assert set(gpu_nodes) < set(again.recap)  # and the control plane
    assert {h: r["changed"] for h, r in again.recap.items()} == dict.fromkeys(again.recap, 0)


def test_check_diff_on_converged_lab_is_clean(converged, gpu_nodes):
    res = playbook("site.yml", "--check", "--diff")
    assert res.returncode == 0, res.stdout[-3000:]
    assert set(gpu_nodes) < set(res.recap)
    assert {h: r["changed"] for h, r in res.recap.items()} == dict.fromkeys(res.recap, 0)


def test_fleet_summary(converged, gpu_nodes, tmp_path):
    res = playbook("site.yml", report_dir=tmp_path)
    assert res.returncode == 0
    report = json.loads((tmp_path / "fleet.json").read_text())
    nodes = report["nodes"]
    assert [n["host"] for n in nodes] == gpu_nodes  # all healthy: most severe first is by name
    assert all(n["status"] == "healthy" and n["health"]["healthy"] for n in nodes)
    assert report["summary"]["healthy"] == len(gpu_nodes) == report["summary"]["total"]
    assert report["last_run"]["playbook"] == "site.yml" and report["last_run"]["checked"] == gpu_nodes
    h100 = next(n for n in nodes if n["profile"] == "hgx-h100-8gpu")
    assert len(h100["health"]["gpus"]) == 8
    assert sum(g["active_links"] for g in h100["health"]["gpus"]) == 8 * 18
    assert len(h100["health"]["ports"]) == 8
    html = (tmp_path / "fleet.html").read_text()
    assert '<li class="s-healthy" id="count-healthy"><span class="n">%d</span>healthy</li>' % len(gpu_nodes) in html


def test_preflight_missing_gpu_fails_that_host_and_changes_nothing(converged, gpu_nodes, faulted):
    victim = gpu_nodes[0]
    faulted(victim, "gpu_missing", "gpu=7")
    before = {n: node_state(n) for n in gpu_nodes}
    res = playbook("playbooks/preflight.yml")
    assert res.returncode != 0
    assert res.recap[victim]["failed"] == 1
    assert all(res.recap[n]["failed"] == 0 for n in gpu_nodes[1:])
    assert "%s: preflight failed: preflight_hardware.gpu_count: expected 8 GPUs (PCI ids 10de:2330), found 7" % victim in res.stdout
    assert {n: node_state(n) for n in gpu_nodes} == before
    assert all(res.recap[n]["changed"] == 0 for n in gpu_nodes)


def test_preflight_not_enforced_only_warns(converged, gpu_nodes, faulted):
    faulted(gpu_nodes[0], "gpu_missing", "gpu=7")
    res = playbook("playbooks/preflight.yml", "-e", "preflight_enforce=false")
    assert res.returncode == 0
    # the module's warning (Ansible prints warnings on stderr; AWX shows them in the job output)
    assert "%s: PREFLIGHT WARNING: preflight_hardware.gpu_count" % gpu_nodes[0] in " ".join((res.stdout + res.stderr).split())


def test_health_gate_excludes_faulted_nodes_and_carries_the_rest(converged, gpu_nodes, faulted, tmp_path):
    nvlink_node, rdma_node, healthy = gpu_nodes[0], gpu_nodes[1], gpu_nodes[2]
    faulted(nvlink_node, "nvlink_inactive", "gpu=3", "links=4,5")
    faulted(rdma_node, "rdma_port_down", "ca=mlx5_1")
    res = playbook("site.yml", report_dir=tmp_path)
    assert res.returncode != 0
    assert res.recap[nvlink_node]["failed"] == 1 and res.recap[rdma_node]["failed"] == 1
    assert res.recap[healthy]["failed"] == 0
    assert "NVLink(s) 4,5 inactive: 16 of 18 expected links active" in res.stdout
    assert "mlx5_1/1" in res.stdout and "expected Active/LinkUp" in res.stdout
    report = json.loads((tmp_path / "fleet.json").read_text())
    statuses = {n["host"]: n["status"] for n in report["nodes"]}
    assert statuses == {nvlink_node: "unhealthy", rdma_node: "unhealthy", healthy: "healthy"}
    assert [n["host"] for n in report["nodes"]][-1] == healthy  # most severe first
    remedies = {f["check"]: f["remedy"] for n in report["nodes"] for f in n["health"]["findings"]}
    assert "reseat / RMA the GPU baseboard" in remedies["nvlink_inactive"]
    assert "cable / transceiver" in remedies["rdma_port_state"]
    html = (tmp_path / "fleet.html").read_text()
    assert '<li class="s-unhealthy" id="count-unhealthy"><span class="n">2</span>unhealthy</li>' in html
    assert 'title="link 4 inactive"' in html and remedies["nvlink_inactive"] in html
