"""The monitoring hosts' real Prometheus (Debian's package, installed and configured by
roles/monitoring_server on lab-mon1 and lab-mon2) scrapes every lab node's node_exporter through
the file_sd targets the nodes' monitoring role wrote there, loads the alert rules, and the
rackforge health gauge follows the nodes' real health."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from conftest import lab, on_node, playbook
from monitoring_helper import (
    ALERTMANAGER_PORT,
    PROMETHEUS_PORT,
    alertmanager,
    monitoring_hosts,
    prometheus,
    ready,
    wait_for,
)


@pytest.fixture(scope="module")
def proms(converged):
    # earlier suites leave faulted verdicts in the textfiles: start from a fresh, healthy check
    fresh = playbook("playbooks/health_check.yml")
    assert fresh.returncode == 0 and "UNHEALTHY" not in fresh.stdout, fresh.stdout[-2000:]
    hosts = monitoring_hosts()
    assert len(hosts) == 2, hosts
    return {name: prometheus(ip) for name, ip in hosts.items()}


def healthy_gauge(api):
    return {r["metric"]["node"]: r["value"][1] for r in api("query", query="rackforge_node_healthy")["result"]}


def test_each_monitoring_host_scrapes_every_node_on_its_management_address(proms, gpu_nodes):
    for name, api in proms.items():

        def all_up(api=api):
            """every rackforge-node target up"""
            targets = [t for t in api("targets")["activeTargets"] if t["labels"]["job"] == "rackforge-node"]
            return len(targets) == len(gpu_nodes) and all(t["health"] == "up" for t in targets) and targets

        targets = wait_for(all_up)
        assert sorted(t["labels"]["node"] for t in targets) == gpu_nodes, name
        # the lab's management network, never 127.0.0.1 or the SSH port forward
        assert all(t["scrapeUrl"].startswith("http://10.89.77.") for t in targets)
        # and each watches both monitoring hosts' Prometheus and Alertmanager
        for job in ("rackforge-prometheus", "rackforge-alertmanager"):
            own = [t for t in api("targets")["activeTargets"] if t["labels"]["job"] == job]
            assert len(own) == 2 and all(t["health"] == "up" for t in own), (name, job, own)


def test_alert_rules_are_loaded_with_the_operators_durations(proms):
    for api in proms.values():
        rules = {r["name"]: r for g in wait_for(lambda api=api: api("rules")["groups"]) for r in g["rules"]}
        assert {"RackforgeNodeUnhealthy", "RackforgeNVLinkDown", "RackforgeRdmaPortDown", "RackforgePfcPauseStorm"} <= set(rules)
        # monitoring_server_alert_for (lab/inventory_vars): 6 s instead of the file's 5 minutes
        assert rules["RackforgeNodeUnhealthy"]["duration"] == 6
        assert rules["RackforgeFabricManagerDown"]["duration"] == 120


def test_health_gauge_one_series_per_node_with_the_right_value(proms, gpu_nodes, faulted):
    api = proms["lab-mon1"]
    # the fixture's fresh health check, once scraped (earlier suites left faulted verdicts)

    def all_healthy():
        """every node's gauge at 1"""
        return healthy_gauge(api) == dict.fromkeys(gpu_nodes, "1")

    wait_for(all_healthy)
    victim = gpu_nodes[0]
    faulted(victim, "nvlink_inactive", "gpu=2", "links=7")
    res = playbook("playbooks/health_check.yml", "--limit", victim)
    assert res.returncode == 0, res.stdout[-2000:]  # the scheduled check is read-only and warns

    for other in proms.values():

        def victim_unhealthy(other=other):
            """the victim's gauge at 0"""
            return healthy_gauge(other).get(victim) == "0"

        wait_for(victim_unhealthy)
    assert healthy_gauge(api) == dict(dict.fromkeys(gpu_nodes, "1"), **{victim: "0"})
    links = api("query", query='rackforge_nvlink_active_links{node="%s",gpu="2"}' % victim)["result"]
    assert [r["value"][1] for r in links] == ["17"]

    def pending():
        """RackforgeNodeUnhealthy pending or firing for the victim"""
        return api("query", query='ALERTS{alertname="RackforgeNodeUnhealthy"}')["result"]

    assert [a["metric"]["node"] for a in wait_for(pending)] == [victim]
    lab("fault", victim, "clear")
    assert playbook("playbooks/health_check.yml", "--limit", victim).returncode == 0
    wait_for(lambda: healthy_gauge(api).get(victim) == "1")


def test_the_two_alertmanagers_gossip_as_one_cluster(proms):
    """HA as Prometheus documents it: each Alertmanager sees the other as a ready peer (a wrong
    peer address or a blocked 9094 would leave two lone instances that both notify)."""
    hosts = monitoring_hosts()
    for name, ip in hosts.items():

        def both_peers(ip=ip):
            """the cluster status ready with both monitoring hosts as peers"""
            status = alertmanager(ip, "status")["cluster"]
            peers = {p["address"].rsplit(":", 1)[0] for p in status.get("peers") or []}
            return status["status"] == "ready" and peers == set(hosts.values()) and status

        status = wait_for(both_peers)
        assert len(status["peers"]) == 2, (name, status)


def test_the_stack_listens_on_the_management_address_only_and_its_secrets_are_private(proms):
    """Prometheus (9090), Alertmanager (9093) and its gossip (9094) bound to the host's management
    address, never to every interface; alertmanager.yml, which holds the receivers' URLs and the
    mail password, readable by the prometheus user alone."""
    for name, ip in monitoring_hosts().items():
        listening = {line.split()[3] for line in on_node(name, "ss", "-Hltn").stdout.splitlines()}
        for port in (9090, 9093, 9094):
            bound = {a for a in listening if a.rsplit(":", 1)[1] == str(port)}
            assert bound == {"%s:%d" % (ip, port)}, (name, port, listening)
        mode = on_node(name, "stat", "-c", "%a %U %G", "/etc/prometheus/alertmanager.yml").stdout.split()
        assert mode == ["600", "prometheus", "prometheus"], (name, mode)


def metric(ip, port, name):
    """One unlabelled sample from a server's own /metrics (text exposition)."""
    with urllib.request.urlopen("http://%s:%d/metrics" % (ip, port), timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError("%s:%d/metrics has no %s" % (ip, port, name))


def test_a_changed_config_is_reloaded_not_restarted_and_a_changed_command_line_restarts(proms):
    """The config and the rules reload in place (SIGHUP: same process, a new reload timestamp, the
    new config served), so Prometheus keeps its in-memory state and Alertmanager its notification
    log; the ARGS in /etc/default restart the service, as only a restart can apply them."""
    host, ip = "lab-mon1", monitoring_hosts()["lab-mon1"]
    units = {"prometheus": (PROMETHEUS_PORT, "prometheus_config_last_reload_success_timestamp_seconds")}
    units["prometheus-alertmanager"] = (ALERTMANAGER_PORT, "alertmanager_config_last_reload_success_timestamp_seconds")

    def pids():
        return {u: on_node(host, "systemctl", "show", "-p", "MainPID", "--value", u).stdout.strip() for u in units}

    def reloads():
        return {u: metric(ip, port, name) for u, (port, name) in units.items()}

    before_pids, before_reloads = pids(), reloads()
    assert all(p != "0" for p in before_pids.values()), before_pids
    time.sleep(1.1)  # the reload timestamps have a resolution of one second
    route = {"group_by": ["alertname", "node"], "group_wait": "0s", "group_interval": "2s", "repeat_interval": "2h"}
    changed = {"monitoring_server_external_labels": {"rackforge_reload_test": "1"}, "monitoring_server_route": route}
    try:
        res = playbook("playbooks/monitoring.yml", "--limit", host, "-v", "-e", json.dumps(changed))
        assert res.returncode == 0, res.stdout[-3000:]
        assert "reload prometheus.service (changed: /etc/prometheus/prometheus.yml)" in res.stdout, res.stdout[-3000:]
        assert "reload prometheus-alertmanager.service (changed: /etc/prometheus/alertmanager.yml)" in res.stdout
        assert "restart prometheus" not in res.stdout
        assert pids() == before_pids

        def reloaded():
            """a newer successful-reload timestamp from both servers"""
            now = reloads()
            return all(now[u] > before_reloads[u] for u in units)

        wait_for(reloaded, timeout=20)
        config = prometheus(ip)("status/config")["yaml"]
        assert 'rackforge_reload_test: "1"' in config or "rackforge_reload_test: '1'" in config, config[:600]
        assert "repeat_interval: 2h" in alertmanager(ip, "status")["config"]["original"]
        # the command line: a retention change must restart Prometheus (a reload cannot apply it)
        res = playbook(
            "playbooks/monitoring.yml", "--limit", host, "-v", "-e", json.dumps(dict(changed, monitoring_server_retention_time="2d"))
        )
        assert res.returncode == 0, res.stdout[-3000:]
        assert "restart prometheus.service (changed: /etc/default/prometheus)" in res.stdout, res.stdout[-3000:]
        assert (
            pids()["prometheus"] != before_pids["prometheus"]
            and pids()["prometheus-alertmanager"] == before_pids["prometheus-alertmanager"]
        )
        assert "--storage.tsdb.retention.time=2d" in on_node(host, "cat", "/proc/%s/cmdline" % pids()["prometheus"]).stdout.replace(
            "\0", " "
        )
    finally:
        res = playbook("playbooks/monitoring.yml", "--limit", host)
        assert res.returncode == 0, res.stdout[-3000:]
        wait_for(lambda: ready(ip, PROMETHEUS_PORT) and ready(ip, ALERTMANAGER_PORT), timeout=60)
