"""Simulated mlnx_qos (SIMULATION) over a simulated mlx5 kernel.

No kernel here has an mlx5 netdev, so the real mlnx_qos (Mellanox/mlnx-tools, python/mlnx_qos)
cannot run: this module reproduces what it does, from its source, in two layers:

- `Mlx5Port`: what the mlx5 driver's DCB netlink handlers (en_dcbnl.c), its manual buffer code
  (en/port_buffer.c) and MLNX_OFED's qos/buffer_size and qos/prio2buffer sysfs handlers
  (en_sysfs.c) do with a request: PFC, cable length, the DSCP app table and trust state, ETS,
  receive buffers with the lossless-buffer rule (ENOMEM, logged to $HWSIM_RUN/kmsg).
- `mlnx_qos()`: the tool's own flow over that port: optparse options and messages, the order in
  which it sends things to the kernel, its error paths (messages on stdout, rc 1; optparse's on
  stderr, rc 2; a Python TypeError traceback where the tool concatenates a str and an OSError)
  and its output layout, per released version (HWSIM_MLNX_QOS_VERSION, default the current one).

Every fact and its source line is in lab/hwsim/MLNX_QOS.md; tests/unit/test_mlnx_qos_fidelity.py
holds each claimed version's output to real captures, line for line.
"""

from __future__ import annotations

import errno
import json
import optparse
import os
import subprocess
import sys

from hwsimlib.nic import nic_by_netdev
from hwsimlib.state import RUN, nic_faulted, nic_state, pfc_effective, save_json
from hwsimlib.sysfs import sysfs_read

TSA_STRICT, TSA_ETS, TSA_VENDOR = 0, 2, 255
DCBX_HOST = 0x1

# mlnx-tools releases modelled here (their tags in Mellanox/mlnx-tools). A version is "claimed"
# only where a real capture holds its layout (tests/unit/test_mlnx_qos_fidelity.py).
#   default_prio  prints "default priority:" and takes --defltprio (a60252a .. 374d9b5)
#   total         the key after the 8 buffer sizes (a60252a: total_size, b8c08c5: max_buffer_size)
#   total_sysfs   the total is printed on the MLNX_OFED sysfs path too (af4851e)
#   sysfs_both    --buffer_size with --prio2buffer writes both sysfs files (until af4851e: only
#                 buffer_size after it)
#   tc_sorted     TCs printed in sorted order (d477a17); otherwise in the order the priorities
#                 first name them, which under Python 2 (4.x on RHEL 7) is sorted too
#   split_pfc     --cable_len and --pfc are sent separately, each keeping the other's current
#                 value (83b87d9); before, --cable_len alone sent PFC off
#   specific_pfc  -F/--specific_pfc and -P/--get_pfc exist (227c7ab)
#   strict_except `except Exception` + the EPERM check (7022290); before, bare `except:` also
#                 caught the tool's own sys.exit(1)
VERSIONS = {
    "4.6": {
        "tag": "v4.6.0",
        "default_prio": False,
        "total": None,
        "total_sysfs": False,
        "sysfs_both": True,
        "tc_sorted": True,
        "split_pfc": False,
        "specific_pfc": False,
        "strict_except": False,
        "cable_max": 1000,
        "dscp_append": False,
    },
    "5.2": {
        "tag": "v5.2.0",
        "default_prio": True,
        "total": "total_size",
        "total_sysfs": False,
        "sysfs_both": True,
        "tc_sorted": False,
        "split_pfc": False,
        "specific_pfc": False,
        "strict_except": False,
        "cable_max": 0xFFFF,
        "dscp_append": True,
    },
    "24.04": {
        "tag": "v24.04.0",
        "default_prio": True,
        "total": "max_buffer_size",
        "total_sysfs": True,
        "sysfs_both": False,
        "tc_sorted": True,
        "split_pfc": True,
        "specific_pfc": False,
        "strict_except": False,
        "cable_max": 0xFFFF,
        "dscp_append": True,
    },
    "24.10": {
        "tag": "v24.10.0",
        "default_prio": True,
        "total": "max_buffer_size",
        "total_sysfs": True,
        "sysfs_both": False,
        "tc_sorted": True,
        "split_pfc": False,  # v24.10.0 was cut from a branch without 83b87d9
        "specific_pfc": False,
        "strict_except": False,
        "cable_max": 0xFFFF,
        "dscp_append": True,
    },
    "25.07": {
        "tag": "v25.07.0",
        "default_prio": False,
        "total": "max_buffer_size",
        "total_sysfs": True,
        "sysfs_both": False,
        "tc_sorted": True,
        "split_pfc": True,
        "specific_pfc": True,
        "strict_except": True,
        "cable_max": 0xFFFF,
        "dscp_append": True,
    },
}
DEFAULT_VERSION = "25.07"

# mlx5 constants (en/port_buffer.h, en/port_buffer.c, en_dcbnl.c)
MAX_CABLE_LEN = 1000  # MLX5E_MAX_CABLE_LENGTH: setpfc ignores a delay of 0 or >= this
MINIMUM_MAX_MTU = 9216
DEFAULT_CELL = 128  # 1 << MLX5E_BUFFER_CELL_SHIFT when SBCAM reports none
BUFFER_CHANGE_PFC, BUFFER_CHANGE_P2B, BUFFER_CHANGE_SIZE, BUFFER_CHANGE_CABLE = 0x1, 0x2, 0x4, 0x8

# what a NIC of a profile has unless it says otherwise (its "mlx5_qos" dict)
QOS_DEFAULTS = {
    "driver": "mlnx_ofed",  # mlnx_ofed: qos/buffer_size + qos/prio2buffer sysfs exist; inbox: netlink only
    "port_buffer_bytes": 262016,
    "internal_buffer_bytes": 0,
    "max_mtu": 9978,  # the netdev's max_mtu when no real netdev of that name exists
    "cell_bytes": DEFAULT_CELL,
}


def version():
    v = os.environ.get("HWSIM_MLNX_QOS_VERSION", DEFAULT_VERSION)
    if v not in VERSIONS:
        sys.stderr.write("hwsim: HWSIM_MLNX_QOS_VERSION=%s is not modelled; one of %s\n" % (v, ", ".join(VERSIONS)))
        sys.exit(2)
    return VERSIONS[v]


def qos_profile(nic):
    out = dict(QOS_DEFAULTS)
    out.update(nic.get("mlx5_qos") or {})
    return out


def port_defaults(st):
    """Fields this module adds to a NIC's entry in $HWSIM_RUN/nic.json (state.py's nic_state
    holds the others); an entry written before them gets them here."""
    st.setdefault("dcbx", "os")
    st.setdefault("manual_buffer", False)
    st.setdefault("xoff", 0)
    st.setdefault("prio_tc", [1, 0, 2, 3, 4, 5, 6, 7])  # mlx5e_ets_init: prio 0 -> TC 1, prio 1 -> TC 0
    st.setdefault("tsa", [TSA_VENDOR] * 8)
    st.setdefault("tc_bw", [100] * 8)
    st.setdefault("maxrate", [0] * 8)
    if "dscp_apps" not in st:
        # the kernel's DCB app table, newest entry first; a trust dscp entry written without it
        # gets the table `--trust dscp` builds (DSCP 0..63 added in order)
        hw = st.get("dscp2prio", {})
        st["dscp_apps"] = [[d, int(hw.get(str(d), d >> 3))] for d in range(63, -1, -1)] if st.get("trust") == "dscp" else []
    return st


def kmsg(line):
    """Append a line to the simulated kernel log ($HWSIM_RUN/kmsg, SIMULATION of dmesg)."""
    os.makedirs(RUN, exist_ok=True)
    with open(os.path.join(RUN, "kmsg"), "a") as fh:
        fh.write(line + "\n")


def netdev_max_mtu(nic):
    """The netdev's max_mtu, as the kernel has it: read from the real netdev of that name
    (`ip -d -j link show`, real iproute2: the lab's veth links), else the profile's."""
    try:
        res = subprocess.run(["ip", "-d", "-j", "link", "show", "dev", nic["netdev"]], capture_output=True, text=True, check=False)
        if res.returncode == 0:
            return int(json.loads(res.stdout)[0]["max_mtu"])
    except (OSError, ValueError, KeyError, IndexError):
        pass
    return int(qos_profile(nic)["max_mtu"])


class Mlx5Port:
    """One mlx5 port as its driver's dcbnl ops and MLNX_OFED qos sysfs files handle it
    (SIMULATION). Methods return 0 or a negative errno, as the kernel functions do."""

    def __init__(self, nic, state):
        self.nic = nic
        self.state = state
        self.st = port_defaults(state[nic["ca"]])
        self.q = qos_profile(nic)
        self.cell = int(self.q["cell_bytes"])

    def save(self):
        self.st["trust"] = "dscp" if self.st["dscp_apps"] else "pcp"
        save_json(os.path.join(RUN, "nic.json"), self.state)

    # ---- PFC and cable length (mlx5e_dcbnl_ieee_getpfc / setpfc)
    def pfc_bits(self):
        return sum(1 << p for p, on in enumerate(pfc_effective(self.nic, self.st)) if on)

    def setpfc(self, bits, delay):
        st = self.st
        changed = 0
        if bits != self.pfc_bits():
            if nic_faulted("pfc_off", self.nic):
                kmsg("mlx5_core %s: PFCC register write refused (hwsim fault pfc_off, SIMULATION)" % self.nic["netdev"])
                return -errno.EINVAL
            st["pfc"] = [(bits >> p) & 1 for p in range(8)]
            changed |= BUFFER_CHANGE_PFC
        old_cable = st["cable_len"]
        if delay and delay < MAX_CABLE_LEN and delay != st["cable_len"]:
            st["cable_len"] = delay
            changed |= BUFFER_CHANGE_CABLE
        ret = 0
        if st["manual_buffer"]:
            ret = self.manual_buffer_config(changed, pfc=st["pfc"])
            if ret and changed & BUFFER_CHANGE_CABLE:
                st["cable_len"] = old_cable
        else:
            st["lossy"] = self.derive_lossy(st["pfc"], st["prio2buffer"])  # the firmware owns the buffers
        self.save()
        return ret

    # ---- DSCP apps and trust (mlx5e_dcbnl_ieee_setapp / delapp)
    def setapp(self, selector, prio, dscp):
        st = self.st
        if selector != 5 or dscp >= 64:
            return -errno.EINVAL
        hw = st["dscp2prio"]
        old = int(hw.get(str(dscp), 0))
        if prio != old:
            hw[str(dscp)] = prio
        apps = [a for a in st["dscp_apps"] if a != [dscp, old]]
        st["dscp_apps"] = [[dscp, prio], *apps]
        self.save()
        return 0

    def delapp(self, selector, prio, dscp):
        st = self.st
        if selector != 5 or dscp >= 64:
            return -errno.EINVAL
        if not st["dscp_apps"] or prio != int(st["dscp2prio"].get(str(dscp), 0)) or [dscp, prio] not in st["dscp_apps"]:
            return -errno.ENOENT
        st["dscp_apps"].remove([dscp, prio])
        st["dscp2prio"][str(dscp)] = 0
        self.save()
        return 0

    # ---- ETS and max rate
    def setets(self, prio_tc, tsa, bw):
        if any(t >= 8 for t in prio_tc):
            kmsg("mlx5_core %s: Failed to validate ETS: priority value greater than max(8)" % self.nic["netdev"])
            return -errno.EINVAL
        ets = [b for t, b in zip(tsa, bw) if t == TSA_ETS]
        if ets and sum(ets) != 100:
            kmsg("mlx5_core %s: Failed to validate ETS: BW sum is illegal" % self.nic["netdev"])
            return -errno.EINVAL
        self.st.update(prio_tc=list(prio_tc), tsa=list(tsa), tc_bw=list(bw))
        self.save()
        return 0

    def setmaxrate(self, rates):
        self.st["maxrate"] = list(rates)
        self.save()
        return 0

    # ---- receive buffers (en/port_buffer.c)
    @staticmethod
    def derive_lossy(pfc, p2b):
        """A buffer is lossless when a PFC-enabled priority maps to it (update_buffer_lossy)."""
        return [0 if any(pfc[p] and p2b[p] == i for p in range(8)) else 1 for i in range(8)]

    def lossy_bits(self):
        st = self.st
        if "lossy" not in st:
            st["lossy"] = self.derive_lossy(pfc_effective(self.nic, st), st["prio2buffer"])
        return list(st["lossy"])

    def xoff(self, mtu):
        speed = 40000 if nic_faulted("rdma_port_down", self.nic) else int(self.nic["rate"]) * 1000
        speed = max(speed, 40000)
        return (301 + 216 * int(self.st["cable_len"]) // 100) * speed // 1000 + 272 * mtu // 100

    def manual_buffer_config(self, change, pfc=None, sizes=None, p2b=None):
        """mlx5e_port_manual_buffer_config: check everything, then apply (nothing on error)."""
        st = self.st
        try:
            mtu = int(sysfs_read("class/net/%s/mtu" % self.nic["netdev"], "1500"))
        except ValueError:
            mtu = 1500
        xoff = self.xoff(mtu)
        max_mtu = max(netdev_max_mtu(self.nic), MINIMUM_MAX_MTU)
        size = list(st["buffer_size"])
        lossy = self.lossy_bits()
        update_buffer = False

        def thresholds():
            for i in range(8):
                if not lossy[i] and size[i] < xoff + max_mtu + self.cell:
                    kmsg("buffer_size[%d]=%d is not enough for lossless buffer" % (i, size[i]))
                    return -errno.ENOMEM
            return 0

        if change & BUFFER_CHANGE_CABLE:
            update_buffer = True
            err = thresholds()
            if err:
                return err
        for flag, pfc_now, p2b_now in (
            (BUFFER_CHANGE_PFC, pfc, st["prio2buffer"]),
            (BUFFER_CHANGE_P2B, pfc_effective(self.nic, st), p2b),
        ):
            if change & flag:
                new = self.derive_lossy(pfc_now, p2b_now)
                if new != lossy:
                    lossy = new
                    update_buffer = True
                    err = thresholds()
                    if err:
                        return err
        if change & BUFFER_CHANGE_SIZE:
            for i in range(8):
                if not lossy[i] and not sizes[i]:
                    return -errno.EINVAL  # "lossless buffer[%d] size cannot be zero" (netdev_dbg only)
            headroom = sum(size)
            spare = int(self.q["port_buffer_bytes"]) - int(self.q["internal_buffer_bytes"]) - headroom
            if sum(sizes) > headroom and sum(sizes) - headroom > spare:
                return -errno.EINVAL
            size = list(sizes)
            update_buffer = True
            err = thresholds()
            if err:
                return err
        if not update_buffer and xoff != st["xoff"]:
            update_buffer = True
            err = thresholds()
            if err:
                return err
        st["xoff"] = xoff
        if update_buffer:
            st["buffer_size"] = [s // self.cell * self.cell for s in size]  # the register counts cells
            st["lossy"] = lossy
        if change & BUFFER_CHANGE_P2B:
            st["prio2buffer"] = list(p2b)
        return 0

    def getbuffer(self, sysfs):
        """(prio2buffer, sizes, total): the netlink total excludes the internal buffers, the
        sysfs file's "Port buffer size" does not."""
        total = int(self.q["port_buffer_bytes"])
        if not sysfs:
            total -= int(self.q["internal_buffer_bytes"])
        return list(self.st["prio2buffer"]), list(self.st["buffer_size"]), total

    def setbuffer(self, p2b, sizes):
        """mlx5e_dcbnl_setbuffer (netlink): only what differs is changed."""
        st = self.st
        if any(b >= 8 for b in p2b):
            return -errno.EINVAL
        change = BUFFER_CHANGE_P2B if list(p2b) != st["prio2buffer"] else 0
        if list(sizes) != st["buffer_size"]:
            change |= BUFFER_CHANGE_SIZE
        if not change:
            return 0
        st["manual_buffer"] = True
        err = self.manual_buffer_config(change, sizes=sizes, p2b=p2b)
        self.save()
        return err

    def store_sysfs(self, name, text):
        """A write to qos/buffer_size or qos/prio2buffer (MLNX_OFED en_sysfs.c)."""
        st = self.st
        values = []
        for token in text.split(","):
            if len(values) == 8:
                break
            token = token.strip()
            if not token.isdigit():
                continue
            if name == "prio2buffer" and int(token) > 7:
                return -errno.EINVAL
            values.append(int(token))
        if len(values) != 8:
            return -errno.EINVAL
        current = st["prio2buffer"] if name == "prio2buffer" else st["buffer_size"]
        change = 0
        if values != current:
            change = BUFFER_CHANGE_P2B if name == "prio2buffer" else BUFFER_CHANGE_SIZE
        st["manual_buffer"] = True
        if name == "prio2buffer":
            err = self.manual_buffer_config(change, p2b=values)
        else:
            err = self.manual_buffer_config(change, sizes=values)
        self.save()
        return err


class Dcb:
    """What mlnx_qos's DcbController gets back from netlink (dcbnetlink.py): a failed set comes
    back as a nonzero status byte and is raised as OSError("Netlink error: Bad value. see
    dmesg.") without an errno; a netdev the kernel does not know fails the request itself."""

    BAD_VALUE = "Netlink error: Bad value. see dmesg."

    def __init__(self, port):
        self.port = port

    def _need(self):
        if self.port is None:
            exc = OSError("Netlink error: %s (%d)" % (os.strerror(errno.ENODEV), errno.ENODEV))
            exc.errno = errno.ENODEV
            raise exc
        return self.port

    def _check(self, err):
        if err:
            raise OSError(self.BAD_VALUE)

    def get_dcbx(self):
        return DCBX_HOST if self._need().st["dcbx"] == "os" else 0

    def set_dcbx(self, mode):
        port = self._need()
        port.st["dcbx"] = "os" if mode & DCBX_HOST else "fw"
        port.save()

    def get_pfc_en(self):
        return self._need().pfc_bits()

    def get_pfc_delay(self):
        return int(self._need().st["cable_len"])

    def set_pfc(self, bits, delay):
        self._check(self._need().setpfc(bits, delay & 0xFFFF))

    def app_table(self):
        return [list(a) for a in self._need().st["dscp_apps"]]

    def set_app(self, selector, prio, dscp):
        self._check(self._need().setapp(selector, prio, dscp))

    def del_app(self, selector, prio, dscp):
        self._check(self._need().delapp(selector, prio, dscp))

    def get_ets(self):
        st = self._need().st
        return list(st["prio_tc"]), list(st["tsa"]), list(st["tc_bw"])

    def set_ets(self, prio_tc, tsa, bw):
        self._check(self._need().setets(prio_tc, tsa, bw))

    def get_maxrate(self):
        return list(self._need().st["maxrate"])

    def set_maxrate(self, rates):
        self._check(self._need().setmaxrate(rates))

    def get_buffer(self):
        return self._need().getbuffer(sysfs=False)

    def set_buffer(self, p2b, sizes):
        self._check(self._need().setbuffer(p2b, sizes))


def _parser(v):
    """The tool's options (names, destinations, actions) per version; help texts are ours."""
    parser = optparse.OptionParser(usage="%prog -i <interface> [options]", version="%prog 1.2", prog="mlnx_qos")
    add = parser.add_option
    add("-f", "--pfc", dest="pfc", metavar="LIST", help="PFC per priority 0..7 (8 comma separated 0/1)")
    if v["specific_pfc"]:
        add("-F", "--specific_pfc", dest="specific_pfc", metavar="LIST", help="PFC for some priorities (x keeps one)")
        add("-P", "--get_pfc", dest="get_pfc", help="print the PFC state of one priority")
    add("-p", "--prio_tc", dest="prio_tc", metavar="LIST", help="priority to TC map (8 values)")
    add("-s", "--tsa", dest="tsa", metavar="LIST", help="strict, ets or vendor for each TC")
    add("-t", "--tcbw", dest="tc_bw", metavar="LIST", help="minimal bandwidth %% of each ETS TC")
    add("-r", "--ratelimit", dest="ratelimit", metavar="LIST", help="rate limit of each TC in Gb/s")
    add("-d", "--dcbx", dest="dcbx", help="os, fw or get")
    add("--trust", dest="trust", help="pcp or dscp")
    add("--dscp2prio", dest="dscp2prio", action="append" if v["dscp_append"] else "store", help="set,DSCP,PRIO / del,DSCP,PRIO / flush")
    if v["default_prio"]:
        add("--defltprio", dest="defltprio", help="set,PRIO or del,PRIO")
    add("--cable_len", dest="cable_len", help="cable length (m) for the xoff/xon thresholds")
    add("--prio2buffer", dest="prio2buffer", metavar="LIST", help="priority to receive buffer map")
    add("--buffer_size", dest="buffer_size", metavar="LIST", help="receive buffer sizes (bytes)")
    add("-i", "--interface", dest="intf", help="interface name")
    add("-a", action="store_true", dest="printall", default=False, help="show all TCs")
    return parser


class _Tool:
    """One run of mlnx_qos (SIMULATION): the steps in the tool's order, its messages verbatim."""

    def __init__(self, v, parser, options):
        self.v = v
        self.parser = parser
        self.o = options
        # before 25.07 the tool's `except:` also caught its own sys.exit(1)
        self.catch = Exception if v["strict_except"] else BaseException

    def out(self, text=""):
        sys.stdout.write(text + "\n")

    def privilege(self, exc):
        # 25.07+: an EPERM is printed and ends the run; reads .errno of whatever was raised
        if self.v["strict_except"] and errno.EPERM == exc.errno:
            self.out(str(exc))
            sys.exit(1)

    def parse_int(self, text, low, high, what):
        try:
            value = int(text)
            if value < low or value > high:
                raise ValueError("%d is not in the range %d..%d" % (value, low, high))
            return value
        except ValueError as exc:
            self.out("Bad value for %s: %s" % (what, exc))
            sys.stdout.flush()
            self.parser.print_usage(sys.stdout)
            sys.exit(1)

    def run(self, port, sysfs_buffers):
        o, ctrl = self.o, Dcb(port)
        if o.dcbx is not None:
            if o.dcbx == "os":
                ctrl.set_dcbx(ctrl.get_dcbx() | DCBX_HOST)
            elif o.dcbx == "fw":
                ctrl.set_dcbx(0)
            elif o.dcbx != "get":
                self.out("Invalid dcbx mode command. Refer to the help.")
                sys.exit(1)
        pfc_en, pfc_delay = self.pfc(ctrl)
        apps = self.dscp2prio(ctrl)
        apps = self.defltprio(ctrl, apps)
        trust, apps = self.trust(ctrl, apps)
        buffer_error, p2b, sizes, total = self.buffers(ctrl, port, sysfs_buffers)
        ratelimit = self.ratelimit(ctrl)
        try:
            prio_tc, tsa, tc_bw = ctrl.get_ets()
            pfc_en = ctrl.get_pfc_en()
            pfc_delay = ctrl.get_pfc_delay()
        except self.catch as exc:
            self.privilege(exc)
            self.out("ETS features are not supported on your system")
            sys.exit(1)
        self.ets(ctrl, prio_tc, tsa, tc_bw)
        dcbx = ctrl.get_dcbx()
        self.pretty(dcbx, trust, apps, buffer_error, sizes, total, p2b, pfc_en, pfc_delay, prio_tc, tsa, tc_bw, ratelimit)
        return 0

    def pfc(self, ctrl):
        o, v = self.o, self.v
        pfc_en, pfc_delay = 0, 0
        if v["split_pfc"]:
            if o.cable_len:
                pfc_delay = self.parse_int(o.cable_len, 0, v["cable_max"], "cable_len")
                pfc_en = ctrl.get_pfc_en()  # outside the tool's try: an error here is a traceback
                try:
                    ctrl.set_pfc(pfc_en, pfc_delay)
                except OSError as exc:
                    self.privilege(exc)
                    self.out("mlnx_qos: Error setting pfc delay:" + exc)  # TypeError, as in the tool
                    sys.exit(1)
            if v["specific_pfc"] and o.get_pfc:
                bits = list(bin(ctrl.get_pfc_en())[2:].zfill(8))[::-1]
                index = int(o.get_pfc)
                if index not in range(8):
                    self.out("pfc index must be in range of 0-7")
                    sys.exit(1)
                self.out(bits[index])
                sys.exit(0)
            if v["specific_pfc"] and o.specific_pfc:
                self.specific_pfc(ctrl)
        elif o.cable_len:
            pfc_delay = self.parse_int(o.cable_len, 0, v["cable_max"], "cable_len")
        if o.pfc:
            pfc_en = 0
            count = 0
            for item in o.pfc.split(","):
                if count >= 8:
                    self.out("Too many items for PFC")
                    sys.exit(1)
                pfc_en |= self.parse_int(item, 0, 1, "PFC") << count
                count += 1
            if count != 8:
                self.out("pfc list must have 8 items")
                sys.exit(1)
            if v["split_pfc"]:
                try:
                    pfc_delay = ctrl.get_pfc_delay()
                    ctrl.set_pfc(pfc_en, pfc_delay)
                except OSError as exc:
                    self.privilege(exc)
                    self.out("mlnx_qos: Error setting pfc:" + exc)  # TypeError, as in the tool
                    sys.exit(1)
        if not v["split_pfc"] and (o.cable_len or o.pfc):
            # one request with both fields: --cable_len alone sends PFC 0 (all off)
            try:
                ctrl.set_pfc(pfc_en, pfc_delay)
            except OSError as exc:
                self.out(str(exc))
                sys.exit(1)
        return pfc_en, pfc_delay

    def specific_pfc(self, ctrl):
        bits = list(bin(ctrl.get_pfc_en())[2:].zfill(8))
        wanted = self.o.specific_pfc.split(",")[::-1]
        if len(wanted) != 8:
            self.out("pfc list must have 8 items")
            sys.exit(1)
        for i, item in enumerate(wanted):
            if item != "x":
                if item not in ("0", "1"):
                    self.out("Bad value for 'PFC': %s" % item)
                    sys.exit(1)
                bits[i] = item
        try:
            ctrl.set_pfc(int("".join(bits), 2), ctrl.get_pfc_delay())
        except OSError as exc:
            self.privilege(exc)
            self.out("mlnx_qos: Error setting pfc:" + exc)  # TypeError, as in the tool
            sys.exit(1)
        sys.exit(0)

    def dscp2prio(self, ctrl):
        o = self.o
        if o.dscp2prio and o.trust:
            self.out("trust and dscp2prio commands cannot be used at the same time.")
            sys.exit(1)
        wanted = []
        requests = o.dscp2prio if isinstance(o.dscp2prio, list) else ([o.dscp2prio] if o.dscp2prio else [])
        try:
            for req in requests:
                if req == "flush" and self.v["dscp_append"]:
                    wanted.append(("flush", None, None))
                    continue
                action, dscp, prio = req.split(",")
                dscp, prio = int(dscp), int(prio)
                if action not in ("set", "del") or dscp > 63 or prio > 7:
                    sys.exit(1)
                wanted.append((action, dscp, prio))
        except self.catch as exc:
            self.privilege(exc)
            self.out("Invalid dscp2prio command. Refer to the help.")
            sys.exit(1)
        try:
            for action, dscp, prio in wanted:
                if action == "set":
                    ctrl.set_app(5, prio, dscp)
                elif action == "del":
                    ctrl.del_app(5, prio, dscp)
                else:
                    for d, p in ctrl.app_table():
                        ctrl.del_app(5, p, d)
            return ctrl.app_table()
        except self.catch as exc:
            self.privilege(exc)
            if o.dscp2prio:
                self.out("dscp2prio command failed")
                sys.exit(1)
            return []

    def defltprio(self, ctrl, apps):
        if not self.v["default_prio"]:
            return apps
        o = self.o
        try:
            if o.defltprio:
                action, prio = o.defltprio.split(",")
                prio = int(prio)
                if action not in ("set", "del") or prio < 0 or prio > 7:
                    raise ValueError(prio)
        except BaseException:
            self.out("Invalid defltprio command. Refer to the help.")
            sys.exit(1)
        try:
            if o.defltprio:
                # selector 1 (ethertype): mlx5's setapp/delapp take DSCP apps only
                (ctrl.set_app if action == "set" else ctrl.del_app)(1, prio, 0)
            return ctrl.app_table()
        except BaseException:
            if o.defltprio:
                self.out("defltprio command failed")
                sys.exit(1)
            return []

    def trust(self, ctrl, apps):
        o = self.o
        if o.trust and o.trust not in ("dscp", "pcp"):
            self.out("Invalid trust state command. Refer to the help.")
            sys.exit(1)
        try:
            trust = "dscp" if ctrl.app_table() else "pcp"
            if o.trust and o.trust != trust:
                if o.trust == "pcp":
                    for d, p in ctrl.app_table():
                        ctrl.del_app(5, p, d)
                else:
                    for d in range(64):
                        ctrl.set_app(5, d >> 3, d)  # the firmware default map
            if o.trust:
                trust = "dscp" if ctrl.app_table() else "pcp"
                apps = ctrl.app_table()
            return trust, apps
        except self.catch as exc:
            self.privilege(exc)
            self.out("Priority trust state is not supported on your system")
            if o.trust:
                sys.exit(1)
            return "none", apps

    def buffers(self, ctrl, port, sysfs):
        o, v = self.o, self.v
        try:
            if sysfs:
                p2b, sizes, total = port.getbuffer(sysfs=True)
                total = total if v["total_sysfs"] else None
            else:
                p2b, sizes, total = ctrl.get_buffer()
        except self.catch as exc:
            self.privilege(exc)
            self.out("Buffers commands are not supported on your system")
            if o.buffer_size or o.prio2buffer:
                sys.exit(1)
            return True, [0] * 8, [0] * 8, None
        try:
            if o.prio2buffer:
                for i, item in enumerate(o.prio2buffer.split(",")):
                    if i >= 8:
                        self.out("Too many items for prio2buffer")
                        sys.exit(1)
                    p2b[i] = self.parse_int(item, 0, 7, "prio buffer")
            if o.buffer_size:
                for i, item in enumerate(o.buffer_size.split(",")):
                    if i >= 8:
                        self.out("Too many items for buffer_size")
                        sys.exit(1)
                    value = int(item)
                    if not 0 <= value <= 0xFFFFFFFF:  # the tool's array('I')
                        raise OverflowError("unsigned int is out of range")
                    sizes[i] = value
            if o.buffer_size or o.prio2buffer:
                if sysfs:
                    writes = []
                    if v["sysfs_both"]:
                        writes = [("prio2buffer", p2b), ("buffer_size", sizes)]
                    elif o.buffer_size:
                        writes = [("buffer_size", sizes)]  # --prio2buffer given with it is dropped
                    else:
                        writes = [("prio2buffer", p2b)]
                    for name, values in writes:
                        err = port.store_sysfs(name, "".join("%d," % x for x in values))
                        if err:
                            raise OSError(-err, os.strerror(-err))
                    p2b, sizes, total = port.getbuffer(sysfs=True)
                    total = total if v["total_sysfs"] else None
                else:
                    ctrl.set_buffer(p2b, sizes)
                    p2b, sizes, total = ctrl.get_buffer()
        except self.catch as exc:
            self.privilege(exc)
            if o.buffer_size or o.prio2buffer:
                self.out("Buffers commands error")
                sys.exit(1)
            return True, p2b, sizes, total
        if v["total"] is None:
            total = None
        return False, p2b, sizes, total

    def ratelimit(self, ctrl):
        o = self.o
        rates = []
        try:
            if o.ratelimit:
                for i, item in enumerate(o.ratelimit.split(",")):
                    if i >= 8:
                        self.out("Too many items for ratelimit")
                        sys.exit(1)
                    rates.append(self.parse_int(item, 0, 1000000, "ratelimit") * 1000 * 1000)
                if len(rates) != 8:
                    self.out("ratelimit must have 8 items")
                    sys.exit(1)
                try:
                    ctrl.set_maxrate(rates)
                except BaseException:
                    self.out("Rate limit is not supported on your system!")
            try:
                return ctrl.get_maxrate()
            except BaseException:
                self.out("Rate limit is not supported on your system!")
                return []
        except BaseException:
            if o.ratelimit:
                sys.exit(1)
            return []

    def ets(self, ctrl, prio_tc, tsa, tc_bw):
        o = self.o
        names = {"strict": TSA_STRICT, "ets": TSA_ETS, "vendor": TSA_VENDOR}
        if o.tsa:
            items = o.tsa.split(",")
            for i, item in enumerate(items):
                if i >= 8:
                    self.out("Too many items for TSA")
                    sys.exit(1)
                if item not in names:
                    self.out(str(("Bad TSA value: ", item)))
                    sys.stdout.flush()
                    self.parser.print_usage(sys.stdout)
                    sys.exit(1)
                tsa[i] = names[item]
            if len(items) != 8:
                self.out("tsa list must have 8 items")
                sys.exit(1)
        if o.tc_bw:
            items = o.tc_bw.split(",")
            for i, item in enumerate(items):
                if i >= 8:
                    self.out("Too many items for ETS BW")
                    sys.exit(1)
                bw = self.parse_int(item, 0, 100, "ETS BW")
                if tsa[i] != TSA_ETS and bw != 0:
                    self.out("ETS BW for a strict/vendor TC must be 0")
                    sys.stdout.flush()
                    self.parser.print_usage(sys.stdout)
                    sys.exit(1)
                tc_bw[i] = bw
            if len(items) != 8:
                self.out("tcbw list must have 8 items")
                sys.exit(1)
        if o.prio_tc:
            items = o.prio_tc.split(",")
            for i, item in enumerate(items):
                if i >= 8:
                    self.out("Too many items in UP => TC mapping")
                    sys.exit(1)
                prio_tc[i] = self.parse_int(item, 0, 7, "UP => TC mapping")
            if len(items) != 8:
                self.out("prio_tc list must have 8 items")
                sys.exit(1)
        if o.tsa or o.tc_bw or o.prio_tc:
            try:
                ctrl.set_ets(prio_tc, tsa, tc_bw)
            except OSError as exc:
                self.out(str(exc))
                sys.exit(1)

    def pretty(self, dcbx, trust, apps, buffer_error, sizes, total, p2b, pfc_en, delay, prio_tc, tsa, tc_bw, ratelimit):
        v = self.v
        self.out("DCBX mode: OS controlled" if dcbx & DCBX_HOST else "DCBX mode: Firmware controlled")
        self.out("Priority trust state: " + trust)
        if trust == "dscp":
            self.out("dscp2prio mapping:")
            per_prio = [""] * 8
            for dscp, prio in apps:
                per_prio[prio] += "%02d," % dscp
            for prio in range(8):
                text, rows = per_prio[prio], []
                while len(text) > 24:  # 8 DSCPs a row
                    rows.append(text[:24])
                    text = text[24:]
                if text:
                    rows.append(text)
                if rows:
                    self.out("\n".join("\tprio:%d dscp:%s" % (prio, row) for row in rows))
        if v["default_prio"]:
            self.out("default priority:")  # mlx5 keeps no ethertype app: nothing follows
        if not buffer_error:
            line = "Receive buffer size (bytes): " + "".join("%d," % s for s in sizes[:8])
            if total is not None and v["total"]:
                line += "%s=%d" % (v["total"], total)
            self.out(line)
        self.out("Cable len: %d" % delay)
        self.out("PFC configuration:")
        self.out("\tpriority    0   1   2   3   4   5   6   7")
        line = "\tenabled     " + "".join("%d   " % ((pfc_en >> p) & 1) for p in range(8))
        if not buffer_error:
            line += "\n\tbuffer      " + "".join("%d   " % b for b in p2b)
        self.out(line)
        tcs = {}
        if self.o.printall:
            for tc in range(8):
                tcs[tc] = []
        for prio, tc in enumerate(prio_tc):
            tcs.setdefault(int(tc), []).append(prio)
        for tc in sorted(tcs) if v["tc_sorted"] else list(tcs):
            line = ""  # the tool builds the "tc:" part only when it can read the TC's rate limit
            if tc < len(ratelimit):
                rate = "%.1f Gbps" % (float(ratelimit[tc] / 1000) / 1000) if ratelimit[tc] > 0 else "unlimited"
                line = "tc: %d ratelimit: %s, tsa: " % (tc, rate)
            line += {TSA_ETS: "ets, bw: %s%%" % tc_bw[tc], TSA_STRICT: "strict", TSA_VENDOR: "vendor"}.get(tsa[tc], "unknown")
            self.out(line)
            for prio in tcs[tc]:
                self.out("\t priority:  %s" % prio)


def mlnx_qos(args):
    v = version()
    parser = _parser(v)
    try:
        options, rest = parser.parse_args(args)
    except SystemExit as exc:  # optparse: usage and error on stderr, rc 2 (0 for -h/--version)
        return exc.code or 0
    tool = _Tool(v, parser, options)
    if rest:
        tool.out("Bad arguments")
        parser.print_usage(sys.stdout)
        return 1
    if options.intf is None:
        tool.out("Interface name is required")
        parser.print_usage(sys.stdout)
        return 1
    nic = nic_by_netdev(options.intf)
    port = Mlx5Port(nic, nic_state()) if nic is not None else None
    sysfs_buffers = nic is not None and qos_profile(nic)["driver"] == "mlnx_ofed"
    try:
        return tool.run(port, sysfs_buffers)
    except SystemExit as exc:
        sys.stdout.flush()
        return exc.code if isinstance(exc.code, int) else 1
