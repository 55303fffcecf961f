"""The local NVMe model cache in the lab: the profile's data disks (SIMULATED: hwsim's disks and md,
lab/hwsim/hwsimlib/block_sim.py) assembled as one RAID0, formatted once, in mdadm.conf and mounted
by its unit, the boot disk never touched; settings that match the wrong disks are refused before
any change. The faults (a member gone, the filesystem unmounted) are in test_fault_matrix.py, the
reboot in test_reboot.py."""

from __future__ import annotations

import json

from conftest import on_node, playbook

NODE = "lab-node2"
UNIT = "var-cache-models.mount"


def test_the_data_disks_are_one_raid0_mounted_by_its_unit_and_the_boot_disk_is_not_touched(converged, gpu_nodes):
    for node in gpu_nodes:
        disks = json.loads(on_node(node, "lsblk", "-J", "-b", "-o", "NAME,TYPE,MODEL,SERIAL,SIZE,FSTYPE,PTTYPE,MOUNTPOINTS").stdout)
        data = [d for d in disks["blockdevices"] if d["name"] != "nvme0n1"]
        assert data and all(d["fstype"] == "linux_raid_member" and d["children"][0]["name"] == "md127" for d in data), disks
        boot = next(d for d in disks["blockdevices"] if d["name"] == "nvme0n1")
        assert boot["pttype"] == "gpt" and [c["name"] for c in boot["children"]] == ["nvme0n1p1", "nvme0n1p2"]
        mdstat = on_node(node, "cat", "/proc/mdstat").stdout
        members = sorted(d["name"] for d in data)
        assert len(members) == (2 if node == "lab-node3" else 8)  # the PCIe server's two data disks, the HGX's eight
        assert (
            "md127 : active raid0 " in mdstat
            and sorted(w.split("[")[0] for w in mdstat.split("raid0 ")[1].splitlines()[0].split()) == members
        )
        conf = on_node(node, "cat", "/etc/mdadm/mdadm.conf").stdout
        line = on_node(node, "mdadm", "--detail", "--brief", "/dev/md/rackforge_cache").stdout.strip()
        assert (
            line.startswith("ARRAY /dev/md/rackforge_cache metadata=1.2 name=%s:rackforge_cache UUID=" % node) and line in conf.splitlines()
        )
        assert on_node(node, "systemctl", "is-enabled", UNIT).stdout.strip() == "enabled"
        assert on_node(node, "systemctl", "is-active", UNIT).stdout.strip() == "active"
        unit = on_node(node, "cat", "/etc/systemd/system/" + UNIT).stdout
        assert (
            "What=/dev/md/rackforge_cache\nWhere=/var/cache/models\nType=xfs\nOptions=noatime\n" in unit
            and "WantedBy=local-fs.target" in unit
        )
        mount = json.loads(on_node(node, "findmnt", "-J", "-o", "SOURCE,TARGET", "/var/cache/models").stdout)["filesystems"][0]
        assert mount["source"] in ("/dev/md127", "/dev/md/rackforge_cache"), mount


def storage(*extra):
    return playbook("playbooks/storage.yml", "--limit", NODE, *extra)


def cache_state():
    return (on_node(NODE, "cat", "/proc/mdstat").stdout, on_node(NODE, "cat", "/etc/mdadm/mdadm.conf").stdout)


def test_patterns_that_match_other_disks_are_refused_with_nothing_changed(converged):
    before = cache_state()
    for patterns, count, needle in (
        ([{"model": "INTEL*"}], 0, "model_storage_cache_devices match no disk"),
        ([{"model": "SAMSUNG *"}], 0, "holds the root filesystem"),
        ([{"model": "SAMSUNG MZQL2*"}], 4, "has 8 members; model_storage_cache_device_count is 4"),
    ):
        extra = json.dumps({"model_storage_cache_devices": patterns, "model_storage_cache_device_count": count})
        res = storage("-e", extra)
        out = " ".join(res.stdout.split())
        assert res.returncode != 0 and res.recap[NODE]["failed"] == 1 and res.recap[NODE]["changed"] == 0, out[-2000:]
        assert needle in out and "nothing was changed" in out, out[-2000:]
    assert cache_state() == before


def test_malformed_settings_are_refused_before_any_change_naming_the_variable(converged):
    res = storage("-e", json.dumps({"model_storage_cache_devices": [{"modle": "SAMSUNG*"}], "model_storage_cache_dir": "/models/cache"}))
    out = " ".join(res.stdout.split())
    assert res.returncode != 0 and res.recap[NODE]["changed"] == 0, out[-2000:]
    assert "model_storage_cache_devices" in out and "only model and serial" in out, out[-2000:]
    assert "model_storage_cache_dir" in out and "the other mount point" in out, out[-2000:]
