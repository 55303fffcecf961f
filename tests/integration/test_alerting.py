"""Alerts end to end in the lab: a fault on a node -> its textfile gauge -> node_exporter -> both
monitoring hosts' Prometheus (the rules, with the lab's short `for:`) -> the two clustered
Alertmanagers -> the receiver, lab/webhook_receiver.py on the control plane, which records every
notification it gets. Then the resolved notification after the fault is cleared; a stopped
node_exporter; the node-down inhibition; one monitoring host down; configs promtool and amtool
refuse never installed.

Timing, measured from the moment the fault became visible on the node (the textfile's mtime; for
a stopped node_exporter, the moment before the stop) to the webhook's receipt, against the issue's
bound: the rule's `for:` plus two scrape intervals. Where the time goes, with the lab's values
(lab/inventory_vars/rackforge.yml, read here: scrape 2 s, evaluation 500 ms, group_wait 0, `for:`
6 s): up to one scrape interval until a scrape carries the change, up to one evaluation interval
until a rule sees it (pending), the `for:` (firing, sent to both Alertmanagers at once), no
group_wait, then Alertmanager's dispatch and the HTTP hop: 2 + 0.5 + 6 + 0 = 8.5 s and the hops,
against 6 + 2 x 2 = 10 s. (Prometheus and Alertmanager add the evaluation interval and group_wait
by design; a production route's 30 s group_wait adds its 30 s.) Every latency measured is
written to reports/alert-latency.json."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
import yaml
from conftest import ROOT, lab, on_node, playbook
from monitoring_helper import (
    ALERTMANAGER_PORT,
    PROMETHEUS_PORT,
    alertmanager,
    file_sha,
    http_json,
    monitoring_hosts,
    ready,
    wait_for,
)


def seconds(duration):
    """A Prometheus duration of one unit (the lab's: 500ms, 2s, 1h) in seconds."""
    match = re.fullmatch(r"(\d+)(ms|s|m|h)", duration)
    assert match, duration
    return int(match.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[match.group(2)]


LAB_VARS = yaml.safe_load((ROOT / "lab" / "inventory_vars" / "rackforge.yml").read_text())
SCRAPE = seconds(LAB_VARS["monitoring_server_scrape_interval"])
EVALUATION = seconds(LAB_VARS["monitoring_server_evaluation_interval"])
GROUP_WAIT = seconds(LAB_VARS["monitoring_server_route"]["group_wait"])
GROUP_INTERVAL = seconds(LAB_VARS["monitoring_server_route"]["group_interval"])
FOR = max(seconds(d) for d in LAB_VARS["monitoring_server_alert_for"].values())
FIRING_BOUND = FOR + 2 * SCRAPE  # the bound
# resolved: the scrape that shows the node healthy, the evaluation that ends the alert, and the
# group's next flush
RESOLVED_BOUND = 2 * SCRAPE + EVALUATION + GROUP_INTERVAL + 5
# with a peer, an Alertmanager that is not first in the cluster's order waits its position times
# --cluster.peer-timeout (15 s) before it notifies, so the first one's notification can be
# deduplicated; with the first one gone, the survivor's notification comes that much later
PEER_TIMEOUT = 15
TEXTFILE = "/var/lib/prometheus/node-exporter/rackforge.prom"
LATENCIES = []
RECEIVER = "/usr/local/lib/rackforge-lab/webhook_receiver.py"
RECORD = "/var/lib/rackforge-lab-webhook/alerts.jsonl"
UNIT = "rackforge-lab-webhook"


@pytest.fixture(scope="module")
def webhook(converged):
    """notifications(since=0) -> the notifications the lab's receiver got, in order, with the
    time each arrived; the receiver runs on lab-cp1 for this module."""
    on_node("lab-cp1", "mkdir", "-p", "/usr/local/lib/rackforge-lab")
    subprocess.run(["podman", "cp", str(ROOT / "lab" / "webhook_receiver.py"), "rackforge-lab-lab-cp1:" + RECEIVER], check=True)
    on_node("lab-cp1", "systemctl", "stop", UNIT, check=False)
    on_node("lab-cp1", "rm", "-f", RECORD)
    on_node(
        "lab-cp1",
        "systemd-run",
        "--unit",
        UNIT,
        "--collect",
        "python3",
        RECEIVER,
        "--listen",
        "10.89.77.10",
        "--port",
        "9095",
        "--out",
        RECORD,
    )

    def notifications(since=0):
        out = on_node("lab-cp1", "cat", RECORD, check=False).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()][since:]

    # a fresh, healthy verdict everywhere before the first fault
    fresh = playbook("playbooks/health_check.yml")
    assert fresh.returncode == 0 and "UNHEALTHY" not in fresh.stdout, fresh.stdout[-2000:]
    try:
        yield notifications
    finally:
        on_node("lab-cp1", "systemctl", "stop", UNIT, check=False)
        (ROOT / "reports").mkdir(exist_ok=True)
        (ROOT / "reports" / "alert-latency.json").write_text(json.dumps(LATENCIES, indent=1) + "\n")


def changed_at(node):
    """When the node's health textfile was last written (the fault visible to node_exporter)."""
    return float(on_node(node, "stat", "-c", "%.9Y", TEXTFILE).stdout)


def find(notes, alertname, node, status):
    """The first notification carrying that alert for that node in that status: (note, alert)."""
    for note in notes:
        for alert in note["body"]["alerts"]:
            labels = alert["labels"]
            if labels.get("alertname") == alertname and labels.get("node") == node and alert["status"] == status:
                return note, alert
    return None


def arrival(webhook, since, alertname, node, status, start, bound):
    def arrived():
        """the webhook notification"""
        return find(webhook(since), alertname, node, status)

    note, alert = wait_for(arrived, timeout=bound + 30)
    took = note["received_at"] - start
    LATENCIES.append({"alert": alertname, "status": status, "node": node, "seconds": round(took, 2), "bound": bound})
    assert took <= bound, "%s %s for %s arrived %.1fs after the change, bound %ss" % (alertname, status, node, took, bound)
    return note, alert


def test_an_nvlink_fault_reaches_the_receiver_and_its_clearing_too(webhook, gpu_nodes, faulted):
    victim = gpu_nodes[0]
    since = len(webhook())
    faulted(victim, "nvlink_inactive", "gpu=2", "links=7")
    res = playbook("playbooks/health_check.yml", "--limit", victim)
    assert res.returncode == 0, res.stdout[-2000:]
    start = changed_at(victim)
    note, alert = arrival(webhook, since, "RackforgeNVLinkDown", victim, "firing", start, FIRING_BOUND)
    assert note["body"]["receiver"] == "lab-webhook" and alert["labels"]["gpu"] == "2"
    assert alert["labels"]["severity"] == "critical" and "NVLinks active" in alert["annotations"]["summary"]
    arrival(webhook, since, "RackforgeNodeUnhealthy", victim, "firing", start, FIRING_BOUND)
    # only the victim alerted
    assert {a["labels"].get("node") for n in webhook(since) for a in n["body"]["alerts"]} == {victim}

    lab("fault", victim, "clear")
    since = len(webhook())
    assert playbook("playbooks/health_check.yml", "--limit", victim).returncode == 0
    start = changed_at(victim)
    arrival(webhook, since, "RackforgeNVLinkDown", victim, "resolved", start, RESOLVED_BOUND)
    arrival(webhook, since, "RackforgeNodeUnhealthy", victim, "resolved", start, RESOLVED_BOUND)


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


def test_a_stopped_node_exporter_alerts_and_holds_back_the_nodes_other_alerts(webhook, gpu_nodes):
    victim = gpu_nodes[-1]
    ip = next(iter(monitoring_hosts().values()))
    since = len(webhook())
    # the inhibition's probe: another alert of the same node, sent to Alertmanager while the node
    # is down; it ends (endsAt) before the node comes back, so it never outlives the test
    gpu_alert = {"labels": {"alertname": "RackforgeGpuXidError", "node": victim, "gpu": "0", "severity": "warning"}}
    start = time.time()
    on_node(victim, "systemctl", "stop", "prometheus-node-exporter")
    try:
        _note, alert = arrival(webhook, since, "RackforgeNodeExporterDown", victim, "firing", start, FIRING_BOUND)
        assert alert["labels"]["job"] == "rackforge-node"
        alertmanager(ip, "alerts", [dict(gpu_alert, endsAt=rfc3339(time.time() + 60))])

        def suppressed():
            """the GPU alert inhibited by the node-down alert"""
            found = [a for a in alertmanager(ip, "alerts") if a["labels"]["alertname"] == "RackforgeGpuXidError"]
            return found and found[0]["status"]["state"] == "suppressed" and found[0]["status"]["inhibitedBy"] and found

        wait_for(suppressed, timeout=20)
        time.sleep(GROUP_WAIT + GROUP_INTERVAL + 2)
        assert find(webhook(since), "RackforgeGpuXidError", victim, "firing") is None
    finally:
        # resolved now, while still inhibited: never notified as firing, so nothing is sent for it
        alertmanager(ip, "alerts", [dict(gpu_alert, endsAt=rfc3339(time.time() - 1))])
        on_node(victim, "systemctl", "start", "prometheus-node-exporter")
    since_back = len(webhook())
    start = time.time()
    arrival(webhook, since_back, "RackforgeNodeExporterDown", victim, "resolved", start, RESOLVED_BOUND)
    assert not [a for a in alertmanager(ip, "alerts") if a["labels"]["alertname"] == "RackforgeGpuXidError"]
    time.sleep(GROUP_WAIT + GROUP_INTERVAL + 2)  # the node's group flushed once more: still nothing for the probe
    assert not [n for n in webhook(since) for a in n["body"]["alerts"] if a["labels"]["alertname"] == "RackforgeGpuXidError"]


def test_one_monitoring_host_down_loses_no_alert_and_stops_no_node(webhook, gpu_nodes, faulted):
    hosts = monitoring_hosts()
    down, (up_ip,) = "lab-mon1", [ip for name, ip in hosts.items() if name != "lab-mon1"]
    # the whole machine down (its container stopped: no SSH, no Prometheus, no Alertmanager)
    victim = gpu_nodes[1]
    subprocess.run(["podman", "stop", "-t", "5", "rackforge-lab-" + down], check=True, capture_output=True)
    try:
        # the nodes' runs carry on: their targets reach the other host, the missed one is named
        res = playbook("playbooks/monitoring.yml", "--limit", "gpu_nodes")
        assert res.returncode == 0, res.stdout[-3000:]
        assert all(res.recap[n]["failed"] == 0 and res.recap[n]["unreachable"] == 0 for n in gpu_nodes), res.recap
        assert "scrape targets were not written on lab-mon1" in " ".join(res.stdout.split())
        since = len(webhook())
        faulted(victim, "nvlink_inactive", "gpu=1", "links=7")
        assert playbook("playbooks/health_check.yml", "--limit", victim).returncode == 0
        start = time.time()
        arrival(webhook, since, "RackforgeNVLinkDown", victim, "firing", start, FIRING_BOUND + PEER_TIMEOUT)
        # the survivor sees its peer's Prometheus and Alertmanager down (RackforgeMonitoringDown
        # follows after the rule's 5 minutes, which the lab does not shorten)

        def peer_down():
            """the survivor's scrape of lab-mon1's Prometheus and Alertmanager failing"""
            targets = http_json("http://%s:9090/api/v1/targets" % up_ip)["data"]["activeTargets"]
            return sorted(
                t["labels"]["job"]
                for t in targets
                if t["labels"]["job"] in ("rackforge-prometheus", "rackforge-alertmanager")
                and t["labels"]["instance"].startswith(hosts[down] + ":")
                and t["health"] == "down"
            ) == ["rackforge-alertmanager", "rackforge-prometheus"]

        wait_for(peer_down, timeout=30)
        lab("fault", victim, "clear")
        since = len(webhook())
        assert playbook("playbooks/health_check.yml", "--limit", victim).returncode == 0
        arrival(webhook, since, "RackforgeNVLinkDown", victim, "resolved", time.time(), RESOLVED_BOUND + PEER_TIMEOUT)
    finally:
        lab("reboot", down)  # a stopped machine is switched on again
        # whatever happened above, the victim leaves healthy (later suites expect a healthy lab)
        lab("fault", victim, "clear")
        playbook("playbooks/health_check.yml", "--limit", victim)
    ip = hosts[down]
    wait_for(lambda: ready(ip, PROMETHEUS_PORT) and ready(ip, ALERTMANAGER_PORT), timeout=90)


def test_a_config_promtool_refuses_is_never_installed_and_the_running_one_keeps_working(converged):
    host, ip = "lab-mon1", monitoring_hosts()["lab-mon1"]
    before = file_sha(host, "/etc/prometheus/prometheus.yml")
    bad = {
        "monitoring_server_extra_scrape_configs": [
            {
                "job_name": "operator-extra",
                "static_configs": [{"targets": ["10.89.77.11:9100"]}],
                # an unterminated regular expression: only Prometheus's own parser knows it is wrong
                "relabel_configs": [{"source_labels": ["__address__"], "regex": "([", "target_label": "x"}],
            }
        ]
    }
    res = playbook("playbooks/monitoring.yml", "--limit", host, "-e", json.dumps(bad))
    assert res.returncode != 0
    assert "promtool" in res.stdout and "missing closing ]" in res.stdout, res.stdout[-3000:]
    assert file_sha(host, "/etc/prometheus/prometheus.yml") == before
    assert ready(ip, PROMETHEUS_PORT)
    assert on_node(host, "systemctl", "is-active", "prometheus").stdout.strip() == "active"


def test_a_config_amtool_refuses_is_never_installed_and_the_running_one_keeps_working(converged):
    host, ip = "lab-mon1", monitoring_hosts()["lab-mon1"]
    before = file_sha(host, "/etc/prometheus/alertmanager.yml")
    # an http URL by rackforge's check, but with a port Alertmanager's URL parser refuses
    url = "http://10.89.77.10:notaport/alerts"
    bad = {"monitoring_server_receivers": [{"name": "ops", "type": "webhook", "url": url}]}
    res = playbook("playbooks/monitoring.yml", "--limit", host, "-e", json.dumps(bad))
    assert res.returncode != 0
    # amtool's reason is shown, the URL (a receiver's URLs carry tokens) masked
    assert "amtool check-config" in res.stdout and 'parse "********": invalid port' in res.stdout, res.stdout[-3000:]
    assert url not in res.stdout
    assert file_sha(host, "/etc/prometheus/alertmanager.yml") == before
    assert ready(ip, ALERTMANAGER_PORT)


def test_a_changed_receiver_url_is_masked_in_the_diff_and_the_invocation(converged):
    """alertmanager.yml goes to rackforge_units as secret_content (a no_log parameter): at -vvv,
    where the default callback prints the module's invocation, neither the new URL nor the old one
    appears, and --diff says only that the file changes, while the other files' diffs stay whole."""
    host = "lab-mon1"
    before = file_sha(host, "/etc/prometheus/alertmanager.yml")
    url = "http://10.89.77.10:9095/hooks/T0KEN-rackforge-test"
    changed = {
        "monitoring_server_receivers": [{"name": "lab-webhook", "type": "webhook", "url": url}],
        "monitoring_server_external_labels": {"rackforge_mask_test": "1"},  # a readable diff beside it
    }
    res = playbook("playbooks/monitoring.yml", "--limit", host, "--check", "--diff", "-vvv", "-e", json.dumps(changed))
    assert res.returncode == 0, res.stdout[-3000:]
    assert '"module_args"' in res.stdout or "module_args" in res.stdout  # the invocation is printed at -vvv
    assert "T0KEN" not in res.stdout and "T0KEN" not in res.stderr
    assert "9095/alerts" not in res.stdout  # the old URL, in the file as it is, neither
    assert "+++ after: /etc/prometheus/alertmanager.yml" in res.stdout and "+(secret content, not shown), changed" in res.stdout
    assert "+    rackforge_mask_test: '1'" in res.stdout.replace('"', "'"), res.stdout[-3000:]  # prometheus.yml's diff, whole
    assert "write /etc/prometheus/alertmanager.yml (content)" in res.stdout
    assert file_sha(host, "/etc/prometheus/alertmanager.yml") == before
