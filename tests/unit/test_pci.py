"""parse_lspci_vv on real `lspci -vv` output (tests/fixtures/realworld/lspci-vv, provenance in *.src.txt)."""

from __future__ import annotations

import pytest
from ansible.module_utils.rackforge import pci as p
from conftest import captures, fixture

ACS_OFF = {
    "SrcValid": False,
    "TransBlk": False,
    "ReqRedir": False,
    "CmpltRedir": False,
    "UpstreamFwd": False,
    "EgressCtrl": False,
    "DirectTrans": False,
}


def link(gts, width):
    return {"speed_gts": gts, "width": width}


def devices(name):
    return p.parse_lspci_vv(fixture("lspci-vv", name))


def test_the_captures_are_there():
    # each one's .src.txt: test_parser_mutation.py::test_every_capture_has_its_source_beside_it
    assert len(captures("lspci-vv")) >= 2


def test_h100_branch_gpu_switch_and_downgraded_ports():
    d = devices("h100-hgx-dell-pex890xx-gpu-nic-branch-vvv")
    assert list(d) == [
        "15:01.0",
        "16:00.0",
        "17:00.0",
        "17:01.0",
        "17:02.0",
        "17:03.0",
        "17:1f.0",
        "18:00.0",
        "19:00.0",
        "1a:00.0",
        "1b:00.0",
        "1b:00.1",
        "1c:00.0",
    ]
    assert d["19:00.0"] == {
        "name": "3D controller: NVIDIA Corporation Device 2330 (rev a1)",
        "acs_ctl": None,
        "lnk_cap": link(32.0, 16),
        "lnk_sta": link(32.0, 16),
    }
    # switch upstream port: no ACS capability; the "(prog-if 00 [Normal decode])" tail is dropped
    assert d["16:00.0"] == {
        "name": "PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)",
        "acs_ctl": None,
        "lnk_cap": link(32.0, 16),
        "lnk_sta": link(32.0, 16),
    }
    # "LnkSta: Speed 16GT/s (downgraded), Width x4 (ok)" under "LnkCap: ... Speed 32GT/s, Width x4"
    assert d["17:00.0"]["lnk_cap"] == link(32.0, 4)
    assert d["17:00.0"]["lnk_sta"] == link(16.0, 4)
    assert d["17:03.0"]["lnk_sta"] == link(16.0, 16)
    assert d["17:00.0"]["acs_ctl"] == ACS_OFF
    assert d["15:01.0"]["acs_ctl"] == ACS_OFF
    assert d["1b:00.1"]["acs_ctl"] == ACS_OFF
    assert d["1a:00.0"]["name"] == "Ethernet controller: Mellanox Technologies MT2910 Family [ConnectX-7]"
    assert d["18:00.0"]["lnk_sta"] == link(16.0, 4)


def test_h100_nvswitch_branch_acs_enabled_and_narrow_root_port():
    d = devices("h100-hgx-dell-pmc-switch-nvswitch-acs-vvv")
    assert len(d) == 11
    for bdf in ("82:00.0", "82:01.0", "82:02.0", "82:03.0"):
        assert d[bdf]["acs_ctl"] == {
            "SrcValid": True,
            "TransBlk": False,
            "ReqRedir": True,
            "CmpltRedir": True,
            "UpstreamFwd": True,
            "EgressCtrl": False,
            "DirectTrans": False,
        }
        assert d[bdf]["name"] == "PCI bridge: PMC-Sierra Inc. Device 4128"
    assert d["80:01.0"]["lnk_cap"] == link(16.0, 16)
    assert d["80:01.0"]["lnk_sta"] == link(16.0, 2)
    assert d["81:00.0"]["acs_ctl"] == ACS_OFF
    nvswitches = [b for b, v in d.items() if v["name"] == "Bridge: NVIDIA Corporation Device 22a3 (rev a1)"]
    assert nvswitches == ["83:00.0", "84:00.0", "85:00.0", "86:00.0"]
    assert all(d[b]["acs_ctl"] is None and d[b]["lnk_sta"] == link(16.0, 2) for b in nvswitches)


def test_cloud_vm_without_pcie_capabilities():
    d = devices("cloud-vm-virtio-no-pcie-vv")
    assert list(d) == ["00:00.0", "00:01.0", "00:02.0", "00:03.0", "00:04.0", "00:05.0"]
    assert d["00:00.0"]["name"] == "Host bridge: Intel Corporation Device 0d57"
    assert d["00:03.0"]["name"] == "Ethernet controller: Red Hat, Inc. Virtio 1.0 network device (rev 01)"
    assert all(v["acs_ctl"] is None and v["lnk_cap"] is None and v["lnk_sta"] is None for v in d.values())


def test_domain_addresses_kept_as_printed():
    plain = devices("cloud-vm-virtio-no-pcie-vv")
    full = devices("cloud-vm-virtio-no-pcie-vv-D")
    assert list(full) == ["0000:" + b for b in plain]
    assert list(full.values()) == list(plain.values())


def test_markdown_spaces_instead_of_tabs():
    # the real capture with its tabs turned into spaces, as a Markdown copy of it would have them
    text = fixture("lspci-vv", "h100-hgx-dell-pmc-switch-nvswitch-acs-vvv")
    assert p.parse_lspci_vv(text.replace("\t", "    ")) == p.parse_lspci_vv(text)


# Shapes no capture file shows. The lines are real, quoted whole from the public pages named in the
# comments; where a device line and link lines come from different places, the comment says so.

# pciutils before 3.6: LnkSta on one line with the flags. A Tesla T4's `lspci -vv` block quoted in a
# user's public notes (repository not identified by the search index): device, LnkCap and LnkSta lines.
OLD_T4 = (
    "af:00.0 3D controller: NVIDIA Corporation TU104GL [Tesla T4] (rev a1)\n"
    "\t\tLnkCap:\tPort #0, Speed 8GT/s, Width x16, ASPM not supported, Exit Latency L0s <1us, L1 <4us\n"
    "\t\tLnkSta:\tSpeed 8GT/s, Width x16, TrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-\n"
)

# pciutils 2008 (-vvnn): "Speed unknown, Width x0" and 2.5GT/s, from the Ubuntu Forums thread
# "[SOLVED] ath5k new drivers", post by jbogdani 2008-11-23 (Sony VAIO, Intel ICH8), lines of two devices.
OLD_ICH8 = (
    "00:1b.0 Audio device [0403]: Intel Corporation 82801H (ICH8 Family) HD Audio Controller [8086:284b] (rev 03)\n"
    "\t\tLnkCap:\tPort #0, Speed unknown, Width x0, ASPM unknown, Latency L0 <64ns, L1 <1us\n"
    "\t\tLnkSta:\tSpeed unknown, Width x0, TrErr- Train- SlotClk- DLActive- BWMgmt- ABWMgmt-\n"
    "00:1c.1 PCI bridge [0604]: Intel Corporation 82801H (ICH8 Family) PCI Express Port 2 [8086:2841] (rev 03)\n"
    "\t\tLnkCap:\tPort #2, Speed 2.5GT/s, Width x1, ASPM L0s L1, Latency L0 <1us, L1 <4us\n"
    "\t\tLnkSta:\tSpeed 2.5GT/s, Width x0, TrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-\n"
)

# pciutils 3.8 and later: no "(ok)". Device line and LnkSta from tinygrad/open-gpu-kernel-modules#6
# (an RTX 4090 "(prog-if 00 [VGA controller])" line, and the "Speed 2.5GT/s (downgraded), Width x16" line
# quoted in the same comment); the LnkCap line and the LnkCap2/LnkSta2 lines, which must be ignored, are
# from a public Proxmox passthrough note (`lspci -vvv -s 00:01.1 | grep -iE 'LnkCap|LnkSta|LnkCtl'`).
NEW_4090 = (
    "62:00.0 VGA compatible controller: NVIDIA Corporation AD102 [GeForce RTX 4090] (rev a1) (prog-if 00 [VGA controller])\n"
    "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM L1, Exit Latency L1 <4us\n"
    "\t\tLnkCtl:\tASPM L1 Enabled; RCB 64 bytes, LnkDisable- CommClk+\n"
    "\t\tLnkSta:\tSpeed 2.5GT/s (downgraded), Width x16\n"
    "\t\tLnkCap2: Supported Link Speeds: 2.5-16GT/s, Crosslink- Retimer+ 2Retimers+ DRS-\n"
    "\t\tLnkSta2: Current De-emphasis Level: -3.5dB, EqualizationComplete+ EqualizationPhase1+\n"
)


def test_old_and_new_pciutils_link_lines():
    assert p.parse_lspci_vv(OLD_T4)["af:00.0"] == {
        "name": "3D controller: NVIDIA Corporation TU104GL [Tesla T4] (rev a1)",
        "acs_ctl": None,
        "lnk_cap": link(8.0, 16),
        "lnk_sta": link(8.0, 16),
    }
    ich8 = p.parse_lspci_vv(OLD_ICH8)
    assert ich8["00:1b.0"]["lnk_cap"] == link(None, 0)
    assert ich8["00:1b.0"]["lnk_sta"] == link(None, 0)
    assert ich8["00:1c.1"]["lnk_cap"] == link(2.5, 1)
    assert ich8["00:1c.1"]["lnk_sta"] == link(2.5, 0)
    assert ich8["00:1c.1"]["name"] == "PCI bridge [0604]: Intel Corporation 82801H (ICH8 Family) PCI Express Port 2 [8086:2841] (rev 03)"
    assert p.parse_lspci_vv(NEW_4090)["62:00.0"] == {
        "name": "VGA compatible controller: NVIDIA Corporation AD102 [GeForce RTX 4090] (rev a1)",
        "acs_ctl": None,
        "lnk_cap": link(16.0, 16),
        "lnk_sta": link(2.5, 16),
    }


def test_empty_text():
    assert p.parse_lspci_vv("") == {}


# Bad input, each built from a real line of the captures and changed where the comment says.
GPU = "19:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n"
CAP = "\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM L1, Exit Latency L1 <4us\n"
STA = "\t\tLnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)\n"
ACS = "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"


@pytest.mark.parametrize(
    "bad",
    [
        CAP + GPU,  # LnkCap before any device line
        STA,  # LnkSta before any device line
        ACS + GPU,  # ACSCtl before any device line
        GPU + CAP.replace("32GT/s", "32GB/s"),  # speed unit changed
        GPU + STA.replace("32GT/s", "fast"),  # speed word changed
        GPU + STA.replace("x16 (ok)", "16 (ok)"),  # width without its x
        GPU + CAP.replace("Width x16", "Width xx"),  # width not a number
        GPU + STA.replace(", Width x16 (ok)", ""),  # width cut off
        GPU + CAP.replace("Speed 32GT/s, ", ""),  # speed cut off
        GPU + ACS.replace("TransBlk-", "TransBlk"),  # ACS flag without +/-
        GPU + "\t\tACSCtl:\t\n",  # ACSCtl without flags
        GPU + CAP + GPU,  # the same device printed twice
        "lspci: Unable to load libkmod resources: error -2\n",  # text, but not one device line
        "Usage: lspci [<switches>]\n\nBasic display modes:\n-mm\t\tProduce machine-readable output\n",
    ],
)
def test_bad_input_raises(bad):
    with pytest.raises(p.ParseError):
        p.parse_lspci_vv(bad)


@pytest.mark.parametrize("bad", [None, GPU.encode(), 3, [GPU]])
def test_not_text_raises(bad):
    with pytest.raises(p.ParseError):
        p.parse_lspci_vv(bad)


def test_other_fields_ignored():
    # LnkCtl, LnkCap2, LnkSta2 and everything else leave the result as the three fields alone give it
    full = p.parse_lspci_vv(NEW_4090)
    only = "".join(line + "\n" for line in NEW_4090.splitlines() if "LnkCap:" in line or "LnkSta:" in line or line[:1] != "\t")
    assert p.parse_lspci_vv(only) == full
    assert issubclass(p.ParseError, ValueError)
