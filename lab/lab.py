#!/usr/bin/env python3
"""rackforge lab: podman containers (Debian 12, systemd as PID 1, sshd) posing as GPU nodes.

    lab.py up [--nodes N] [--profile P] [--node-profile NAME=P ...] [--fault NAME:KIND[:k=v,...] ...]
    lab.py down              remove every container, network, image and file the lab created
    lab.py reboot NAME       restart a node's container: /run is a tmpfs, so the simulated GPU and
                             NIC runtime state is lost exactly as on a reboot
    lab.py exec NAME CMD...  run a command in a node (tests use it to read simulator state)
    lab.py fault NAME KIND [k=v ...] | lab.py fault NAME clear

What is real: the OS, systemd, sshd, apt, files, namespaced sysctls, and the rdma-core tools
ibstat/ibstatus (Debian's infiniband-diags, installed by the roles), which read the simulated
sysfs tree at /sys/class/infiniband through the preload library lab/sysfs_redirect (built here,
listed in the node's /etc/ld.so.preload). What is simulated: the GPU/NIC hardware, that sysfs
tree and the other driver tools (lab/hwsim), the vendor packages (lab/mirror). Traffic stays on
loopback (SSH on 127.0.0.1 ports) and the lab's own podman network; the nodes' apt sources name
only the lab mirror. Uses only the Python standard library (runs before the venv exists).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STATE = os.path.join(HERE, ".state")
CONTROL_DIR = os.path.join(STATE, "ssh-control")  # the lab's SSH masters
INVENTORY = os.path.join(ROOT, "inventories", "lab")
PREFIX = "rackforge-lab"
NETWORK = PREFIX
SUBNET = "10.89.77.0/24"
MIRROR_IP = "10.89.77.2"
CP_IP = "10.89.77.10"
SSH_BASE_PORT = int(os.environ.get("RACKFORGE_LAB_SSH_PORT", "2230"))
LABEL = "io.rackforge.lab=1"
CONFIG_LABEL = "io.rackforge.lab.config"
# every lab container: runc (crun fails on this host's hybrid cgroups), lowered ulimits
# (raising them is refused here), the label `down` removes by
BASE_FLAGS = ["--runtime", "runc", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096", "--label", LABEL]
NODE_FLAGS = [*BASE_FLAGS, "--systemd=always", "--cap-add", "NET_ADMIN"]
# simulated tools (symlinks to hwsim); ibstat and ibstatus are not among them: the real binaries run
NIC_TOOLS = ("ibv_devinfo", "rdma", "mlnx_qos", "ethtool", "show_gids", "modinfo", "modprobe", "lsmod")
# the sysfs redirect library in a node (hwsimlib/nic.py NODE_LIBRARY names the same path)
REDIRECT_LIB = "/usr/lib/hwsim/libhwsim_sysfs.so"


def sh(cmd, check=True, capture=True, inp=None):
    res = subprocess.run(
        cmd, check=False, text=True, input=inp, stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE if capture else None
    )
    if check and res.returncode != 0:
        sys.stderr.write("lab: command failed (%d): %s\n%s%s" % (res.returncode, " ".join(cmd), res.stdout or "", res.stderr or ""))
        sys.exit(1)
    return res


def podman(*args, **kw):
    return sh(["podman", *args], **kw)


def exists(kind, name):
    return podman(kind, "exists", name, check=False).returncode == 0


def profiles():
    pdir = os.path.join(HERE, "hwsim", "profiles")
    return {f[:-5]: json.load(open(os.path.join(pdir, f))) for f in sorted(os.listdir(pdir)) if f.endswith(".json")}


def ssh_key():
    key = os.path.join(STATE, "id_ed25519")
    if not os.path.exists(key):
        os.makedirs(STATE, exist_ok=True)
        sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rackforge-lab", "-f", key])
    return key


def wait_running(name, timeout=90):
    deadline = time.time() + timeout
    state = ""
    while time.time() < deadline:
        res = podman("exec", name, "systemctl", "is-system-running", check=False)
        state = res.stdout.strip()
        if state in ("running", "degraded"):
            return state
        time.sleep(1)
    sys.stderr.write("lab: %s did not reach systemd 'running' within %ds (last: %r)\n" % (name, timeout, state))
    sys.exit(1)


HWSIM_BOOT_UNIT = """[Unit]
Description=rackforge lab hardware simulator: boot (SIMULATION: resets volatile GPU/NIC state, loads the installed driver)
DefaultDependencies=no
After=local-fs.target
Before=sysinit.target network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/hwsim boot

[Install]
WantedBy=sysinit.target
"""


def install_access(name, pub):
    """The lab key for root, and no package source outside the lab: the node's distro source is
    the lab mirror's /debian (signed); the roles add its /vendor as the NVIDIA repository."""
    key = open(os.path.join(STATE, "mirror", "rackforge-lab.asc")).read()
    script = f"""set -e
install -d -m 0700 /root/.ssh
printf '%s\\n' '{pub}' > /root/.ssh/authorized_keys
chmod 0600 /root/.ssh/authorized_keys
rm -f /etc/apt/sources.list.d/*
: > /etc/apt/sources.list
install -d -m 0755 /etc/apt/keyrings
cat > /etc/apt/keyrings/rackforge-lab-distro.asc <<'KEY'
{key}KEY
echo 'deb [signed-by=/etc/apt/keyrings/rackforge-lab-distro.asc] http://{MIRROR_IP}/debian bookworm main' \\
  > /etc/apt/sources.list.d/rackforge-lab-distro.list
apt-get update -qq  # an installed server has its package lists
"""
    podman("exec", "-i", name, "bash", "-s", inp=script)


NETDEVS_UNIT = """[Unit]
Description=rackforge lab: the RDMA NICs' netdevs with their RoCE addresses (SIMULATION: veth links)
DefaultDependencies=no
Before=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/rackforge-lab-netdevs

[Install]
WantedBy=multi-user.target
"""


def netdevs_script(prof, index):
    """veth links named as the profile's RDMA netdevs, each with an address in 10.201.<nic>.0/24,
    so a node has several interfaces as a real multi-NIC GPU node does (in its own netns only)."""
    lines = ["#!/bin/sh", "set -e", "# rackforge lab: the RDMA NICs as veth links in this container's network namespace"]
    rdma = [n for n in prof["nics"] if n["role"] == "rdma"]
    for i, nic in enumerate(rdma):
        dev = nic["netdev"]
        # veth, not dummy: the host may not have the dummy module, and a lab never loads one
        lines.append("ip link show %s >/dev/null 2>&1 || ip link add %s mtu 9000 type veth peer name rf-peer%d mtu 9000" % (dev, dev, i))
        lines.append("ip link set rf-peer%d up" % i)
        lines.append("ip addr replace 10.201.%d.%d/24 dev %s" % (i, 10 + index, dev))
        lines.append("ip link set %s up" % dev)
    return "\n".join(lines) + "\n"


def copy_hwsim(name):
    """The simulator (entry script + hwsimlib package) into /usr/lib/hwsim, callable as
    /usr/lib/hwsim/hwsim (the simulated packages' shims) and /usr/local/sbin/hwsim."""
    podman("exec", name, "mkdir", "-p", "/usr/lib/hwsim/hwsimlib")
    podman("cp", os.path.join(HERE, "hwsim", "hwsim.py"), "%s:/usr/lib/hwsim/hwsim.py" % name)
    lib = os.path.join(HERE, "hwsim", "hwsimlib")
    for fname in sorted(os.listdir(lib)):
        if fname.endswith(".py"):
            podman("cp", os.path.join(lib, fname), "%s:/usr/lib/hwsim/hwsimlib/%s" % (name, fname))
    link = "ln -sf hwsim.py /usr/lib/hwsim/hwsim && ln -sf /usr/lib/hwsim/hwsim.py /usr/local/sbin/hwsim"
    podman("exec", name, "sh", "-c", "chmod 0755 /usr/lib/hwsim/hwsim.py && " + link)


def sysfs_redirect_library():
    """lab/sysfs_redirect/sysfs_redirect.c built with this machine's compiler (the nodes have
    none), cached by source hash under .cache/sysfs_redirect (lab/sysfs_redirect/build.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sysfs_redirect_build", os.path.join(HERE, "sysfs_redirect", "build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        return mod.build()
    except mod.BuildError as exc:
        sys.exit("lab: %s" % exc)


def install_sysfs_redirect(name):
    """Show the node's simulated tree at /sys/class/infiniband[_mad] to every (dynamically linked)
    program, read-only: the library goes in first (a rename, never a half-written file), then
    into /etc/ld.so.preload, which the dynamic loader reads for each program it starts."""
    podman("cp", sysfs_redirect_library(), "%s:%s.new" % (name, REDIRECT_LIB))
    script = f"""set -e
chmod 0644 {REDIRECT_LIB}.new && mv -f {REDIRECT_LIB}.new {REDIRECT_LIB}
grep -qxF {REDIRECT_LIB} /etc/ld.so.preload 2>/dev/null || echo {REDIRECT_LIB} >> /etc/ld.so.preload
"""
    podman("exec", "-i", name, "sh", "-s", inp=script)


def install_hwsim(name, index, profile_name):
    """Copy the simulator into a node, initialise its hardware from the profile and make the
    simulated sysfs tree the one the real rdma-core tools read."""
    copy_hwsim(name)
    install_sysfs_redirect(name)
    prof = os.path.join(HERE, "hwsim", "profiles", profile_name + ".json")
    podman("cp", prof, "%s:/tmp/profile.json" % name)
    links = " ".join("ln -sf /usr/local/sbin/hwsim /usr/local/sbin/%s;" % t for t in NIC_TOOLS)
    netdevs = netdevs_script(json.load(open(prof)), index)
    script = f"""set -e
cat > /usr/local/sbin/rackforge-lab-netdevs <<'SCRIPT'
{netdevs}SCRIPT
chmod 0755 /usr/local/sbin/rackforge-lab-netdevs
cat > /etc/systemd/system/rackforge-lab-netdevs.service <<'UNIT'
{NETDEVS_UNIT}UNIT
{links}
cat > /etc/systemd/system/hwsim-boot.service <<'UNIT'
{HWSIM_BOOT_UNIT}UNIT
systemctl daemon-reload
systemctl enable -q hwsim-boot.service
systemctl enable -q --now rackforge-lab-netdevs.service
/usr/local/sbin/hwsim init /tmp/profile.json --seed {name} --index {index}
rm -f /tmp/profile.json
"""
    podman("exec", "-i", name, "bash", "-s", inp=script)


def install_kernel_tools(name):
    """A host without GPUs or RDMA NICs (the control plane) still gets the simulator's modinfo,
    modprobe and lsmod: a container cannot load real kernel modules."""
    copy_hwsim(name)
    script = """set -e
for t in modinfo modprobe lsmod; do ln -sf /usr/local/sbin/hwsim /usr/local/sbin/$t; done
"""
    podman("exec", "-i", name, "bash", "-s", inp=script)


def start_mirror():
    mirror_dir = os.path.join(STATE, "mirror")
    sh([sys.executable, os.path.join(HERE, "mirror", "build.py"), mirror_dir], capture=False)
    name = PREFIX + "-mirror"
    if not exists("container", name):
        podman(
            "run",
            "-d",
            "--name",
            name,
            "--hostname",
            "mirror",
            "--network",
            NETWORK,
            "--ip",
            MIRROR_IP,
            "-v",
            "%s:/srv/mirror:ro" % mirror_dir,
            *BASE_FLAGS,
            image(),
            "python3",
            "-m",
            "http.server",
            "80",
            "--directory",
            "/srv/mirror",
        )
    else:
        podman("start", name)


_IMAGE = []


def image():
    if not _IMAGE:
        _IMAGE.append(sh(["bash", os.path.join(HERE, "build-image.sh")], capture=True).stdout.strip().splitlines()[-1])
    return _IMAGE[0]


def parse_fault(text):
    """'lab-node1:nvlink_inactive:gpu=3,links=4+5' -> ('lab-node1', ['nvlink_inactive', 'gpu=3', 'links=4,5'])"""
    parts = text.split(":")
    if len(parts) < 2:
        sys.exit("lab: --fault wants NODE:KIND[:key=value,...], got %r" % text)
    args = [parts[1]]
    if len(parts) > 2:
        args += [kv.replace("+", ",") for kv in parts[2].split(",") if kv]
    return parts[0], args


def cmd_up(opts):
    all_profiles = profiles()
    node_profiles = {}
    for i in range(1, opts.nodes + 1):
        node_profiles["lab-node%d" % i] = opts.profile
    for item in opts.node_profile or []:
        name, _, prof = item.partition("=")
        node_profiles[name] = prof
    for name, prof in node_profiles.items():
        if prof not in all_profiles:
            sys.exit("lab: node %s: unknown profile %r; known: %s" % (name, prof, ", ".join(all_profiles)))
    faults = [parse_fault(f) for f in opts.fault or []]
    for name, _args in faults:
        if name not in node_profiles:
            sys.exit("lab: --fault names %r, which is not a lab node (%s)" % (name, ", ".join(node_profiles)))
    key = ssh_key()
    pub = open(key + ".pub").read().strip()
    if not exists("network", NETWORK):
        podman("network", "create", "--subnet", SUBNET, "--label", LABEL, NETWORK)
    start_mirror()
    hosts = {}
    members = [("lab-cp1", CP_IP, None)] if opts.control_plane else []
    members += [(name, "10.89.77.%d" % (10 + i), prof) for i, (name, prof) in enumerate(node_profiles.items(), start=1)]
    wanted = {"%s-%s" % (PREFIX, name) for name, _ip, _prof in members}
    for cname in podman("ps", "-a", "--format", "{{.Names}}", "--filter", "label=" + LABEL).stdout.split():
        # a node of an earlier `up` with more nodes, or without the control plane: not part of this lab
        if re.match(r"^%s-lab-(node[0-9]+|cp1)$" % PREFIX, cname) and cname not in wanted:
            podman("rm", "-f", "-t", "2", cname, check=False)
    for idx, (name, ip, prof) in enumerate(members):
        port = SSH_BASE_PORT + idx
        cname = start_node(name, ip, port, prof, idx, pub, [args for node_name, args in faults if node_name == name])
        hosts[name] = {"port": port, "ip": ip, "profile": prof, "container": cname}
    # systemd reports running before sshd answers on a loaded machine: wait for every banner, so
    # the first play never meets a refused or timed-out connection
    for h in hosts.values():
        wait_ssh(h["port"])
    write_inventory(hosts, key, all_profiles)
    with open(os.path.join(STATE, "lab.json"), "w") as fh:
        json.dump(hosts, fh, indent=1)
    for name, h in hosts.items():
        print("lab: %-10s %-14s ssh 127.0.0.1:%d  profile %s" % (name, h["ip"], h["port"], h["profile"] or "control-plane"))


def node_config(ip, port, prof, faults):
    """What a node container was made from: its address, profile and faults, the image, the
    simulator's and the mirror's sources. A container made from anything else is replaced, so a
    `make test` after a `make lab` with other options (or older code) gets the lab it asks for."""
    import hashlib

    h = hashlib.sha256(json.dumps({"ip": ip, "port": port, "profile": prof, "faults": faults, "image": image()}, sort_keys=True).encode())
    for sub in ("hwsim", "sysfs_redirect", "nvml", "mirror", "k8sim"):
        for dirpath, _dirs, files in sorted(os.walk(os.path.join(HERE, sub))):
            for fname in sorted(files):
                if fname.endswith((".py", ".c", ".h", ".json", ".sh", ".txt")) and "__pycache__" not in dirpath:
                    h.update(fname.encode() + open(os.path.join(dirpath, fname), "rb").read())
    h.update(open(__file__, "rb").read())
    return h.hexdigest()[:16]


def start_node(name, ip, port, prof, idx, pub, faults=()):
    """Start (or restart) one lab container; a new one gets the lab key, hwsim and its faults.
    An existing container made from another configuration (node_config) is replaced."""
    cname = "%s-%s" % (PREFIX, name)
    config = node_config(ip, port, prof, [list(f) for f in faults])
    if exists("container", cname):
        made = podman("inspect", "-f", '{{ index .Config.Labels "%s" }}' % CONFIG_LABEL, cname, check=False).stdout.strip()
        if made != config:
            print("lab: %s was made from another configuration: replacing it" % name)
            podman("rm", "-f", "-t", "2", cname, check=False)
    fresh = not exists("container", cname)
    if fresh:
        podman(
            "run",
            "-d",
            "--name",
            cname,
            "--hostname",
            name,
            "--network",
            NETWORK,
            "--ip",
            ip,
            "-p",
            "127.0.0.1:%d:22" % port,
            "--label",
            "%s=%s" % (CONFIG_LABEL, config),
            *NODE_FLAGS,
            image(),
        )
    else:
        podman("start", cname)
    wait_running(cname)
    if fresh:
        install_access(cname, pub)
        if prof:
            install_hwsim(cname, idx, prof)
        else:
            install_kernel_tools(cname)
        for args in faults:
            podman("exec", cname, "/usr/local/sbin/hwsim", "fault", "add", *args)
    return cname


FRESH_IP, FRESH_INDEX = "10.89.77.50", 50


def cmd_fresh(opts):
    """A never-converged node beside the shared lab, in its own inventory (inventories/lab/fresh.yml),
    for check-mode runs against a fresh server; `lab.py fresh --remove` deletes it again."""
    path = os.path.join(INVENTORY, "fresh.yml")
    cname = "%s-%s" % (PREFIX, opts.name)
    if opts.remove:
        podman("rm", "-f", "-t", "2", cname, check=False)
        if os.path.exists(path):
            os.remove(path)
        print("lab: removed %s" % opts.name)
        return 0
    if not exists("network", NETWORK):
        sys.exit("lab: no lab network: run `lab.py up` first")
    key = ssh_key()
    port = SSH_BASE_PORT + FRESH_INDEX
    start_node(opts.name, FRESH_IP, port, opts.profile, FRESH_INDEX, open(key + ".pub").read().strip())
    wait_ssh(port)
    entry = {"ansible_port": port, "rackforge_lab_ip": FRESH_IP, "rackforge_mgmt_address": FRESH_IP, "rackforge_hw_profile": opts.profile}
    inv = {"all": {"children": {"gpu_nodes": {"hosts": {opts.name: entry}}}}}
    # the shared lab's control plane, so the fresh node can join (or preview its join)
    lab_hosts = json.load(open(os.path.join(STATE, "lab.json")))
    cps = {
        n: {"ansible_port": h["port"], "rackforge_lab_ip": h["ip"], "rackforge_mgmt_address": h["ip"]}
        for n, h in lab_hosts.items()
        if not h["profile"]
    }
    if cps:
        inv["all"]["children"]["kube_control_plane"] = {"hosts": cps}
    with open(path, "w") as fh:
        fh.write("---\n# Written by lab/lab.py fresh: one never-converged node (and the lab's control plane).\n" + _yaml(inv) + "\n")
    print("lab: %s %s ssh 127.0.0.1:%d profile %s (inventory %s)" % (opts.name, FRESH_IP, port, opts.profile, path))
    return 0


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


def hardware_expectations(prof):
    """What the inventory expects of a profile (the operator's view, not the simulator's)."""
    g = prof["gpu"]
    rdma = [n for n in prof["nics"] if n["role"] == "rdma"]
    mgmt = [n["netdev"] for n in prof["nics"] if n["role"] == "management"]
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
    }


def write_inventory(hosts, key, all_profiles):
    os.makedirs(os.path.join(INVENTORY, "group_vars", "all"), exist_ok=True)
    gpu_hosts = {}
    cp_hosts = {}
    for name, h in hosts.items():
        entry = {"ansible_port": h["port"], "rackforge_lab_ip": h["ip"], "rackforge_mgmt_address": h["ip"]}
        if h["profile"]:
            entry["rackforge_hw_profile"] = h["profile"]
            gpu_hosts[name] = entry
        else:
            cp_hosts[name] = entry
    inv = {"all": {"children": {"gpu_nodes": {"hosts": gpu_hosts}}}}
    if cp_hosts:
        inv["all"]["children"]["kube_control_plane"] = {"hosts": cp_hosts}
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
        "rackforge_hardware_profiles": {n: hardware_expectations(p) for n, p in all_profiles.items()},
    }
    with open(os.path.join(INVENTORY, "group_vars", "all", "lab.yml"), "w") as fh:
        fh.write(header + _yaml(lab_vars) + "\n")
    src = os.path.join(HERE, "inventory_vars")
    for fname in sorted(os.listdir(src)):
        with open(os.path.join(src, fname)) as fin, open(os.path.join(INVENTORY, "group_vars", "all", fname), "w") as fout:
            fout.write(fin.read())


def sha256_file(path):
    import hashlib

    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def cmd_down(_opts):
    for cid in podman("ps", "-aq", "--filter", "label=" + LABEL).stdout.split():
        podman("rm", "-f", "-t", "2", cid, check=False)
    if exists("network", NETWORK):
        podman("network", "rm", "-f", NETWORK, check=False)
    for img in podman("images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split():
        if img.startswith("localhost/%s:" % PREFIX):
            podman("rmi", "-f", img, check=False)
    sh(["rm", "-rf", STATE], check=False)
    # scrape targets of the lab's nodes (the default monitoring_prometheus_config_dir)
    sh(["rm", "-rf", os.path.join(ROOT, "reports", "prometheus")], check=False)
    for entry in os.listdir(INVENTORY) if os.path.isdir(INVENTORY) else []:
        if entry != "README.md":
            sh(["rm", "-rf", os.path.join(INVENTORY, entry)], check=False)
    print("lab: removed containers, network %s, images localhost/%s:*, %s" % (NETWORK, PREFIX, STATE))


def container(name):
    return name if name.startswith(PREFIX) else "%s-%s" % (PREFIX, name)


def cmd_reboot(opts):
    cname = container(opts.name)
    podman("restart", "-t", "5", cname)
    wait_running(cname)
    # the SSH masters of the old boot hang on the dead connection: drop them (lab nodes only)
    if os.path.isdir(CONTROL_DIR):
        for sock in os.listdir(CONTROL_DIR):
            os.remove(os.path.join(CONTROL_DIR, sock))
    node = json.load(open(os.path.join(STATE, "lab.json")))[opts.name]
    # the restarted container has a new veth (new MAC) behind the same IP: forget the old one
    sh(["ip", "neigh", "flush", "to", node["ip"]], check=False)
    wait_ssh(node["port"])
    print("lab: %s rebooted (simulated: container restart, /run cleared)" % opts.name)


def wait_ssh(port, timeout=60):
    """Until sshd answers with its banner on the published 127.0.0.1 port."""
    deadline = time.time() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
                if conn.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        if time.time() > deadline:
            sys.exit("lab: sshd on 127.0.0.1:%d did not answer within %ds" % (port, timeout))
        time.sleep(0.5)


def cmd_exec(opts):
    res = podman("exec", container(opts.name), *opts.command, check=False, capture=False)
    return res.returncode


def cmd_fault(opts):
    if opts.kind == "clear":
        args = ["fault", "clear"]
    else:
        args = ["fault", "add", opts.kind, *opts.args]
    return podman("exec", container(opts.name), "/usr/local/sbin/hwsim", *args, check=False, capture=False).returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up")
    up.add_argument("--nodes", type=int, default=3)
    up.add_argument("--profile", default="hgx-h100-8gpu")
    up.add_argument("--node-profile", action="append", help="NAME=PROFILE")
    up.add_argument("--fault", action="append", help="NODE:KIND[:key=value,...] ('+' separates list items)")
    up.add_argument("--control-plane", type=int, default=1, choices=(0, 1))
    sub.add_parser("down")
    rb = sub.add_parser("reboot")
    rb.add_argument("name")
    ex = sub.add_parser("exec")
    ex.add_argument("name")
    ex.add_argument("command", nargs=argparse.REMAINDER)
    fa = sub.add_parser("fault")
    fa.add_argument("name")
    fa.add_argument("kind")
    fa.add_argument("args", nargs="*")
    fr = sub.add_parser("fresh", help="a never-converged node in inventories/lab/fresh.yml")
    fr.add_argument("name", nargs="?", default="lab-fresh1")
    fr.add_argument("--profile", default="hgx-h100-8gpu")
    fr.add_argument("--remove", action="store_true")
    opts = parser.parse_args()
    commands = {"up": cmd_up, "down": cmd_down, "reboot": cmd_reboot, "exec": cmd_exec, "fault": cmd_fault, "fresh": cmd_fresh}
    return commands[opts.cmd](opts) or 0


if __name__ == "__main__":
    sys.exit(main())
