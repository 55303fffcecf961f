"""The simulated mlnx_qos's output layout per version (SIMULATION; the tool's pretty print)."""

from __future__ import annotations

from hwsimlib.mlx5_port import DCBX_HOST, TSA_ETS, TSA_STRICT, TSA_VENDOR


class Printer:
    """The settings as the tool prints them; mixed into mlnx_qos_tool.Tool, whose out(), v
    (the version's traits) and o (the options) it uses."""

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
