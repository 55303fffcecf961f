"""The simulated mlnx_qos (lab/hwsim/hwsimlib/mlnx_qos.py, SIMULATION) against the real one.

Layouts: for each mlnx-tools release the simulator claims (HWSIM_MLNX_QOS_VERSION), a port is set
to a real capture's settings with the simulator's own mlnx_qos commands, and `mlnx_qos -i` must
print that capture line for line; whitespace is compared as the capture's .src.txt says (tabs
turned into 8 spaces by Markdown, or all whitespace lost). Releases without a capture are not
claimed (lab/hwsim/MLNX_QOS.md).

Error paths: rc and messages against the sources (facts in lab/hwsim/MLNX_QOS.md):
  mq:    Mellanox/mlnx-tools python/mlnx_qos at 8fbfd9c (v26.07+), "mq:L<n>"; older tags named
  dcb:   the same repository, python/Python/dcbnetlink.py at 8fbfd9c
  pb/dn/sy: knneth/mlnx-ofa_kernel at 2850235 (DOCA 3.2.1, MLNX_OFED 25.10) drivers/net/ethernet/
         mellanox/mlx5/core/ en/port_buffer.c, en_dcbnl.c, en_sysfs.c (the same code as Linux's)
"""

from __future__ import annotations

import json
import re

import pytest
from ansible.module_utils.rackforge import rdma as r
from conftest import fixture
from hwsim_helper import PROFILES, Sim

USAGE = "Usage: mlnx_qos -i <interface> [options]\n\n"
PFC3 = "0,0,0,1,0,0,0,0"


def sim_for(tmp_path, version, rate=400, **qos):
    """A simulated HGX node whose NICs have the given speed and mlx5_qos fields, mlnx_qos at version."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    sim = Sim(tmp_path, driver=None)
    prof = json.loads((PROFILES / "hgx-h100-8gpu.json").read_text())
    for nic in prof["nics"]:
        nic["rate"] = rate
        nic["mlx5_qos"].update(qos)
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(prof))
    sim.run("hwsim", "init", str(path), "--seed", "test", "--index", "1")
    sim.env["HWSIM_MLNX_QOS_VERSION"] = version
    return sim


def mq(sim, *args, netdev="ens1np0"):
    return sim.run("mlnx_qos", "-i", netdev, *args, check=False)


def kmsg(sim):
    """The kernel's error messages (records of priority <= 3, KERN_ERR) in the simulated /dev/kmsg."""
    path = sim.tmp / "run" / "kmsg"
    records = [line.split(";", 1) for line in (path.read_text() if path.exists() else "").splitlines()]
    return "".join(message + "\n" for head, message in records if int(head.split(",")[0]) <= 3)


ETS_25 = ["--prio_tc", "0,0,0,3,0,0,6,0", "--tsa", "ets,vendor,vendor,ets,vendor,vendor,vendor,vendor", "--tcbw", "50,0,0,50,0,0,0,0"]
ETS_24 = ["--prio_tc", "0,1,2,3,4,5,6,7", "--tsa", "ets,ets,ets,ets,strict,strict,strict,strict", "--tcbw", "9,1,80,10,0,0,0,0"]
PFC5 = "0,0,0,0,0,1,0,0"

# (capture, version, whitespace, NIC rate and mlx5_qos fields, the commands that set its state)
CAPTURES = [
    (
        "mlnx-tools-4.6-trust-dscp-buffer524160",
        "4.6",
        "tabs",
        {"port_buffer_bytes": 524160},
        [["--buffer_size", "524160"], ["--trust", "dscp"]],
    ),
    ("mlnx-tools-5.2-sysfs-trust-dscp", "5.2", "collapsed", {"rate": 100}, [["--trust", "dscp"]]),
    (
        "mlnx-tools-5.2-sysfs-pfc-prio3-buffer1",
        "5.2",
        "collapsed",
        {"rate": 100},
        [["--buffer_size", "130944,130944"], ["--prio2buffer", PFC3], ["--trust", "dscp"], ["--pfc", PFC3]],
    ),
    (
        "mlnx-tools-24.04-dscp-ets-pfc5-cable30",
        "24.04",
        "tabs",
        {"rate": 100, "port_buffer_bytes": 4151520, "cell_bytes": 96},
        [
            ["--buffer_size", "19872,220896"],
            ["--prio2buffer", PFC5],
            ["--trust", "dscp"],
            ["--dscp2prio", "set,40,5"],
            ["--dscp2prio", "set,48,6"],
            ["--cable_len", "30"],
            ["--pfc", PFC5],
            ETS_24,
        ],
    ),
    (
        "mlnx-tools-25.07-dcbx-fw-ets-pfc3",
        "25.07",
        "tabs",
        {"rate": 100},
        [["--buffer_size", "130944,130944"], ["--prio2buffer", PFC3], ["--trust", "dscp"], ["--pfc", PFC3], ETS_25, ["--dcbx", "fw"]],
    ),
]
# 24.10 prints what 24.04 prints (they differ in how --cable_len is sent, below)
CAPTURES.append(("mlnx-tools-24.04-dscp-ets-pfc5-cable30", "24.10", *CAPTURES[3][2:]))


def _normal(text, whitespace):
    if whitespace == "collapsed":
        return re.sub(r"\s+", "", text)
    return [line.expandtabs(8) for line in text.splitlines()]


@pytest.mark.parametrize(("name", "version", "whitespace", "nic", "commands"), CAPTURES, ids=[c[0] + "@" + c[1] for c in CAPTURES])
def test_output_matches_the_real_capture_line_for_line(tmp_path, name, version, whitespace, nic, commands):
    nic = dict(nic)
    sim = sim_for(tmp_path, version, rate=nic.pop("rate", 400), **nic)
    for cmd in commands:
        res = mq(sim, *cmd)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
    real = fixture("mlnx_qos", name)
    simulated = sim.run("mlnx_qos", "-i", "ens1np0")
    assert _normal(simulated, whitespace) == _normal(real, whitespace)
    if whitespace == "tabs":
        assert "\t" in simulated  # the simulator prints the tool's tabs
        assert r.parse_mlnx_qos(simulated) == r.parse_mlnx_qos(real)


def test_versions_differ_where_the_sources_do(tmp_path):
    sim = sim_for(tmp_path, "25.07")
    out = {}
    for version in ("4.6", "5.2", "24.04", "25.07"):
        sim.env["HWSIM_MLNX_QOS_VERSION"] = version
        out[version] = sim.run("mlnx_qos", "-i", "ens1np0")
    buffer_rows = {v: next(line for line in text.splitlines() if line.startswith("Receive")) for v, text in out.items()}
    # a60252a added total_size= (netlink only until af4851e), b8c08c5 renamed it max_buffer_size=
    assert buffer_rows["4.6"].endswith(",0,") and buffer_rows["5.2"].endswith(",0,")  # sysfs path: no total
    assert buffer_rows["24.04"].endswith(",0,max_buffer_size=262016") and buffer_rows["25.07"] == buffer_rows["24.04"]
    # "default priority:" printed from a60252a until 374d9b5 removed --defltprio (v25.07.0)
    assert ["default priority:" in out[v] for v in ("4.6", "5.2", "24.04", "25.07")] == [False, True, True, False]
    # on the netlink path (no qos/buffer_size) 5.2 prints the total as total_size=
    inbox = sim_for(tmp_path / "inbox", "5.2", driver="inbox", internal_buffer_bytes=1024)
    assert "Receive buffer size (bytes): 262016,0,0,0,0,0,0,0,total_size=260992\n" in inbox.run("mlnx_qos", "-i", "ens1np0")
    inbox.env["HWSIM_MLNX_QOS_VERSION"] = "25.07"  # netlink total: port buffer minus internal buffers (dn:L931)
    assert ",max_buffer_size=260992\n" in inbox.run("mlnx_qos", "-i", "ens1np0")
    # TCs: sorted since d477a17; 5.2 walks them in the order priorities first name them
    assert out["5.2"].index("tc: 1 ") < out["5.2"].index("tc: 0 ") and out["25.07"].index("tc: 0 ") < out["25.07"].index("tc: 1 ")


ERRORS = [
    # optparse (mq:L59, L130): usage and error on stderr, rc 2
    ("25.07", ["--bogus"], 2, "", USAGE + "mlnx_qos: error: no such option: --bogus\n"),
    ("25.07", ["--pfc"], 2, "", USAGE + "mlnx_qos: error: --pfc option requires 1 argument\n"),
    ("4.6", ["-F", "x,x,x,1,x,x,x,x"], 2, "", USAGE + "mlnx_qos: error: no such option: -F\n"),  # added in 227c7ab (v24.07)
    ("25.07", ["--defltprio", "set,2"], 2, "", USAGE + "mlnx_qos: error: no such option: --defltprio\n"),  # removed by 374d9b5
    ("25.07", ["--version"], 0, "mlnx_qos 1.2\n", ""),
    # the tool's own checks print on stdout and exit 1
    ("25.07", ["extra"], 1, "Bad arguments\n" + USAGE, ""),  # mq:L132-135
    ("25.07", ["--trust", "dscp", "--dscp2prio", "set,26,3"], 1, "trust and dscp2prio commands cannot be used at the same time.\n", ""),
    ("25.07", ["--pfc", "0,0,0,2,0,0,0,0"], 1, "Bad value for PFC: 2 is not in the range 0..1\n" + USAGE, ""),  # mq:L369-380, L479
    ("25.07", ["--pfc", "0,0,0,1"], 1, "pfc list must have 8 items\n", ""),  # mq:L484-486
    ("25.07", ["--pfc", "0,0,0,1,0,0,0,0,0"], 1, "Too many items for PFC\n", ""),  # mq:L475-477
    ("25.07", ["--cable_len", "65536"], 1, "Bad value for cable_len: 65536 is not in the range 0..65535\n" + USAGE, ""),  # mq:L419
    ("4.6", ["--cable_len", "1001"], 1, "Bad value for cable_len: 1001 is not in the range 0..1000\n" + USAGE, ""),  # v4.6.0 L396
    ("25.07", ["--trust", "foo"], 1, "Invalid trust state command. Refer to the help.\n", ""),  # mq:L554-557
    ("25.07", ["--dcbx", "bar"], 1, "Invalid dcbx mode command. Refer to the help.\n", ""),  # mq:L413-415
    ("25.07", ["--prio2buffer", "0,0,0,8,0,0,0,0"], 1, "Bad value for prio buffer: 8 is not in the range 0..7\n" + USAGE, ""),  # mq:L606
    # before 7022290 a bare `except:` also caught parse_int's sys.exit(1): one more message
    (
        "24.04",
        ["--prio2buffer", "0,0,0,8,0,0,0,0"],
        1,
        "Bad value for prio buffer: 8 is not in the range 0..7\n" + USAGE + "Buffers commands error\n",
        "",
    ),
    ("24.04", ["--dscp2prio", "set,64,3"], 1, "Invalid dscp2prio command. Refer to the help.\n", ""),
    ("25.07", ["--dscp2prio", "set,64,3"], 1, "", ""),  # mq:L512-513: sys.exit(1) escapes `except Exception`
    ("25.07", ["--dscp2prio", "del,40,4"], 1, "dscp2prio command failed\n", ""),  # dn: delapp -ENOENT (prio differs), mq:L544-548
    ("25.07", ["--tsa", "ets,ets,ets,ets,ets,ets,ets,ets"], 1, "Netlink error: Bad value. see dmesg.\n", ""),  # dn:L313-316 BW sum
    ("25.07", ["--tcbw", "10,0,0,0,0,0,0,0"], 1, "ETS BW for a strict/vendor TC must be 0\n" + USAGE, ""),  # mq:L726-729
    ("25.07", ["-P", "3"], 0, "0\n", ""),  # mq:L429-439
]


@pytest.mark.parametrize(("version", "args", "rc", "stdout", "stderr"), ERRORS, ids=["%s %s" % (e[0], " ".join(e[1])) for e in ERRORS])
def test_error_paths_as_the_source_has_them(tmp_path, version, args, rc, stdout, stderr):
    sim = sim_for(tmp_path, version)
    res = mq(sim, *args)
    assert (res.returncode, res.stdout, res.stderr) == (rc, stdout, stderr)


def test_what_is_applied_before_an_error_stays_applied(tmp_path):
    sim = sim_for(tmp_path, "25.07")
    # PFC is sent (mq:L470-493) before the trust/dscp2prio conflict is noticed (mq:L497-499)
    assert mq(sim, "--pfc", PFC3, "--trust", "dscp", "--dscp2prio", "set,26,3").returncode == 1
    assert r.parse_mlnx_qos(sim.run("mlnx_qos", "-i", "ens1np0"))["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0]


def test_an_unknown_netdev_fails_every_netlink_request(tmp_path):
    # the kernel answers ENODEV (an NLMSG_ERROR, netlink.py L247-252): each step reports it is
    # "not supported" (mq:L558-574, L579-595, L641-678) and the ETS read ends the run (mq:L680-688)
    res = mq(sim_for(tmp_path, "25.07"), netdev="ens99np0")
    assert res.returncode == 1 and res.stdout == (
        "Priority trust state is not supported on your system\n"
        "Buffers commands are not supported on your system\n"
        "Rate limit is not supported on your system!\n"
        "ETS features are not supported on your system\n"
    )
    # with --cable_len the current PFC is read outside any try (mq:L418-420): a traceback
    res = mq(sim_for(tmp_path / "b", "25.07"), "--cable_len", "7", netdev="ens99np0")
    assert res.returncode == 1 and res.stderr.strip().endswith("OSError: Netlink error: No such device (19)")


@pytest.mark.parametrize(
    ("version", "stdout", "stderr_tail"),
    [
        ("25.07", "", 'TypeError: can only concatenate str (not "OSError") to str'),  # mq:L487-493 (83b87d9 on)
        ("24.04", "", 'TypeError: can only concatenate str (not "OSError") to str'),
        ("24.10", "Netlink error: Bad value. see dmesg.\n", ""),  # v24.10.0 L423-428: print(e)
        ("5.2", "Netlink error: Bad value. see dmesg.\n", ""),
    ],
)
def test_a_kernel_that_rejects_pfc(tmp_path, version, stdout, stderr_tail):
    # mlx5_set_port_pfc fails: setpfc returns the error (dn:L375-378), dcbnl puts it in the reply's
    # status byte, dcb:L159-162 raises OSError("Netlink error: Bad value. see dmesg.") without errno
    sim = sim_for(tmp_path, version)
    sim.run("hwsim", "fault", "add", "pfc_off", "ca=mlx5_0")
    res = mq(sim, "--pfc", PFC3)
    assert res.returncode == 1 and res.stdout == stdout and res.stderr.strip().endswith(stderr_tail)
    if stderr_tail:
        assert "OSError: Netlink error: Bad value. see dmesg." in res.stderr
    assert r.parse_mlnx_qos(sim.run("mlnx_qos", "-i", "ens1np0"))["pfc"] == [0] * 8
    assert "PFCC register write refused" in kmsg(sim)


@pytest.mark.parametrize(
    ("version", "pfc_after"),
    [("25.07", [0, 0, 0, 1, 0, 0, 0, 0]), ("24.04", [0, 0, 0, 1, 0, 0, 0, 0]), ("24.10", [0] * 8), ("5.2", [0] * 8)],
)
def test_cable_len_alone_turns_pfc_off_before_the_split(tmp_path, version, pfc_after):
    # before 83b87d9 (and in v24.10.0, cut without it) --cable_len alone sends pfc_en 0 with the
    # delay (v24.10.0 L402-428); since, the current PFC goes with it (mq:L418-427)
    sim = sim_for(tmp_path, version)
    assert mq(sim, "--pfc", PFC3).returncode == 0
    assert mq(sim, "--cable_len", "30").returncode == 0
    now = r.parse_mlnx_qos(sim.run("mlnx_qos", "-i", "ens1np0"))
    assert now["cable_len"] == 30 and now["pfc"] == pfc_after


def test_the_kernel_ignores_cable_lengths_of_1000_m_and_more(tmp_path):
    sim = sim_for(tmp_path, "25.07")  # dn:L47 MLX5E_MAX_CABLE_LENGTH 1000, L383-387
    assert mq(sim, "--cable_len", "1000").returncode == 0
    assert r.parse_mlnx_qos(sim.run("mlnx_qos", "-i", "ens1np0"))["cable_len"] == 7
    assert mq(sim, "--cable_len", "999").returncode == 0
    assert r.parse_mlnx_qos(sim.run("mlnx_qos", "-i", "ens1np0"))["cable_len"] == 999


@pytest.mark.parametrize(
    ("max_mtu", "refused", "accepted"),
    [
        # xoff 150880 (400 Gb/s, 7 m, MTU 9000) + max(max_mtu, 9216) + 128 (pb:L355, L481-502, L361-380)
        (9978, 160896, 161024),  # 150880 + 9978 + 128 = 160986
        (4000, 160128, 160256),  # 150880 + 9216 + 128 = 160224
    ],
)
def test_the_lossless_buffer_rule(tmp_path, max_mtu, refused, accepted):
    sim = sim_for(tmp_path, "25.07", max_mtu=max_mtu)  # no netdev of that name here: the profile's max_mtu
    ok = [262016 - accepted, accepted, 0, 0, 0, 0, 0, 0]
    for cmd in (["--buffer_size", "%d,%d" % tuple(ok[:2])], ["--prio2buffer", PFC3], ["--pfc", PFC3]):
        assert mq(sim, *cmd).returncode == 0, cmd
    assert kmsg(sim) == ""
    res = mq(sim, "--buffer_size", "%d,%d" % (262016 - refused, refused))
    assert (res.returncode, res.stdout) == (1, "Buffers commands error\n")  # mq:L633-638
    assert kmsg(sim) == "buffer_size[1]=%d is not enough for lossless buffer\n" % refused
    assert r.parse_mlnx_qos(sim.run("mlnx_qos", "-i", "ens1np0"))["buffer_size"] == ok  # nothing applied


def test_enabling_pfc_on_a_too_small_buffer_fails_after_pfc_is_set(tmp_path):
    # setpfc writes PFC to the port first (dn:L374-380), then checks the buffers (dn:L390-399):
    # the tool dies (TypeError, mq:L487-493) while the port already has PFC on
    sim = sim_for(tmp_path, "25.07")
    assert mq(sim, "--prio2buffer", PFC3).returncode == 0  # priority 3 -> buffer 1, still 0 bytes
    res = mq(sim, "--pfc", PFC3)
    assert res.returncode == 1 and res.stderr.strip().endswith('TypeError: can only concatenate str (not "OSError") to str')
    assert kmsg(sim) == "buffer_size[1]=0 is not enough for lossless buffer\n"
    assert r.parse_mlnx_qos(sim.run("mlnx_qos", "-i", "ens1np0"))["pfc"] == [0, 0, 0, 1, 0, 0, 0, 0]


def test_buffer_size_with_prio2buffer_on_the_mlnx_ofed_sysfs_path_writes_only_the_sizes(tmp_path):
    # mq:L620-628 (af4851e on): with --buffer_size, --prio2buffer is dropped; 5.2 wrote both
    for version, p2b in (("25.07", [0] * 8), ("5.2", [0, 0, 0, 1, 0, 0, 0, 0])):
        sim = sim_for(tmp_path / version, version)
        assert mq(sim, "--buffer_size", "130944,131072", "--prio2buffer", PFC3).returncode == 0
        now = r.parse_mlnx_qos(sim.run("mlnx_qos", "-i", "ens1np0"))
        assert now["buffer_size"][:2] == [130944, 131072] and now["prio2buffer"] == p2b, version


def test_buffer_size_with_prio2buffer_on_netlink_checks_the_map_first(tmp_path):
    # one DCB_ATTR_DCB_BUFFER request (dcb:L268-280); the kernel checks the new map against the
    # sizes of the moment (pb:L529-543) before the new sizes (pb:L545-570): with PFC on priority 3,
    # buffer 1 becomes lossless while still 0 bytes: ENOMEM, nothing applied
    sim = sim_for(tmp_path, "25.07", driver="inbox")
    assert mq(sim, "--pfc", PFC3).returncode == 0
    res = mq(sim, "--buffer_size", "45440,216576", "--prio2buffer", PFC3)
    assert (res.returncode, res.stdout) == (1, "Buffers commands error\n")
    assert "buffer_size[1]=0 is not enough for lossless buffer" in kmsg(sim)
    now = r.parse_mlnx_qos(sim.run("mlnx_qos", "-i", "ens1np0"))
    assert now["buffer_size"] == [262016, 0, 0, 0, 0, 0, 0, 0] and now["prio2buffer"] == [0] * 8


def test_fewer_than_8_buffer_sizes_keep_the_others(tmp_path):
    sim = sim_for(tmp_path, "25.07")  # mq:L609-618 overwrites only the given ones
    assert mq(sim, "--buffer_size", "130944,131072").returncode == 0
    assert mq(sim, "--buffer_size", "130816").returncode == 0
    assert r.parse_mlnx_qos(sim.run("mlnx_qos", "-i", "ens1np0"))["buffer_size"][:3] == [130816, 131072, 0]
    # more than the port has (the sizes now plus its spare, pb:L545-563): EINVAL
    assert (mq(sim, "--buffer_size", "131200").returncode, kmsg(sim)) == (1, "")


def test_a_re_set_dscp_heads_its_priority_row(tmp_path):
    # the kernel deletes the old app entry and adds the new one at the head (dn:L467-490)
    sim = sim_for(tmp_path, "25.07")
    assert mq(sim, "--trust", "dscp").returncode == 0
    out = mq(sim, "--dscp2prio", "set,26,3").stdout
    assert "\tprio:3 dscp:26,31,30,29,28,27,25,24,\n" in out
    # a DSCP moved to another priority: 9 DSCPs print as a row of 8 and a row of 1 (dcb:L512)
    out = mq(sim, "--dscp2prio", "set,40,3").stdout
    assert "\tprio:3 dscp:40,26,31,30,29,28,27,25,\n\tprio:3 dscp:24,\n" in out
    assert r.parse_mlnx_qos(out)["dscp2prio"][40] == 3


def test_python_errors_of_the_tool_are_tracebacks(tmp_path):
    # 25.07: check_privilege reads .errno of a ValueError (mq:L383-389, L516-519)
    res = mq(sim_for(tmp_path, "25.07"), "--dscp2prio", "set,x,3")
    assert res.returncode == 1 and res.stderr.strip().endswith("AttributeError: 'ValueError' object has no attribute 'errno'")
    res = mq(sim_for(tmp_path / "b", "24.04"), "--dscp2prio", "set,x,3")
    assert (res.returncode, res.stdout) == (1, "Invalid dscp2prio command. Refer to the help.\n")
