"""hwsim state: paths, the node's profile and faults, volatile GPU/NIC state (SIMULATION).

GPU faults (`gpu=<slot>`: the GPU's index in the profile, which is its nvidia-smi index while no
GPU is missing) act at the NVML layer (hwsimlib/nvml.py), gpu_missing at the PCI layer too (the GPU
is gone from the sysfs tree and from NVML's enumeration)."""

from __future__ import annotations

import hashlib
import json
import os
import sys

ETC = os.environ.get("HWSIM_ETC", "/etc/hwsim")
VARLIB = os.environ.get("HWSIM_VARLIB", "/var/lib/hwsim")
RUN = os.environ.get("HWSIM_RUN", "/run/hwsim")
SYSFS = os.environ.get("HWSIM_SYSFS", os.path.join(VARLIB, "sys"))
DRIVER_FILE = os.environ.get("HWSIM_DRIVER_FILE", "/usr/lib/hwsim/driver-version")
FM_FILE = os.environ.get("HWSIM_FM_FILE", "/usr/lib/hwsim/fabricmanager-version")

FAULTS = {
    "nvlink_inactive": "GPU <gpu> links <l1,l2,..> print <inactive>",
    "gpu_links_all_inactive": "GPU <gpu>: NVML cannot read NVLink (all links inactive)",
    "fabric_in_progress": "NVSwitch fabric stays 'In Progress' even with fabric manager running",
    "gpu_missing": "GPU <gpu> has fallen off the bus (gone from PCI and nvidia-smi)",
    "rdma_port_down": "port 1 of <ca> is Down/Disabled",
    "pfc_off": "<ca> refuses PFC: every priority stays disabled",
    "roce_mtu_1024": "<ca> active MTU stuck at 1024",
    "nvlink_errors": "GPU <gpu> link <link> gains <count> replay/recovery/CRC errors",
    "gpu_setting_unsupported": "GPU <gpu|all>: NVML answers Not Supported to <op> (persistence, app-clocks, locked-clocks, power-limit)",
    "pause_storm": "<ca> reports <count> tx_pause_storm_error_events (the NIC cut off a PFC pause storm)",
    "gpu_ecc_uncorrectable": "GPU <gpu> counts <count> volatile uncorrectable DRAM ECC errors",
    "gpu_row_remap_pending": "GPU <gpu> has a row remap pending (it takes effect at the next GPU reset)",
    "gpu_row_remap_failure": "GPU <gpu> failed to remap a row (no spare rows left)",
    "gpu_pcie_downtrained": "GPU <gpu> busy with its PCIe link at x<width> (default 8) of x16",
    "gpu_hw_slowdown": "GPU <gpu> busy with its clocks held by HW Slowdown and the power brake",
    "gpu_xid": "GPU <gpu> logs Xid <xid> (default 79) with <detail> in the kernel log (/dev/kmsg's format, /run/hwsim/kmsg)",
    "slow_nic": "<ca> moves RDMA traffic at <factor> (default 0.5) of its line rate (perftest)",
    "slow_link": "the path from <ca> to the node at <peer> (address) runs at <factor> (default 0.5) (perftest)",
    "high_latency": "<ca> adds <us> (default 6) microseconds to every RDMA round trip (perftest)",
    "rdma_cm_unresolved": "<ca>'s RoCE address answers no ARP: RDMA-CM fails, verbs with a GID still work (perftest -R)",
    "slow_gpu_pair": "GPUs <gpu> and <peer> copy at <factor> (default 0.5) of their NVLink speed (nvbandwidth, nccl-tests)",
    "acs_enabled": "the PCIe switch ports above GPU <gpu> have ACS redirect on again (as after a hot reset; pci_sim.py)",
    "iommu_dma": "the IOMMU translates DMA (iommu_groups/*/type DMA-FQ, not passthrough)",
    "nfs_server_down": "the model share's NFS server refuses connections (mount.nfs, nfs_client.py)",
    "nfs_server_hung": "the model share's NFS server accepts and never answers: a mount hangs",
    "nfs_export_missing": "the NFS server has no such export (mount.nfs: ENOENT from the server)",
    "nvme_missing": "the NVMe disk with <serial> is gone (lsblk; a raid0 over it is broken: block_sim.py)",
}


# Kernel modules of the simulated kernel: `modinfo -p` of Debian 12's linux-image-6.1.0-57-amd64
# (captured into tests/fixtures/captured/modinfo-p-debian12-6.1.0-57.txt). Inbox ib_uverbs has
# no parameters: `disable_raw_qp_enforcement` exists only in MLNX_OFED's ib_uverbs, and


def kmsg_append(message, prio=6):
    """One record in the simulated kernel's log, as /dev/kmsg prints it: "<prio>,<seq>,<usec>,-;<message>"
    ($HWSIM_RUN/kmsg, SIMULATION: a lab container has no /dev/kmsg of its own and the host's is
    never read or written; it lives under /run, so a simulated reboot empties it)."""
    path = os.environ.get("HWSIM_KMSG", os.path.join(RUN, "kmsg"))
    try:
        with open(path) as fh:
            seq = sum(1 for _ in fh)
    except OSError:
        seq = 0
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as fh:
        fh.write("%d,%d,%d,-;%s\n" % (prio, seq, 5000000 + seq * 1000, message))


def load_json(path, default):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return default


def save_json(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)


def profile():
    prof = load_json(os.path.join(ETC, "profile.json"), None)
    if prof is None:
        sys.stderr.write("hwsim: no profile at %s/profile.json (run 'hwsim init')\n" % ETC)
        sys.exit(2)
    return prof


def node():
    return load_json(os.path.join(VARLIB, "node.json"), {"faults": [], "seed": "lab"})


def faults(kind=None):
    found = node()["faults"]
    return [f for f in found if kind is None or f["kind"] == kind]


def nic_faulted(kind, nic):
    """True when a fault of this kind is injected on this NIC (by its CA name)."""
    return nic["ca"] in {f["ca"] for f in faults(kind)}


def uuid_for(seed, *parts):
    h = hashlib.sha256(("%s/%s" % (seed, "/".join(str(p) for p in parts))).encode()).hexdigest()
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])


def guid_for(seed, *parts):
    h = hashlib.sha256(("guid/%s/%s" % (seed, "/".join(str(p) for p in parts))).encode()).hexdigest()
    return "a088c203" + h[:8]


def gpu_state():
    prof = profile()
    g = prof["gpu"]
    default = {
        str(i): {
            "persistence": False,
            "app_graphics": g["clocks"]["default_app_graphics"],
            "app_mem": g["clocks"]["default_app_mem"],
            "locked": None,
            "power_limit": g["power"]["default"],
        }
        for i in range(g["count"])
    }
    state = load_json(os.path.join(RUN, "gpu.json"), {})
    for key, value in default.items():
        state.setdefault(key, value)
    return state


def nic_state():
    prof = profile()
    default_map = {str(d): d // 8 for d in range(64)}
    default = {
        nic["ca"]: {
            "trust": "pcp",
            "pfc": [0] * 8,
            "cable_len": 7,
            "dscp2prio": default_map,
            "buffer_size": [262016, 0, 0, 0, 0, 0, 0, 0],
            "prio2buffer": [0] * 8,
        }
        for nic in prof["nics"]
    }
    state = load_json(os.path.join(RUN, "nic.json"), {})
    for key, value in default.items():
        state.setdefault(key, value)
    return state


def present_gpus():
    prof = profile()
    missing = {int(f["gpu"]) for f in faults("gpu_missing")}
    return [i for i in range(prof["gpu"]["count"]) if i not in missing]


def loaded_driver():
    return load_json(os.path.join(RUN, "driver.json"), {}).get("version")


def installed(path):
    try:
        with open(path) as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def fabric_state():
    """(state, status) as nvidia-smi -q prints them for an NVSwitch system."""
    prof = profile()
    if not prof.get("nvswitch", {}).get("count"):
        return "N/A", "N/A"
    if faults("fabric_in_progress"):
        return "In Progress", "N/A"
    fm = load_json(os.path.join(RUN, "fabricmanager.json"), {})
    if fm.get("running") and fm.get("version") == loaded_driver():
        return "Completed", "Success"
    return "Not Started", "N/A"


def pfc_effective(nic, st):
    if nic_faulted("pfc_off", nic):
        return [0] * 8
    return st["pfc"]
