#!/usr/bin/env python3
"""rackforge lab: podman containers (Debian 12, systemd as PID 1, sshd) posing as GPU nodes.

    lab.py up [--nodes N] [--profile P] [--node-profile NAME=P ...] [--fault NAME:KIND[:k=v,...] ...]
              [--control-plane 0|1] [--monitoring 0|1|2]
    lab.py down              remove every container, network, image and file the lab created
    lab.py reboot NAME       reboot a node (`systemctl reboot` in it; podman's restart policy
                             starts its container again): /run is a new tmpfs, so the simulated
                             GPU and NIC runtime state is lost exactly as on a reboot; a node
                             that is down (podman kill/stop) is started
    lab.py exec NAME CMD...  run a command in a node (tests use it to read simulator state)
    lab.py fault NAME KIND [k=v ...] | lab.py fault NAME clear
    lab.py fresh [NAME] [--profile P] [--remove]   a never-converged node beside the lab

What is real: the OS, systemd, sshd, apt, files, namespaced sysctls, a reboot as the OS sees it
(labcore/nodes.py says what the lab adds), and the rdma-core tools ibstat/ibstatus (Debian's
infiniband-diags, installed by the roles), which read the simulated sysfs tree at
/sys/class/infiniband through the preload library lab/sysfs_redirect (built here, listed in the
node's /etc/ld.so.preload). What is simulated: the GPU/NIC hardware, that sysfs
tree and the other driver tools (lab/hwsim), the vendor packages (lab/mirror). Traffic stays on
loopback (SSH on 127.0.0.1 ports) and the lab's own podman network; the nodes' apt sources name
only the lab mirror. Uses only the Python standard library (runs before the venv exists); the
work is done in lab/labcore (containers, nodes, inventory).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from labcore import fabric, nodes
from labcore.containers import (
    CONTROL_DIR,
    CP_IP,
    INVENTORY,
    LABEL,
    MON_IP_BASE,
    MON_IP_FORMAT,
    NETWORK,
    PREFIX,
    ROOT,
    SSH_BASE_PORT,
    STATE,
    SUBNET,
    container,
    exists,
    host_group,
    podman,
    profiles,
    sh,
    ssh_key,
    wait_ssh,
)
from labcore.inventory import write_fresh_inventory, write_inventory

FRESH_IP, FRESH_INDEX = "10.89.77.50", 50


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
    nodes.start_mirror()
    hosts = {}
    members = [("lab-cp1", CP_IP, None)] if opts.control_plane else []
    members += [(name, "10.89.77.%d" % (10 + i), prof) for i, (name, prof) in enumerate(node_profiles.items(), start=1)]
    # the monitoring hosts (roles/monitoring_server): after the nodes, so the nodes keep their ports
    members += [("lab-mon%d" % i, MON_IP_FORMAT % (MON_IP_BASE + i), None) for i in range(1, opts.monitoring + 1)]
    wanted = {"%s-%s" % (PREFIX, name) for name, _ip, _prof in members}
    for cname in podman("ps", "-a", "--format", "{{.Names}}", "--filter", "label=" + LABEL).stdout.split():
        # a node of an earlier `up` with more nodes, or without the control plane: not part of this lab
        if re.match(r"^%s-lab-(node[0-9]+|cp1|mon[0-9]+)$" % PREFIX, cname) and cname not in wanted:
            nodes.retire(cname)
    for idx, (name, ip, prof) in enumerate(members):
        port = SSH_BASE_PORT + idx
        cname = nodes.start_node(name, ip, port, prof, idx, pub, [args for node_name, args in faults if node_name == name])
        hosts[name] = {"port": port, "ip": ip, "profile": prof, "container": cname, "group": host_group(name, prof)}
    addresses = fabric.fabric_map([(idx, ip, prof) for idx, (_name, ip, prof) in enumerate(members)])
    for h in hosts.values():
        if h["profile"]:
            fabric.install_fabric(h["container"], addresses)
    # systemd reports running before sshd answers on a loaded machine: wait for every banner, so
    # the first play never meets a refused or timed-out connection
    for h in hosts.values():
        wait_ssh(h["port"])
    write_inventory(hosts, key, all_profiles)
    with open(os.path.join(STATE, "lab.json"), "w") as fh:
        json.dump(hosts, fh, indent=1)
    for name, h in hosts.items():
        print("lab: %-10s %-14s ssh 127.0.0.1:%d  profile %s" % (name, h["ip"], h["port"], h["profile"] or h["group"]))


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
    nodes.start_node(opts.name, FRESH_IP, port, opts.profile, FRESH_INDEX, open(key + ".pub").read().strip())
    wait_ssh(port)
    lab_hosts = json.load(open(os.path.join(STATE, "lab.json")))
    write_fresh_inventory(path, opts.name, port, FRESH_IP, opts.profile, lab_hosts)
    print("lab: %s %s ssh 127.0.0.1:%d profile %s (inventory %s)" % (opts.name, FRESH_IP, port, opts.profile, path))
    return 0


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


def cmd_reboot(opts):
    node = json.load(open(os.path.join(STATE, "lab.json"))).get(opts.name)
    if node is None:
        sys.exit("lab: %r is not a node of this lab (lab/.state/lab.json)" % opts.name)
    nodes.reboot(opts.name)
    # the SSH masters of the old boot may hang on the dead connection: drop them (lab nodes only;
    # ansible.builtin.reboot resets its own connection)
    if os.path.isdir(CONTROL_DIR):
        for sock in os.listdir(CONTROL_DIR):
            os.remove(os.path.join(CONTROL_DIR, sock))
    # a reboot keeps the container's veth and MAC; a node that was down and is started again
    # gets a new one behind the same IP: forget the old one
    sh(["ip", "neigh", "flush", "to", node["ip"]], check=False)
    wait_ssh(node["port"])
    print("lab: %s rebooted (simulated: systemd reboot, container restarted by podman, /run cleared)" % opts.name)


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
    up.add_argument("--monitoring", type=int, default=2, choices=(0, 1, 2), help="monitoring hosts (Prometheus, Alertmanager)")
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
