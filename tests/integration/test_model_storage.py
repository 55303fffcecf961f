"""model_storage in the lab: the share's mount unit written, enabled for boot and mounted, as
systemd sees it (hwsim's mount.nfs stands in for the kernel's NFS client: a container has none);
the faults of a server that is down, hung or has no such export fail the role naming the unit,
with mount.nfs's own words, and a hung server costs no more than the unit's timeout."""

from __future__ import annotations

import json
import time

import pytest
from conftest import on_node, playbook

NODE = "lab-node2"
TRIAL = "/srv/model-trial"  # a mount point of the tests' own, beside the converged /models
TRIAL_UNIT = "srv-model\\x2dtrial.mount"


def test_the_share_is_mounted_by_its_unit_and_enabled_for_boot(converged, gpu_nodes):
    for node in gpu_nodes:
        assert on_node(node, "systemctl", "is-enabled", "models.mount").stdout.strip() == "enabled"
        assert on_node(node, "systemctl", "is-active", "models.mount").stdout.strip() == "active"
        unit = on_node(node, "cat", "/etc/systemd/system/models.mount").stdout
        assert "Where=/models\nType=nfs\nOptions=vers=4.2,ro,hard,nconnect=8,rsize=1048576,wsize=1048576,noatime,_netdev\n" in unit
        assert "WantedBy=remote-fs.target" in unit
        mount = json.loads(on_node(node, "findmnt", "-J", "-o", "TARGET,OPTIONS", "/models").stdout)["filesystems"][0]
        assert "ro" in mount["options"].split(",")
        assert on_node(node, "test", "-f", "/models/SIMULATED-NFS-SHARE", check=False).returncode == 0


def trial(*extra, options=("ro", "hard", "retry=0", "_netdev")):
    args = {"model_storage_mount_point": TRIAL, "model_storage_nfs_options": list(options), "model_storage_mount_timeout_s": 5}
    return playbook("playbooks/storage.yml", "--limit", NODE, "-e", json.dumps(args), *extra)


PENDING = "/var/lib/rackforge/restart-pending/" + TRIAL_UNIT
HOLDER = "rf-trial-share-holder"


@pytest.fixture
def clean_trial():
    yield
    on_node(
        NODE,
        "sh",
        "-c",
        "systemctl stop %s; systemctl disable --now '%s'; rm -f '/etc/systemd/system/%s' '%s'; systemctl daemon-reload; rmdir %s"
        % (HOLDER, TRIAL_UNIT, TRIAL_UNIT, PENDING, TRIAL),
        check=False,
    )


@pytest.mark.parametrize(
    "fault, evidence",
    [
        ("nfs_server_down", "mount.nfs: Connection refused"),
        ("nfs_export_missing", "reason given by server: No such file or directory"),
        ("nfs_server_hung", "timed out"),
    ],
)
def test_a_failing_server_fails_the_role_with_the_mount_helpers_words(converged, faulted, clean_trial, fault, evidence):
    faulted(NODE, fault)
    began = time.monotonic()
    res = trial()
    took = time.monotonic() - began
    assert res.returncode != 0 and res.recap[NODE]["failed"] == 1, res.stdout[-3000:]
    assert "trial.mount failed" in res.stdout and evidence in res.stdout, res.stdout[-3000:]
    assert took < 60, "the role took %.0f s on a %s server (the unit's timeout is 5 s)" % (took, fault)


def test_options_changed_remount_and_a_rerun_changes_nothing(converged, clean_trial):
    first = trial()
    assert first.returncode == 0 and first.recap[NODE]["changed"] == 1, first.stdout[-3000:]
    assert on_node(NODE, "findmnt", "-n", "-o", "OPTIONS", TRIAL).stdout.split(",")[0] == "ro"
    assert trial().recap[NODE]["changed"] == 0
    rw = playbook(
        "playbooks/storage.yml",
        "--limit",
        NODE,
        "-e",
        json.dumps(
            {"model_storage_mount_point": TRIAL, "model_storage_nfs_options": ["rw", "hard", "_netdev"], "model_storage_mount_timeout_s": 5}
        ),
    )
    assert rw.returncode == 0 and rw.recap[NODE]["changed"] == 1, rw.stdout[-3000:]
    assert on_node(NODE, "findmnt", "-n", "-o", "OPTIONS", TRIAL).stdout.split(",")[0] == "rw"


def test_a_remount_refused_by_a_busy_share_is_retried_by_every_run_until_it_succeeds(converged, clean_trial):
    """A pod holding the share open makes the remount fail; the unit file is current from then on, so
    only the pending restart rackforge_units remembers makes the next runs try again (and fail,
    saying so) until the share is free; then one run remounts and the next changes nothing."""
    assert trial().recap[NODE]["failed"] == 0
    # cd in its shell, not --working-directory (which makes the unit require the mount: systemd would stop it first)
    on_node(NODE, "systemd-run", "--unit=" + HOLDER, "sh", "-c", "cd %s && exec sleep 600" % TRIAL)
    rw = ("rw", "hard", "retry=0", "_netdev")
    for attempt in (1, 2):
        busy = trial(options=rw)
        assert busy.returncode != 0 and busy.recap[NODE]["failed"] == 1, (attempt, busy.stdout[-3000:])
        assert "systemctl restart -- %s failed" % TRIAL_UNIT in busy.stdout.replace("\\\\", "\\"), (attempt, busy.stdout[-3000:])
        assert on_node(NODE, "findmnt", "-n", "-o", "OPTIONS", TRIAL).stdout.split(",")[0] == "ro"  # the old mount stays
        assert on_node(NODE, "test", "-e", PENDING, check=False).returncode == 0
    on_node(NODE, "systemctl", "stop", HOLDER)
    freed = trial(options=rw)
    assert freed.returncode == 0 and freed.recap[NODE]["changed"] == 1, freed.stdout[-3000:]
    assert on_node(NODE, "findmnt", "-n", "-o", "OPTIONS", TRIAL).stdout.split(",")[0] == "rw"
    assert on_node(NODE, "test", "-e", PENDING, check=False).returncode != 0
    assert trial(options=rw).recap[NODE]["changed"] == 0


def kubectl_json(*args):
    return json.loads(on_node("lab-cp1", "kubectl", *args, "-o", "json").stdout)


def test_the_control_plane_holds_the_share_s_volume_and_claim_and_puts_a_deleted_claim_back(converged):
    """What the seed's Deployment mounts (claim `models` in `inference`): the static NFS volume,
    pre-bound, with the unit's options less _netdev, from the lab's share variables."""
    pv = kubectl_json("get", "persistentvolume", "models-inference")
    what = next(ln for ln in on_node("lab-node1", "cat", "/etc/systemd/system/models.mount").stdout.splitlines() if ln.startswith("What="))
    assert pv["spec"]["nfs"] == {"server": what[5:].rsplit(":", 1)[0], "path": "/srv/models", "readOnly": True}  # the nodes' share
    assert pv["spec"]["mountOptions"] == ["vers=4.2", "ro", "hard", "nconnect=8", "rsize=1048576", "wsize=1048576", "noatime"]
    assert pv["spec"]["claimRef"]["namespace"] == "inference" and pv["spec"]["claimRef"]["name"] == "models"
    pvc = kubectl_json("get", "persistentvolumeclaim", "models", "-n", "inference")
    assert pvc["spec"]["volumeName"] == "models-inference" and pvc["spec"]["accessModes"] == ["ReadOnlyMany"]
    on_node("lab-cp1", "kubectl", "delete", "persistentvolumeclaim", "models", "-n", "inference")
    res = playbook("playbooks/control_plane.yml", "--limit", "lab-cp1")
    assert res.returncode == 0 and res.recap["lab-cp1"]["changed"] == 1, res.stdout[-3000:]
    assert kubectl_json("get", "persistentvolumeclaim", "models", "-n", "inference") == pvc


def test_control_plane_yml_on_its_own_refuses_a_bad_claim_namespace_before_applying(converged):
    manifest = on_node("lab-cp1", "sha256sum", "/etc/kubernetes/rackforge/model-storage.yml").stdout
    res = playbook("playbooks/control_plane.yml", "--limit", "lab-cp1", "-e", json.dumps({"model_storage_namespace": "Inference"}))
    assert res.returncode != 0 and res.recap["lab-cp1"]["failed"] == 1, res.stdout[-3000:]
    assert 'model_storage_namespace = "Inference": must be a DNS-1123 label' in " ".join(res.stdout.split()), res.stdout[-3000:]
    assert "TASK [model_storage : Apply" not in res.stdout
    assert on_node("lab-cp1", "sha256sum", "/etc/kubernetes/rackforge/model-storage.yml").stdout == manifest
