"""The node's health verdict as node_exporter textfile metrics (pure, no I/O): textfile(health) ->
the text of <textfile_dir>/rackforge.prom. health is the rackforge_health verdict (healthy,
findings, gpus, fabric, ports); the names, labels and HELP texts are the contract the alert rules
(roles/monitoring) and the dashboards read."""

from __future__ import annotations

HEADER = "# rackforge: written by the health check (health_checks role); every run replaces it\n"


def _labels(pairs):
    return ",".join('%s="%s"' % (k, str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")) for k, v in pairs)


def _gauge(lines, name, help_text, samples):
    lines.append("# HELP %s %s" % (name, help_text))
    lines.append("# TYPE %s gauge" % name)
    for labels, value in samples:
        lines.append("%s{%s} %s" % (name, _labels(labels), value) if labels else "%s %s" % (name, value))


def _port(p):
    return [("ca", p["ca"]), ("port", p["port"]), ("netdev", p.get("netdev"))]


def textfile(health):
    gpus, fabric, ports = health.get("gpus") or [], health.get("fabric") or [], health.get("ports") or []
    lines = []
    healthy = int(bool(health["healthy"]))
    _gauge(lines, "rackforge_node_healthy", "1 when the last rackforge health check found nothing wrong.", [([], healthy)])
    _gauge(lines, "rackforge_health_findings", "Number of findings of the last rackforge health check.", [([], len(health["findings"]))])
    _gauge(
        lines,
        "rackforge_nvlink_active_links",
        "Active NVLinks per GPU.",
        [([("gpu", g["index"]), ("uuid", g["uuid"])], g["active_links"]) for g in gpus],
    )
    _gauge(
        lines,
        "rackforge_nvlink_expected_links",
        "NVLinks each GPU is expected to have active.",
        [([("gpu", g["index"]), ("uuid", g["uuid"])], g["expected_links"]) for g in gpus],
    )
    _gauge(
        lines,
        "rackforge_fabric_completed",
        "1 when the GPU's NVSwitch fabric state is Completed/Success.",
        [([("gpu", i)], int(bool(f["completed"]))) for i, f in enumerate(fabric)],
    )
    up = [(_port(p), int(p["state"] == "Active" and p["physical_state"] == "LinkUp")) for p in ports]
    _gauge(lines, "rackforge_rdma_port_up", "1 when the RDMA port is Active/LinkUp.", up)
    _gauge(lines, "rackforge_rdma_port_rate_gbps", "RDMA port rate in Gb/s as ibstat reports it.", [(_port(p), p["rate"]) for p in ports])
    _gauge(lines, "rackforge_rdma_port_healthy", "1 when the port has no findings.", [(_port(p), int(bool(p["healthy"]))) for p in ports])
    _gauge(
        lines,
        "rackforge_rdma_port_counter",
        "RDMA port error counters (sysfs, ethtool -S) at the last health check.",
        [([*_port(p), ("counter", k)], v) for p in ports for k, v in sorted((p.get("counters") or {}).items())],
    )
    _gauge(
        lines,
        "rackforge_rdma_port_traffic",
        "RDMA port traffic counters at the last health check: PFC pause frames per priority (ethtool -S "
        "rx/tx_prio<N>_pause) and RoCE congestion notifications (hw_counters np_cnp_sent, rp_cnp_handled, "
        "np_ecn_marked_roce_packets); reported, never judged.",
        [([*_port(p), ("counter", k)], v) for p in ports for k, v in sorted((p.get("traffic") or {}).items())],
    )
    share = health.get("share")
    # only where a model share is configured (model_storage); how long it took is left out: the
    # file must not change on a re-run that finds the node as it was (node_exporter's mountstats
    # collector has the NFS latencies)
    if share:
        where = [("path", share["path"])]
        _gauge(
            lines,
            "rackforge_model_share_up",
            "1 when the model share is mounted and answered a stat within its timeout (no model_share finding).",
            [(where, int(bool(share["up"])))],
        )
    cache = health.get("cache")
    # only where a local cache is configured; its free space is left out for the same reason
    # (node_exporter's filesystem collector has it)
    if cache:
        _gauge(
            lines,
            "rackforge_model_cache_up",
            "1 when the local model cache's array is active with every member, mounted and above its free-space floor.",
            [([("path", cache["path"])], int(bool(cache["up"])))],
        )
    return HEADER + "\n".join(lines) + "\n"
