"""bench: the lab under the bench (rebuilding it, the timing wrapper in its nodes, reading them)
and the controller's environment. Part of bench/bench.py (make bench), which re-exports these names."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LAB = [sys.executable, os.path.join(ROOT, "lab", "lab.py")]
INVENTORY = os.path.join(ROOT, "inventories", "lab", "hosts.yml")
PREFIX = "rackforge-lab"
MITOGEN = "mitogen==0.3.54"
MITOGEN_DIR = os.path.join(ROOT, ".cache", "mitogen")
# the timing wrapper: each module execution on a node appends "start end" (seconds) to TIMES
TIMED_PYTHON = "/usr/local/libexec/rackforge-bench-python3"
TIMES = "/run/rackforge-bench-module-times"
WRAPPER = (
    """#!/bin/sh
# rackforge bench (bench/bench.py): times each Ansible module execution on this node
start=$(date +%%s.%%N)
/usr/bin/python3 "$@"
rc=$?
echo "$start $(date +%%s.%%N)" >> %s
exit $rc
"""
    % TIMES
)


def log(msg):
    sys.stderr.write("bench: %s\n" % msg)
    sys.stderr.flush()


def sh(cmd, **kw):
    res = subprocess.run(cmd, text=True, capture_output=True, check=False, **kw)
    if res.returncode != 0:
        sys.exit("bench: failed (%d): %s\n%s%s" % (res.returncode, " ".join(cmd), res.stdout[-3000:], res.stderr[-3000:]))
    return res.stdout


def lab_rebuild(nodes):
    """Remove the lab's node and control-plane containers (the mirror, network and image stay),
    then start N fresh nodes and the control plane."""
    names = sh(["podman", "ps", "-a", "--format", "{{.Names}}", "--filter", "label=io.rackforge.lab=1"]).split()
    for name in names:
        if name != PREFIX + "-mirror":
            subprocess.run(["podman", "rm", "-f", "-t", "2", name], capture_output=True, check=False)
    fresh = os.path.join(ROOT, "inventories", "lab", "fresh.yml")
    if os.path.exists(fresh):
        os.remove(fresh)
    started = time.monotonic()
    sh([*LAB, "up", "--nodes", str(nodes), "--profile", "hgx-h100-8gpu", "--control-plane", "1"])
    took = time.monotonic() - started
    install = "mkdir -p %s && cat > %s && chmod 0755 %s" % (os.path.dirname(TIMED_PYTHON), TIMED_PYTHON, TIMED_PYTHON)
    for i in range(1, nodes + 1):
        sh(["podman", "exec", "-i", node_container("lab-node%d" % i), "sh", "-c", install], input=WRAPPER)
    return took


def node_container(host):
    return "%s-%s" % (PREFIX, host)


def gpu_hosts():
    """The GPU nodes of the lab inventory (lab.py writes it)."""
    import yaml  # ansible's dependency: make bench runs in the venv

    with open(INVENTORY) as fh:
        inventory = yaml.safe_load(fh)
    return sorted((inventory["all"]["children"].get("gpu_nodes") or {}).get("hosts") or {})


def read_node_file(host, path):
    """A file's text in a lab node ("" when missing)."""
    return subprocess.run(["podman", "exec", node_container(host), "cat", path], text=True, capture_output=True, check=False).stdout


def mitogen_env():
    """The optional mitogen strategy, installed beside (not into) the venv; None when pip cannot."""
    if not os.path.isdir(os.path.join(MITOGEN_DIR, "ansible_mitogen")):
        res = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--target", MITOGEN_DIR, MITOGEN], capture_output=True, text=True, check=False
        )
        if res.returncode != 0:
            log("mitogen not installed (%s): its runs are skipped" % res.stderr.strip()[-300:])
            return None
    return {
        "PYTHONPATH": MITOGEN_DIR,
        "ANSIBLE_STRATEGY_PLUGINS": os.path.join(MITOGEN_DIR, "ansible_mitogen", "plugins", "strategy"),
        "ANSIBLE_STRATEGY": "mitogen_linear",
        # mitogen runs its own ssh and ignores the lab inventory's StrictHostKeyChecking=no: the
        # lab's throwaway containers get new host keys on every start (lab runs only)
        "ANSIBLE_HOST_KEY_CHECKING": "False",
    }


def pipelining():
    """The ssh connection's pipelining setting as ansible.cfg sets it (a connection-plugin option)."""
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "ansible.cfg"))
    return cfg.get("ssh_connection", "pipelining", fallback="False")


def environment():
    ver = subprocess.run(["ansible-playbook", "--version"], text=True, capture_output=True, check=False).stdout.splitlines()
    cfg = {}
    for line in subprocess.run(
        ["ansible-config", "dump", "--only-changed", "-t", "all"],
        text=True,
        capture_output=True,
        check=False,
        env=dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg")),
    ).stdout.splitlines():
        key, _, value = line.partition("=")
        cfg[key.split("(")[0].strip()] = value.strip()
    mem_kb = int(open("/proc/meminfo").read().split()[1])
    return {
        "ansible_core": ver[0] if ver else "?",
        "python": platform.python_version(),
        "forks": cfg.get("DEFAULT_FORKS", "5"),
        "strategy": cfg.get("DEFAULT_STRATEGY", "linear"),
        # what the roles gather (bench/playbooks/facts.yml gathers the same; a unit test keeps them equal)
        "gather_subset": "distribution,platform,service_mgr (the roles' setup tasks; plays gather_facts: false)",
        "pipelining": pipelining(),
        "controller_cpus": os.cpu_count(),
        "controller_mem_gib": round(mem_kb / 1048576, 1),
        "transport": "ssh to 127.0.0.1 ports (podman containers), ControlPersist",
    }
