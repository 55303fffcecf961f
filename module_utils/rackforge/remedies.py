"""What the operator does about each finding (pure data; the fleet report prints it)."""

from __future__ import annotations

# What the operator does about each finding, by its check name (every check the modules,
# module_utils/rackforge/*.py and the roles' tasks can report:
# tests/unit/test_fleet_reports.py finds them and fails on one without an entry). "<check>_not_run" is a
# check that could not run; its evidence names the tool and what it printed.
REMEDIES = {
    "driver": "Install the pinned NVIDIA driver (playbooks/gpu.yml, role nvidia_driver); after a driver change "
    "nvidia-smi reports a driver/library version mismatch until the node reboots (nvidia_driver_reboot_ok).",
    "gpu_count": "A GPU is missing from nvidia-smi: look for Xid 79 (fallen off the bus) in the kernel log and at lspci; "
    "reseat the GPU or RMA the baseboard. The health gate keeps the node out of the cluster until it passes.",
    "os": "The node's OS is not one rackforge supports (preflight_supported_os): install a supported release, or add "
    "this one to preflight_supported_os once it is tested (preflight_enforce: false only warns).",
    "service_mgr": "rackforge needs systemd as the service manager (its units, drop-ins and timers): reinstall the "
    "node with a systemd-based OS image.",
    "cdi_spec": "The NVIDIA CDI spec is missing or lacks a GPU: rerun role nvidia_driver (playbooks/gpu.yml), which runs "
    "nvidia-ctk cdi generate; a GPU the driver does not see is a gpu_count finding first.",
    "cdi_spec_stale": "The CDI spec names files the driver no longer has (written for another driver version): rerun role "
    "nvidia_driver, or systemctl start rackforge-cdi-spec; check that rackforge-cdi-spec.service is enabled for boot.",
    "cdi_spec_not_run": "The CDI spec does not parse as JSON: remove it and rerun role nvidia_driver (nvidia-ctk cdi generate).",
    "nvlink_inactive": "NVLink down: reseat / RMA the GPU baseboard (check the kernel log for Xid 74 first). "
    "The health gate keeps the node out of the cluster (cordoned during an upgrade) until it passes.",
    "nvlink_all_inactive": "Every NVLink of this GPU is down: check nvidia-fabricmanager and that the GPU is not in reset, "
    "then reseat / RMA the GPU baseboard. The node stays out of the cluster until it passes.",
    "nvlink_unavailable": "nvidia-smi shows no NVLink state for this GPU (MIG enabled, or a model without NVLink): "
    "disable MIG (nvidia-smi -mig 0, then reset the GPU) or correct the node's hardware profile.",
    "nvlink_speed": "A link trained below its speed: reseat the GPU / baseboard; RMA it when the link stays slow after a "
    "reset. Check that the hardware profile's nvlink_speed_gbps is this model's.",
    "nvlink_errors": "NVLink error counters are rising: watch nvidia-smi nvlink -e; reseat / RMA the GPU baseboard if they "
    "keep rising; after the repair take a new baseline (health_checks_reset_baseline=true).",
    "nvlink_p2p": "nvidia-smi topo -p2p n does not show NVLink P2P between these GPUs: check the NVSwitch fabric and "
    "nvidia-fabricmanager, then reseat / RMA the baseboard.",
    "fabricmanager": "Start nvidia-fabricmanager (systemctl status / journalctl -u nvidia-fabricmanager); its version must "
    "equal the driver's (role nvidia_driver pins and holds both).",
    "fabric": "NVSwitch fabric not trained: restart nvidia-fabricmanager and read its log; a fabric still not "
    "Completed/Success after that needs a node reboot, then an RMA of the baseboard.",
    "rdma_port_state": "RDMA port down: check the cable / transceiver and the switch port (admin state, errors); ibstat "
    "shows the physical state. The node stays out of the cluster until the port is Active/LinkUp.",
    "rdma_rate": "The port trained below its rate: check the cable / transceiver type and the switch port's speed setting.",
    "rdma_port_count": "Fewer RDMA ports than the hardware profile expects: check that every NIC is seated and listed "
    "(lspci, ibstat), its firmware and the mlx5 driver; correct the profile if this node differs.",
    "roce_mtu": "RoCE active MTU below 4096: set the netdev MTU to at least 4200 and check the switch port's MTU.",
    "roce_gid": "No RoCE v2 GID with an IPv4 address: give the RDMA netdev its fabric address and check that the link is up "
    "(RDMA-CM cannot use the port without one).",
    "pfc": "PFC off on the lossless priority: rerun role rdma_roce (playbooks/network.yml) and check the switch port's "
    "DCB / PFC configuration for the same priority.",
    "pause_storm": "The NIC's pause-storm watchdog fired: find the receiver or switch port flooding PFC pause frames "
    "(a stuck host, the switch's PFC watchdog); take a new baseline after the fix (health_checks_reset_baseline=true).",
    "rdma_errors": "Port error counters are rising: check the cable / transceiver and the switch port's counters; replace "
    "the optic if symbol / CRC errors keep rising; take a new baseline after the repair (health_checks_reset_baseline=true).",
    "rdma_not_run": "The RDMA checks could not run: install infiniband-diags (ibstat) and rdma-core, load the RDMA driver "
    "(mlx5_ib), and read the command's output below.",
    "roce_mtu_not_run": "The RoCE MTU check could not run: install ibverbs-utils (ibv_devinfo) and read the command's output "
    "below; ibv_devinfo needs the RDMA driver loaded.",
    "roce_gid_not_run": "The RoCE GID check could not run: install show_gids (MLNX_OFED / DOCA) or fix what its output below says.",
    "nvlink_not_run": "The NVLink checks could not run: nvidia-smi is missing or failed (its output is below). Install the "
    "pinned driver's nvidia-smi (role nvidia_driver); rc 9 means the driver is installed but not loaded: load it or reboot.",
    "nvlink_errors_not_run": "The NVLink error counters could not be read (nvidia-smi nvlink -e failed, output below): fix "
    "what it printed; on a driver branch without error counters, this check cannot run.",
    "nvlink_p2p_not_run": "The NVLink P2P check could not run (nvidia-smi topo -p2p n failed, output below): fix what it "
    "printed, or set health_checks_check_topology=false on a system without the topology query.",
    "fabric_not_run": "The NVSwitch fabric state could not be read (nvidia-smi -q failed, output below): fix what it printed; "
    "the fabric is unknown until it runs.",
    "pfc_not_run": "The PFC and port counter checks could not run: install ethtool or fix what `ethtool -S` printed below.",
    # GPU hardware (gpu_health.py, in nvidia_gpu_info)
    "gpu_xid": "The kernel logged an Xid that means drain: drain the node, read the Xid's meaning in NVIDIA's Xid "
    "catalogue (48/94/95 ECC, 63/64 row remap, 74 NVLink, 79 fallen off the bus, 119 GSP), reset or reboot, and RMA the "
    "GPU if it returns.",
    "gpu_ecc_uncorrectable": "The GPU counted volatile uncorrectable ECC errors since the driver loaded: drain the node, "
    "reset the GPU (or reboot); if the count returns, RMA the GPU.",
    "gpu_row_remap_pending": "A row remap is pending: it takes effect at the next GPU reset. Drain the node and reset the GPU "
    "(nvidia-smi -r) or reboot.",
    "gpu_row_remap_failure": "The GPU failed to remap a row (no spare rows left): the memory is degraded for good; take the "
    "node out of service and RMA the GPU.",
    "gpu_retired_pages_pending": "A page retirement is pending: it takes effect at the next GPU reset. Drain the node and "
    "reset the GPU or reboot.",
    "gpu_pcie_width": "The GPU's PCIe link trained narrower than its maximum while busy: reseat the GPU/riser, check the "
    "slot and the BIOS PCIe settings; lspci -vv shows LnkCap against LnkSta.",
    "gpu_pcie_generation": "The GPU's PCIe link runs below its maximum generation while busy: check the BIOS PCIe speed "
    "setting, risers and retimers; lspci -vv shows LnkCap against LnkSta.",
    "gpu_slowdown": "The GPU's clocks are held by a hardware, thermal or power-brake slowdown: check cooling, the power "
    "supplies and the baseboard's power brake signal (nvidia-smi -q -d PERFORMANCE).",
    "gpu_xid_not_run": "The kernel log could not be read for Xids (the error is below): the check needs root and "
    "/dev/kmsg (health_checks_kmsg_path); until it runs, Xid events go unseen.",
    # the model share (roles/model_storage; module_utils/rackforge/share_check.py)
    "model_share_hung": "The model share did not answer in time: check the NFS server and the path to it (ping, "
    "rpcinfo -p <server>, showmount -e <server>), then systemctl status <unit>.mount; the node stays out of scheduling "
    "until the share answers again (a hard mount resumes on its own when the server is back).",
    "model_share_not_mounted": "The model share is not mounted: systemctl status and journalctl -u of its .mount unit "
    "(systemd-escape --path --suffix=mount <mount point>) say why; rerun playbooks/storage.yml (role model_storage).",
    "model_share_not_run": "The share's probe failed (its evidence has the output): check that python3 runs on the node "
    "and that the mount point is readable by root.",
    # the local model cache (roles/model_storage; module_utils/rackforge/cache_check.py)
    "model_cache_array": "The cache's RAID0 is not serving (cat /proc/mdstat, mdadm --detail /dev/md/rackforge_cache, "
    "lsblk): a member disk is gone or failed. RAID0 keeps no copy: replace the disk, stop the array, wipe its members and "
    "rerun playbooks/storage.yml (model_storage_wipe_ok) to make it anew; the models are copied from the share again.",
    "model_cache_not_mounted": "The cache's filesystem is not mounted: systemctl status and journalctl -u of its .mount unit "
    "say why; rerun playbooks/storage.yml (role model_storage).",
    "model_cache_full": "The cache has less free space than health_checks_model_cache_min_free_gb: remove models no "
    "longer served (du -sh <cache>/*), or add disks to the hardware profile's cache.",
    "model_cache_not_run": "The cache's check could not run (its evidence has the error): check that /proc/mdstat is "
    "readable and python3 runs on the node.",
    # fabric acceptance (playbooks/fabric_acceptance.yml)
    "acceptance_incomplete": "The last fabric acceptance started on this node but did not finish (its job was killed, or the "
    "node became unreachable): read that run's output, fix the cause and rerun playbooks/fabric_acceptance.yml.",
    "rdma_acceptance": "The rail failed the pairwise RDMA acceptance: check the NIC's link (ibstat, ethtool -S counters), "
    "its cable and switch port, PFC/ECN on the lossless priority, then rerun playbooks/fabric_acceptance.yml.",
    "rdma_bandwidth": "RDMA write bandwidth below the floor: look for PFC pauses or ECN marks (ethtool -S), a link trained "
    "below its rate, or a NIC in a narrow PCIe slot.",
    "rdma_latency": "RDMA write latency above the ceiling: look for congestion (PFC pauses, CNPs), a wrong traffic class, "
    "or a path through extra switch hops.",
    "kubernetes_gpu_gate": "The node joined but is not Ready or does not advertise all its GPUs (kubectl describe node): check "
    "the nvidia-device-plugin pod on it (kubectl -n kube-system logs), containerd's nvidia runtime and the driver, then rerun "
    "playbooks/join.yml; the gate uncordons only a node it cordoned itself (label rackforge.io/gpu-gate).",
    "rdma_cm": "RDMA-CM could not connect the rail to the partner's RoCE address (verbs with a GID may still work): check "
    "the rail's IPv4 address and route (ip addr/route on its netdev), ARP between the rails (arp_ignore/arp_announce on "
    "multi-NIC hosts, the neighbour table), then rerun playbooks/fabric_acceptance.yml.",
    "nvlink_bandwidth": "A GPU pair copies slower than the node's other pairs: check its NVLinks (nvidia-smi nvlink -s/-e) "
    "and the NVSwitch fabric; reseat or RMA the baseboard if links are degraded.",
    "nvlink_bandwidth_not_run": "nvbandwidth could not run (output below): build NVIDIA/nvbandwidth on the node and set "
    "fabric_acceptance_nvbandwidth to it.",
    "nccl_busbw": "All-reduce bus bandwidth below the floor: check NVLink/NVSwitch health, the fabric manager, GPU clocks "
    "and a GPU pair the nvbandwidth matrix shows slow.",
    "nccl_busbw_not_run": "all_reduce_perf could not run (output below): build NVIDIA/nccl-tests on the node and set "
    "fabric_acceptance_all_reduce_perf to it.",
    "nccl_results": "nccl-tests found wrong results: a GPU or link corrupts data; drain the node, check ECC and Xids, and RMA "
    "the GPU that fails alone.",
    "gpudirect_topology": "No GPU shares a PCIe switch with an RDMA NIC: GPUDirect RDMA would cross the root complex. "
    "Check the hardware profile's gpudirect_rdma and rdma_nic_pci_ids against lspci -tv; set gpudirect_rdma: none "
    "for a node without a shared switch.",
    "gpudirect_acs": "ACS redirects peer traffic on a GPU<->NIC switch port: set rdma_roce_gpudirect_acs: disable "
    "(setpci now and rackforge-gpudirect-acs.service at every boot) and rerun playbooks/network.yml, or disable ACS "
    "in the BIOS. ACS isolates devices: disabling it is the operator's decision.",
    "gpudirect_acs_not_run": "lspci could not read the PCIe switch ports (output below): install pciutils and run as root "
    "(without root lspci prints no capabilities).",
    "gpudirect_iommu_not_run": "The devices' IOMMU groups show no type (a kernel before 5.0): read the kernel command line "
    "(iommu=pt, intel_iommu/amd_iommu) and dmesg for the IOMMU's mode by hand, or upgrade the kernel.",
    "gpudirect_iommu": "The IOMMU translates GPU/NIC DMA: add iommu=pt (with intel_iommu=on / amd_iommu=on) to the kernel "
    "command line, or turn the IOMMU off, then reboot. rackforge does not change the boot loader.",
    "gpudirect_peermem": "nvidia-peermem is not loaded or not registered with the RDMA core: it needs MLNX_OFED's ib_core "
    "(its peer-memory API); rerun playbooks/network.yml, or on Linux's own RDMA stack use gpudirect_rdma: dmabuf.",
    "gpudirect_peermem_boot": "nvidia-peermem is not loaded at boot: rerun playbooks/network.yml (it writes "
    "/etc/modules-load.d/rackforge-gpudirect.conf).",
    "gpudirect_dmabuf": "dma-buf GPUDirect RDMA needs Linux 5.12+ and NVIDIA's open kernel module loaded: install the "
    "open flavour (nvidia_driver_kernel_module_type: open; NVIDIA's repository calls the package nvidia-driver-<branch>-open) "
    "and reboot, or use peermem over MLNX_OFED.",
}
NOT_RUN_REMEDY = "The check could not run: install or fix %s (the command and its output are below), then rerun playbooks/health_check.yml."
UNKNOWN_REMEDY = "No remedy is recorded for check %s: read its message; add one to REMEDIES in module_utils/rackforge/remedies.py."
