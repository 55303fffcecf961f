"""Integration tests run against the shared lab that `make integration` started (lab/lab.py up)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "inventories" / "lab" / "hosts.yml"


def lab(*args, check=True):
    return subprocess.run(["python3", str(ROOT / "lab" / "lab.py"), *args], capture_output=True, text=True, check=check, cwd=ROOT)


def playbook(*args, report_dir=None, prometheus_dir=None, inventory=INVENTORY, env=None):
    """ansible-playbook against the lab; res.recap is {host: {ok, changed, failed, ...}}.
    report_dir / prometheus_dir keep a run's fleet report / scrape targets out of reports/;
    env adds environment variables for this run only."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", **(env or {}))
    if report_dir:
        env["RACKFORGE_REPORT_DIR"] = str(report_dir)
    if prometheus_dir:
        env["RACKFORGE_PROMETHEUS_DIR"] = str(prometheus_dir)
    res = subprocess.run(["ansible-playbook", "-i", str(inventory), *args], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    res.recap = {
        m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
        for m in re.finditer(r"^(\S+)\s+:\s+(ok=.*)$", res.stdout, re.M)
    }
    res.changed_tasks = changed_tasks(res.stdout)
    return res


def changed_tasks(stdout):
    """["TASK [...] -> changed: [host] ..."] for every task or handler that reported a change:
    what a failed changed=0 assertion must name (the recap only counts them)."""
    found, task = [], None
    for line in stdout.splitlines():
        if line.startswith(("TASK [", "RUNNING HANDLER [")):
            task = line.rstrip("* ")
        elif line.startswith("changed: ["):
            found.append("%s -> %s" % (task, line[:300]))
    return found


def not_idempotent(res):
    """The assertion message of a second run that changed something: the changed tasks, then the
    end of the output."""
    return "changed tasks:\n%s\n...\n%s" % ("\n".join(res.changed_tasks) or "(none)", res.stdout[-2000:])


def on_node(name, *argv, check=True):
    """Run a command in a lab node's container (not through Ansible)."""
    return subprocess.run(["podman", "exec", "rackforge-lab-" + name, *argv], capture_output=True, text=True, check=check)


def node_state(name):
    """Checksum of /etc, the simulator's persistent + volatile state and the Kubernetes stand-in's
    state (the control plane's "etcd", the kubelet's files): 'unchanged' means equal."""
    dirs = "/etc /var/lib/hwsim /run/hwsim /var/lib/rackforge /var/lib/k8sim /var/lib/kubelet"
    cmd = "find %s -type f ! -name '*.lock' -exec sha256sum {} + 2>/dev/null | sort | sha256sum" % dirs
    return on_node(name, "sh", "-c", cmd).stdout


@pytest.fixture(scope="session")
def gpu_nodes():
    data = json.loads((ROOT / "lab" / ".state" / "lab.json").read_text())
    return sorted(n for n, h in data.items() if h["profile"])


@pytest.fixture(scope="session")
def converged(gpu_nodes):
    """site.yml has converged the lab once in this session (healthy, nothing faulted)."""
    first = playbook("site.yml")
    assert first.returncode == 0, first.stdout[-3000:]
    return first


@pytest.fixture
def faulted(gpu_nodes):
    """inject(node, kind, key=value...): a simulator fault, cleared again after the test."""
    injected = []

    def inject(node, *fault):
        lab("fault", node, *fault)
        injected.append(node)

    yield inject
    for node in injected:
        lab("fault", node, "clear")


FRESH = "lab-fresh1"


@pytest.fixture(scope="module")
def fresh_node():
    """A never-converged node beside the shared lab (inventories/lab/fresh.yml), removed again
    after the module, and taken out of the cluster if a test joined it."""
    lab("fresh", FRESH)
    try:
        yield FRESH
    finally:
        lab("fresh", FRESH, "--remove")
        on_node("lab-cp1", "kubectl", "delete", "node", FRESH, check=False)
