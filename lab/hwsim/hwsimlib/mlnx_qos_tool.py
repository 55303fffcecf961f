"""One run of the simulated mlnx_qos (SIMULATION): its steps in the tool's order over netlink
(hwsimlib.mlnx_qos_netlink) or the MLNX_OFED sysfs files, with its messages and exits verbatim.
The options per version are in hwsimlib/mlnx_qos.py, the output layout in hwsimlib/mlnx_qos_print.py."""

from __future__ import annotations

import errno
import os
import sys

from hwsimlib.mlnx_qos_netlink import Dcb
from hwsimlib.mlnx_qos_print import Printer
from hwsimlib.mlx5_port import DCBX_HOST, TSA_ETS, TSA_STRICT, TSA_VENDOR


class Tool(Printer):
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
