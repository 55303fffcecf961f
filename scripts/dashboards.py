#!/usr/bin/env python3
"""Write rackforge's Grafana dashboards (roles/monitoring_server/files/dashboards/*.json) from the
definitions below; `--check` fails when a file differs from what this script writes (make lint).

Three dashboards, each with a Prometheus datasource variable (provisioned as rackforge-prometheus
by roles/monitoring_server) and, where it is per node, a `node` variable:
- rackforge-fleet: the health verdict, GPUs, NVLink and RDMA findings per node, firing alerts;
- rackforge-node-gpu: one node's GPUs from dcgm-exporter (utilisation, memory, power against its
  limit, clocks, temperature, Xid, ECC, row remapping, NVLink errors) and its NVLink links;
- rackforge-fabric: RDMA ports per node: state and rate, PFC pause frames per priority, CNP/ECN,
  link errors and flaps, pause storms (the health check's textfile counters: their values at the
  last health check, not a live rate).
Every panel's query returns series on the lab's Prometheus (tests/integration/test_dashboards.py).
"""

from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "roles" / "monitoring_server" / "files" / "dashboards"
DS = {"type": "prometheus", "uid": "${datasource}"}
N = 'node="$node"'


def panel(title, exprs, kind="timeseries", unit=None, description="", legend="{{node}}", w=12, h=8):
    """exprs: [expr] or [(expr, legend)]."""
    targets = []
    for i, e in enumerate(exprs):
        expr, leg = e if isinstance(e, tuple) else (e, legend)
        targets.append({"datasource": DS, "expr": expr, "legendFormat": leg, "refId": chr(ord("A") + i)})
    p = {"type": kind, "title": title, "datasource": DS, "targets": targets, "gridPos": {"w": w, "h": h}}
    if description:
        p["description"] = description
    p["fieldConfig"] = {"defaults": {"unit": unit} if unit else {}, "overrides": []}
    if kind == "table":
        for t in targets:
            t.update(format="table", instant=True)
    if kind == "stat":
        for t in targets:
            t["instant"] = True
    return p


def variables(per_node, metric):
    current = {"text": "rackforge-prometheus", "value": "rackforge-prometheus"}
    out = [{"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus", "current": current}]
    if per_node:
        out.append(
            {
                "name": "node",
                "label": "node",
                "type": "query",
                "datasource": DS,
                "query": {"query": "label_values(%s, node)" % metric, "refId": "node"},
                "definition": "label_values(%s, node)" % metric,
                "refresh": 2,
                "sort": 1,
            }
        )
    return out


def dashboard(uid, title, description, panels, per_node=False, node_metric=None):
    x = y = 0
    laid = []
    for i, p in enumerate(panels, start=1):
        w, h = p["gridPos"]["w"], p["gridPos"]["h"]
        if x + w > 24:
            x, y = 0, y + h
        laid.append(dict(p, id=i, gridPos={"x": x, "y": y, "w": w, "h": h}))
        x += w
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["rackforge"],
        "editable": False,
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "templating": {"list": variables(per_node, node_metric)},
        "panels": laid,
    }


FLEET = dashboard(
    "rackforge-fleet",
    "rackforge: fleet",
    "Every GPU node's health verdict (the rackforge health check), GPUs, NVLink and RDMA findings.",
    [
        panel("Nodes healthy", ["sum(rackforge_node_healthy)"], "stat", w=6, h=4, legend="healthy"),
        panel("Nodes unhealthy", ["count(rackforge_node_healthy == 0) or vector(0)"], "stat", w=6, h=4, legend="unhealthy"),
        panel("node_exporters up", ['sum(up{job="rackforge-node"})'], "stat", w=6, h=4, legend="up"),
        panel("Alerts firing", ['count(ALERTS{alertstate="firing"}) or vector(0)'], "stat", w=6, h=4, legend="firing"),
        panel(
            "Health verdict per node",
            ["rackforge_node_healthy", "rackforge_health_findings"],
            "table",
            description=(
                "1 healthy, 0 unhealthy (the node is cordoned by the health gate); findings: how many the last"
                " check found. Details: reports/fleet.html."
            ),
            w=24,
        ),
        panel("GPUs per node (dcgm-exporter)", ["count by (node) (DCGM_FI_DEV_GPU_TEMP)"], "stat", legend="{{node}}", w=12),
        panel(
            "NVLink links active / expected",
            [
                ("sum by (node) (rackforge_nvlink_active_links)", "{{node}} active"),
                ("sum by (node) (rackforge_nvlink_expected_links)", "{{node}} expected"),
            ],
            w=12,
        ),
        panel("RDMA ports up", ["sum by (node) (rackforge_rdma_port_up)"], w=8),
        panel("RDMA ports with findings", ["sum by (node) (1 - rackforge_rdma_port_healthy)"], w=8),
        panel("NVSwitch fabric not Completed (GPUs)", ["sum by (node) (1 - rackforge_fabric_completed)"], w=8),
        panel(
            "GPU stack units active",
            [
                (
                    'sum by (node, name) (node_systemd_unit_state{state="active",name=~"nvidia-.*|containerd.service|kubelet.service"})',
                    "{{node}} {{name}}",
                )
            ],
            w=24,
        ),
    ],
)

NODE_GPU = dashboard(
    "rackforge-node-gpu",
    "rackforge: node GPUs",
    "One node's GPUs from dcgm-exporter: load, memory, power against the applied limit, clocks, temperatures, Xid, ECC,"
    " row remapping, NVLink.",
    [
        panel("GPU utilisation", ["DCGM_FI_DEV_GPU_UTIL{%s}" % N], unit="percent", legend="GPU {{gpu}}", w=12),
        panel("Frame buffer used", ["DCGM_FI_DEV_FB_USED{%s}" % N], unit="decmbytes", legend="GPU {{gpu}}", w=12),
        panel(
            "Power draw and limit",
            [("DCGM_FI_DEV_POWER_USAGE{%s}" % N, "GPU {{gpu}} draw"), ("DCGM_FI_DEV_POWER_MGMT_LIMIT{%s}" % N, "GPU {{gpu}} limit")],
            unit="watt",
            description="The limit is the one the driver enforces: gpu_tuning's power_limit once applied.",
            w=12,
        ),
        panel(
            "Clocks against the applied application clocks",
            [
                ("DCGM_FI_DEV_SM_CLOCK{%s}" % N, "GPU {{gpu}} SM"),
                ("DCGM_FI_DEV_APP_SM_CLOCK{%s}" % N, "GPU {{gpu}} SM application (gpu_tuning)"),
                ("DCGM_FI_DEV_MEM_CLOCK{%s}" % N, "GPU {{gpu}} memory"),
                ("DCGM_FI_DEV_APP_MEM_CLOCK{%s}" % N, "GPU {{gpu}} memory application (gpu_tuning)"),
            ],
            unit="MHz",
            description=(
                "The application clocks are the ones gpu_tuning sets (nvidia-smi -ac). Locked clocks (-lgc)"
                " cannot be read back from NVML, so they are not shown."
            ),
            w=12,
        ),
        panel(
            "Temperature",
            [("DCGM_FI_DEV_GPU_TEMP{%s}" % N, "GPU {{gpu}}"), ("DCGM_FI_DEV_MEMORY_TEMP{%s}" % N, "GPU {{gpu}} memory")],
            unit="celsius",
            w=12,
        ),
        panel("Last Xid", ["DCGM_FI_DEV_XID_ERRORS{%s}" % N], "table", legend="GPU {{gpu}}", w=12),
        panel(
            "ECC errors (volatile)",
            [
                ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{%s}" % N, "GPU {{gpu}} double-bit"),
                ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{%s}" % N, "GPU {{gpu}} single-bit"),
            ],
            w=12,
        ),
        panel(
            "Row remapping",
            [
                ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{%s}" % N, "GPU {{gpu}} uncorrectable"),
                ("DCGM_FI_DEV_ROW_REMAP_FAILURE{%s}" % N, "GPU {{gpu}} failure"),
            ],
            w=12,
        ),
        panel(
            "NVLink errors (15 min)",
            [
                ("sum by (gpu) (increase(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{%s}[15m]))" % N, "GPU {{gpu}} CRC"),
                ("sum by (gpu) (increase(DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{%s}[15m]))" % N, "GPU {{gpu}} replay"),
                ("sum by (gpu) (increase(DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL{%s}[15m]))" % N, "GPU {{gpu}} recovery"),
            ],
            w=12,
        ),
        panel(
            "NVLink links active (health check)",
            ["rackforge_nvlink_active_links{%s}" % N],
            legend="GPU {{gpu}}",
            description="At the last health check; fewer than the profile's links is RackforgeNVLinkDown.",
            w=12,
        ),
        panel("PCIe replays", ["DCGM_FI_DEV_PCIE_REPLAY_COUNTER{%s}" % N], legend="GPU {{gpu}}", w=12),
    ],
    per_node=True,
    node_metric="DCGM_FI_DEV_GPU_TEMP",
)

TRAFFIC = "counters at the last health check (health_checks' textfile), not a live rate"
FABRIC = dashboard(
    "rackforge-fabric",
    "rackforge: RoCE fabric",
    "RDMA ports per node: state, rate, PFC pause frames per priority, CNP/ECN, link errors and flaps (%s)." % TRAFFIC,
    [
        panel("Ports up", ['rackforge_rdma_port_up{node=~"$node"}'], "table", w=12),
        panel("Port rate", ['rackforge_rdma_port_rate_gbps{node=~"$node"}'], "table", unit="Gbits", w=12),
        panel(
            "PFC pause frames per priority",
            ['rackforge_rdma_port_traffic{node=~"$node",counter=~"(rx|tx)_prio[0-7]_pause"}'],
            legend="{{node}} {{netdev}} {{counter}}",
            description="ethtool -S rx/tx_prio<N>_pause of the PFC-enabled priorities; " + TRAFFIC + ".",
            w=12,
        ),
        panel(
            "Congestion notifications (CNP) and ECN marks",
            ['rackforge_rdma_port_traffic{node=~"$node",counter=~"np_cnp_sent|rp_cnp_handled|np_ecn_marked_roce_packets"}'],
            legend="{{node}} {{netdev}} {{counter}}",
            description="The port's hw_counters; " + TRAFFIC + ".",
            w=12,
        ),
        panel(
            "Link errors",
            [
                'rackforge_rdma_port_counter{node=~"$node",counter=~"symbol_error|port_rcv_errors|rx_crc_errors_phy|local_ack_timeout_err|out_of_buffer"}'
            ],
            legend="{{node}} {{netdev}} {{counter}}",
            w=12,
        ),
        panel(
            "Link flaps",
            ['rackforge_rdma_port_counter{node=~"$node",counter=~"link_down_events_phy|link_downed"}'],
            legend="{{node}} {{netdev}} {{counter}}",
            w=12,
        ),
        panel(
            "Pause storms (NIC watchdog)",
            ['rackforge_rdma_port_counter{node=~"$node",counter="tx_pause_storm_error_events"}'],
            legend="{{node}} {{netdev}}",
            w=12,
        ),
        panel("Ports with findings", ['1 - rackforge_rdma_port_healthy{node=~"$node"}'], legend="{{node}} {{netdev}}", w=12),
    ],
    per_node=True,
    node_metric="rackforge_rdma_port_up",
)

DASHBOARDS = {"rackforge-fleet.json": FLEET, "rackforge-node-gpu.json": NODE_GPU, "rackforge-fabric.json": FABRIC}


def main():
    check = "--check" in sys.argv
    stale = []
    OUT.mkdir(parents=True, exist_ok=True)
    for name, doc in DASHBOARDS.items():
        text = json.dumps(doc, indent=2, sort_keys=False) + "\n"
        path = OUT / name
        if not path.exists() or path.read_text() != text:
            stale.append(name)
            if not check:
                path.write_text(text)
    if check and stale:
        sys.exit("dashboards out of date (run scripts/dashboards.py): %s" % ", ".join(stale))
    print("dashboards: %d %s" % (len(DASHBOARDS), "current" if not stale else ("stale" if check else "written")))


if __name__ == "__main__":
    main()
