"""What the simulated mlnx_qos gets back from netlink (SIMULATION): its DcbController's view
(dcbnetlink.py) of a hwsimlib.mlx5_port port."""

from __future__ import annotations

import errno
import os

from hwsimlib.mlx5_port import DCBX_HOST


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
