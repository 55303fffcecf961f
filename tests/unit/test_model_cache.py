"""model_cache.py and the rackforge_model_cache module: the local NVMe cache's disks, its RAID0 and
filesystem. The decisions are held to lsblk 2.38.1's real JSON (tests/fixtures/captured, NVMe
entries added in its layout) and to real /proc/mdstat captures (tests/fixtures/realworld/mdstat);
the module runs against the lab's SIMULATED disks and md (lab/hwsim/hwsimlib/block_sim.py)."""

from __future__ import annotations

import json

import pytest
import rackforge_model_cache
from ansible.module_utils import _internal as module_utils_internal
from ansible.module_utils.common import warnings as ansible_warnings
from ansible.module_utils.rackforge import mdstat
from ansible.module_utils.rackforge import model_cache as MC
from ansible.module_utils.rackforge import model_storage as M
from ansible.module_utils.testing import patch_module_args
from conftest import ROOT, fixture
from hwsim_helper import Sim

CAPTURED = ROOT / "tests" / "fixtures" / "captured"


def real_lsblk():
    return (CAPTURED / "lsblk-J-debian12-vm.txt").read_text()


def with_nvme(extra):
    """The real capture (lsblk 2.38.1 on a VM, no NVMe) with NVMe entries added in its layout."""
    data = json.loads(real_lsblk())
    data["blockdevices"] += extra
    return json.dumps(data)


def nvme(name, serial, model="SAMSUNG MZWLO3T8HCLS-00A07", fstype=None, pttype=None, mounts=(None,), children=None):
    entry = {"name": name, "type": "disk", "model": model, "serial": serial, "size": 3840755982336, "fstype": fstype, "pttype": pttype}
    entry["mountpoints"] = list(mounts)
    if children:
        entry["children"] = children
    return entry


def test_parse_lsblk_reads_the_real_capture():
    devices = MC.parse_lsblk(real_lsblk())
    vda = next(d for d in devices if d["name"] == "vda")
    assert vda == {
        "name": "vda",
        "type": "disk",
        "model": None,
        "serial": None,
        "size": 274877906944,
        "fstype": None,
        "pttype": None,
        "mountpoints": ["/run/netns", "/"],
        "parent": None,
    }
    for bad in ("", "{}", '{"blockdevices": [{"name": "x"}]}'):
        with pytest.raises(ValueError):
            MC.parse_lsblk(bad)


def test_cache_devices_by_model_and_serial_in_serial_order_never_the_root_disk():
    root_part = {"name": "nvme9n1p2", "type": "part", "model": None, "serial": None, "size": 1, "fstype": "ext4", "pttype": None}
    root_part["mountpoints"] = ["/"]
    text = with_nvme(
        [
            nvme("nvme1n1", "S6CKNA0W200002"),
            nvme("nvme0n1", "S6CKNA0W200001"),
            nvme("nvme2n1", "PHAB1234", model="INTEL SSDPF2KX038TZ"),
            nvme("nvme9n1", "S6CKNA0W200009", pttype="gpt", children=[root_part]),
        ]
    )
    got = MC.select_cache_devices(MC.parse_lsblk(text), [{"model": "SAMSUNG MZWLO3T8*"}])
    assert [d["name"] for d in got["selected"]] == ["nvme0n1", "nvme1n1"]  # by serial, not by the kernel's numbering
    assert got["problems"] == [
        "nvme9n1 (model SAMSUNG MZWLO3T8HCLS-00A07, serial S6CKNA0W200009) holds the root filesystem: never a cache device"
    ]
    assert MC.select_cache_devices(MC.parse_lsblk(text), [{"serial": "PHAB*"}])["selected"][0]["name"] == "nvme2n1"
    none = MC.select_cache_devices(MC.parse_lsblk(text), [{"model": "Micron*"}])
    assert none["selected"] == [] and "no NVMe disk matches" in none["problems"][0]


def test_a_disk_rackforge_did_not_make_is_left_alone_unless_wipe_is_allowed():
    text = with_nvme(
        [nvme("nvme0n1", "S1", fstype="xfs"), nvme("nvme1n1", "S2", pttype="gpt"), nvme("nvme2n1", "S3", fstype="linux_raid_member")]
    )
    devices = MC.parse_lsblk(text)
    got = MC.select_cache_devices(devices, [{"model": "SAMSUNG*"}], ours=("linux_raid_member",))
    assert [d["name"] for d in got["selected"]] == ["nvme2n1"]
    assert any("filesystem (xfs)" in p and "model_storage_wipe_ok" in p for p in got["problems"])
    assert any("partition table (gpt)" in p for p in got["problems"])
    assert len(MC.select_cache_devices(devices, [{"model": "SAMSUNG*"}], wipe_ok=True)["selected"]) == 3
    mounted = MC.parse_lsblk(with_nvme([nvme("nvme0n1", "S1", fstype="xfs", mounts=["/scratch"])]))
    assert "in use (mounted at /scratch)" in MC.select_cache_devices(mounted, [{"model": "*"}], wipe_ok=True)["problems"][0]


def lsblk_with(*entries):
    return MC.parse_lsblk(with_nvme(list(entries)))


def md_child(name="md0", fstype="xfs", mounts=(None,)):
    return {
        "name": name,
        "type": "raid0",
        "model": None,
        "serial": None,
        "size": 1,
        "fstype": fstype,
        "pttype": None,
        "mountpoints": list(mounts),
    }


def healthy_arrays():
    """The real capture of a GCE node's NVMe RAID0 (md0 over nvme0n1 and nvme0n2)."""
    return mdstat.parse_mdstat(fixture("mdstat", "gce-nvme-raid0-healthy"))["arrays"]


PATTERNS = [{"model": "SAMSUNG MZWLO3T8*"}]


def test_a_new_cache_is_created_over_the_blank_disks_in_serial_order_and_formatted_once():
    devices = lsblk_with(nvme("nvme1n1", "S2"), nvme("nvme0n1", "S3"), nvme("nvme5n1", "S1"))
    got = MC.plan(devices, {}, None, PATTERNS, 3, False)
    assert got["problems"] == []
    assert got["steps"] == [("create", ["nvme5n1", "nvme1n1", "nvme0n1"]), ("mkfs", False)]
    short = MC.plan(devices, {}, None, PATTERNS, 4, False)
    assert "match 3 disks" in short["problems"][0] and "model_storage_cache_device_count is 4" in short["problems"][0]
    none = MC.plan(devices, {}, None, [{"model": "Micron*"}], 0, False)
    assert "match no NVMe disk" in none["problems"][0] and "nvme1n1 (model SAMSUNG MZWLO3T8HCLS-00A07, serial S2)" in none["problems"][0]


def test_a_foreign_signature_needs_wipe_ok_and_is_wiped_first():
    devices = lsblk_with(nvme("nvme0n1", "S1", pttype="gpt"), nvme("nvme1n1", "S2"))
    refused = MC.plan(devices, {}, None, PATTERNS, 0, False)
    assert (
        refused["steps"] == [] and "partition table (gpt)" in refused["problems"][0] and "model_storage_wipe_ok" in refused["problems"][0]
    )
    wiped = MC.plan(devices, {}, None, PATTERNS, 0, True)
    assert wiped["steps"] == [("wipe", ["nvme0n1"]), ("create", ["nvme0n1", "nvme1n1"]), ("mkfs", False)]
    # wipe_ok never reaches a mounted disk
    mounted = lsblk_with(nvme("nvme0n1", "S1", fstype="ext4", mounts=["/data"]), nvme("nvme1n1", "S2"))
    assert "in use (mounted at /data)" in MC.plan(mounted, {}, None, PATTERNS, 0, True)["problems"][0]


def test_the_members_of_the_array_not_assembled_are_assembled_not_recreated():
    devices = lsblk_with(nvme("nvme0n1", "S1", fstype="linux_raid_member"), nvme("nvme1n1", "S2", fstype="linux_raid_member"))
    assert MC.plan(devices, {}, None, PATTERNS, 2, False)["steps"] == [("assemble", ["nvme0n1", "nvme1n1"])]
    mixed = lsblk_with(nvme("nvme0n1", "S1", fstype="linux_raid_member"), nvme("nvme1n1", "S2"))
    assert "filesystem (linux_raid_member)" in MC.plan(mixed, {}, None, PATTERNS, 0, False)["problems"][0]


def test_a_running_array_is_kept_as_it_is_or_refused_with_nothing_done():
    children = [md_child()]
    devices = lsblk_with(
        nvme("nvme0n1", "S1", fstype="linux_raid_member", children=children),
        nvme("nvme0n2", "S2", fstype="linux_raid_member", children=children),
    )
    assert MC.plan(devices, healthy_arrays(), "md0", PATTERNS, 2, False) == {
        "problems": [],
        "steps": [],
        "members": ["nvme0n1", "nvme0n2"],
        "md": "md0",
    }
    # found by its members when /dev/md/<name> is missing
    assert MC.plan(devices, healthy_arrays(), None, PATTERNS, 0, False)["md"] == "md0"
    blank = lsblk_with(nvme("nvme0n1", "S1", children=[md_child(fstype=None)]), nvme("nvme0n2", "S2", children=[md_child(fstype=None)]))
    assert MC.plan(blank, healthy_arrays(), "md0", PATTERNS, 0, False)["steps"] == [("mkfs", False)]
    ext4 = lsblk_with(nvme("nvme0n1", "S1", children=[md_child(fstype="ext4")]), nvme("nvme0n2", "S2", children=[md_child(fstype="ext4")]))
    assert "ext4 filesystem that rackforge did not make" in MC.plan(ext4, healthy_arrays(), "md0", PATTERNS, 0, False)["problems"][0]
    assert MC.plan(ext4, healthy_arrays(), "md0", PATTERNS, 0, True)["steps"] == [("mkfs", True)]
    # a member gone from the node (the 6.1 kernel still prints the broken RAID0 "active")
    lost = MC.plan(lsblk_with(nvme("nvme0n1", "S1", children=children)), healthy_arrays(), "md0", PATTERNS, 0, False)
    assert lost["steps"] == [] and "has lost nvme0n2" in lost["problems"][0]
    # a pattern widened onto the boot disk names it first
    root = {
        "name": "nvme9n1p2",
        "type": "part",
        "model": None,
        "serial": None,
        "size": 1,
        "fstype": "ext4",
        "pttype": None,
        "mountpoints": ["/"],
    }
    wide = lsblk_with(
        *(nvme(n, s, children=children) for n, s in (("nvme0n1", "S1"), ("nvme0n2", "S2"))),
        nvme("nvme9n1", "S9", pttype="gpt", children=[root]),
    )
    problems = MC.plan(wide, healthy_arrays(), "md0", PATTERNS, 0, True)["problems"]
    assert "nvme9n1 (model SAMSUNG MZWLO3T8HCLS-00A07, serial S9) holds the root filesystem" in problems[0] and "is made of" in problems[1]
    # other disks than the patterns match
    other = lsblk_with(*(nvme(n, s, children=children) for n, s in (("nvme0n1", "S1"), ("nvme0n2", "S2"))), nvme("nvme3n1", "S3"))
    assert (
        "is made of nvme0n1, nvme0n2, but model_storage_cache_devices match nvme0n1, nvme0n2, nvme3n1"
        in MC.plan(other, healthy_arrays(), "md0", PATTERNS, 0, False)["problems"][0]
    )


def test_an_inactive_array_is_refused():
    arrays = mdstat.parse_mdstat(
        "Personalities : \nmd127 : inactive nvme1n1[0](S)\n      3750729728 blocks super 1.2\n       \nunused devices: <none>\n"
    )["arrays"]
    devices = lsblk_with(nvme("nvme1n1", "S1", fstype="linux_raid_member", children=[dict(md_child("md127", None), type="md")]))
    got = MC.plan(devices, arrays, None, PATTERNS, 0, False)
    assert got["steps"] == [] and "md127 is inactive" in got["problems"][0]


def test_mdadm_conf_keeps_other_lines_and_replaces_the_arrays_own():
    line = "ARRAY /dev/md/rackforge_cache metadata=1.2 name=n1:rackforge_cache UUID=aaaaaaaa:bbbbbbbb:cccccccc:dddddddd"
    text = "HOMEHOST <system>\nMAILADDR root\nARRAY /dev/md/boot metadata=1.2 UUID=11111111:22222222:33333333:44444444\n"
    text += (
        "ARRAY /dev/md/old metadata=1.2 UUID=aaaaaaaa:bbbbbbbb:cccccccc:dddddddd\nARRAY /dev/md/rackforge_cache metadata=1.2 UUID=0:0:0:0\n"
    )
    got = MC.mdadm_conf(text, line, "/dev/md/rackforge_cache")
    assert (
        got == "HOMEHOST <system>\nMAILADDR root\nARRAY /dev/md/boot metadata=1.2 UUID=11111111:22222222:33333333:44444444\n" + line + "\n"
    )
    assert MC.mdadm_conf(got, line, "/dev/md/rackforge_cache") == got
    assert MC.mdadm_conf(None, line, "/dev/md/rackforge_cache").endswith("\n" + line + "\n")


def test_settings_checks_of_the_cache():
    assert MC.pattern_problems([{"model": "SAMSUNG*"}, {"serial": "S64H*", "model": "X"}]) == []
    assert "only model and serial" in MC.pattern_problems([{"modle": "x"}])[0]
    assert "matches every NVMe disk" in MC.pattern_problems([{"model": "*"}])[0]
    assert "non-empty string" in MC.pattern_problems([{"model": ""}])[0]
    assert "must be a list" in MC.pattern_problems("SAMSUNG*")[0]
    assert M.mount_point_problem("/var/cache/models", "/models") is None
    assert "the other mount point" in M.mount_point_problem("/models/cache", "/models")
    assert "the other mount point" in M.mount_point_problem("/models", "/models/")
    assert "system owns" in M.mount_point_problem("/etc/cache", "/models")


def run_module(sim, monkeypatch, capsys, check_mode=False, **args):
    for key, value in sim.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(ansible_warnings, "_global_warnings", {})
    monkeypatch.setattr(module_utils_internal, "is_controller", False)
    monkeypatch.setattr(rackforge_model_cache.AnsibleModule, "get_bin_path", sim.get_bin_path())
    base = {"devices": [{"model": "Micron_7450_MTFDKCC3T8TFR"}], "count": 2, "mdadm_conf": str(sim.tmp / "mdadm.conf")}
    base.update(proc_mdstat=str(sim.tmp / "run" / "mdstat"), dev_root=str(sim.tmp / "dev"), _ansible_check_mode=check_mode)
    with patch_module_args(dict(base, **args)), pytest.raises(SystemExit):
        rackforge_model_cache.main()
    return json.loads(capsys.readouterr().out)


def test_module_makes_the_cache_once_and_a_rerun_changes_nothing(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path, profile="pcie-a100-4gpu", driver=None)
    checked = run_module(sim, monkeypatch, capsys, check_mode=True)
    assert checked["changed"] and not (tmp_path / "mdadm.conf").exists() and "md127" not in (tmp_path / "run" / "mdstat").read_text()
    first = run_module(sim, monkeypatch, capsys)
    assert first["actions"] == [
        "create /dev/md/rackforge_cache (RAID0 over /dev/nvme1n1, /dev/nvme2n1)",
        "mkfs.xfs -L rfcache /dev/md/rackforge_cache",
        "write %s" % (tmp_path / "mdadm.conf"),
    ], first
    assert checked["actions"] == first["actions"]
    assert first["initramfs"] == "not installed" and "update-initramfs is not installed" in json.dumps(first.get("warnings"))
    conf = (tmp_path / "mdadm.conf").read_text()
    assert first["array_line"].startswith("ARRAY /dev/md/rackforge_cache metadata=1.2 name=") and conf.endswith(first["array_line"] + "\n")
    assert "md127 : active raid0 nvme2n1[1] nvme1n1[0]" in (tmp_path / "run" / "mdstat").read_text()
    again = run_module(sim, monkeypatch, capsys)
    assert not again["changed"] and again["actions"] == [] and again["members"] == ["nvme1n1", "nvme2n1"]
    assert run_module(sim, monkeypatch, capsys, check_mode=True)["changed"] is False


def test_module_refuses_a_broken_cache_and_a_foreign_disk_with_nothing_changed(tmp_path, monkeypatch, capsys):
    sim = Sim(tmp_path, profile="pcie-a100-4gpu", driver=None)
    data = (
        json.loads((tmp_path / "var" / "block.json").read_text())
        if (tmp_path / "var" / "block.json").exists()
        else {"sig": {}, "arrays": {}}
    )
    data["sig"]["2240395F500202"] = {"fstype": "ext4"}
    (tmp_path / "var" / "block.json").write_text(json.dumps(data))
    refused = run_module(sim, monkeypatch, capsys)
    assert (
        refused["failed"] and "nvme2n1 (model Micron_7450_MTFDKCC3T8TFR, serial 2240395F500202) holds a filesystem (ext4)" in refused["msg"]
    )
    assert "nothing was changed" in refused["msg"] and "md127" not in (tmp_path / "run" / "mdstat").read_text()
    wiped = run_module(sim, monkeypatch, capsys, wipe_ok=True)
    assert wiped["actions"][0] == "wipe /dev/nvme2n1" and "create /dev/md/rackforge_cache" in wiped["actions"][1]
    sim.run("hwsim", "fault", "add", "nvme_missing", "serial=2240395F500202")
    lost = run_module(sim, monkeypatch, capsys)
    assert lost["failed"] and "has lost nvme2n1" in lost["msg"]
    sim.run("hwsim", "boot")  # the reboot leaves the array inactive, its present member a spare
    inactive = run_module(sim, monkeypatch, capsys)
    assert inactive["failed"] and "md127 is inactive (members present: nvme1n1)" in inactive["msg"]
    sim.run("hwsim", "fault", "clear")
    sim.run("hwsim", "boot")
    assert not run_module(sim, monkeypatch, capsys)["changed"]


def test_health_of_the_cache_array_mount_and_free_space(tmp_path, monkeypatch, capsys):
    from ansible.module_utils.rackforge.cache_check import check_cache

    sim = Sim(tmp_path, profile="pcie-a100-4gpu", driver=None)
    assert run_module(sim, monkeypatch, capsys)["changed"]  # the cache made
    where = {"proc_mdstat": str(tmp_path / "run" / "mdstat"), "dev_root": str(tmp_path / "dev")}
    # "/" stands in for the cache's mount (a real mount point with real free space)
    ok = check_cache("/", "/dev/md/rackforge_cache", 0, 10, **where)
    assert ok == {"findings": [], "cache": {"path": "/", "device": "/dev/md/rackforge_cache", "up": True}}
    full = check_cache("/", "/dev/md/rackforge_cache", 10**9, 10, **where)["findings"]
    assert [f["check"] for f in full] == ["model_cache_full"] and "below 1e+09 GB" in full[0]["message"]
    plain = tmp_path / "cache"
    plain.mkdir()
    assert (
        check_cache(str(plain), "/dev/md/rackforge_cache", 0, 10, **where)["findings"][0]["observed"]
        == "a plain directory, nothing mounted"
    )
    sim.run("hwsim", "fault", "add", "nvme_missing", "serial=2240395F500202")
    lost = check_cache("/", "/dev/md/rackforge_cache", 0, 10, **where)
    assert not lost["cache"]["up"] and "has lost nvme2n1" in lost["findings"][0]["observed"]
    sim.run("hwsim", "boot")
    gone = check_cache("/", "/dev/md/rackforge_cache", 0, 10, **where)["findings"][0]
    assert gone["check"] == "model_cache_array" and "not assembled" in gone["observed"]


def test_the_simulated_mdstat_and_lsblk_have_the_real_layouts(tmp_path, monkeypatch, capsys):
    """hwsim's /proc/mdstat of a 2-disk RAID0 is the real GCE capture's, line for line, but for the
    names, sizes and chunk; its lsblk JSON has the real capture's keys and the disk rows' types."""
    import re

    sim = Sim(tmp_path, profile="pcie-a100-4gpu", driver=None)
    assert run_module(sim, monkeypatch, capsys)["changed"]

    def shape(text):
        return re.sub(r"\d+", "N", re.sub(r"\bmd\d+|nvme\dn\d", "DEV", text))

    assert shape((tmp_path / "run" / "mdstat").read_text()) == shape(fixture("mdstat", "gce-nvme-raid0-healthy"))
    real = json.loads((CAPTURED / "lsblk-J-debian12-vm.txt").read_text())["blockdevices"][1]
    ours = json.loads(sim.run("lsblk", "-J", "-b", "-o", "NAME,TYPE,MODEL,SERIAL,SIZE,FSTYPE,PTTYPE,MOUNTPOINTS"))["blockdevices"]
    assert all(set(d) - {"children"} == set(real) for d in ours)
    assert all(isinstance(d["size"], int) and isinstance(d["mountpoints"], list) for d in ours)
