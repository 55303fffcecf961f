"""Fabric acceptance on the shared lab: the pairs run between the lab's own nodes over the lab network
(the simulated perftest's exchange; no RDMA traffic exists here), NVLink inside each node with the
simulated nvbandwidth / nccl-tests. A faulted NIC fails exactly its node, a slow GPU pair exactly
its node, the others pass; the health gate holds the findings until an acceptance passes again."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, lab, on_node, playbook


@pytest.fixture
def acceptance_passes_afterwards(gpu_nodes):
    """The nodes keep their last acceptance's findings, and the health gate holds them: a test
    that fails halfway would leave every later suite's nodes unhealthy. On a failure, clear the
    faults (the faulted fixture, torn down first) and run a passing acceptance, the test's own last
    step when it succeeds."""
    yield
    if not all(json.loads(on_node(n, "cat", "/var/lib/rackforge/acceptance.json").stdout or "{}").get("findings") == [] for n in gpu_nodes):
        res = playbook("playbooks/fabric_acceptance.yml")
        assert res.returncode == 0, res.stdout[-2000:]


def test_faults_fail_exactly_their_nodes_and_the_gate_holds_them_until_a_pass(
    converged, gpu_nodes, acceptance_passes_afterwards, faulted, tmp_path
):
    nic_victim, gpu_victim, healthy = gpu_nodes  # two HGX H100, one PCIe A100 (2 rails at 100G)
    faulted(nic_victim, "slow_nic", "ca=mlx5_1", "factor=0.5")  # rail 1: tested with both partners
    faulted(gpu_victim, "slow_gpu_pair", "gpu=1", "peer=6", "factor=0.4")
    # rail 0's address answers no ARP: its verbs pass, RDMA-CM (ib_write_lat -R) cannot resolve it
    faulted(gpu_victim, "rdma_cm_unresolved", "ca=mlx5_0")
    # rails 2-7 exist only on the two H100 nodes: one pair each, so a failure there holds both ends
    # (nothing tells which end is at fault); the faults still reach the report with their numbers
    faulted(gpu_victim, "high_latency", "ca=mlx5_2", "us=6")  # 1.9 us + 6 us, both ways
    address = json.loads((ROOT / "lab" / ".state" / "lab.json").read_text())[gpu_victim]["ip"]
    faulted(nic_victim, "slow_link", "ca=mlx5_3", "peer=" + address, "factor=0.5")  # only towards gpu_victim
    # a shorter wait for a partner: the RDMA-CM server of a pair whose client gave up waits that long
    res = playbook("playbooks/fabric_acceptance.yml", "-e", "fabric_acceptance_connect_timeout=15", report_dir=tmp_path)
    out = " ".join(res.stdout.split())
    assert res.returncode != 0
    assert res.recap[nic_victim]["failed"] == 1 and res.recap[gpu_victim]["failed"] == 1, out[-3000:]
    assert res.recap[healthy]["failed"] == 0
    assert "%s: FABRIC ACCEPTANCE FAILED: rail 1 fails with every partner" % nic_victim in out
    assert "GPU pair 1/6 copies at" in out
    cm = "%s: FABRIC ACCEPTANCE FAILED: rail 0 fails with every partner (" % gpu_victim
    assert cm in out and "no RDMA-CM result from perftest -R; ib_write_lat -R (RDMA-CM) failed (rc 1): Received 10 times ADDR_ERROR" in out

    report = json.loads((tmp_path / "acceptance.json").read_text())
    assert sorted(n for n, d in report["nodes"].items() if d["findings"]) == sorted([nic_victim, gpu_victim])
    rail0 = sorted((p["a"], p["b"]) for d in report["nodes"].values() for p in d["rdma"] if p["rail"] == 0)
    undecided = {u["rail"]: u for u in report["undecided"]}
    assert sorted(undecided) == [2, 3], report["undecided"]
    assert {undecided[2]["a"], undecided[2]["b"]} == {nic_victim, gpu_victim}
    assert "RDMA write latency" in undecided[2]["why"] and "is not below 5.0 us" in undecided[2]["why"]
    assert "RDMA write bandwidth" in undecided[3]["why"] and "below 90 % of the 400.0 Gb/s line rate" in undecided[3]["why"]
    assert len(set(rail0)) == 3  # a ring over 3 nodes: 3 pairs, never all pairs twice
    md = (tmp_path / "acceptance.md").read_text()
    assert "## RDMA rail 7" in md and "FAIL" in md
    prom = on_node(nic_victim, "cat", "/var/lib/prometheus/node-exporter/rackforge-acceptance.prom").stdout
    assert "rackforge_acceptance_healthy 0" in prom and 'rail="1"' in prom

    # the gate holds the acceptance's findings (the faults are still injected, but the gate does
    # not run perftest: it reads the node's last acceptance)
    lab("fault", nic_victim, "clear")
    lab("fault", gpu_victim, "clear")
    gate = playbook("playbooks/health_check.yml", report_dir=tmp_path)
    text = " ".join(gate.stdout.split())
    assert "%s: UNHEALTHY" % nic_victim in text and "%s: UNHEALTHY" % gpu_victim in text
    assert "%s: UNHEALTHY" % healthy not in text
    # the fleet report pictures each node's last acceptance: its pairs per rail, its GPU pair matrix
    page = (tmp_path / "fleet.html").read_text()
    victim_section = page[page.index('id="node-%s"' % gpu_victim) :]
    assert '<td class="bad" title="GPU 1 to GPU 6">' in victim_section.split("</section>")[0]
    nic_section = page[page.index('id="node-%s"' % nic_victim) :].split("</section>")[0]
    assert "<td>1</td><td>%s</td>" % healthy in nic_section and ">FAIL</td>" in nic_section

    # a passing acceptance clears them
    res = playbook("playbooks/fabric_acceptance.yml", report_dir=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:]
    report = json.loads((tmp_path / "acceptance.json").read_text())
    assert all(not d["findings"] for d in report["nodes"].values())
    # every pair also connected through RDMA-CM, to the partner's RoCE address over the lab's fabric
    assert all(p["runs"]["rdma_cm"] == 1 and p["cm_lat_us"] < 5 for d in report["nodes"].values() for p in d["rdma"])
    busbw = {n: (d["nvlink"] or {}).get("busbw_gbps") for n, d in report["nodes"].items()}
    assert busbw[nic_victim] > 400 and busbw[gpu_victim] > 400
    gate = playbook("playbooks/health_check.yml", report_dir=tmp_path)
    assert gate.returncode == 0 and "UNHEALTHY" not in gate.stdout, gate.stdout[-2000:]
