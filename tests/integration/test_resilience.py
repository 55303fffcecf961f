"""A node lost in the middle of a run, and a run killed in the middle: the rest of the fleet
finishes, and the next run converges with no manual cleanup."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from conftest import INVENTORY, ROOT, lab, not_idempotent, on_node, playbook


def run_until(line_prefix, action, *args, inventory=INVENTORY, after=None, timeout=900):
    """ansible-playbook, calling action() once when a line starting with line_prefix appears
    (after a line starting with `after`, when given); returns (returncode, stdout)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.Popen(
        ["ansible-playbook", "-i", str(inventory), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    out, fired, deadline = [], False, time.time() + timeout
    armed = after is None
    for line in proc.stdout:
        out.append(line)
        armed = armed or line.startswith(after)
        if armed and not fired and line.startswith(line_prefix):
            fired = True
            action(proc)
        if time.time() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            break
    proc.wait()
    assert fired, "never saw %r" % line_prefix
    return proc.returncode, "".join(out)


def test_a_node_lost_mid_play_leaves_the_others_to_finish_and_converges_when_back(converged, gpu_nodes):
    victim = gpu_nodes[-1]
    # the node dies (container killed) when the RDMA play starts: after preflight and the GPU stack
    rc, out = run_until(
        "PLAY [RDMA stack",
        lambda _proc: subprocess.run(["podman", "kill", "rackforge-lab-" + victim], capture_output=True, check=True),
        "site.yml",
    )
    recap = {line.split()[0]: line for line in out.splitlines() if " : ok=" in line}
    assert rc != 0
    assert "unreachable=1" in recap[victim]
    for node in gpu_nodes[:-1]:
        assert "failed=0" in recap[node] and "unreachable=0" in recap[node], recap[node]
    # the others went on to the end
    assert "TASK [kubernetes_node : Work out the node IP, name and labels]" in out
    lab("reboot", victim)  # it comes back (a restart: /run is empty, as after a crash)
    back = playbook("site.yml")
    assert back.returncode == 0, back.stdout[-3000:]
    again = playbook("site.yml")
    assert again.returncode == 0 and all(r["changed"] == 0 for r in again.recap.values()), not_idempotent(again)


def test_a_run_killed_after_the_driver_step_converges_on_the_next_run(fresh_node, tmp_path):
    inventory = ROOT / "inventories" / "lab" / "fresh.yml"
    dirs = {"report_dir": tmp_path / "reports", "prometheus_dir": tmp_path / "prometheus"}
    # killed (as a crashed controller) at the first gpu_tuning task of the GPU play, right after the driver step
    rc, out = run_until(
        "TASK [gpu_tuning",
        lambda proc: os.killpg(proc.pid, signal.SIGKILL),
        "site.yml",
        inventory=inventory,
        after="PLAY [NVIDIA driver",
    )
    assert rc == -signal.SIGKILL
    assert "TASK [nvidia_driver : Install the driver" in out and "PLAY RECAP" not in out
    assert on_node(fresh_node, "dpkg-query", "-W", "nvidia-driver-535-open").returncode == 0  # the driver step had run
    first = playbook("site.yml", inventory=inventory, **dirs)
    assert first.returncode == 0, first.stdout[-3000:]
    assert first.recap[fresh_node]["failed"] == 0
    assert on_node("lab-cp1", "kubectl", "get", "node", fresh_node).returncode == 0  # it went all the way to the join
    again = playbook("site.yml", inventory=inventory, **dirs)
    assert again.returncode == 0 and again.recap[fresh_node]["changed"] == 0, not_idempotent(again)
