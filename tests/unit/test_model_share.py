"""The model share's pieces the role runs on the controller (filter_plugins/storage.py over
module_utils/rackforge/model_storage.py) and the lab's simulated NFS client (hwsim's mount.nfs,
whose failures must read as nfs-utils' mount.nfs prints them: utils/mount/error.c)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from ansible.errors import AnsibleFilterError
from ansible.module_utils.rackforge import model_storage as M
from conftest import ROOT

sys.path.insert(0, str(ROOT / "filter_plugins"))
import storage as F

HWSIM = ROOT / "lab" / "hwsim" / "hwsim.py"


@pytest.mark.parametrize(
    "path, why",
    [
        ("/models", None),
        ("/srv/models/", None),
        ("/var/models", None),
        ("models", "must be an absolute path"),
        ("/", "must not be / nor contain whitespace"),
        ("/srv/my models", "must not be / nor contain whitespace"),
        ("/srv/../etc", "must not have . or .. components"),
        ("/etc", "must not be /etc or under it"),
        ("/usr/share/models", "must not be /usr or under it"),
        ("/var/lib/models", "must not be /var/lib or under it"),
        ("/var", "must not be /var (the system owns it)"),
        ("/run/models", "must not be /run or under it"),
        (7, "must be an absolute path"),
    ],
)
def test_mount_point_rules(path, why):
    got = M.mount_point_problem(path)
    assert (got is None) if why is None else (why in got), got
    assert F.mount_point_problems(path) == ([] if why is None else [got])


def test_the_unit_is_named_as_systemd_names_it_and_carries_the_options():
    unit = F.model_share_unit("/srv/model-share", "10.0.0.5", "/export/models", ["vers=4.2", "ro", "hard", "nconnect=8"], 90)
    assert unit["name"] == "srv-model\\x2dshare.mount"
    assert (
        "What=10.0.0.5:/export/models\nWhere=/srv/model-share\nType=nfs\nOptions=vers=4.2,ro,hard,nconnect=8\nTimeoutSec=90\n"
        in unit["content"]
    )


def test_a_unit_with_options_the_kernel_refuses_is_never_rendered():
    with pytest.raises(AnsibleFilterError, match="nconnect=32 is out of range"):
        F.model_share_unit("/models", "nfs1", "/m", ["vers=4.2", "nconnect=32"], 90)
    with pytest.raises(AnsibleFilterError, match="not an absolute path"):
        F.model_share_unit("models", "nfs1", "/m", ["vers=4.2"], 90)


def test_the_role_defaults_pass_and_a_second_version_is_refused():
    defaults = ["ro", "hard", "nconnect=8", "rsize=1048576", "wsize=1048576", "noatime", "_netdev"]
    assert F.nfs_option_problems(["vers=4.2", *defaults]) == []
    assert any("more than one NFS version" in p for p in F.nfs_option_problems(["vers=4.2", "nfsvers=3"]))
    assert F.nfs_option_problems("ro,hard") == ["must be a list of mount options (got str)"]


def mount_nfs(tmp_path, faults, *argv):
    var = tmp_path / "var"
    var.mkdir(exist_ok=True)
    (var / "node.json").write_text(json.dumps({"faults": [{"kind": k} for k in faults]}))
    env = {"HWSIM_VARLIB": str(var), "HWSIM_RUN": str(tmp_path / "run"), "HWSIM_ETC": str(tmp_path / "etc"), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, str(HWSIM), "mount.nfs", *argv], env=env, capture_output=True, text=True, timeout=30, check=False
    )


@pytest.mark.parametrize(
    "faults, spec, err",
    [
        (["nfs_server_down"], "127.0.0.1:/srv/models", "mount.nfs: Connection refused\n"),
        (
            ["nfs_export_missing"],
            "127.0.0.1:/srv/models",
            "mount.nfs: mounting 127.0.0.1:/srv/models failed, reason given by server: No such file or directory\n",
        ),
        ([], "127.0.0.1/srv/models", "mount.nfs: remote share not in 'host:dir' format\n"),
    ],
)
def test_the_simulated_client_fails_as_mount_nfs_does(tmp_path, faults, spec, err):
    res = mount_nfs(tmp_path, faults, spec, str(tmp_path), "-o", "ro,retry=0,vers=4.2")
    assert (res.returncode, res.stderr) == (32, err)


def test_a_missing_mount_point_is_named(tmp_path):
    res = mount_nfs(tmp_path, [], "127.0.0.1:/m", str(tmp_path / "nowhere"), "-o", "ro")
    assert (res.returncode, res.stderr) == (32, "mount.nfs: mount point %s does not exist\n" % (tmp_path / "nowhere"))


def test_a_hung_server_never_returns(tmp_path):
    with pytest.raises(subprocess.TimeoutExpired):
        var = tmp_path / "var"
        var.mkdir()
        (var / "node.json").write_text(json.dumps({"faults": [{"kind": "nfs_server_hung"}]}))
        env = {"HWSIM_VARLIB": str(var), "HWSIM_RUN": str(tmp_path / "run"), "HWSIM_ETC": str(tmp_path / "etc")}
        subprocess.run([sys.executable, str(HWSIM), "mount.nfs", "127.0.0.1:/m", str(tmp_path)], env=env, timeout=2, check=False)


def test_the_share_check_finds_a_directory_that_is_not_mounted_and_passes_a_mount_point(tmp_path):
    from ansible.module_utils.rackforge import share_check as S

    plain = S.check_share(str(tmp_path), 10)
    assert [f["check"] for f in plain["findings"]] == ["model_share_not_mounted"]
    assert plain["findings"][0]["observed"] == "a plain directory, nothing mounted"
    gone = S.check_share(str(tmp_path / "gone"), 10)["findings"]
    assert [(f["check"], f["observed"]) for f in gone] == [("model_share_not_mounted", "no such directory")]
    assert S.check_share("/", 10) == {
        "findings": [],
        "share": {"path": "/", "answered": True, "up": True},
    }


def test_a_share_that_never_answers_is_a_finding_within_the_timeout_and_the_check_does_not_wait_for_it():
    from ansible.module_utils.rackforge import share_check as S

    began = time.monotonic()
    found = S.check_share("/models", 0.5, argv=[sys.executable, "-c", "import time; time.sleep(60)"])
    assert time.monotonic() - began < 3
    assert (
        [f["check"] for f in found["findings"]] == ["model_share_hung"]
        and found["share"]["answered"] is False
        and found["share"]["up"] is False
    )
    assert "did not answer within 0.5 s" in found["findings"][0]["message"]


def test_a_failing_probe_is_a_check_that_could_not_run_with_its_evidence():
    from ansible.module_utils.rackforge import share_check as S

    found = S.check_share("/models", 10, argv=[sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"])["findings"]
    assert [f["check"] for f in found] == ["model_share_not_run"]
    assert found[0]["evidence"]["rc"] == 3 and "boom" in found[0]["evidence"]["stderr"]


def test_the_share_s_gauges_are_in_the_textfile_only_where_a_share_is_configured():
    """What RackforgeModelShareDown reads (roles/monitoring/files/rackforge-alerts.yml, its promtool case)."""
    from ansible.module_utils.rackforge.health_metrics import textfile

    base = {"healthy": False, "findings": [{"check": "model_share_hung"}], "gpus": [], "fabric": [], "ports": []}
    hung = textfile(dict(base, share={"path": "/models", "answered": False, "up": False}))
    assert 'rackforge_model_share_up{path="/models"} 0\n' in hung
    up = textfile(dict(base, healthy=True, findings=[], share={"path": "/models", "answered": True, "up": True}))
    assert 'rackforge_model_share_up{path="/models"} 1\n' in up
    assert "rackforge_model_share" not in textfile(dict(base, share=None)) and "rackforge_model_share" not in textfile(base)
