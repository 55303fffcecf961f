"""parse_mdstat on real /proc/mdstat captures (tests/fixtures/realworld/mdstat, provenance in *.src.txt)."""

from __future__ import annotations

import pytest
from ansible.module_utils.rackforge import mdstat as m
from conftest import captures, fixture

ALL_PERSONALITIES = ["linear", "multipath", "raid0", "raid1", "raid6", "raid5", "raid4", "raid10"]


def parse(name):
    return m.parse_mdstat(fixture("mdstat", name))


def dev(name, slot, role=None):
    return {"name": name, "slot": slot, "role": role}


def sync(action, percent=None, done=None, total=None, finish_min=None, speed_kbs=None):
    return {
        "action": action,
        "percent": percent,
        "done": done,
        "total": total,
        "finish_min": finish_min,
        "speed_kbs": speed_kbs,
    }


def array(**kw):
    base = {
        "state": "active",
        "read_only": False,
        "level": None,
        "devices": [],
        "blocks": None,
        "super": None,
        "chunk_kb": None,
        "raid_disks": None,
        "active_disks": None,
        "status": None,
        "degraded": False,
        "sync": None,
        "bitmap": None,
    }
    base.update(kw)
    return base


def test_the_captures_are_there():
    # each one's .src.txt: test_parser_mutation.py::test_every_capture_has_its_source_beside_it
    assert len(captures("mdstat")) >= 5


def test_gce_nvme_raid0_healthy():
    assert parse("gce-nvme-raid0-healthy") == {
        "personalities": ["raid0"],
        "arrays": {
            "md0": array(
                level="raid0",
                devices=[dev("nvme0n2", 1), dev("nvme0n1", 0)],
                blocks=786169856,
                super="1.2",
                chunk_kb=1024,
            )
        },
        "unused": [],
    }


def test_hetzner_four_raid1_each_with_a_faulty_member():
    r = parse("hetzner-raid1-faulty-members")
    assert r["personalities"] == ALL_PERSONALITIES
    assert list(r["arrays"]) == ["md0", "md3", "md1", "md2"]  # kernel order, not sorted
    assert r["arrays"]["md0"] == array(
        level="raid1",
        devices=[dev("sdb1", 1), dev("sda1", 0, "faulty")],
        blocks=12581816,
        super="1.2",
        raid_disks=2,
        active_disks=1,
        status="_U",
        degraded=True,
    )
    for name, part, blocks in (("md3", "4", 1843414335), ("md1", "2", 524276), ("md2", "3", 1073740664)):
        a = r["arrays"][name]
        assert a["devices"] == [dev("sdb" + part, 1), dev("sda" + part, 0, "faulty")]
        assert (a["blocks"], a["raid_disks"], a["active_disks"], a["status"], a["degraded"]) == (blocks, 2, 1, "_U", True)


def test_check_in_progress_and_resync_delayed_with_bitmap():
    r = parse("raid1-check-and-resync-delayed-bitmap")
    assert r["personalities"] == ["raid1", "linear", "multipath", "raid0", "raid6", "raid5", "raid4", "raid10"]
    assert r["arrays"]["md0"] == array(
        level="raid1",
        devices=[dev("sdb2", 0), dev("sda2", 1)],
        blocks=972946432,
        super="1.2",
        raid_disks=2,
        active_disks=2,
        status="UU",
        sync=sync("check", 45.5, 442910144, 972946432, 55.6, 158752),
        bitmap="2/8 pages [8KB], 65536KB chunk",
    )
    md1 = r["arrays"]["md1"]
    assert md1["sync"] == sync("resync")  # resync=DELAYED: action only, no numbers
    assert (md1["blocks"], md1["status"], md1["degraded"], md1["bitmap"]) == (3677184, "UU", False, None)
    assert r["unused"] == []


def test_write_mostly_replacement_and_write_mostly_spare():
    r = parse("raid1-write-mostly-replacement-check")
    md0, md1 = r["arrays"]["md0"], r["arrays"]["md1"]
    # (W)(R): the stronger flag wins; [2/3] while a replacement is in the array is not degraded
    assert md0["devices"] == [dev("sda3", 2), dev("sdc3", 3, "replacement"), dev("sdb3", 0)]
    assert (md0["raid_disks"], md0["active_disks"], md0["status"], md0["degraded"]) == (2, 3, "UU", False)
    assert md0["sync"] == sync("check", 15.6, 152996864, 976015360, 153.2, 89504)
    assert md0["bitmap"] == "2/8 pages [8KB], 65536KB chunk"
    assert md1["devices"] == [dev("sdc2", 3, "spare"), dev("sda2", 2), dev("sdb2", 0)]
    assert (md1["blocks"], md1["degraded"], md1["sync"]) == (409280, False, None)


def test_auto_read_only():
    arrays = parse("raid1-auto-read-only")["arrays"]
    assert arrays["md1"] == array(
        read_only=True,
        level="raid1",
        devices=[dev("sdd1", 3), dev("sdc1", 2)],
        blocks=5860390471,
        super="1.2",
        raid_disks=2,
        active_disks=2,
        status="UU",
    )
    assert arrays["md0"]["read_only"] is False


def test_raid10_nvme_and_single_disk_raid1_without_unused_line():
    r = parse("raid10-nvme-and-single-disk-raid1")
    assert r["arrays"]["md1"] == array(
        level="raid10",
        devices=[
            dev("nvme4n1p3", 3),
            dev("nvme5n1p3", 5),
            dev("nvme2n1p3", 4),
            dev("nvme1n1p3", 0),
            dev("nvme3n1p3", 2),
            dev("nvme0n1p3", 1),
        ],
        blocks=9296776704,
        super="1.2",
        chunk_kb=512,
        raid_disks=6,
        active_disks=6,
        status="UUUUUU",
        bitmap="34/70 pages [136KB], 65536KB chunk",
    )
    md0, md2 = r["arrays"]["md0"], r["arrays"]["md2"]
    assert (len(md0["devices"]), md0["status"], md0["chunk_kb"], md0["bitmap"]) == (6, "UUUUUU", None, None)
    assert md2["devices"] == [dev("nvme6n1", 0)]
    assert (md2["raid_disks"], md2["active_disks"], md2["status"], md2["degraded"]) == (1, 1, "U", False)
    assert r["unused"] == []


def test_nested_raid0_over_two_raid1():
    arrays = parse("nested-raid0-over-raid1-bitmap")["arrays"]
    assert arrays["md2"] == array(level="raid0", devices=[dev("md0", 0), dev("md1", 1)], blocks=3906502656, super="1.2", chunk_kb=512)
    assert arrays["md0"]["bitmap"] == "1/15 pages [4KB], 65536KB chunk"
    assert arrays["md1"]["bitmap"] == "0/15 pages [0KB], 65536KB chunk"
    assert not any(a["degraded"] for a in arrays.values())


def test_initial_resync_in_progress():
    a = parse("raid1-resync-in-progress")["arrays"]["md127"]
    assert a["devices"] == [dev("sdc1", 0), dev("sdc2", 1)]
    assert a["sync"] == sync("resync", 50.4, 26409536, 52395008, 6.4, 67648)
    assert (a["status"], a["degraded"]) == ("UU", False)


def test_inactive_array_with_its_one_member_as_spare():
    r = parse("raid1-inactive-one-spare")
    assert r["arrays"] == {"md127": array(state="inactive", devices=[dev("sdc1", 0, "spare")], blocks=52395008, super="1.2")}
    assert r["personalities"] == ALL_PERSONALITIES


def test_faulty_hot_spare_degrades_despite_full_count_and_no_personalities_line():
    r = parse("raid1-faulty-spare-bitmap-arrays-only")
    assert (r["personalities"], r["unused"]) == ([], [])
    md1 = r["arrays"]["md1"]
    assert md1["devices"][1] == dev("sdh1", 5, "faulty")
    assert [d["role"] for d in md1["devices"]] == [None, "faulty", None, None, None, None]
    assert (md1["raid_disks"], md1["active_disks"], md1["status"], md1["degraded"]) == (5, 5, "UUUUU", True)
    assert md1["bitmap"] == "2/15 pages [8KB], 65536KB chunk"
    assert r["arrays"]["md0"]["degraded"] is False


def test_superblock_0_90_prints_no_super():
    arrays = parse("raid0-raid1-superblock-0.90")["arrays"]
    assert arrays["md2"] == array(level="raid0", devices=[dev("sdb2", 1), dev("sda2", 0)], blocks=7812096, chunk_kb=512)
    assert (arrays["md1"]["super"], arrays["md1"]["blocks"], arrays["md1"]["status"]) == (None, 292800, "UU")
    assert arrays["md3"]["blocks"] == 230230528


def test_removed_member_and_recovery():
    arrays = parse("raid1-removed-member-and-recovery")["arrays"]
    # a removed disk is not listed at all: only the count shows it
    assert arrays["md1"] == array(
        level="raid1",
        devices=[dev("sdb2", 1)],
        blocks=972574976,
        raid_disks=2,
        active_disks=1,
        status="_U",
        degraded=True,
    )
    md0 = arrays["md0"]
    assert md0["devices"] == [dev("sda1", 2), dev("sdb1", 1)]
    assert md0["sync"] == sync("recovery", 3.6, 7680, 208704, 259.6, 12)
    assert md0["degraded"] is True


def test_imsm_container_is_inactive_with_spares():
    arrays = parse("imsm-container-inactive-spares")["arrays"]
    assert arrays["md0"] == array(
        state="inactive",
        devices=[dev("sda", 1, "spare"), dev("sdb", 0, "spare")],
        blocks=5288,
        super="external:imsm",
    )
    assert arrays["md127"]["super"] == "external:/md0/0"
    assert (arrays["md127"]["status"], arrays["md127"]["degraded"]) == ("UU", False)


def test_raid6_reshape_with_two_indented_spares():
    a = parse("raid6-reshape-with-spares")["arrays"]["md0"]
    assert a == array(
        level="raid6",
        devices=[
            dev("sde1", 6, "spare"),
            dev("sdf1", 7, "spare"),
            dev("sdb1", 0),
            dev("sdg1", 3),
            dev("sdd1", 2),
            dev("sdc", 1),
        ],
        blocks=5860543744,
        super="0.91",
        chunk_kb=4,
        raid_disks=6,
        active_disks=4,
        status="UUUU__",
        degraded=True,
        sync=sync("reshape", 48.4, 709745748, 1465135936, 1271.8, 9898),
    )


def test_linear_rounding_is_chunk_kb():
    r = parse("linear-and-raid1-superblock-0.90")
    assert r["personalities"] == ["linear", "raid1"]
    assert r["arrays"]["md0"] == array(level="linear", devices=[dev("sdf2", 0), dev("sde6", 1)], blocks=58291648, chunk_kb=64)


# Edge cases no capture shows: each text is a real capture changed the way the kernel source
# (drivers/md/md.c md_seq_show / status_resync / status_unused) says the line would read.


def test_broken_raid0_is_degraded():
    # MD_BROKEN: raid0/linear set it when a member fails; md_seq_show prints "broken" for "active"
    text = fixture("mdstat", "gce-nvme-raid0-healthy").replace(": active raid0", ": broken raid0")
    a = m.parse_mdstat(text)["arrays"]["md0"]
    assert (a["state"], a["level"], a["degraded"]) == ("broken", "raid0", True)


def test_faulty_raid0_member_is_degraded():
    text = fixture("mdstat", "gce-nvme-raid0-healthy").replace("nvme0n1[0]", "nvme0n1[0](F)")
    a = m.parse_mdstat(text)["arrays"]["md0"]
    assert a["devices"][1] == dev("nvme0n1", 0, "faulty")
    assert (a["state"], a["degraded"]) == ("active", True)


def test_read_only_and_resync_pending():
    # ro == MD_RDONLY prints " (read-only)"; an unclean array not yet written prints "\tresync=PENDING"
    text = fixture("mdstat", "raid1-auto-read-only")
    text = text.replace("(auto-read-only)", "(read-only)").replace(
        "5860390471 blocks super 1.2 [2/2] [UU]\n      \n",
        "5860390471 blocks super 1.2 [2/2] [UU]\n      \tresync=PENDING\n      \n",
    )
    md1 = m.parse_mdstat(text)["arrays"]["md1"]
    assert (md1["read_only"], md1["level"], md1["sync"]) == (True, "raid1", sync("resync"))


def test_kernel_tab_before_resync_delayed_and_recover_remote():
    text = fixture("mdstat", "raid1-check-and-resync-delayed-bitmap").replace("        resync=DELAYED", "      \tresync=DELAYED")
    assert m.parse_mdstat(text)["arrays"]["md1"]["sync"] == sync("resync")
    # md-cluster: another node recovers this array
    remote = text.replace("\tresync=DELAYED", "\trecover=REMOTE")
    assert m.parse_mdstat(remote)["arrays"]["md1"]["sync"] == sync("recovery")


def test_unused_devices_listed_and_journal_and_write_mostly_flags():
    text = fixture("mdstat", "raid1-write-mostly-replacement-check")
    text = text.replace("unused devices: <none>", "unused devices: sdd1 sde1 ")
    text = text.replace("sdc2[3](W)(S) sda2[2]", "sdc2[3](W) sda2[2](J)")
    r = m.parse_mdstat(text)
    assert r["unused"] == ["sdd1", "sde1"]
    assert r["arrays"]["md1"]["devices"] == [dev("sdc2", 3, "write-mostly"), dev("sda2", 2, "journal"), dev("sdb2", 0)]


def test_crlf_and_only_personalities():
    text = fixture("mdstat", "gce-nvme-raid0-healthy").replace("\n", "\r\n")
    assert m.parse_mdstat(text)["arrays"]["md0"]["chunk_kb"] == 1024
    assert m.parse_mdstat("Personalities : \nunused devices: <none>\n") == {
        "personalities": [],
        "arrays": {},
        "unused": [],
    }


@pytest.mark.parametrize("value", [None, b"Personalities : [raid0]\n", 3, ["md0 : active raid0 sda[0]"]])
def test_non_text_raises_parse_error(value):
    with pytest.raises(m.ParseError):
        m.parse_mdstat(value)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " \n\t\n",
        "cat: /proc/mdstat: No such file or directory\n",
        "Failed to initialize NVML: Driver/library version mismatch\n",
        "mdadm: added /dev/sda3\n",
    ],
)
def test_text_that_is_not_mdstat_raises_parse_error(text):
    with pytest.raises(m.ParseError):
        m.parse_mdstat(text)


GCE = "gce-nvme-raid0-healthy"
DELAYED = "raid1-check-and-resync-delayed-bitmap"


@pytest.mark.parametrize(
    "name,old,new",
    [
        (GCE, "md0 : active raid0 nvme0n2[1] nvme0n1[0]", "md0 :"),  # no state
        (GCE, "md0 : active raid0", "md0 : N/A raid0"),
        (GCE, "nvme0n1[0]", "nvme0n1[x]"),  # member without a number
        (GCE, "nvme0n1[0]", "nvme0n1[0](X)"),  # no such member flag
        (GCE, "nvme0n1[0]", "nvme0n1"),
        (GCE, "786169856 blocks", "786169856 blokcs"),
        (GCE, "1024k chunks", "1024k chunks garbage"),
        (DELAYED, "[2/2] [UU]\n      [=", "[2/2] [U]\n      [="),  # status shorter than raid_disks
        (DELAYED, "check = 45.5%", "check = N/A%"),
        (DELAYED, "resync=DELAYED", "resync=LATER"),
        (DELAYED, "Personalities : [raid1]", "Personalities : raid1"),
        (DELAYED, "md1 : active raid1 sdb3[0] sda3[1]", "md0 : active raid1 sdb3[0] sda3[1]"),  # md0 twice
    ],
)
def test_malformed_array_raises_parse_error(name, old, new):
    text = fixture("mdstat", name)
    assert old in text
    with pytest.raises(m.ParseError):
        m.parse_mdstat(text.replace(old, new, 1))


def test_parse_error_is_a_value_error():
    assert issubclass(m.ParseError, ValueError)
