"""The inventories the lab writes under inventories/lab, from the containers it started."""

from __future__ import annotations

import hashlib
import json
import os

from labcore.containers import CONTROL_DIR, CP_IP, HERE, INVENTORY, MIRROR_IP, STATE, WEBHOOK_PORT


def _yaml(value, indent=0):
    """Tiny YAML emitter for the inventory (dicts, lists, scalars); keeps lab.py stdlib-only."""
    pad = " " * indent
    lines = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, (dict, list)) and v:
                lines.append("%s%s:" % (pad, k))
                lines.append(_yaml(v, indent + 2))
            else:
                lines.append(
                    "%s%s: %s" % (pad, k, json.dumps(v) if not isinstance(v, (dict, list)) else ("{}" if isinstance(v, dict) else "[]"))
                )
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, (dict, list)):
                inner = _yaml(v, indent + 2).lstrip()
                lines.append("%s- %s" % (pad, inner))
            else:
                lines.append("%s- %s" % (pad, json.dumps(v)))
    return "\n".join(lines)


def sha256_file(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def hardware_expectations(prof):
    """What the inventory expects of a profile (the operator's view, not the simulator's)."""
    g = prof["gpu"]
    rdma = [n for n in prof["nics"] if n["role"] == "rdma"]
    mgmt = [n["netdev"] for n in prof["nics"] if n["role"] == "management"]
    data_nvme = [d for d in prof.get("nvme", []) if not d.get("boot")]
    return {
        "gpu_count": g["count"],
        "gpu_pci_ids": ["%s:%s" % (g["pci_vendor"][2:], g["pci_device"][2:])],
        "gpu_model": g["name"],
        "nvswitch": bool(prof.get("nvswitch", {}).get("count")),
        "nvlinks_per_gpu": g["nvlink"]["links"],
        "nvlink_speed_gbps": g["nvlink"]["speed_gbps"],
        "rdma_nic_count": len(rdma),
        "rdma_nic_pci_ids": sorted({"%s:%s" % (n["pci_vendor"][2:], n["pci_device"][2:]) for n in rdma}),
        "rdma_link_layer": "Ethernet",
        "rdma_rate_gbps": rdma[0]["rate"] if rdma else 0,
        "management_interfaces": mgmt,
        # GPUs and NICs behind shared PCIe switches, over Debian's inbox RDMA stack: dma-buf
        "gpudirect_rdma": "dmabuf" if prof.get("pcie", {}).get("switches") else "none",
        # the local model cache's disks: the data NVMe by model (the boot disk is not one of them)
        "cache_devices": [{"model": m} for m in sorted({d["model"] for d in data_nvme})],
        "cache_device_count": len(data_nvme),
    }


def host_entry(port, ip):
    return {"ansible_port": port, "rackforge_lab_ip": ip, "rackforge_mgmt_address": ip}


def write_inventory(hosts, key, all_profiles):
    os.makedirs(os.path.join(INVENTORY, "group_vars", "all"), exist_ok=True)
    groups = {"gpu_nodes": {}, "kube_control_plane": {}, "monitoring_hosts": {}}
    for name, h in hosts.items():
        entry = host_entry(h["port"], h["ip"])
        if h["profile"]:
            entry["rackforge_hw_profile"] = h["profile"]
        groups[h["group"]][name] = entry
    inv = {"all": {"children": {"gpu_nodes": {"hosts": groups["gpu_nodes"]}}}}
    for group in ("kube_control_plane", "monitoring_hosts"):
        if groups[group]:
            inv["all"]["children"][group] = {"hosts": groups[group]}
    header = "---\n# Written by lab/lab.py from the containers it started. Never hand-edited.\n"
    with open(os.path.join(INVENTORY, "hosts.yml"), "w") as fh:
        fh.write(header + _yaml(inv) + "\n")
    lab_vars = {
        "ansible_host": "127.0.0.1",
        "ansible_user": "root",
        "ansible_ssh_private_key_file": key,
        # the lab's throwaway containers get new host keys on every start: only here is checking off
        "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
        # a lab-only SSH control directory, so that `lab.py reboot` can drop the stale masters
        "ansible_control_path_dir": CONTROL_DIR,
        "rackforge_lab": True,
        "rackforge_sysfs_root": "/var/lib/hwsim/sys",
        "rackforge_lab_mirror": "http://%s" % MIRROR_IP,
        "rackforge_lab_mirror_key_sha256": sha256_file(os.path.join(STATE, "mirror", "rackforge-lab.asc")),
        "rackforge_lab_runfiles": {
            f[len("NVIDIA-Linux-x86_64-") : -len(".run")]: sha256_file(os.path.join(STATE, "mirror", "vendor", "runfile", f))
            for f in sorted(os.listdir(os.path.join(STATE, "mirror", "vendor", "runfile")))
        },
        "rackforge_lab_calico_manifests": {
            v: sha256_file(os.path.join(STATE, "mirror", "calico", v, "tigera-operator.yaml"))
            for v in sorted(os.listdir(os.path.join(STATE, "mirror", "calico")))
        },
        "rackforge_lab_device_plugin_manifests": {
            v: sha256_file(os.path.join(STATE, "mirror", "k8s-device-plugin", v, "nvidia-device-plugin.yml"))
            for v in sorted(os.listdir(os.path.join(STATE, "mirror", "k8s-device-plugin")))
        },
        "rackforge_hardware_profiles": {n: hardware_expectations(p) for n, p in all_profiles.items()},
        # where Alertmanager sends the lab's notifications: lab/webhook_receiver.py on the control
        # plane, started by tests/integration/test_alerting.py (nothing listens there otherwise)
        "rackforge_lab_webhook_url": "http://%s:%d/alerts" % (CP_IP, WEBHOOK_PORT),
    }
    with open(os.path.join(INVENTORY, "group_vars", "all", "lab.yml"), "w") as fh:
        fh.write(header + _yaml(lab_vars) + "\n")
    src = os.path.join(HERE, "inventory_vars")
    for fname in sorted(os.listdir(src)):
        with open(os.path.join(src, fname)) as fin, open(os.path.join(INVENTORY, "group_vars", "all", fname), "w") as fout:
            fout.write(fin.read())


def write_fresh_inventory(path, name, port, ip, profile, lab_hosts):
    """inventories/lab/fresh.yml: one never-converged node, and the shared lab's control plane,
    so the fresh node can join (or preview its join)."""
    entry = host_entry(port, ip)
    entry["rackforge_hw_profile"] = profile
    inv = {"all": {"children": {"gpu_nodes": {"hosts": {name: entry}}}}}
    cps = {n: host_entry(h["port"], h["ip"]) for n, h in lab_hosts.items() if h.get("group") == "kube_control_plane"}
    if cps:
        inv["all"]["children"]["kube_control_plane"] = {"hosts": cps}
    with open(path, "w") as fh:
        fh.write("---\n# Written by lab/lab.py fresh: one never-converged node (and the lab's control plane).\n" + _yaml(inv) + "\n")
