"""parse_xid on real kernel logs (tests/fixtures/realworld/kernel-log-xid, provenance in *.src.txt)."""

from __future__ import annotations

import pathlib

import pytest
from ansible.module_utils.rackforge import kernel_log as k
from ansible.module_utils.rackforge.gpu_health import new_records
from ansible.module_utils.rackforge.kernel_log import ParseError, parse_kmsg
from conftest import captures, fixture

ROOT_CAPTURED = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "captured"


def xids(name):
    return k.parse_xid(fixture("kernel-log-xid", name))


def test_the_captures_are_there():
    # each one's .src.txt: test_parser_mutation.py::test_every_capture_has_its_source_beside_it
    assert len(captures("kernel-log-xid")) >= 3


def test_xid79_fallen_off_the_bus_dmesg_T_pid_unknown():
    # one Xid line among NVRM lines, including the crash-dump notice's space-indented continuation lines
    assert xids("akash-node1-xid79-fallen-off-bus-dmesg-T") == [
        {"pci": "0000:a1:00", "xid": 79, "pid": None, "name": None, "detail": "GPU has fallen off the bus."}
    ]


def test_xid119_gsp_timeouts_with_pid_and_name():
    events = xids("xe9680-xid119-gsp-timeout-dmesg-T")
    assert [(e["xid"], e["pid"], e["name"]) for e in events] == [
        (119, 2024380, "nvidia-smi"),
        (119, 2024380, "nvidia-smi"),
        (119, 2024380, "nvidia-smi"),
        (119, 1263500, "cache_mgr_main"),
        (119, 1240590, "gpud"),
    ]
    assert {e["pci"] for e in events} == {"0000:9b:00"}
    assert events[0]["detail"] == (
        "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4)."
    )


def test_xid43_31_94_detail_keeps_its_own_commas():
    events = xids("akash-xid43-31-94-contained-dmesg-T")
    assert events[0] == {"pci": "0000:00:05", "xid": 43, "pid": 1045242, "name": "pt_main_thread", "detail": "Ch 00000008"}
    assert events[2] == {
        "pci": "0000:00:07",
        "xid": 31,
        "pid": 2512125,
        "name": "python3.10",
        "detail": "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_8 faulted @ 0x73ac_1c000000. "
        "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE",
    }
    assert events[3] == {
        "pci": "0000:00:08",
        "xid": 94,
        "pid": None,
        "name": None,
        "detail": "Contained: SM (0x1). RST: No, D-RST: No",
    }
    assert len(events) == 4


def test_xid48_64_syslog_prefix_and_dmesg_timestamp():
    events = xids("gpu-operator-xid48-dbe-64-syslog")
    assert [(e["pci"], e["xid"], e["pid"], e["name"]) for e in events] == [
        ("0000:07:00", 48, None, None),
        ("0000:07:00", 64, None, None),
    ]
    assert events[0]["detail"].startswith("An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer")
    assert events[0]["detail"].endswith("partition 7, subpartition 1.")
    assert events[1]["detail"] == (
        "Dynamic Page Retirement: Blacklisting failed.  Page should have been blacklisted on boot(0x00000000007fffa8)."
    )


def test_old_driver_without_pid_or_name():
    assert xids("optimus-laptop-2015-xid32-31-no-pid-dmesg") == [
        {"pci": "0000:01:00", "xid": 32, "pid": None, "name": None, "detail": "Channel ID 00000000 intr 00004000"},
        {"pci": "0000:01:00", "xid": 32, "pid": None, "name": None, "detail": "Channel ID 00000000 intr 00004000"},
        {"pci": "0000:01:00", "xid": 31, "pid": None, "name": None, "detail": "Ch 00000003, engmask 00000101, intr 10000000"},
    ]


# Edge cases no capture file shows. Each line below is a real log line, quoted whole from the public
# page named in its comment; only the tests' choice of lines is ours.
REAL_LINES = [
    # Ubuntu Forums "System crash with pixelation in monitors (image attached)", mechgt 2012-05-10,
    # GeForce 8500 GT: a 2012 driver prints no "PCI:" before the address
    (
        "May 10 22:25:01 jambi kernel: [176830.774761] NVRM: Xid (0000:03:00): 13, 0003 00000000 00008297 00001098 00000000 00000044",
        {"pci": "0000:03:00", "xid": 13, "pid": None, "name": None, "detail": "0003 00000000 00008297 00001098 00000000 00000044"},
    ),
    # a user's Xubuntu 20.04 / nvidia-driver-450 notes in a public repository: pid= without name=
    (
        "Okt 06 17:59:27 balrog kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1122, GPU has fallen off the bus.",
        {"pci": "0000:01:00", "xid": 79, "pid": 1122, "name": None, "detail": "GPU has fallen off the bus."},
    ),
    # NVIDIA/open-gpu-kernel-modules#1150 (journalctl -k, 590.48.01): "Xid 149" inside the detail is not an event
    (
        "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149",
        {"pci": "0000:dc:00", "xid": 45, "pid": 1818990, "name": "python3", "detail": "Ch 00000001 caused by previous Xid 149"},
    ),
    # NVIDIA/NVSentinel#1357: an NVLink Xid has no pid/name (the line is cut short in the issue itself)
    (
        "NVRM: Xid (PCI:0000:c5:00): 145, RLW_SRC_TRACK Nonfatal XC1 i0 Link 17 (0x04084507 0x00000004 0x00000000 0x00000000 0x00000000 0x00000000",
        {
            "pci": "0000:c5:00",
            "xid": 145,
            "pid": None,
            "name": None,
            "detail": "RLW_SRC_TRACK Nonfatal XC1 i0 Link 17 (0x04084507 0x00000004 0x00000000 0x00000000 0x00000000 0x00000000",
        },
    ),
    # NixOS/nixpkgs#539036 (journalctl): a process name starting with a dot
    (
        "Jul 06 20:02:59 gaming kernel: NVRM: Xid (PCI:0000:01:00): 13, pid=1773, name=.gala-wrapped, Graphics Exception: channel 0x00000005, Class 0000c997, Offset 00000000, Data",
        {
            "pci": "0000:01:00",
            "xid": 13,
            "pid": 1773,
            "name": ".gala-wrapped",
            "detail": "Graphics Exception: channel 0x00000005, Class 0000c997, Offset 00000000, Data",
        },
    ),
]


@pytest.mark.parametrize(("line", "want"), REAL_LINES, ids=lambda v: v[:40] if isinstance(v, str) else "")
def test_real_line_variants(line, want):
    assert k.parse_xid(line + "\n") == [want]


def test_other_lines_ignored():
    # real non-Xid lines from the captures: NVRM messages, continuation lines, stack dumps
    text = fixture("kernel-log-xid", "akash-node1-xid79-fallen-off-bus-dmesg-T")
    others = "\n".join(line for line in text.splitlines() if "NVRM: Xid" not in line)
    assert len(others.splitlines()) == 6
    assert k.parse_xid(others) == []
    assert k.parse_xid("") == []


@pytest.mark.parametrize(
    "bad",
    [
        # the akash Xid 79 line with its number removed
        "[Fri Apr  5 21:29:39 2024] NVRM: Xid (PCI:0000:a1:00): GPU has fallen off the bus.",
        # the same line, number mangled
        "[Fri Apr  5 21:29:39 2024] NVRM: Xid (PCI:0000:a1:00): 7x9, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        # the same line cut after "Xid"
        "[Fri Apr  5 21:29:39 2024] NVRM: Xid",
        # the xe9680 Xid 119 line with an unreadable pid
        "NVRM: Xid (PCI:0000:9b:00): 119, pid=20243x80, name=nvidia-smi, Timeout after 6s of waiting for RPC response",
    ],
)
def test_unreadable_xid_line_raises(bad):
    with pytest.raises(k.ParseError):
        k.parse_xid("[    1.000000] ok\n" + bad + "\n")


@pytest.mark.parametrize("bad", [None, b"NVRM: Xid (PCI:0000:a1:00): 79, GPU has fallen off the bus.", 79, ["line"]])
def test_not_text_raises(bad):
    with pytest.raises(k.ParseError):
        k.parse_xid(bad)


def test_parse_error_is_a_value_error():
    assert issubclass(k.ParseError, ValueError)


def test_parse_kmsg_reads_a_real_dev_kmsg_capture_and_skips_dictionary_lines():
    text = (ROOT_CAPTURED / "dev-kmsg-excerpt.txt").read_text()
    records = parse_kmsg(text)
    assert records[0]["seq"] == 0 and records[0]["message"].startswith("Linux version 6.18.44")
    assert [r["seq"] for r in records[1:5]] == [2, 3, 4, 5]
    assert all(not r["message"].startswith(" ") for r in records)
    assert any(r["message"].startswith("acpi PNP0A08:00: _OSC") for r in records)
    assert len(records) == len([x for x in text.split("\n") if x and not x.startswith(" ")]) == 42


def test_parse_kmsg_refuses_what_is_not_a_record():
    with pytest.raises(ParseError, match="line 2 is not a record"):
        parse_kmsg("6,1,0,-;ok\nnot a record\n")
    with pytest.raises(ParseError):
        parse_kmsg(b"6,1,0,-;bytes")


def test_xids_since_the_baseline_and_after_a_reboot():
    log = "6,1,10,-;NVRM: loading\n4,2,20,-;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    records = parse_kmsg(log)
    new, marker = new_records(records, {}, "boot-a")
    assert [r["seq"] for r in new] == [1, 2] and marker == {"boot_id": "boot-a", "seq": 2}
    assert new_records(records, marker, "boot-a")[0] == []  # nothing since the marker
    later = parse_kmsg(log + "4,3,30,-;NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, DBE\n")
    assert [r["seq"] for r in new_records(later, {"boot_id": "boot-a", "seq": 1}, "boot-a")[0]] == [2, 3]
    # another boot (or a ring buffer that started again: seq below the marker): everything is new
    assert len(new_records(records, {"boot_id": "boot-b", "seq": 1}, "boot-a")[0]) == 2
    assert len(new_records(records[:1], {"boot_id": "boot-a", "seq": 9}, "boot-a")[0]) == 1
