"""A real Prometheus (Debian's package), started here on loopback, scrapes the lab nodes'
node_exporter through the file_sd targets and loads the alert rules the monitoring role wrote;
the rackforge health gauge follows the nodes' real health."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
from conftest import ROOT, lab, playbook

PROM_DIR = ROOT / "reports" / "prometheus"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def prometheus(converged, tmp_path_factory):
    exe = shutil.which("prometheus")
    assert exe, "prometheus not found: scripts/setup.sh installs Debian's prometheus package"
    # earlier suites leave faulted verdicts in the textfiles: start from a fresh, healthy check
    fresh = playbook("playbooks/health_check.yml")
    assert fresh.returncode == 0 and "UNHEALTHY" not in fresh.stdout, fresh.stdout[-2000:]
    tmp = tmp_path_factory.mktemp("prometheus")
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(PROM_DIR / "rules" / "*.yml")],
        "scrape_configs": [
            {
                "job_name": "rackforge-node",
                "file_sd_configs": [{"files": [str(PROM_DIR / "file_sd" / "node" / "*.json")], "refresh_interval": "1s"}],
            }
        ],
    }
    (tmp / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
    port = free_port()
    proc = subprocess.Popen(
        [
            exe,
            "--config.file=%s" % (tmp / "prometheus.yml"),
            "--storage.tsdb.path=%s" % (tmp / "data"),
            "--web.listen-address=127.0.0.1:%d" % port,
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "prometheus.log").open("w"),
    )
    base = "http://127.0.0.1:%d/api/v1/" % port

    def api(path, **params):
        url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=5) as resp:
            return json.load(resp)["data"]

    try:
        yield api
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def wait_for(fn, timeout=60):
    deadline = time.time() + timeout
    while True:
        try:
            value = fn()
            if value:
                return value
        except OSError:
            pass
        if time.time() > deadline:
            raise AssertionError("timed out waiting for %s" % fn.__doc__)
        time.sleep(1)


def healthy_gauge(api):
    return {r["metric"]["node"]: r["value"][1] for r in api("query", query="rackforge_node_healthy")["result"]}


def test_prometheus_scrapes_every_node_on_its_management_address(prometheus, gpu_nodes):
    def all_up():
        """every file_sd target up"""
        targets = prometheus("targets")["activeTargets"]
        return len(targets) == len(gpu_nodes) and all(t["health"] == "up" for t in targets) and targets

    targets = wait_for(all_up)
    assert sorted(t["labels"]["node"] for t in targets) == gpu_nodes
    # the lab's management network, never 127.0.0.1 or the SSH port forward
    assert all(t["scrapeUrl"].startswith("http://10.89.77.") for t in targets)


def test_alert_rules_are_loaded(prometheus):
    groups = wait_for(lambda: prometheus("rules")["groups"])
    names = {r["name"] for g in groups for r in g["rules"]}
    assert {"RackforgeNodeUnhealthy", "RackforgeNVLinkDown", "RackforgeRdmaPortDown", "RackforgePfcPauseStorm"} <= names


def test_health_gauge_one_series_per_node_with_the_right_value(prometheus, gpu_nodes, faulted):
    assert wait_for(lambda: len(healthy_gauge(prometheus)) == len(gpu_nodes) and healthy_gauge(prometheus)) == dict.fromkeys(gpu_nodes, "1")
    victim = gpu_nodes[0]
    faulted(victim, "nvlink_inactive", "gpu=2", "links=7")
    res = playbook("playbooks/health_check.yml", "--limit", victim)
    assert res.returncode == 0, res.stdout[-2000:]  # the scheduled check is read-only and warns

    def victim_unhealthy():
        """the victim's gauge at 0"""
        return healthy_gauge(prometheus).get(victim) == "0"

    wait_for(victim_unhealthy)
    assert healthy_gauge(prometheus) == dict(dict.fromkeys(gpu_nodes, "1"), **{victim: "0"})
    links = prometheus("query", query='rackforge_nvlink_active_links{node="%s",gpu="2"}' % victim)["result"]
    assert [r["value"][1] for r in links] == ["17"]

    def pending():
        """RackforgeNodeUnhealthy pending or firing for the victim"""
        return prometheus("query", query='ALERTS{alertname="RackforgeNodeUnhealthy"}')["result"]

    assert [a["metric"]["node"] for a in wait_for(pending)] == [victim]
    lab("fault", victim, "clear")
    assert playbook("playbooks/health_check.yml", "--limit", victim).returncode == 0
    wait_for(lambda: healthy_gauge(prometheus).get(victim) == "1")
