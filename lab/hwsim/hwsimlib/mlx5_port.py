"""The simulated mlx5 kernel under the simulated mlnx_qos (SIMULATION): one port as the mlx5
driver's DCB netlink handlers (en_dcbnl.c), its manual buffer code (en/port_buffer.c) and
MLNX_OFED's qos/buffer_size and qos/prio2buffer sysfs handlers (en_sysfs.c) treat a request: PFC,
cable length, the DSCP app table and trust state, ETS, receive buffers with the lossless-buffer
rule (ENOMEM, logged to $HWSIM_RUN/kmsg). The tool itself is hwsimlib/mlnx_qos.py; the facts and
their sources are in lab/hwsim/MLNX_QOS.md."""

from __future__ import annotations

import errno
import json
import os
import subprocess

from hwsimlib.state import RUN, kmsg_append, nic_faulted, pfc_effective, save_json
from hwsimlib.sysfs import sysfs_read

TSA_STRICT, TSA_ETS, TSA_VENDOR = 0, 2, 255
DCBX_HOST = 0x1
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
    """An error in the simulated kernel log (KERN_ERR, as mlx5_core's netdev_err logs it)."""
    kmsg_append(line, prio=3)


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
