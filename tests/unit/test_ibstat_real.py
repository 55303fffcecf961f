"""The REAL ibstat and ibstatus (Debian 12 infiniband-diags 44) over the simulator's sysfs tree.

Only the tree is simulated (lab/hwsim/hwsimlib/sysfs.py); the binaries are Debian's, made to
read the tree at /sys/class/infiniband by the lab's preload library (lab/sysfs_redirect). So
what is checked here is the tree: that the real tools, reading it, print what they print on
the real hardware of the captures in tests/fixtures/realworld, line for line where the hardware
is the same, and fail as they do.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
from ansible.module_utils.rackforge import rdma as r
from conftest import fixture
from hwsim_helper import PROFILES, Sim
from ibsim_helper import install_real_tools, run_preloaded, run_real

GUID_LINE = re.compile(r"^\s*(Node GUID|System image GUID|Port GUID): 0x[0-9a-f]{16}$")


@pytest.fixture
def sim(tmp_path):
    """A node of its own, for tests that change its state (faults, profile)."""
    return Sim(tmp_path)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """One untouched HGX H100 node shared by the tests that only read it."""
    return Sim(tmp_path_factory.mktemp("node"))


def blocks(text):
    """ibstat text -> {ca: [lines of its block]} (the CA line first)."""
    out, ca = {}, None
    for line in text.splitlines():
        m = re.match(r"^CA '([^']+)'$", line)
        if m:
            ca = m.group(1)
            out[ca] = []
        if ca is not None:
            out[ca].append(line)
    return out


def without_guids(lines):
    """The block with GUID values masked (they identify a card, not its state)."""
    return [GUID_LINE.sub(r"\1: <guid>", ln) if GUID_LINE.match(ln) else ln for ln in lines]


def guid_fields(lines):
    return {m.group(1): m.group(0).rsplit(" ", 1)[1] for m in map(GUID_LINE.match, lines) if m}


def value_column(line):
    """Where the value starts in a "key: value" line (the layout of the text, not its values)."""
    return len(line) - len(line.split(":", 1)[1].lstrip())


def eui64_port_guid(node_guid):
    """A RoCE port's GUID as ConnectX firmware derives it from the node GUID (OUI + 0300 + NIC id):
    the modified EUI-64 of the port's MAC (U/L bit flipped, ff:fe in the middle)."""
    g = int(node_guid, 16).to_bytes(8, "big")
    return "0x" + bytes([g[0] ^ 0x02, g[1], g[2], 0xFF, 0xFE, g[5], g[6], g[7]]).hex()


def test_ibstat_is_the_real_binary_not_the_simulator(node):
    res = run_real("ibstat", node.sysfs, "-V")
    assert res.returncode == 0
    assert res.stderr == "/usr/sbin/ibstat BUILD VERSION: 44.0\n"  # Debian 12's rdma-core
    bad = run_real("ibstat", node.sysfs, "--bogus")  # the real option parser
    assert bad.returncode == 2 and "unrecognized option '--bogus'" in bad.stderr and "--port_list, -p" in bad.stderr


def test_real_ibstat_parses_like_the_roce_capture(node):
    res = run_real("ibstat", node.sysfs)
    assert res.returncode == 0 and res.stderr == ""
    simulated = r.parse_ibstat(res.stdout)
    real = r.parse_ibstat(fixture("ibstat", "h100-roce-cx7-400g-two-ports-down"))
    assert sorted(simulated) == ["mlx5_%d" % i for i in range(9)]
    # a healthy ConnectX-7 400G RoCE port and the ConnectX-6 Dx management port, field by field
    assert simulated["mlx5_0"] == real["mlx5_0"]
    assert simulated["mlx5_8"] == real["mlx5_1"]  # MT4125, fw 22.39.1002, Active/LinkUp/100/Ethernet
    for ca in simulated:
        assert set(simulated[ca]) == set(real["mlx5_0"]) and set(simulated[ca]["ports"][1]) == set(real["mlx5_0"]["ports"][1])


def test_real_ibstat_text_is_line_for_line_the_capture(node):
    simulated = blocks(run_real("ibstat", node.sysfs).stdout)
    real = blocks(fixture("ibstat", "h100-roce-cx7-400g-two-ports-down"))
    # same hardware, same state: every line but the card's GUIDs is the capture's
    assert without_guids(simulated["mlx5_0"]) == without_guids(real["mlx5_0"])
    assert without_guids(simulated["mlx5_3"]) == without_guids(real["mlx5_3"])
    # the GUIDs relate as on the real cards: port GUID = EUI-64 of the MAC behind the node GUID
    for block in (real["mlx5_0"], real["mlx5_3"], simulated["mlx5_0"], simulated["mlx5_7"]):
        g = guid_fields(block)
        assert g["System image GUID"] == g["Node GUID"] and g["Port GUID"] == eui64_port_guid(g["Node GUID"]), block
        assert g["Node GUID"][8:12] == "0300" and g["Node GUID"][2:8] == "a088c2", block  # ConnectX: OUI, 0300, NIC id
    cx6 = guid_fields(blocks(fixture("ibstat", "h100-ib-cx7-400g-eth-ports-disabled"))["mlx5_1"])  # a CX-6 Dx RoCE port
    assert cx6["Port GUID"] == eui64_port_guid(cx6["Node GUID"])
    assert guid_fields(simulated["mlx5_8"])["Port GUID"] == eui64_port_guid(guid_fields(simulated["mlx5_8"])["Node GUID"])


def test_real_ibstat_one_ca_and_one_port(node):
    one = run_real("ibstat", node.sysfs, "mlx5_4")
    assert one.returncode == 0 and list(r.parse_ibstat(one.stdout)) == ["mlx5_4"]
    port = run_real("ibstat", node.sysfs, "mlx5_4", "1")
    assert port.returncode == 0 and port.stdout.splitlines()[:3] == ["CA: 'mlx5_4'", "Port 1:", "State: Active"]
    listed = run_real("ibstat", node.sysfs, "-l")
    assert listed.stdout.split() == ["mlx5_%d" % i for i in range(9)]


def test_real_ibstatus_parses_and_lays_out_like_the_capture(node):
    res = run_real("ibstatus", node.sysfs)
    assert res.returncode == 0
    simulated = r.parse_ibstatus(res.stdout)
    real = r.parse_ibstatus(fixture("ibstatus", "a100-azure-hdr-all-active"))
    assert sorted(simulated) == ["mlx5_%d" % i for i in range(9)]
    assert set(simulated["mlx5_0"][1]) == set(real["mlx5_8"][1])
    assert simulated["mlx5_0"][1] == {"state": "ACTIVE", "physical_state": "LinkUp", "rate": 400, "link_layer": "Ethernet"}
    # the capture's Ethernet port (mlx5_8) line for line, tabs expanded as in the capture; its kernel
    # printed "unknown" for an unreadable default GID and it ran at 40G, ours reads fe80::... at 400G
    sim_block = res.stdout.expandtabs().split("\n\n")[0].splitlines()
    real_block = fixture("ibstatus", "a100-azure-hdr-all-active").split("\n\n")[8].splitlines()
    assert real_block[0] == "Infiniband device 'mlx5_8' port 1 status:"
    assert sim_block[0] == "Infiniband device 'mlx5_0' port 1 status:"
    assert [ln.split(":", 1)[0] for ln in sim_block[1:]] == [ln.split(":", 1)[0] for ln in real_block[1:]]
    assert [value_column(ln) for ln in sim_block[1:]] == [value_column(ln) for ln in real_block[1:]]
    for key in ("base lid", "sm lid", "state", "phys state", "link_layer"):
        assert next(ln for ln in sim_block if ln.strip().startswith(key + ":")) == next(
            ln for ln in real_block if ln.strip().startswith(key + ":")
        )
    assert re.fullmatch(r" +default gid: +fe80:0000:0000:0000:a288:c2ff:fe[0-9a-f]{2}:[0-9a-f]{4}", sim_block[1])  # EUI-64 of the MAC
    assert sim_block[6] == "        rate:            400 Gb/sec (4X NDR)"


def test_port_down_fault_as_the_real_tools_show_it(sim):
    sim.run("hwsim", "fault", "add", "rdma_port_down", "ca=mlx5_5")
    simulated = blocks(run_real("ibstat", sim.sysfs).stdout)
    real = blocks(fixture("ibstat", "h100-roce-cx7-400g-two-ports-down"))
    # the capture's downed ConnectX-7 (mlx5_5 there too): Down / Disabled / 40, no port GUID
    assert without_guids(simulated["mlx5_5"]) == without_guids(real["mlx5_5"])
    assert guid_fields(simulated["mlx5_5"])["Port GUID"] == guid_fields(real["mlx5_5"])["Port GUID"] == "0x" + "0" * 16
    assert r.parse_ibstat("\n".join(simulated["mlx5_4"]))["mlx5_4"]["ports"][1]["state"] == "Active"
    status = r.parse_ibstatus(run_real("ibstatus", sim.sysfs, "mlx5_5").stdout)
    assert status == {"mlx5_5": {1: {"state": "DOWN", "physical_state": "Disabled", "rate": 40, "link_layer": "Ethernet"}}}
    # the simulator's other NIC tools read the same tree and agree
    dev = r.parse_ibv_devinfo(sim.run("ibv_devinfo"))
    assert dev["mlx5_5"]["ports"][1]["state"] == "PORT_DOWN" and dev["mlx5_4"]["ports"][1]["state"] == "PORT_ACTIVE"
    link = {x["device"]: x for x in r.parse_rdma_link(sim.run("rdma", "link", "show"))}
    assert (link["mlx5_5"]["state"], link["mlx5_5"]["physical_state"]) == ("DOWN", "DISABLED")
    gids = r.parse_show_gids(sim.run("show_gids"))
    assert not [g for g in gids if g["device"] == "mlx5_5"] and [g for g in gids if g["device"] == "mlx5_4"]
    # clearing the fault brings it back
    sim.run("hwsim", "fault", "clear")
    assert r.parse_ibstat(run_real("ibstat", sim.sysfs, "mlx5_5").stdout)["mlx5_5"]["ports"][1]["state"] == "Active"


def test_simulated_tools_show_the_guids_and_gids_ibstat_reads(node):
    stat = blocks(run_real("ibstat", node.sysfs).stdout)
    dev = node.run("ibv_devinfo")
    gids = r.parse_show_gids(node.run("show_gids"))
    for ca, block in stat.items():
        g = guid_fields(block)
        guid = g["Node GUID"][2:]
        assert "\tnode_guid:\t\t\t%s:%s:%s:%s\n" % (guid[0:4], guid[4:8], guid[8:12], guid[12:16]) in dev.split("hca_id:\t%s\n" % ca)[1]
        port = g["Port GUID"][2:]
        link_local = "fe80:0000:0000:0000:%s:%s:%s:%s" % (port[0:4], port[4:8], port[8:12], port[12:16])
        assert [x["index"] for x in gids if x["device"] == ca and x["gid"] == link_local] == [0, 1]
        status = run_real("ibstatus", node.sysfs, ca).stdout
        assert "default gid:\t %s\n" % link_local in status
    assert {x["ipv4"] for x in gids if x["device"] == "mlx5_0" and x["version"] == "v2"} == {None, "10.100.0.1"}


def test_a_ca_that_does_not_exist_fails_as_the_real_tool_does(node):
    res = run_real("ibstat", node.sysfs, "mlx5_99")
    assert res.returncode == 255 and res.stdout == ""
    # the ibpanic line of the real capture's failing run: "ibpanic: [pid] main: ..."
    real_line = fixture("ibstat", "a100-azure-ibpanic-exit255").strip().splitlines()[-1]
    assert re.match(r"^ibpanic: \[\d+\] main: ", real_line)
    assert re.match(r"^ibpanic: \[\d+\] main: 'mlx5_99' IB device can't be found", res.stderr)
    port = run_real("ibstat", node.sysfs, "mlx5_0", "2")
    assert port.returncode == 255 and "'mlx5_0' has no port number 2 - max (1)" in port.stderr
    status = run_real("ibstatus", node.sysfs, "mlx5_99")
    assert status.returncode == 255
    # the script names the path it looked at: the real one, not the simulator's
    assert status.stdout == "Fatal error:  device 'mlx5_99': sys files not found (/sys/class/infiniband/mlx5_99/ports)\n"


def test_no_tree_means_no_devices(tmp_path):
    empty = tmp_path / "sys"
    empty.mkdir()
    res = run_real("ibstat", empty)
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")  # the real ibstat on a host without RDMA devices
    status = run_real("ibstatus", empty)
    assert (status.returncode, status.stdout) == (255, "Fatal error:  No devices\n")


def test_infiniband_link_layer_like_the_ndr_capture(sim, tmp_path):
    prof = json.loads((PROFILES / "hgx-h100-8gpu.json").read_text())
    for nic in prof["nics"]:
        if nic["role"] == "rdma":
            nic["link_layer"] = "InfiniBand"
    path = tmp_path / "ib-profile.json"
    path.write_text(json.dumps(prof))
    sim.run("hwsim", "init", str(path), "--seed", "test", "--index", "1")
    simulated = blocks(run_real("ibstat", sim.sysfs).stdout)
    real = blocks(fixture("ibstat", "h100-ib-cx7-400g-eth-ports-disabled"))
    lid_line = re.compile(r"^(\s*(Base lid|SM lid)): \d+$")

    def masked(lines):
        return [lid_line.sub(r"\1: <lid>", ln) for ln in without_guids(lines)]

    assert masked(simulated["mlx5_0"]) == masked(real["mlx5_0"])  # Active/LinkUp/400, cap mask 0xa751e848, InfiniBand
    for block in (real["mlx5_0"], simulated["mlx5_0"]):
        g = guid_fields(block)
        assert g["Port GUID"] == g["Node GUID"]
    assert r.parse_ibstat("\n".join(simulated["mlx5_8"]))["mlx5_8"]["ports"][1]["link_layer"] == "Ethernet"


def test_pcie_profile_connectx6_dx_100g(tmp_path):
    s = Sim(tmp_path, profile="pcie-a100-4gpu")
    simulated = blocks(run_real("ibstat", s.sysfs).stdout)
    real = blocks(fixture("ibstat", "h100-ib-cx7-400g-eth-ports-disabled"))
    assert sorted(simulated) == ["mlx5_0", "mlx5_1"]
    # the capture's ConnectX-6 Dx RoCE port (fw 22.38 there, 22.39 in the profile)
    assert simulated["mlx5_0"][0] == "CA 'mlx5_0'"
    assert without_guids(simulated["mlx5_0"])[1:] == [ln.replace("22.38.1002", "22.39.1002") for ln in without_guids(real["mlx5_1"])[1:]]
    assert "\trate:\t\t 100 Gb/sec (4X EDR)\n" in run_real("ibstatus", s.sysfs, "mlx5_1").stdout


def test_the_preload_redirects_only_the_infiniband_classes(sim, tmp_path):
    assert (sim.sysfs / "class" / "infiniband_verbs" / "abi_version").read_text() == "6\n"  # the simulated ib_uverbs made it
    (sim.sysfs / "class" / "infiniband_mad").mkdir()
    (sim.sysfs / "class" / "infiniband_mad" / "abi_version").write_text("5\n")
    script = (
        "cat /etc/hostname; cat /proc/sys/kernel/ostype; cat /sys/class/infiniband_mad/abi_version;"
        " cat //sys/./class/infiniband/mlx5_0/ports/1/state; ls /sys/class/infiniband/ | head -1;"
        " cat /sys/class/infiniband_verbs/abi_version 2>/dev/null || echo verbs-not-redirected;"
        " ls /sys/class | grep -c '^infiniband' || true"
    )
    res = run_preloaded(["/bin/sh", "-c", script], sim.sysfs)
    with open("/etc/hostname") as fh:
        hostname = fh.read().strip()
    with open("/proc/sys/kernel/ostype") as fh:
        ostype = fh.read().strip()
    host_has_verbs = os.path.exists("/sys/class/infiniband_verbs/abi_version")
    lines = res.stdout.splitlines()
    assert lines[:5] == [hostname, ostype, "5", "4: ACTIVE", "mlx5_0"]
    assert host_has_verbs or lines[5] == "verbs-not-redirected"  # a sibling name is not the redirected class
    # a listing of /sys/class itself is the real one (nothing is added to it)
    assert lines[6] == str(sum(1 for e in os.listdir("/sys/class") if e.startswith("infiniband")))
    # Python sees the tree there too: os.listdir, open, and a directory descriptor (O_DIRECTORY)
    # with a path relative to it, which resolves inside the tree
    code = (
        "import os; d = os.open('/sys/class/infiniband', os.O_RDONLY | os.O_DIRECTORY);"
        " s = os.open('mlx5_0/ports/1/state', os.O_RDONLY, dir_fd=d);"
        " print(sorted(os.listdir('/sys/class/infiniband'))[0], sorted(os.listdir(d))[-1], os.read(s, 64).decode().split()[1],"
        " open('/etc/hostname').read().strip())"
    )
    py = run_preloaded(["python3", "-c", code], sim.sysfs)
    assert py.stdout.split() == ["mlx5_0", "mlx5_8", "ACTIVE", hostname], py.stderr


def test_the_redirected_tree_is_read_only(sim):
    state = sim.sysfs / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "state"
    res = run_preloaded(
        [
            "/bin/sh",
            "-c",
            "echo '1: DOWN' > /sys/class/infiniband/mlx5_0/ports/1/state; mkdir /sys/class/infiniband/new; rm /sys/class/infiniband/mlx5_0/fw_ver",
        ],
        sim.sysfs,
    )
    assert res.stderr.count("Read-only file system") == 3, res.stderr
    assert state.read_text() == "4: ACTIVE\n" and (sim.sysfs / "class/infiniband/mlx5_0/fw_ver").exists()
    assert not (sim.sysfs / "class" / "infiniband" / "new").exists()
    # the simulator itself changes the tree at its own path (faults), which the tools then read
    sim.run("hwsim", "fault", "add", "rdma_port_down", "ca=mlx5_0")
    assert state.read_text() == "1: DOWN\n"


def test_without_the_preload_the_real_tool_sees_no_simulated_devices(node):
    if os.path.exists("/sys/class/infiniband"):
        pytest.skip("this host has real RDMA devices")  # then there is nothing to contrast with
    res = subprocess.run(
        ["/usr/sbin/ibstat"], capture_output=True, text=True, check=False, env=dict(os.environ, HWSIM_SYSFS=str(node.sysfs))
    )
    assert (res.returncode, res.stdout) == (0, "")
    assert r.parse_ibstat(run_real("ibstat", node.sysfs).stdout)


def test_sim_bin_wrappers_run_the_real_tools(node, tmp_path):
    bindir = tmp_path / "real-bin"
    bindir.mkdir()
    install_real_tools(bindir, node.sysfs)
    for tool in ("ibstat", "ibstatus"):
        via_wrapper = subprocess.run([str(bindir / tool), "mlx5_1"], capture_output=True, text=True, check=False)
        assert (via_wrapper.returncode, via_wrapper.stdout) == (0, run_real(tool, node.sysfs, "mlx5_1").stdout)
    # Sim.run("ibstat") (hwsim's ibstat entry, which execs the real binary; or these wrappers) is the same
    assert node.run("ibstat", "mlx5_1") == run_real("ibstat", node.sysfs, "mlx5_1").stdout
