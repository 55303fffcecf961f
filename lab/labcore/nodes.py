"""What makes a podman container a lab node: access, the simulator, its boot units, (re)start and reboot.

A node's reboot (SIMULATION of the machine's reboot; the OS side of it is real):
- `shutdown -r` / `systemctl reboot` in a node (ansible.builtin.reboot's default command, or
  `lab.py reboot`) is real systemd: the units stop in order, then PID 1 is refused the reboot()
  call (a container has no CAP_SYS_BOOT) and exits with status 0. podman's restart policy
  `always` (containers.NODE_FLAGS) starts the container again; `podman stop`, `podman kill` and
  `lab.py down` are not restarted.
- The restarted container has a new mount namespace: /run is a fresh tmpfs, so the simulator's
  volatile GPU/NIC state (/run/hwsim) is gone and hwsim-boot.service initialises it, as a
  reboot resets the hardware.
- The kernel's /proc/sys/kernel/random/boot_id is the host's and never changes; the lab
  inventory gives the product a boot-time command that does (PID 1's start time).
- podman keeps the network namespace over a policy restart (same veth, same MAC: the host's
  neighbour cache stays right). What the last boot built in it (the nftables ruleset, links,
  extra addresses) would survive, where a real reboot starts without it: the netns reset unit
  below removes it first thing at boot.
- systemd-logind is masked in the lab image; `shutdown -r` schedules the reboot through it, so
  the nodes run it (a real server does).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

from labcore import dcgm
from labcore.containers import (
    BASE_FLAGS,
    CONFIG_LABEL,
    HERE,
    MIRROR_IP,
    NETWORK,
    PREFIX,
    STATE,
    boot_fresh,
    container,
    container_state,
    exists,
    image,
    podman,
    sh,
    wait_running,
)

# simulated tools (symlinks to hwsim); ibstat and ibstatus are not among them: the real binaries run
NIC_TOOLS = ("ibv_devinfo", "rdma", "mlnx_qos", "ethtool", "show_gids", "modinfo", "modprobe", "lsmod")
# the fabric acceptance's benchmarks (simulated: no RDMA device or GPU runs them here)
BENCH_TOOLS = ("ib_write_bw", "ib_write_lat", "nvbandwidth", "all_reduce_perf")
# the NVMe disks and md arrays (hwsimlib/block_sim.py; SIMULATED: a container sees no block device),
# ahead of util-linux's lsblk and wipefs and of mdadm's and xfsprogs' binaries on PATH
BLOCK_TOOLS = ("lsblk", "mdadm", "wipefs", "mkfs.xfs")
# the sysfs redirect library in a node (hwsimlib/nic.py NODE_LIBRARY names the same path)
REDIRECT_LIB = "/usr/lib/hwsim/libhwsim_sysfs.so"

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

# udev assembles md arrays as their members appear, before the local filesystems mount (SIMULATED:
# hwsim's disks and arrays, block_sim.py; the container's /dev and /run are new at every boot)
BLOCK_BOOT_UNIT = """[Unit]
Description=rackforge lab: assemble the simulated md arrays before the local filesystems (SIMULATION of udev's assembly)
DefaultDependencies=no
Wants=local-fs-pre.target
Before=local-fs-pre.target local-fs.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/hwsim block-boot

[Install]
WantedBy=sysinit.target
"""

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

NETNS_RESET_UNIT = """[Unit]
Description=rackforge lab: a reboot's empty kernel network state (SIMULATION: the container keeps its network namespace)
DefaultDependencies=no
After=local-fs.target
Before=sysinit.target network-pre.target rackforge-lab-netdevs.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/rackforge-lab-netns-reset

[Install]
WantedBy=sysinit.target
"""

# eth0 is podman's interface (its address comes from outside, as a management NIC's comes from
# the network configuration at every boot) and lo is the kernel's: everything else the last boot
# made goes, and the lab's RDMA netdevs are made again by rackforge-lab-netdevs.service
NETNS_RESET_SCRIPT = """#!/bin/sh
# rackforge lab (SIMULATION): what the kernel forgets at a reboot, in a container that keeps its network namespace
if command -v nft >/dev/null 2>&1; then nft flush ruleset; fi
for dev in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1); do
  case "$dev" in lo|eth0) ;; *) ip link delete "$dev" 2>/dev/null || true ;; esac
done
for addr in $(ip -o addr show dev lo | awk '{print $4}'); do
  case "$addr" in 127.0.0.1/8|::1/128) ;; *) ip addr delete "$addr" dev lo ;; esac
done
exit 0
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


def install_reboot(name):
    """What a reboot needs in a node (module docstring): logind for `shutdown -r`, and the unit
    that starts each boot from an empty kernel network state."""
    script = f"""set -e
systemctl unmask -q systemd-logind.service
systemctl start systemd-logind.service
cat > /usr/local/sbin/rackforge-lab-netns-reset <<'SCRIPT'
{NETNS_RESET_SCRIPT}SCRIPT
chmod 0755 /usr/local/sbin/rackforge-lab-netns-reset
cat > /etc/systemd/system/rackforge-lab-netns-reset.service <<'UNIT'
{NETNS_RESET_UNIT}UNIT
systemctl daemon-reload
systemctl enable -q rackforge-lab-netns-reset.service
"""
    podman("exec", "-i", name, "bash", "-s", inp=script)


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
    """Show the node's simulated tree at /sys/class/infiniband[_mad] (and hwsim's /proc/mdstat) to
    every (dynamically linked) program, read-only: the library goes in first (a rename, never a half-written file), then
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
    links = " ".join("ln -sf /usr/local/sbin/hwsim /usr/local/sbin/%s;" % t for t in NIC_TOOLS + BENCH_TOOLS + BLOCK_TOOLS)
    netdevs = netdevs_script(json.load(open(prof)), index)
    script = f"""set -e
cat > /usr/local/sbin/rackforge-lab-netdevs <<'SCRIPT'
{netdevs}SCRIPT
chmod 0755 /usr/local/sbin/rackforge-lab-netdevs
cat > /etc/systemd/system/rackforge-lab-netdevs.service <<'UNIT'
{NETDEVS_UNIT}UNIT
{links}
# the kernel's NFS client is simulated: mount(8) runs /sbin/mount.nfs, diverted before nfs-common
# installs its own (kept as /sbin/mount.nfs.distrib)
dpkg-divert --quiet --local --rename --divert /sbin/mount.nfs.distrib --add /sbin/mount.nfs
ln -sf /usr/local/sbin/hwsim /sbin/mount.nfs
# mount(8) runs /sbin/mount.xfs for the cache's xfs (xfsprogs ships none): hwsim's mounts a tmpfs
ln -sf /usr/local/sbin/hwsim /sbin/mount.xfs
cat > /etc/systemd/system/hwsim-boot.service <<'UNIT'
{HWSIM_BOOT_UNIT}UNIT
cat > /etc/systemd/system/rackforge-lab-block.service <<'UNIT'
{BLOCK_BOOT_UNIT}UNIT
systemctl daemon-reload
systemctl enable -q hwsim-boot.service rackforge-lab-block.service
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


def node_config(ip, port, prof, faults):
    """What a node container was made from: its address, profile and faults, the image, the
    simulator's and the mirror's sources and the lab's own code. A container made from anything
    else is replaced, so a `make test` after a `make lab` with other options (or older code)
    gets the lab it asks for."""
    h = hashlib.sha256(json.dumps({"ip": ip, "port": port, "profile": prof, "faults": faults, "image": image()}, sort_keys=True).encode())
    for sub in ("hwsim", "sysfs_redirect", "nvml", "mirror", "k8sim"):
        for dirpath, _dirs, files in sorted(os.walk(os.path.join(HERE, sub))):
            for fname in sorted(files):
                if fname.endswith((".py", ".c", ".h", ".json", ".sh", ".txt")) and "__pycache__" not in dirpath:
                    h.update(fname.encode() + open(os.path.join(dirpath, fname), "rb").read())
    core = os.path.dirname(os.path.abspath(__file__))
    for path in [os.path.join(HERE, "lab.py")] + [os.path.join(core, f) for f in sorted(os.listdir(core)) if f.endswith(".py")]:
        h.update(open(path, "rb").read())
    return h.hexdigest()[:16]


def retire(cname):
    """Remove a node's container as an operator retires a machine: its Node object goes from the
    lab's control plane too (otherwise the node made anew in its place is a re-imaged host whose
    stale Node the join refuses)."""
    podman("rm", "-f", "-t", "2", cname, check=False)
    node = cname[len(PREFIX) + 1 :]
    cp = "%s-lab-cp1" % PREFIX
    if node != "lab-cp1" and exists("container", cp):
        podman("exec", cp, "sh", "-c", "command -v kubectl >/dev/null && kubectl delete node %s || true" % node, check=False)


def start_node(name, ip, port, prof, idx, pub, faults=()):
    """Start (or restart) one lab container; a new one gets the lab key, hwsim and its faults.
    An existing container made from another configuration (node_config) is replaced."""
    cname = "%s-%s" % (PREFIX, name)
    config = node_config(ip, port, prof, [list(f) for f in faults])
    if exists("container", cname):
        made = podman("inspect", "-f", '{{ index .Config.Labels "%s" }}' % CONFIG_LABEL, cname, check=False).stdout.strip()
        if made != config:
            print("lab: %s was made from another configuration: replacing it" % name)
            retire(cname)
    fresh = not exists("container", cname)
    if not fresh:
        podman("start", cname)
        if wait_running(cname, fail=False) is None:
            # a lab node is rebuilt, never debugged in place: what it held is made again by the run
            print("lab: %s: the existing container did not boot: replacing it" % name, flush=True)
            retire(cname)
            fresh = True
    if fresh:
        boot_fresh(cname, name, ip, port, config)
        install_access(cname, pub)
        install_reboot(cname)
        if prof:
            install_hwsim(cname, idx, prof)
            dcgm.install(cname, name, ip)
        else:
            install_kernel_tools(cname)
        for args in faults:
            podman("exec", cname, "/usr/local/sbin/hwsim", "fault", "add", *args)
    return cname


def reboot(name, timeout=120):
    """Reboot a node as ansible.builtin.reboot does (`systemctl reboot` in it: module docstring)
    and wait until its container runs again under systemd. A container that is not running (a
    `podman kill` or `podman stop`, which the restart policy leaves down) is started instead, as
    a crashed or powered-off machine is switched on. Returns the container's name."""
    cname = container(name)
    status, started = container_state(cname)
    if not status:
        sys.exit("lab: no container %s: run `lab.py up` first" % cname)
    if status != "running":
        podman("start", cname)
    else:
        podman("exec", cname, "systemctl", "reboot", check=False)
        deadline = time.time() + timeout
        while True:
            now, now_started = container_state(cname)
            if now == "running" and now_started != started:
                break
            if time.time() > deadline:
                policy = podman("inspect", "-f", "{{.HostConfig.RestartPolicy.Name}}", cname, check=False).stdout.strip()
                sys.exit(
                    "lab: %s did not come back from `systemctl reboot` within %ds (podman: %s; restart policy %r, the lab's is"
                    " 'always': an older container needs `lab.py up`)" % (name, timeout, now or "gone", policy)
                )
            time.sleep(0.5)
    wait_running(cname)
    return cname
