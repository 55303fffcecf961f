"""model_storage.py: the groundwork of the model_storage role (issue 23), held to the real tools
here (systemd-escape, systemd-analyze) and to the
kernel's NFS option table (fs/nfs/fs_context.c). The local cache's decisions: test_model_cache.py."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from ansible.module_utils.rackforge import model_storage as M
from conftest import ROOT

CAPTURED = ROOT / "tests" / "fixtures" / "captured"
PATHS = [
    "/models",
    "/srv/model-cache",
    "/",
    "//a//b/",
    "/a b/c.d",
    "/.hidden/x",
    "/a/.b",
    "/ünï",
    "/a:b_c",
    "/x-y/z\\w",
    "/mnt/nvme_cache-0",
]


@pytest.mark.skipif(not shutil.which("systemd-escape"), reason="systemd-escape is not installed")
@pytest.mark.parametrize("path", PATHS)
def test_unit_names_are_what_the_real_systemd_escape_prints(path):
    real = subprocess.run(["systemd-escape", "--path", path], capture_output=True, text=True, check=True).stdout.strip()
    assert M.systemd_escape_path(path) == real


def test_escape_refuses_what_is_not_a_mount_point():
    for bad in ("models", "/a/../etc", "/a/./b", None):
        with pytest.raises(ValueError):
            M.systemd_escape_path(bad)


def test_the_options_operators_tune_pass():
    good = ["vers=4.2", "nconnect=16", "rsize=1048576", "wsize=1048576", "hard", "ro", "noatime", "_netdev", "proto=tcp"]
    good += ["x-systemd.mount-timeout=30s", "timeo=600", "retrans=2", "fsc", "lookupcache=positive", "sec=sys", "nofail"]
    assert M.nfs_option_problems(good) == []
    assert M.nfs_option_problems(["v4.1", "noac", "nocto", "fsc=models", "local_lock=none", "proto=rdma", "port=20049"]) == []


@pytest.mark.parametrize(
    "options, why",
    [
        (["nconnect=17"], "nconnect=17 is out of range (1..16)"),  # NFS_MAX_CONNECTIONS
        (["nconnect=0"], "out of range (1..16)"),
        (["timeo=0"], "timeo=0 is out of range"),
        (["vers=4.3"], "vers must be one of 2, 3, 4, 4.0, 4.1, 4.2"),
        (["proto=sctp"], "proto must be one of"),
        (["mountproto=rdma"], "mountproto must be one of"),
        (["rsize=1M"], "rsize needs a whole number"),
        (["hard=1"], "hard takes no value"),
        (["nohard"], "nohard is not an option"),  # hard is a plain flag: no "no" form
        (["nconect=8"], "nconect is not an option the kernel's NFS client knows"),
        (["sec=krb6"], "krb6 not a security flavor"),
        (["hard", "soft"], "hard and soft contradict"),
        (["ro", "rw"], "ro and rw contradict"),
        (["vers=4.2", "v4.1"], "more than one NFS version"),
        (["ro,hard"], "is not one mount option"),
        (["x-systemd.mount-timeout="], "x-systemd.mount-timeout needs a value"),
    ],
)
def test_options_the_kernel_or_mount_would_refuse_are_named(options, why):
    problems = M.nfs_option_problems(options)
    assert any(why in p for p in problems), problems


def test_the_mount_unit_is_one_systemd_accepts(tmp_path):
    text = M.nfs_mount_unit("10.0.0.5", "/export/models", "/models", ["vers=4.2", "nconnect=8", "hard", "ro", "_netdev"], 60)
    assert "What=10.0.0.5:/export/models\nWhere=/models\nType=nfs\nOptions=vers=4.2,nconnect=8,hard,ro,_netdev\n" in text
    assert "WantedBy=remote-fs.target" in text and "After=network-online.target" in text
    assert "What=[fd00::5]:/m\n" in M.nfs_mount_unit("fd00::5", "/m", "/models", ["vers=4.2"], 60)
    if shutil.which("systemd-analyze"):
        # the real systemd-analyze reads the unit; its name must match Where= (systemd refuses a mismatch)
        unit = tmp_path / (M.systemd_escape_path("/models") + ".mount")
        unit.write_text(text)
        res = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True, check=False)
        assert "Where= setting doesn't match unit name" not in res.stderr and "Unknown" not in res.stderr, res.stderr
        wrong = tmp_path / "other.mount"
        wrong.write_text(text)
        res = subprocess.run(["systemd-analyze", "verify", "--man=no", str(wrong)], capture_output=True, text=True, check=False)
        assert res.returncode != 0 and "doesn't match unit name" in res.stderr, res.stderr


def test_the_volumes_are_valid_kubernetes_objects_and_the_claim_is_bound_to_the_share():
    import kubernetes_validate

    options = ["vers=4.2", "nconnect=8", "hard", "ro", "_netdev", "x-systemd.mount-timeout=30s", "nofail"]
    objs = M.volume_objects(
        "models", "inference", "10.0.0.5", "/export/models", 2048, options, "/var/cache/models", 7000, ["GPU-01", "gpu-02"]
    )
    for obj in objs:
        kubernetes_validate.validate(json.loads(json.dumps(obj)), "1.31.4", strict=True)
    pv, pvc, klass, local1, local2 = objs
    assert pv["spec"]["mountOptions"] == ["vers=4.2", "nconnect=8", "hard", "ro"]  # fstab-only options are not the kubelet's
    assert pv["spec"]["claimRef"]["name"] == pvc["metadata"]["name"] and pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert pv["spec"]["accessModes"] == pvc["spec"]["accessModes"] == ["ReadOnlyMany"] and pv["spec"]["nfs"]["readOnly"] is True
    assert local1["metadata"]["name"] == "models-cache-gpu-01" and local1["spec"]["storageClassName"] == klass["metadata"]["name"]
    term = local1["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term == {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-01"]}  # the kubelet lowercases it
    assert local2["metadata"]["name"] == "models-cache-gpu-02"
    assert klass["volumeBindingMode"] == "WaitForFirstConsumer" and len(M.volume_objects("m", "ns", "s", "/e", 1, [])) == 2
