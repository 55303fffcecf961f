#!/usr/bin/env python3
"""SIMULATED dcgm-exporter for the lab's GPU nodes (no DCGM can run here: no GPU, no container
engine). It serves /metrics in the text format of dcgm-exporter 3.3.9-3.6.1 (the release the
monitoring role pins), as its source renders it (pkg/dcgmexporter/pipeline.go migMetricsFormat,
gpu_collector.go, xid_errors.go at tag 3.3.9-3.6.1):

- one family per field of the counters file (dcgm-exporter's -f; the file the monitoring role
  writes), HELP and TYPE from the file, families in ascending DCGM field id, GPUs in index order;
- labels gpu, UUID, pci_bus_id, device (nvidia<index>), modelName, Hostname (NODE_NAME, else the
  host name), then the file's `label` fields (DCGM_FI_DRIVER_VERSION), then err_code/err_msg on
  the XID family; no spaces, raw values, integers as %d and DOUBLE fields as %f;
- a field without a value here (NVLink bandwidth, energy, throttle reasons) is left out, HELP and
  TYPE included, as dcgm-exporter drops blank values.

The values come from below, not beside: the lab's real nvidia-smi 535 over the simulated NVML
(`nvidia-smi -q -x`, `nvidia-smi nvlink -e`) and the simulated kernel log's Xid records, so a
fault hwsim injects shows in these series as it would through DCGM. Held to a real 3.3.8 capture
in tests/unit/test_dcgm_exporter_sim.py.

    dcgm_exporter_sim.py --listen 10.89.77.11 --port 9400 --counters /etc/rackforge/dcgm-exporter/counters.csv
"""

from __future__ import annotations

import argparse
import http.server
import os
import re
import socket
import subprocess
import xml.etree.ElementTree as ET

# DCGM field ids (dcgm_fields.h of the go-dcgm that 3.3.9-3.6.1 pins): the families' order
FIELD_IDS = {
    "DCGM_FI_DRIVER_VERSION": 1,
    "DCGM_FI_DEV_SM_CLOCK": 100,
    "DCGM_FI_DEV_MEM_CLOCK": 101,
    "DCGM_FI_DEV_APP_SM_CLOCK": 110,
    "DCGM_FI_DEV_APP_MEM_CLOCK": 111,
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": 112,
    "DCGM_FI_DEV_MEMORY_TEMP": 140,
    "DCGM_FI_DEV_GPU_TEMP": 150,
    "DCGM_FI_DEV_POWER_USAGE": 155,
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 156,
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": 160,
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 202,
    "DCGM_FI_DEV_GPU_UTIL": 203,
    "DCGM_FI_DEV_MEM_COPY_UTIL": 204,
    "DCGM_FI_DEV_ENC_UTIL": 206,
    "DCGM_FI_DEV_DEC_UTIL": 207,
    "DCGM_FI_DEV_XID_ERRORS": 230,
    "DCGM_FI_DEV_FB_FREE": 251,
    "DCGM_FI_DEV_FB_USED": 252,
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 310,
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 311,
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": 312,
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": 313,
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 393,
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 394,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": 395,
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": 409,
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": 419,
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": 429,
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": 439,
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": 449,
}
DOUBLE_FIELDS = {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_MGMT_LIMIT"}
# xid_errors.go: the codes hwsim can inject (and 0); any other code prints as unknownErr
XID_TEXT = {
    0: "No Error",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    48: "Double Bit ECC Error",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
}
XID_RECORD = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+)")
NVLINK_LINE = re.compile(r"^\s*Link \d+: (Replay Errors|Recovery Errors|CRC Errors|CRC Data Errors): (\d+)")
NVLINK_FIELDS = {
    "CRC Errors": "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "CRC Data Errors": "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "Replay Errors": "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "Recovery Errors": "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
}


def parse_counters(text):
    """dcgm-exporter's CSV (parser.go: '#' comments, fields trimmed): [(field, type, help)]."""
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) == 3:
            out.append(tuple(parts))
    return out


def _number(text):
    """'81008 MiB' -> 81008, '67.74 W' -> 67.74, 'No' -> 0, 'Yes' -> 1; None for N/A."""
    if text is None:
        return None
    text = text.strip()
    if text in ("Yes", "No"):
        return int(text == "Yes")
    m = re.match(r"^(-?[0-9]+(\.[0-9]+)?)", text)
    if not m:
        return None
    return float(m.group(1)) if m.group(2) else int(m.group(1))


def _bus(text):
    """bus:device of a PCI address, as NVML (00000000:19:00.0) and the kernel log (0000:19:00)
    write it."""
    parts = text.lower().split(":")
    return "%s:%s" % (parts[-2], parts[-1].split(".")[0]) if len(parts) >= 2 else text.lower()


def gpus_from(xml_text, nvlink_text, kmsg_text):
    """Each GPU's values by DCGM field name, and its identity, from the tools' outputs."""
    root = ET.fromstring(xml_text)
    driver = root.findtext("driver_version")
    last_xid = {}
    for m in XID_RECORD.finditer(kmsg_text or ""):
        last_xid[_bus(m.group(1))] = int(m.group(2))
    links = {}
    current = None
    for line in (nvlink_text or "").splitlines():
        head = re.match(r"^GPU (\d+):", line)
        if head:
            current = int(head.group(1))
            links[current] = {}
            continue
        m = NVLINK_LINE.match(line)
        if m and current is not None:
            field = NVLINK_FIELDS[m.group(1)]
            links[current][field] = links[current].get(field, 0) + int(m.group(2))
    out = []
    for g in root.findall("gpu"):
        index = int(g.findtext("minor_number"))
        bus = g.findtext("pci/pci_bus_id")
        values = {
            "DCGM_FI_DRIVER_VERSION": driver,
            "DCGM_FI_DEV_SM_CLOCK": _number(g.findtext("clocks/sm_clock")),
            "DCGM_FI_DEV_MEM_CLOCK": _number(g.findtext("clocks/mem_clock")),
            "DCGM_FI_DEV_APP_SM_CLOCK": _number(g.findtext("applications_clocks/graphics_clock")),
            "DCGM_FI_DEV_APP_MEM_CLOCK": _number(g.findtext("applications_clocks/mem_clock")),
            "DCGM_FI_DEV_MEMORY_TEMP": _number(g.findtext("temperature/memory_temp")),
            "DCGM_FI_DEV_GPU_TEMP": _number(g.findtext("temperature/gpu_temp")),
            "DCGM_FI_DEV_POWER_USAGE": _number(g.findtext("gpu_power_readings/power_draw")),
            "DCGM_FI_DEV_POWER_MGMT_LIMIT": _number(g.findtext("gpu_power_readings/current_power_limit")),
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": _number(g.findtext("pci/replay_counter")),
            "DCGM_FI_DEV_GPU_UTIL": _number(g.findtext("utilization/gpu_util")),
            "DCGM_FI_DEV_MEM_COPY_UTIL": _number(g.findtext("utilization/memory_util")),
            "DCGM_FI_DEV_ENC_UTIL": _number(g.findtext("utilization/encoder_util")),
            "DCGM_FI_DEV_DEC_UTIL": _number(g.findtext("utilization/decoder_util")),
            "DCGM_FI_DEV_XID_ERRORS": last_xid.get(_bus(bus), 0),
            "DCGM_FI_DEV_FB_FREE": _number(g.findtext("fb_memory_usage/free")),
            "DCGM_FI_DEV_FB_USED": _number(g.findtext("fb_memory_usage/used")),
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": _number(g.findtext("ecc_errors/volatile/dram_correctable")),
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": _number(g.findtext("ecc_errors/volatile/dram_uncorrectable")),
            "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": _number(g.findtext("ecc_errors/aggregate/dram_correctable")),
            "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": _number(g.findtext("ecc_errors/aggregate/dram_uncorrectable")),
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": _number(g.findtext("remapped_rows/remapped_row_unc")),
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": _number(g.findtext("remapped_rows/remapped_row_corr")),
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": _number(g.findtext("remapped_rows/remapped_row_failure")),
        }
        values.update(links.get(index, {}))
        out.append(
            {
                "index": index,
                "uuid": g.findtext("uuid"),
                "bus": bus,
                "model": g.findtext("product_name"),
                "values": values,
            }
        )
    return sorted(out, key=lambda g: g["index"])


def render(gpus, counters, hostname):
    """The /metrics text, as dcgm-exporter's template writes it."""
    labels_fields = sorted(f for f, kind, _help in counters if kind == "label")
    families = sorted(((FIELD_IDS.get(f, 1 << 30), f, kind, help_) for f, kind, help_ in counters if kind in ("gauge", "counter")))
    lines = []
    for _id, field, kind, help_ in families:
        samples = []
        for g in gpus:
            value = g["values"].get(field)
            if value is None:
                continue
            text = "%f" % value if field in DOUBLE_FIELDS else "%d" % value
            labels = [
                ("gpu", str(g["index"])),
                ("UUID", g["uuid"]),
                ("pci_bus_id", g["bus"]),
                ("device", "nvidia%d" % g["index"]),
                ("modelName", g["model"]),
            ]
            if hostname:
                labels.append(("Hostname", hostname))
            labels += [(f, g["values"][f]) for f in labels_fields if g["values"].get(f) is not None]
            if field == "DCGM_FI_DEV_XID_ERRORS":
                labels += [("err_code", str(value)), ("err_msg", XID_TEXT.get(value, "Unknown Error"))]
            samples.append("%s{%s} %s" % (field, ",".join('%s="%s"' % kv for kv in labels), text))
        if samples:
            lines += ["# HELP %s %s" % (field, help_), "# TYPE %s %s" % (field, kind), *samples]
    return "\n".join(lines) + ("\n" if lines else "")


def collect(counters_path, kmsg_path):
    def run(*argv):
        res = subprocess.run(argv, capture_output=True, text=True, check=False, env=dict(os.environ, LC_ALL="C"))
        return res.stdout if res.returncode == 0 else None

    xml_text = run("nvidia-smi", "-q", "-x")
    if xml_text is None:  # no driver loaded: no GPU to report, as DCGM finds none
        return ""
    try:
        with open(counters_path) as fh:
            counters = parse_counters(fh.read())
    except OSError:
        counters = []
    try:
        with open(kmsg_path) as fh:
            kmsg = fh.read()
    except OSError:
        kmsg = ""
    gpus = gpus_from(xml_text, run("nvidia-smi", "nvlink", "-e") or "", kmsg)
    return render(gpus, counters, os.environ.get("NODE_NAME") or socket.gethostname())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--port", type=int, default=9400)
    ap.add_argument("--counters", default="/etc/rackforge/dcgm-exporter/counters.csv")
    ap.add_argument("--kmsg", default="/run/hwsim/kmsg")
    opts = ap.parse_args()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                self.send_response(404)
                self.end_headers()
                return
            body = collect(opts.counters, opts.kmsg).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args):
            pass

    http.server.ThreadingHTTPServer((opts.listen, opts.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
