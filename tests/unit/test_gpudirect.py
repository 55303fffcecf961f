"""GPUDirect RDMA prerequisites: the pure rules (module_utils/rackforge/gpudirect.py) and the
gpudirect_rdma module over the simulator's PCI hierarchy, read and written by the REAL lspci and
setpci (Debian's pciutils) through their sysfs access method. Only the config space is simulated."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import gpudirect_rdma
import pytest
from ansible.module_utils import _internal as module_utils_internal
from ansible.module_utils.common import warnings as ansible_warnings
from ansible.module_utils.rackforge import gpudirect as G
from ansible.module_utils.rackforge.pci import parse_lspci_vv
from ansible.module_utils.testing import patch_module_args
from hwsim_helper import Sim

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "realworld" / "lspci-vv"
H100 = {"gpu_pci_ids": ["10de:2330"], "nic_pci_ids": ["15b3:1021"]}
GPU0 = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0"
NIC0 = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:1a:00.0"
FAR_NIC = "/sys/devices/pci0000:a0/0000:a0:01.0/0000:a1:00.0"


def pciutils():
    for tool in ("lspci", "setpci"):
        if not shutil.which(tool):
            raise AssertionError("%s is not installed: Debian's pciutils (scripts/setup.sh installs it)" % tool)


def test_pairs_are_the_gpus_and_nics_below_one_root_port_with_the_ports_between_them():
    assert G.pci_chain(GPU0) == ["0000:15:01.0", "0000:16:00.0", "0000:17:01.0", "0000:19:00.0"]
    found = G.pairs({"0000:19:00.0": GPU0}, {"0000:1a:00.0": NIC0, "0000:a1:00.0": FAR_NIC})
    assert found == [{"gpu": "0000:19:00.0", "nic": "0000:1a:00.0", "ports": ["0000:17:01.0", "0000:17:02.0"]}]
    assert G.pairs({"0000:19:00.0": GPU0}, {"0000:a1:00.0": FAR_NIC}) == []


def test_acs_from_the_real_dell_hgx_capture_blocks_nothing():
    # a real HGX branch (root port 15:01.0, PEX890xx switch 16:00.0, GPU 19:00.0): every ACSCtl flag "-"
    lspci = parse_lspci_vv((FIXTURES / "h100-hgx-dell-pex890xx-gpu-nic-branch-vvv.txt").read_text())
    assert lspci["17:01.0"]["acs_ctl"]["ReqRedir"] is False
    found = G.pairs({"0000:19:00.0": GPU0}, {"0000:1a:00.0": NIC0})
    assert G.acs_ports(found, lspci) == {}
    # the same port with redirect on (what Linux's pci_std_enable_acs leaves with an IOMMU)
    lspci["17:01.0"]["acs_ctl"].update(SrcValid=True, ReqRedir=True, CmpltRedir=True, UpstreamFwd=True)
    assert G.acs_ports(found, lspci) == {"0000:17:01.0": ["ReqRedir", "CmpltRedir"]}


def _evaluate(method="dmabuf", lspci=None, iommu=None, **state):
    gpus, nics = {"0000:19:00.0": GPU0}, {"0000:1a:00.0": NIC0}
    lspci = lspci or {}
    iommu = {"0000:19:00.0": "identity", "0000:1a:00.0": "identity"} if iommu is None else iommu
    return G.evaluate(method, gpus, nics, lspci, iommu, **state)


DMABUF_OK = {"kernel": "6.1.0-57-amd64", "nvidia_loaded": True, "taint": "OE"}
PEERMEM_OK = {"loaded": True, "registered": True, "at_boot": True}


@pytest.mark.parametrize(
    ("method", "state", "iommu", "checks"),
    [
        ("dmabuf", DMABUF_OK, None, []),
        ("dmabuf", dict(DMABUF_OK, kernel="5.10.0-28-amd64"), None, ["gpudirect_dmabuf"]),
        ("dmabuf", dict(DMABUF_OK, taint="POE"), None, ["gpudirect_dmabuf"]),
        ("dmabuf", dict(DMABUF_OK, nvidia_loaded=False), None, ["gpudirect_dmabuf"]),
        ("dmabuf", DMABUF_OK, {"0000:19:00.0": "DMA-FQ", "0000:1a:00.0": "DMA-FQ"}, ["gpudirect_iommu"]),
        ("dmabuf", DMABUF_OK, {"0000:19:00.0": None, "0000:1a:00.0": None}, []),  # IOMMU off
        ("peermem", PEERMEM_OK, None, []),
        ("peermem", dict(PEERMEM_OK, registered=False), None, ["gpudirect_peermem"]),
        ("peermem", dict(PEERMEM_OK, loaded=False), None, ["gpudirect_peermem"]),
        ("peermem", dict(PEERMEM_OK, at_boot=False), None, ["gpudirect_peermem_boot"]),
    ],
)
def test_each_prerequisite_is_its_own_finding(method, state, iommu, checks):
    kwargs = {"dmabuf": state} if method == "dmabuf" else {"peermem": state}
    assert [f["check"] for f in _evaluate(method, iommu=iommu, **kwargs)] == checks


def test_no_shared_switch_is_a_topology_finding_and_an_unknown_method_an_error():
    found = G.evaluate("dmabuf", {"0000:19:00.0": GPU0}, {"0000:a1:00.0": FAR_NIC}, {}, {}, dmabuf=DMABUF_OK)
    assert [f["check"] for f in found] == ["gpudirect_topology"]
    with pytest.raises(ValueError, match="peermem, dmabuf"):
        G.evaluate("nccl", {}, {}, {}, {})


def proc_root(sim, release="6.1.0-57-amd64"):
    """A procfs root with the simulated kernel's release (the module reads sys/kernel/osrelease)."""
    root = sim.tmp / "proc"
    (root / "sys" / "kernel").mkdir(parents=True, exist_ok=True)
    (root / "sys" / "kernel" / "osrelease").write_text(release + "\n")
    return root


def run(sim, monkeypatch, capsys, **args):
    for key, value in sim.env.items():
        monkeypatch.setenv(key, value)
    base = dict(
        H100,
        method="dmabuf",
        sysfs_root=str(sim.sysfs),
        proc_root=str(proc_root(sim)),
        modules_load_dirs=[str(sim.tmp / "etc" / "modules-load.d")],
    )
    # as on the node: no warning of an earlier call, and this call's are returned
    monkeypatch.setattr(ansible_warnings, "_global_warnings", {})
    monkeypatch.setattr(module_utils_internal, "is_controller", False)
    with patch_module_args(dict(base, **args)), pytest.raises(SystemExit):
        gpudirect_rdma.main()
    return json.loads(capsys.readouterr().out)


def warnings(res):
    return [w["event"]["msg"] for w in res.get("warnings", [])]


def real_lspci(sim, *args):
    access = ["-A", "linux-sysfs", "-O", "sysfs.path=%s/bus/pci" % sim.sysfs]
    return subprocess.run(
        [shutil.which("lspci", path="/usr/bin:/usr/sbin:/bin:/sbin"), *access, *args], capture_output=True, text=True, check=True
    ).stdout


def test_the_real_lspci_reads_the_simulated_hierarchy_with_acs_on_at_boot(tmp_path):
    pciutils()
    sim = Sim(tmp_path)
    text = real_lspci(sim, "-D", "-vvv")
    devices = parse_lspci_vv(text)
    assert devices["0000:19:00.0"]["name"].startswith("3D controller: NVIDIA Corporation")
    assert devices["0000:19:00.0"]["lnk_sta"] == {"speed_gts": 32.0, "width": 16}
    assert devices["0000:17:00.0"]["acs_ctl"]["ReqRedir"] is True  # the switch port above GPU 0
    assert devices["0000:16:00.0"]["acs_ctl"] is None  # an upstream port has no ACS
    assert os.path.realpath(sim.sysfs / "bus/pci/devices/0000:19:00.0").endswith("0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:19:00.0")


def test_check_reports_acs_per_port_and_present_clears_it_with_the_real_setpci(tmp_path, monkeypatch, capsys):
    pciutils()
    sim = Sim(tmp_path)
    res = run(sim, monkeypatch, capsys)
    assert not res["changed"] and len(res["pairs"]) == 8
    acs = [f for f in res["findings"] if f["check"] == "gpudirect_acs"]
    assert len(acs) == 16 and acs[0]["observed"] == "ReqRedir+ CmpltRedir+"  # two downstream ports per GPU<->NIC pair
    assert [f["check"] for f in res["findings"] if f["check"] != "gpudirect_acs"] == []  # open module, identity IOMMU
    res = run(sim, monkeypatch, capsys, state="present", acs="disable")
    assert res["changed"] and len(res["actions"]) == 16 and "ECAP_ACS+6.w=0000" in res["actions"][0]
    assert res["findings"] == [] and len(res["ports"]) == 16
    assert parse_lspci_vv(real_lspci(sim, "-D", "-vvv", "-s", "17:00.0"))["0000:17:00.0"]["acs_ctl"]["SrcValid"] is False
    again = run(sim, monkeypatch, capsys, state="present", acs="disable")
    assert not again["changed"] and again["actions"] == []  # a re-run finds nothing to do


def test_a_fault_resets_acs_on_one_gpus_ports_and_iommu_translation_is_reported(tmp_path, monkeypatch, capsys):
    pciutils()
    sim = Sim(tmp_path)
    run(sim, monkeypatch, capsys, state="present", acs="disable")
    sim.run("hwsim", "fault", "add", "acs_enabled", "gpu=2")
    sim.run("hwsim", "fault", "add", "iommu_dma")
    res = run(sim, monkeypatch, capsys)
    assert sorted(f["component"] for f in res["findings"] if f["check"] == "gpudirect_acs") == ["pcie 37:00.0"]
    assert [f["observed"] for f in res["findings"] if f["check"] == "gpudirect_iommu"] == ["DMA-FQ"]


def test_check_mode_changes_nothing(tmp_path, monkeypatch, capsys):
    pciutils()
    sim = Sim(tmp_path)
    monkeypatch.setenv("ANSIBLE_CHECK_MODE", "1")
    with patch_module_args(
        dict(H100, method="dmabuf", state="present", acs="disable", sysfs_root=str(sim.sysfs), _ansible_check_mode=True)
    ):
        for key, value in sim.env.items():
            monkeypatch.setenv(key, value)
        with pytest.raises(SystemExit):
            gpudirect_rdma.main()
    res = json.loads(capsys.readouterr().out)
    assert res["changed"] and len(res["actions"]) == 16
    assert res["findings"] == []  # what the run would clear is not reported as standing in the way
    assert parse_lspci_vv(real_lspci(sim, "-D", "-vvv", "-s", "17:00.0"))["0000:17:00.0"]["acs_ctl"]["ReqRedir"] is True


def test_peermem_on_the_inbox_rdma_stack_fails_before_any_change(tmp_path, monkeypatch, capsys):
    pciutils()
    sim = Sim(tmp_path)
    res = run(sim, monkeypatch, capsys, method="peermem", state="present", acs="disable")
    assert res["failed"] and "could not insert 'nvidia_peermem': Invalid argument" in res["msg"]
    assert "dmabuf" in res["msg"] and "MLNX_OFED" in res["msg"]
    # the ACS ports were not touched
    assert parse_lspci_vv(real_lspci(sim, "-D", "-vvv", "-s", "17:00.0"))["0000:17:00.0"]["acs_ctl"]["ReqRedir"] is True


def test_a_proprietary_driver_is_a_dmabuf_finding(tmp_path, monkeypatch, capsys):
    pciutils()
    sim = Sim(tmp_path, driver=None)
    (sim.tmp / "driver-flavor").write_text("proprietary\n")
    (sim.tmp / "driver-version").write_text("535.261.03\n")
    sim.run("hwsim", "load-driver")
    assert (sim.sysfs / "module/nvidia/taint").read_text().strip() == "POE"
    res = run(sim, monkeypatch, capsys, state="present", acs="disable")
    assert [f["observed"] for f in res["findings"]] == ["proprietary (taint POE)"]
    assert warnings(res) == [res["findings"][0]["message"]]  # not fatal here: said (the health gate holds the node)


def test_two_level_switches_and_a_sibling_root_port_of_one_host_bridge():
    # GPU behind a second-level switch, NIC on the first level: the ports below their common prefix
    gpu = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/0000:19:00.0/0000:1a:00.0"
    nic = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:1b:00.0"
    assert G.pairs({"0000:1a:00.0": gpu}, {"0000:1b:00.0": nic})[0]["ports"] == [
        "0000:17:00.0",
        "0000:17:01.0",
        "0000:18:00.0",
        "0000:19:00.0",
    ]
    # another root port of the same host bridge: through the root complex, not a shared switch
    sibling = "/sys/devices/pci0000:15/0000:15:02.0/0000:20:00.0"
    found = G.evaluate("dmabuf", {"0000:1a:00.0": gpu}, {"0000:20:00.0": sibling}, {}, {}, dmabuf=DMABUF_OK)
    assert [(f["check"], f["component"]) for f in found] == [("gpudirect_topology", "GPU 1a:00.0")]
    # a domain other than 0000 keeps its bdf
    other = "/sys/devices/pci0001:00/0001:00:01.0/0001:01:00.0/0001:02:00.0/0001:03:00.0"
    nic1 = "/sys/devices/pci0001:00/0001:00:01.0/0001:01:00.0/0001:02:01.0/0001:04:00.0"
    assert G.pairs({"0001:03:00.0": other}, {"0001:04:00.0": nic1})[0]["ports"] == ["0001:02:00.0", "0001:02:01.0"]


def test_one_gpu_without_a_nic_on_its_switch_is_named():
    gpus = {"0000:19:00.0": GPU0, "0000:99:00.0": "/sys/devices/pci0000:90/0000:90:01.0/0000:99:00.0"}
    found = G.evaluate("dmabuf", gpus, {"0000:1a:00.0": NIC0}, {}, {}, dmabuf=DMABUF_OK)
    assert [(f["check"], f["component"]) for f in found] == [("gpudirect_topology", "GPU 99:00.0")]


def test_unreadable_ports_and_an_untyped_iommu_group_are_checks_that_could_not_run():
    found = G.evaluate(
        "dmabuf",
        {"0000:19:00.0": GPU0},
        {"0000:1a:00.0": NIC0},
        {"0000:17:01.0": {"name": "PCI bridge", "acs_ctl": None, "lnk_cap": None, "lnk_sta": None}},
        {"0000:19:00.0": "unknown", "0000:1a:00.0": "identity"},
        dmabuf=DMABUF_OK,
    )
    assert [(f["check"], f["not_run"]) for f in found] == [("gpudirect_acs_not_run", True), ("gpudirect_iommu_not_run", True)]
    assert found[0]["evidence"] == {"ports": ["0000:17:01.0", "0000:17:02.0"]}


def fake_tool(sim, name, script):
    path = sim.bin / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(0o755)


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("echo 'lspci: Cannot open /sys/bus/pci/devices' >&2; exit 1", "lspci exited 1"),
        # what lspci prints without root
        (
            "printf '0000:17:00.0 PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)\\n\\tCapabilities: <access denied>\\n'",
            "no PCI Express capability",
        ),
    ],
)
def test_lspci_that_fails_or_is_not_root_fails_closed(tmp_path, monkeypatch, capsys, script, reason):
    pciutils()
    sim = Sim(tmp_path)
    fake_tool(sim, "lspci", script)
    res = run(sim, monkeypatch, capsys)
    assert [f["check"] for f in res["findings"] if f.get("not_run")] == ["gpudirect_acs_not_run"]
    assert reason in next(f for f in res["findings"] if f.get("not_run"))["observed"]
    res = run(sim, monkeypatch, capsys, state="present", acs="disable")
    assert res["failed"] and "nothing was changed" in res["msg"] and res["ports"] == []
    assert "ReqRedir+" in real_lspci(sim, "-vvv", "-s", "17:00.0")


def test_a_setpci_failing_part_way_names_the_ports_it_cleared(tmp_path, monkeypatch, capsys):
    pciutils()
    sim = Sim(tmp_path)
    count = sim.tmp / "setpci-calls"
    fake_tool(
        sim,
        "setpci",
        'n=$(cat %s 2>/dev/null || echo 0); echo $((n+1)) > %s; [ "$n" -lt 2 ] && exec /usr/bin/setpci "$@"; '
        'echo "setpci: Unable to write" >&2; exit 1' % (count, count),
    )
    res = run(sim, monkeypatch, capsys, state="present", acs="disable")
    assert res["failed"] and res["changed"] and res["cleared"] == ["0000:17:00.0", "0000:17:01.0"]
    assert "ACS already cleared on: 0000:17:00.0, 0000:17:01.0" in res["msg"] and res["stderr"].startswith("setpci: Unable")


def test_acs_stays_on_while_the_iommu_translates(tmp_path, monkeypatch, capsys):
    pciutils()
    sim = Sim(tmp_path)
    sim.run("hwsim", "fault", "add", "iommu_dma")
    res = run(sim, monkeypatch, capsys, state="present", acs="disable")
    assert not res["changed"] and res["actions"] == [] and res["ports"] == []  # no boot unit either
    assert {f["check"] for f in res["findings"]} == {"gpudirect_acs", "gpudirect_iommu"}


def test_peermem_over_mlnx_ofed_loads_registers_and_is_checked_at_boot(tmp_path, monkeypatch, capsys):
    pciutils()
    sim = Sim(tmp_path)
    prof = json.loads((pathlib.Path(gpudirect_rdma.__file__).parents[1] / "lab/hwsim/profiles/hgx-h100-8gpu.json").read_text())
    custom = sim.tmp / "ofed.json"
    custom.write_text(json.dumps(dict(prof, rdma_stack="mlnx_ofed")))
    sim.run("hwsim", "init", str(custom))
    sim.run("hwsim", "load-driver")
    res = run(sim, monkeypatch, capsys, method="peermem", state="present", acs="disable")
    assert res["changed"] and res["actions"][0].endswith("modprobe nvidia-peermem")
    assert res["peermem"] == {"loaded": True, "registered": True, "at_boot": False}
    assert [f["check"] for f in res["findings"]] == ["gpudirect_peermem_boot"]
    assert warnings(res) == []  # the role's boot step writes that entry after this call
    boot = sim.tmp / "etc" / "modules-load.d"
    boot.mkdir(parents=True, exist_ok=True)
    (boot / "rackforge-gpudirect.conf").write_text("; a comment\nnvidia-peermem\n")
    again = run(sim, monkeypatch, capsys, method="peermem", state="present", acs="disable")
    assert not again["changed"] and again["findings"] == []
    sim.run("modprobe", "-r", "nvidia-peermem")
    gone = run(sim, monkeypatch, capsys, method="peermem")
    assert [f["check"] for f in gone["findings"]] == ["gpudirect_peermem"] and not gone["peermem"]["registered"]
