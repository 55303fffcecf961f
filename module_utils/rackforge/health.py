"""Pure health evaluation for NVLink/NVSwitch and RDMA ports (no I/O).

Inputs are the parsed outputs of module_utils.rackforge.nvidia_smi / .rdma; outputs are findings
{"check", "component", "expected", "observed", "message"} that name the GPU/link or NIC/port.
"""

from __future__ import annotations

# Active NVLinks per GPU and per-link speed (GB/s) as nvidia-smi nvlink -s prints them.
NVLINK_MODELS = {
    "V100-SXM2": (6, 25.781),
    "A100-SXM4": (12, 25.0),
    "H100 80GB HBM3": (18, 26.562),
    "H100 SXM": (18, 26.562),
    "H200": (18, 26.562),
    "B200": (18, 53.125),
    "GB200": (18, 53.125),
}

FABRIC_OK = ("Completed", "Success")
FABRIC_OK_WORDS = "/".join(FABRIC_OK)  # as findings and messages print it


def fabric_completed(entry):
    """True when one GPU's NVSwitch fabric (a parse_fabric entry) is trained: Completed/Success."""
    return (entry.get("state"), entry.get("status")) == FABRIC_OK


def fabric_summary(fabric):
    """parse_fabric's entries each with `completed`, and whether all of them are (none: False)."""
    entries = [dict(entry, completed=fabric_completed(entry)) for entry in fabric]
    return entries, bool(entries) and all(e["completed"] for e in entries)


def model_expectation(name):
    """(links, speed) for a GPU product name, or None when the model has no known NVLink layout."""
    for key, value in NVLINK_MODELS.items():
        if key in name:
            return value
    return None


def finding(check, component, expected, observed, message):
    """One finding: what was checked, on which component, what was expected and seen, and why it matters."""
    return {"check": check, "component": component, "expected": expected, "observed": observed, "message": message}


def driver_finding(error):
    """The finding for a node whose NVIDIA driver does not answer (nvidia-smi's own message, or
    that nvidia-smi is not installed)."""
    observed = error or "nvidia-smi not installed"
    return finding("driver", "nvidia driver", "loaded", observed, "NVIDIA driver not usable: %s" % observed)


def not_run(check, component, reason, evidence=None):
    """A check that could not run (tool missing, non-zero exit, output that does not parse) is a
    finding with its evidence, never a silent pass: check "<check>_not_run", not_run True."""
    found = finding(
        check + "_not_run", component, "the check runs", reason, "%s: the %s check could not run: %s" % (component, check, reason)
    )
    found.update(not_run=True, evidence=evidence or {})
    return found


def evaluate_nvlink(status, expected_links, expected_speed, errors=None, baseline=None, p2p=None):
    """Findings for `nvidia-smi nvlink -s` (+ optional -e counters against a baseline and the
    NVLink P2P matrix of `topo -p2p n`, parse_topo_p2p: every pair must be OK on NVSwitch systems).

    expected_links: active links each GPU must have (0 = no NVLink expected: nothing to check).
    baseline: {uuid: {link: {"replay", "recovery", "crc"}}} from an earlier healthy run.
    """
    findings = []
    if not expected_links:
        return findings
    for gpu in status:
        comp = "GPU %d (%s)" % (gpu["index"], gpu["uuid"])
        if gpu["all_inactive"] and not any(gpu["links"].values()):
            findings.append(
                finding(
                    "nvlink_all_inactive", comp, expected_links, 0, "%s: all NVLinks inactive, expected %d active" % (comp, expected_links)
                )
            )
            continue
        if not gpu["links"] and gpu.get("notice"):
            # MIG mode or a device without NVLink: nvidia-smi prints why instead of the links
            findings.append(
                finding(
                    "nvlink_unavailable",
                    comp,
                    expected_links,
                    gpu["notice"],
                    "%s: no NVLink state (%s), expected %d active links" % (comp, gpu["notice"], expected_links),
                )
            )
            continue
        inactive = sorted(link for link, speed in gpu["links"].items() if speed is None)
        active = len(gpu["links"]) - len(inactive)
        if active < expected_links:
            findings.append(
                finding(
                    "nvlink_inactive",
                    comp,
                    expected_links,
                    active,
                    "%s: NVLink(s) %s inactive: %d of %d expected links active"
                    % (comp, ",".join(str(x) for x in inactive), active, expected_links),
                )
            )
        for link, speed in sorted(gpu["links"].items()):
            if speed is not None and expected_speed and abs(speed - expected_speed) > 0.01:
                findings.append(
                    finding(
                        "nvlink_speed",
                        "%s link %d" % (comp, link),
                        expected_speed,
                        speed,
                        "%s link %d runs at %s GB/s, expected %s GB/s" % (comp, link, speed, expected_speed),
                    )
                )
    baseline = baseline or {}
    for gpu in errors or []:
        comp = "GPU %d (%s)" % (gpu["index"], gpu["uuid"])
        base = baseline.get(gpu["uuid"], {})
        for link, counters in sorted(gpu["links"].items()):
            before = base.get(str(link), base.get(link, {}))
            for name, value in sorted(counters.items()):
                if value > int(before.get(name, 0)):
                    findings.append(
                        finding(
                            "nvlink_errors",
                            "%s link %d" % (comp, link),
                            before.get(name, 0),
                            value,
                            "%s link %d: %s errors rose to %d (baseline %d)" % (comp, link, name, value, int(before.get(name, 0))),
                        )
                    )
    for row, cols in sorted(((p2p or {}).get("status") or {}).items()):
        for col, value in sorted(cols.items()):
            if value != "OK":
                findings.append(
                    finding(
                        "nvlink_p2p",
                        "%s-%s" % (row, col),
                        "OK",
                        value,
                        "topo -p2p n: NVLink P2P from %s to %s is %s, expected OK" % (row, col, value),
                    )
                )
    return findings


def evaluate_fabric(fabric, fabricmanager_active):
    """Findings for NVSwitch systems: every GPU's fabric Completed/Success and fabric manager active."""
    findings = []
    if not fabricmanager_active:
        findings.append(
            finding(
                "fabricmanager",
                "nvidia-fabricmanager",
                "active",
                "inactive",
                "nvidia-fabricmanager.service is not active (NVSwitch fabric cannot be trained)",
            )
        )
    for i, entry in enumerate(fabric):
        unhealthy = entry.get("health_summary") not in (None, "N/A", "Healthy")
        if not fabric_completed(entry) or unhealthy:
            observed = "%s/%s%s" % (entry["state"], entry["status"], ", health %s" % entry["health_summary"] if unhealthy else "")
            findings.append(
                finding(
                    "fabric",
                    "GPU %d fabric" % i,
                    FABRIC_OK_WORDS,
                    observed,
                    "GPU %d: NVSwitch fabric is %s, expected %s" % (i, observed, FABRIC_OK_WORDS),
                )
            )
    if not fabric:
        findings.append(
            finding(
                "fabric",
                "fabric",
                FABRIC_OK_WORDS,
                "no Fabric section",
                "nvidia-smi -q printed no Fabric section on an NVSwitch system",
            )
        )
    return findings


def evaluate_rdma(ibstat, devinfo, netdev_of, expected, pause_prios=None, mtus=None, gids=None, counters=None, baseline=None):
    """Findings for the RDMA ports rackforge expects.

    ibstat / devinfo: parse_ibstat / parse_ibv_devinfo results; netdev_of: {ca: netdev};
    expected: {"count", "link_layer", "rate", "exclude_netdevs": [...], "lossless_priority"};
    pause_prios: {netdev: [prio, ...]} (priorities whose rx_prio<N>_pause counter exists);
    mtus: {netdev: int}; gids: parse_show_gids rows; counters / baseline: {ca: {name: int}}.
    Returns (findings, ports) where ports summarise each checked port.
    """
    findings = []
    ports = []
    exclude = set(expected.get("exclude_netdevs") or [])
    link_layer = expected.get("link_layer", "Ethernet")
    for ca in sorted(ibstat):
        for port_no, port in sorted(ibstat[ca]["ports"].items()):
            netdev = netdev_of.get(ca)
            if port["link_layer"] != link_layer or netdev in exclude:
                continue
            comp = "%s/%d (%s)" % (ca, port_no, netdev or "no netdev")
            info = devinfo.get(ca, {}).get("ports", {}).get(port_no, {})
            summary = {
                "ca": ca,
                "port": port_no,
                "netdev": netdev,
                "state": port["state"],
                "physical_state": port["physical_state"],
                "rate": port["rate"],
                "active_mtu": info.get("active_mtu"),
                "pfc_priorities": None,
                "counters": {},
                "healthy": True,
            }
            ports.append(summary)
            before = len(findings)
            if port["state"] != "Active" or port["physical_state"] != "LinkUp":
                findings.append(
                    finding(
                        "rdma_port_state",
                        comp,
                        "Active/LinkUp",
                        "%s/%s" % (port["state"], port["physical_state"]),
                        "%s: port is %s/%s, expected Active/LinkUp" % (comp, port["state"], port["physical_state"]),
                    )
                )
            elif expected.get("rate") and port["rate"] != expected["rate"]:
                findings.append(
                    finding(
                        "rdma_rate",
                        comp,
                        expected["rate"],
                        port["rate"],
                        "%s: rate %d Gb/s, expected %d Gb/s" % (comp, port["rate"], expected["rate"]),
                    )
                )
            mtu = (mtus or {}).get(netdev)
            if mtu and mtu >= 4200 and info.get("active_mtu") and info["active_mtu"] < 4096:
                findings.append(
                    finding(
                        "roce_mtu",
                        comp,
                        4096,
                        info["active_mtu"],
                        "%s: RoCE active MTU %d with netdev MTU %d, expected 4096" % (comp, info["active_mtu"], mtu),
                    )
                )
            if gids is not None and port["state"] == "Active":
                v2 = [g for g in gids if g["device"] == ca and g["port"] == port_no and g["version"] == "v2" and g["ipv4"]]
                if not v2:
                    findings.append(
                        finding(
                            "roce_gid",
                            comp,
                            "RoCE v2 GID with IPv4",
                            "none",
                            "%s: no RoCE v2 GID with an IPv4 address (RDMA-CM cannot use this port)" % comp,
                        )
                    )
            prio = expected.get("lossless_priority")
            if pause_prios is not None and prio is not None and netdev in pause_prios:
                summary["pfc_priorities"] = pause_prios[netdev]
                if prio not in pause_prios[netdev]:
                    findings.append(
                        finding(
                            "pfc",
                            comp,
                            "PFC on priority %d" % prio,
                            pause_prios[netdev] or "off",
                            "%s: PFC not enabled on lossless priority %d (no rx_prio%d_pause counter)" % (comp, prio, prio),
                        )
                    )
            port_counters = (counters or {}).get(ca) or {}
            summary["counters"] = dict(port_counters)
            for name, value in sorted(port_counters.items()):
                base = int(((baseline or {}).get(ca) or {}).get(name, 0))
                if value > base:
                    check = "pause_storm" if "pause_storm" in name else "rdma_errors"
                    findings.append(finding(check, comp, base, value, "%s: %s rose to %d (baseline %d)" % (comp, name, value, base)))
            summary["healthy"] = len(findings) == before
    count = expected.get("count")
    if count is not None and len(ports) < count:
        findings.append(
            finding(
                "rdma_port_count", "RDMA NICs", count, len(ports), "expected %d %s RDMA ports, found %d" % (count, link_layer, len(ports))
            )
        )
    return findings, ports
