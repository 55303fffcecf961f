"""Fault matrix: each injected fault excludes exactly the faulted node at the health gate with
the finding named; the other nodes carry on."""

from __future__ import annotations

import subprocess

import pytest
from conftest import lab, node_state, not_idempotent, playbook

# (fault or action on the victim, text the gate must print)
CASES = [
    (("nvlink_inactive", "gpu=2", "links=7"), "NVLink(s) 7 inactive: 17 of 18 expected links active"),
    (("gpu_links_all_inactive", "gpu=5"), "GPU 5"),
    (("fabric_in_progress",), "In Progress"),
    ("stop-fabricmanager", "nvidia-fabricmanager"),
    (("nvlink_errors", "gpu=1", "link=3", "count=40"), "GPU 1"),
    (("rdma_port_down", "ca=mlx5_3"), "mlx5_3/1 (ens4np0): port is Down/Disabled, expected Active/LinkUp"),
    (("pfc_off", "ca=mlx5_6"), "mlx5_6/1 (ens7np0): PFC not enabled on lossless priority 3 (no rx_prio3_pause counter)"),
    (("roce_mtu_1024", "ca=mlx5_0"), "mlx5_0/1 (ens1np0): RoCE active MTU 1024 with netdev MTU 9000, expected 4096"),
    (("pause_storm", "ca=mlx5_2", "count=3"), "mlx5_2/1 (ens3np0): tx_pause_storm_error_events rose to 3 (baseline 0)"),
    # GPU hardware, as the real nvidia-smi -q prints it over the lab NVML
    (("gpu_ecc_uncorrectable", "gpu=3", "count=2"), "GPU 3 (00000000:5D:00.0): 2 volatile uncorrectable ECC errors; reset the GPU"),
    (("gpu_row_remap_failure", "gpu=1"), "GPU 1 (00000000:3B:00.0): row remapping failed; replace the GPU"),
    (("gpu_row_remap_pending", "gpu=4"), "GPU 4 (00000000:9B:00.0): a row remap is pending; reset the GPU"),
    (("gpu_pcie_downtrained", "gpu=3", "width=8"), "GPU 3 (00000000:5D:00.0): PCIe link runs at x8 of x16 while busy"),
    (("gpu_hw_slowdown", "gpu=6"), "GPU 6 (00000000:CB:00.0): clocks held down by HW Slowdown, HW Power Brake Slowdown"),
    # an Xid in the (simulated) kernel log, read in /dev/kmsg's format since the baseline
    (("gpu_xid", "gpu=4", "xid=79"), "GPU 4 (00000000:9B:00.0) logged Xid 79 (1 times): GPU has fallen off the bus."),
    # a health tool that fails is a finding, not a pass: without ib_uverbs every verbs tool fails
    ("unload-ib_uverbs", "ibv_devinfo: the roce_mtu check could not run: ibv_devinfo failed"),
    # GPUDirect RDMA: ACS back on the switch ports above GPU 2 (as a hot reset leaves them), read by
    # the REAL lspci from the simulated config space; the boot unit clears it again (the undo)
    ("reset-acs", "PCIe port 37:00.0 redirects peer traffic (ReqRedir+, CmpltRedir+) between 4c:00.0<->38:00.0"),
    (("iommu_dma",), "the IOMMU translates DMA of 16 GPU/NIC device(s) (group type DMA-FQ)"),
    # the CDI spec nvidia-ctk wrote: left from another driver (its libraries and firmware gone), or
    # missing; the undo is the boot unit that writes it (rackforge-cdi-spec.service)
    (
        "stale-cdi-spec",
        "CDI spec /var/run/cdi/nvidia.json is stale (written for another driver or boot): "
        "/usr/lib/x86_64-linux-gnu/libcuda.so.535.261.03 (mount)",
    ),
    ("remove-cdi-spec", "CDI spec /var/run/cdi/nvidia.json is missing: no pod can be given a GPU through CDI"),
    # the model share gone (its unit stopped): pods would read the node's empty /models
    ("unmount-share", "model share /models is not mounted (a plain directory, nothing mounted)"),
    # the local model cache: a member disk gone (SIMULATED, block_sim.py), its filesystem unmounted
    (
        ("nvme_missing", "serial=S64HNE0T500202"),
        "model cache /var/cache/models: /dev/md/rackforge_cache (md127) has lost nvme2n1: the disk is gone",
    ),
    ("unmount-cache", "model cache /var/cache/models is not mounted (a plain directory, nothing mounted)"),
]
CDI_SPEC = "/var/run/cdi/nvidia.json"
REGENERATE = ["systemctl", "start", "rackforge-cdi-spec.service"]
# actions on the victim that are not hwsim faults: (do, undo)
ACTIONS = {
    "stop-fabricmanager": (["systemctl", "stop", "nvidia-fabricmanager"], ["systemctl", "start", "nvidia-fabricmanager"]),
    "unload-ib_uverbs": (["modprobe", "-r", "ib_uverbs"], ["modprobe", "ib_uverbs"]),
    "reset-acs": (
        ["hwsim", "fault", "add", "acs_enabled", "gpu=2"],
        ["sh", "-c", "hwsim fault clear && systemctl restart rackforge-gpudirect-acs.service"],
    ),
    # the lab's nodes run 535.247.01; the spec of an upgrade's other version names 535.261.03's files
    "stale-cdi-spec": (["sed", "-i", "s/535[.]247[.]01/535.261.03/g", CDI_SPEC], REGENERATE),
    "remove-cdi-spec": (["rm", CDI_SPEC], REGENERATE),
    "unmount-share": (["systemctl", "stop", "models.mount"], ["systemctl", "start", "models.mount"]),
    "unmount-cache": (["systemctl", "stop", "var-cache-models.mount"], ["systemctl", "start", "var-cache-models.mount"]),
}


@pytest.fixture(scope="module", autouse=True)
def fresh_verdicts_afterwards(converged):
    """The faulted verdicts stay in the nodes' textfile metrics: check once more when done."""
    yield
    res = playbook("playbooks/health_check.yml")
    assert res.returncode == 0 and "UNHEALTHY" not in res.stdout, res.stdout[-2000:]


@pytest.mark.parametrize(("fault", "needle"), CASES, ids=[c[0] if isinstance(c[0], str) else c[0][0] for c in CASES])
def test_fault_excludes_only_the_faulted_node(converged, gpu_nodes, faulted, fault, needle):
    victim = gpu_nodes[0]  # an HGX H100 node with NVSwitches and 8 RoCE ports
    if fault in ACTIONS:
        lab("exec", victim, *ACTIONS[fault][0])
    else:
        faulted(victim, *fault)
    try:
        res = playbook("playbooks/health.yml")
    finally:
        if fault in ACTIONS:
            lab("exec", victim, *ACTIONS[fault][1])
        if fault[0] == "gpu_xid":
            # an Xid is an event: it stays logged; the operator acknowledges it with a new baseline
            playbook("playbooks/health_check.yml", "--limit", victim, "-e", "health_checks_reset_baseline=true")
    assert res.returncode != 0
    assert res.recap[victim]["failed"] == 1
    assert all(res.recap[n]["failed"] == 0 for n in gpu_nodes if n != victim)
    out = " ".join(res.stdout.split())
    assert "%s: UNHEALTHY, excluded:" % victim in out and needle in out, out[-2500:]


def paused_mirror_run(*args):
    """site.yml with the lab's mirror frozen: connections time out (pause keeps its address and MAC,
    so nothing is stale after)."""
    subprocess.run(["podman", "pause", "rackforge-lab-mirror"], capture_output=True, check=True)
    try:
        return playbook("site.yml", *args)
    finally:
        subprocess.run(["podman", "unpause", "rackforge-lab-mirror"], capture_output=True, check=True)


def test_unreachable_mirror_fails_every_node_that_needs_it_before_any_change_naming_the_url(converged, gpu_nodes):
    """An upgrade needs the driver repository: with the mirror down every node stops in the preflight
    play, naming the URL and its variable, and nothing changes."""
    before = {n: node_state(n) for n in gpu_nodes}
    res = paused_mirror_run("-e", "nvidia_driver_version=535.261.03")  # the lab's nodes run 535.247.01
    assert res.returncode != 0
    assert all(res.recap[n]["failed"] == 1 and res.recap[n]["changed"] == 0 for n in gpu_nodes)
    out = " ".join(res.stdout.split())
    assert "cannot reach http://10.89.77.2/vendor/dists/bookworm/InRelease" in out and "check nvidia_driver_repo_url" in out
    assert "TASK [nvidia_driver : Install" not in res.stdout  # stopped in the preflight play
    assert {n: node_state(n) for n in gpu_nodes} == before


def test_a_converged_fleets_rerun_does_not_need_the_mirror(converged, gpu_nodes):
    """Nothing is to be installed: the repositories are not checked (the preflight's package snapshot
    shows every package in place) and the run passes with the mirror down, changing nothing."""
    settle = playbook("site.yml")  # the faults above leave drift (a rewritten CDI spec) that a run repairs
    assert settle.returncode == 0, settle.stdout[-3000:]
    res = paused_mirror_run()
    assert res.returncode == 0, res.stdout[-3000:]
    assert all(res.recap[n]["failed"] == 0 and res.recap[n]["changed"] == 0 for n in res.recap), not_idempotent(res)
    assert "cannot reach" not in res.stdout
