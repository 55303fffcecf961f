"""podman and process helpers, the lab's names and paths, and waiting for a node's systemd and sshd."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # lab/
ROOT = os.path.dirname(HERE)
STATE = os.path.join(HERE, ".state")
CONTROL_DIR = os.path.join(STATE, "ssh-control")  # the lab's SSH masters
INVENTORY = os.path.join(ROOT, "inventories", "lab")
PREFIX = "rackforge-lab"
NETWORK = PREFIX
SUBNET = "10.89.77.0/24"
MIRROR_IP = "10.89.77.2"
CP_IP = "10.89.77.10"
# the monitoring hosts lab-mon1, lab-mon2: 10.89.77.6, .7
MON_IP_FORMAT, MON_IP_BASE = "10.89.77.%d", 5
# the lab's webhook receiver (lab/webhook_receiver.py) runs on the control plane
WEBHOOK_PORT = 9095
SSH_BASE_PORT = int(os.environ.get("RACKFORGE_LAB_SSH_PORT", "2230"))
LABEL = "io.rackforge.lab=1"
CONFIG_LABEL = "io.rackforge.lab.config"
# every lab container: runc (crun fails on this host's hybrid cgroups), lowered ulimits
# (raising them is refused here), the label `down` removes by
BASE_FLAGS = ["--runtime", "runc", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096", "--label", LABEL]
# a node's reboot: systemd (PID 1) is refused the reboot() call in a container (no CAP_SYS_BOOT)
# and exits with status 0; podman's restart policy `always` starts the container again (a
# `podman stop` or `podman kill` is not restarted). See nodes.py REBOOT_NOTES.
# CAP_MKNOD: the simulated driver's load creates /dev/nvidia* as the real one has nvidia-modprobe do
# (hwsimlib/kernel.py device_nodes); the nodes only exist, the device cgroup refuses opening them
# CAP_SYS_ADMIN: mounts inside the node's own mount namespace, for the model share's mount unit
# (hwsim's mount.nfs mounts a tmpfs as the simulated share; systemd only takes a mount it sees in
# mountinfo). /proc/sys stays read-only (podman), so the host's kernel settings stay out of reach.
NODE_FLAGS = [
    *BASE_FLAGS,
    "--systemd=always",
    "--cap-add",
    "NET_ADMIN",
    "--cap-add",
    "MKNOD",
    "--cap-add",
    "SYS_ADMIN",
    "--restart",
    "always",
]


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


def container(name):
    """A node's container name from its inventory name (or the container name itself)."""
    return name if name.startswith(PREFIX) else "%s-%s" % (PREFIX, name)


def container_state(cname):
    """(status, started_at) of a container as podman reports them, ('', '') when there is none."""
    res = podman("inspect", "-f", "{{.State.Status}} {{.State.StartedAt}}", cname, check=False)
    if res.returncode != 0:
        return "", ""
    status, _, started = res.stdout.strip().partition(" ")
    return status, started


def profiles():
    pdir = os.path.join(HERE, "hwsim", "profiles")
    return {f[:-5]: json.load(open(os.path.join(pdir, f))) for f in sorted(os.listdir(pdir)) if f.endswith(".json")}


def ssh_key():
    key = os.path.join(STATE, "id_ed25519")
    if not os.path.exists(key):
        os.makedirs(STATE, exist_ok=True)
        sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rackforge-lab", "-f", key])
    return key


_IMAGE = []


def image():
    if not _IMAGE:
        _IMAGE.append(sh(["bash", os.path.join(HERE, "build-image.sh")], capture=True).stdout.strip().splitlines()[-1])
    return _IMAGE[0]


def running_evidence(name, res=None):
    """What a container that never reached systemd 'running' looked like: podman's state (with
    the exit code, error and OOM flag of its last init), the last `systemctl is-system-running`
    (rc, stdout, stderr), the host's load and memory and the tail of its console log."""
    status, started = container_state(name)
    lines = ["  podman state: %s (started %s)" % (status or "no such container", started or "-")]
    detail = podman(
        "inspect", "-f", "pid {{.State.Pid}} exit {{.State.ExitCode}} oom {{.State.OOMKilled}} error {{.State.Error}}", name, check=False
    )
    if detail.returncode == 0:
        lines.append("  podman init: %s" % detail.stdout.strip())
    if res is not None:
        err = res.stderr.strip()[-400:]
        lines.append("  last `systemctl is-system-running`: rc %d, stdout %r, stderr %r" % (res.returncode, res.stdout.strip(), err))
    try:
        meminfo = dict(line.split(":", 1) for line in open("/proc/meminfo").read().splitlines() if ":" in line)
        lines.append("  host: load %s, MemAvailable %s" % (open("/proc/loadavg").read().strip(), meminfo.get("MemAvailable", "?").strip()))
    except OSError:
        pass
    logs = podman("logs", "--tail", "40", name, check=False)
    lines.append("  podman logs --tail 40:")
    lines.extend("    " + line for line in (logs.stdout + logs.stderr).strip().splitlines()[-40:])
    return "\n".join(lines)


# runc's answer to an exec in a container whose init (systemd) has exited; podman may still call
# the container running for a while (CI, stop 44: cp1's first boot on a fresh machine)
STOPPED_INIT = "cannot exec in a stopped container"


def wait_running(name, timeout=180, fail=True, dead_after=30):
    """Until systemd in the container says running (or degraded). On a timeout: exit with the
    evidence (fail=True) or return None with the evidence printed (fail=False: the caller retries).
    A container whose init has been gone for dead_after seconds (runc refuses the exec, or podman
    no longer calls it running) is given up at once: it will not boot by waiting.
    A fresh machine under load has taken over 90 s to boot its first container (CI, stop 30)."""
    deadline = time.time() + timeout
    res = None
    dead_since = None
    why = "did not reach systemd 'running' within %ds" % timeout
    while time.time() < deadline:
        res = podman("exec", name, "systemctl", "is-system-running", check=False)
        state = res.stdout.strip()
        if state in ("running", "degraded"):
            return state
        if STOPPED_INIT in res.stderr or container_state(name)[0] not in ("running", "created", "initialized"):
            dead_since = dead_since or time.time()
            if time.time() - dead_since >= dead_after:
                why = "stopped booting: its init has been gone for %ds" % dead_after
                break
        else:
            dead_since = None
        time.sleep(1)
    sys.stderr.write("lab: %s %s\n%s\n" % (name, why, running_evidence(name, res)))
    if fail:
        sys.exit(1)
    return None


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


def host_group(name, profile):
    """The inventory group of a lab container: a GPU node has a profile; the rest by name."""
    if profile:
        return "gpu_nodes"
    return "monitoring_hosts" if name.startswith("lab-mon") else "kube_control_plane"


def run_fresh(cname, name, ip, port, config):
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


# a fresh container that does not boot is removed and run again, up to this many times in all
BOOT_ATTEMPTS = 3


def boot_fresh(cname, name, ip, port, config):
    """Run a new container and wait for its systemd; one that does not boot is removed and run
    again (BOOT_ATTEMPTS in all), each failure printed with its evidence (running_evidence)."""
    for attempt in range(1, BOOT_ATTEMPTS + 1):
        run_fresh(cname, name, ip, port, config)
        if wait_running(cname, fail=attempt == BOOT_ATTEMPTS) is not None:
            return
        print("lab: %s: the container did not boot (attempt %d of %d): removing it" % (name, attempt, BOOT_ATTEMPTS), flush=True)
        podman("rm", "-f", "-t", "0", cname, check=False)
