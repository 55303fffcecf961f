"""rackforge_packages' run snapshot on a lab node, through real ansible-playbook runs: a later call of
the same run is answered on the controller from what the first call read, and a snapshot an earlier
run left in the fact cache (ansible.cfg caches facts for an hour) is never trusted.

The node's kubeadm is held by site.yml (kubernetes_node pins and holds it): the test takes the hold
off by hand between two runs and puts it back through the module."""

from __future__ import annotations

import json

from conftest import on_node, playbook

NODE = "lab-node1"


def write_play(tmp_path, calls):
    """A playbook on NODE with one rackforge_packages task per entry of calls; the registered results
    are written as JSON to tmp_path/results.json on the controller."""
    out = tmp_path / "results.json"
    tasks = [{"name": "call %d" % i, "rackforge_packages": {"packages": pkgs}, "register": "r%d" % i} for i, pkgs in enumerate(calls)]
    results = "{{ {%s} | to_json }}" % ", ".join("'%d': r%d" % (i, i) for i in range(len(calls)))
    tasks.append({"name": "results", "ansible.builtin.copy": {"content": results, "dest": str(out)}, "delegate_to": "localhost"})
    play = tmp_path / "play.yml"
    play.write_text(json.dumps([{"hosts": NODE, "gather_facts": False, "tasks": tasks}]))
    return play, out


def kubeadm():
    version = on_node(NODE, "dpkg-query", "-W", "-f", "${Version}", "kubeadm").stdout.strip()
    held = "kubeadm" in on_node(NODE, "apt-mark", "showhold").stdout.split()
    return version, held


def test_a_later_call_of_the_run_is_decided_on_the_controller(tmp_path):
    version, held = kubeadm()
    assert version and held, "site.yml holds kubeadm on %s" % NODE
    play, out = write_play(tmp_path, [[{"name": "nfs-common"}], [{"name": "kubeadm", "version": version.split("-")[0], "hold": True}]])
    res = playbook(str(play))
    assert res.returncode == 0, res.stdout[-3000:]
    first, second = json.loads(out.read_text()).values()
    # the first call ran on the node and read every package (the fact), the second did not
    assert not first.get("decided_on_controller") and first["changed"] is False
    assert second["decided_on_controller"] is True and second["changed"] is False and second["actions"] == []
    assert second["packages"] == {"kubeadm": {"before": {"version": version, "held": True}, "after": {"version": version, "held": True}}}


def test_a_snapshot_from_an_earlier_run_is_not_trusted(tmp_path):
    version, held = kubeadm()
    assert held
    want = [{"name": "kubeadm", "version": version.split("-")[0], "hold": True}]
    play, out = write_play(tmp_path, [want])
    assert playbook(str(play)).returncode == 0  # caches a snapshot that shows kubeadm held
    on_node(NODE, "apt-mark", "unhold", "kubeadm")
    try:
        res = playbook(str(play))
        assert res.returncode == 0, res.stdout[-3000:]
        (call,) = json.loads(out.read_text()).values()
        assert not call.get("decided_on_controller"), call
        assert call["changed"] is True and call["actions"] == ["hold kubeadm"], call
        assert kubeadm() == (version, True)
    finally:
        on_node(NODE, "apt-mark", "hold", "kubeadm")


def test_a_call_with_something_to_do_runs_the_module_after_a_snapshot(tmp_path):
    version, _ = kubeadm()
    want = [{"name": "kubeadm", "version": version.split("-")[0], "hold": True}]
    on_node(NODE, "apt-mark", "unhold", "kubeadm")
    try:
        play, out = write_play(tmp_path, [[{"name": "nfs-common"}], want, want])
        res = playbook(str(play))
        assert res.returncode == 0, res.stdout[-3000:]
        first, second, third = json.loads(out.read_text()).values()
        # the snapshot shows the hold missing: the module runs and holds; its fresh snapshot answers the third
        assert not first.get("decided_on_controller") and first["changed"] is False
        assert not second.get("decided_on_controller") and second["actions"] == ["hold kubeadm"]
        assert third["decided_on_controller"] is True and third["changed"] is False
        assert kubeadm() == (version, True)
    finally:
        on_node(NODE, "apt-mark", "hold", "kubeadm")
