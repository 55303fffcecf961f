"""No dashboard ships broken and no alert watches a series that is not there: every PromQL query of
every panel of rackforge's Grafana dashboards returns at least one series from the monitoring
hosts' real Prometheus in the lab, and every series selector of every alert rule matches at least
one series there. And the Grafana provisioning files monitoring_server wrote (no Grafana runs in
the lab: Debian has no package) point at that host's own Prometheus and carry the dashboards.

The lab's GPU series come from the SIMULATED dcgm-exporter (lab/hwsim/dcgm_exporter_sim.py)."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from conftest import ROOT, on_node, playbook
from monitoring_helper import monitoring_hosts, prometheus, wait_for

DASHBOARDS = ROOT / "roles" / "monitoring_server" / "files" / "dashboards"
RULES = ROOT / "roles" / "monitoring" / "files" / "rackforge-alerts.yml"
# PromQL words that are not series names
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset",
    "sum", "count", "avg", "min", "max", "increase", "rate", "irate", "label_replace", "vector", "abs", "time",
}  # fmt: skip
# selectors of the rules with no series in the lab, each with its reason
NO_LAB_SERIES = {
    # nvidia-smi 535's `nvlink -e` (what the simulated exporter reads) has no data-CRC counter;
    # the rule sums it with the flit-CRC, replay and recovery counters, which are there
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
}


def selectors(expr):
    """The series selectors of a PromQL expression: name{matchers} and bare names."""
    found = [m.group(0) for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*\{[^}]*\}", expr)]
    rest = re.sub(r"[A-Za-z_:][A-Za-z0-9_:]*\{[^}]*\}", " ", expr)
    rest = re.sub(r'"[^"]*"', " ", rest)  # label_replace's strings
    rest = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", rest)
    rest = re.sub(r"\[[^\]]*\]", " ", rest)  # range durations
    found += [w for w in re.findall(r"\b[A-Za-z_:][A-Za-z0-9_:]*\b", rest) if w not in PROMQL_WORDS and not re.match(r"^[0-9]", w)]
    return found


def panel_queries():
    out = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        doc = json.loads(path.read_text())
        for p in doc["panels"]:
            for t in p["targets"]:
                out.append((path.stem, p["title"], t["expr"]))
    return out


@pytest.fixture(scope="module")
def api(converged):
    # a health check on every node, so the textfile series (the fabric's traffic counters
    # included) are fresh; then wait until the first monitoring host has scraped them
    res = playbook("playbooks/health_check.yml")
    assert res.returncode == 0, res.stdout[-2000:]
    prom = prometheus(monitoring_hosts()["lab-mon1"])

    def traffic():
        """the RDMA traffic counters scraped"""
        return prom("query", query="rackforge_rdma_port_traffic")["result"]

    wait_for(traffic)
    return prom


def test_the_selector_reader_finds_every_series_of_a_rule():
    expr = 'rackforge_rdma_port_healthy == 0 and on (instance, ca, port) rackforge_rdma_port_up{job="x"} == 1'
    assert selectors(expr) == ['rackforge_rdma_port_up{job="x"}', "rackforge_rdma_port_healthy"]
    expr = 'sum by (node, gpu) (label_replace(increase(A_TOTAL[15m]), "counter", "crc", "", "") or increase(B{x="1"}[1h])) > 0'
    assert sorted(selectors(expr)) == ["A_TOTAL", 'B{x="1"}']


@pytest.mark.parametrize("dashboard, title, expr", panel_queries(), ids=[f"{d}:{t}:{i}" for i, (d, t, _e) in enumerate(panel_queries())])
def test_every_panel_query_returns_series(api, gpu_nodes, dashboard, title, expr):
    query = expr.replace("$node", gpu_nodes[0]).replace("$__rate_interval", "1m")
    result = api("query", query=query)["result"]
    assert result, "%s / %s: %s returns nothing" % (dashboard, title, query)


def test_every_alert_rule_watches_series_that_exist(api):
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    missing = []
    for rule in rules:
        for sel in selectors(rule["expr"]):
            if sel.split("{")[0] in NO_LAB_SERIES:
                continue
            if not api("series", **{"match[]": sel}):
                missing.append((rule["alert"], sel))
    assert not missing, missing
    assert len(rules) >= 17


def test_grafana_provisioning_points_at_each_hosts_own_prometheus(converged):
    for name, ip in monitoring_hosts().items():
        ds = yaml.safe_load(on_node(name, "cat", "/etc/grafana/provisioning/datasources/rackforge.yaml").stdout)
        (source,) = ds["datasources"]
        assert source["uid"] == "rackforge-prometheus" and source["type"] == "prometheus"
        assert source["url"] == "http://%s:9090" % ip
        provider = yaml.safe_load(on_node(name, "cat", "/etc/grafana/provisioning/dashboards/rackforge.yaml").stdout)
        path = provider["providers"][0]["options"]["path"]
        for board in DASHBOARDS.glob("*.json"):
            shipped = json.loads(on_node(name, "cat", "%s/%s" % (path, board.name)).stdout)
            assert shipped == json.loads(board.read_text())
            # every query uses the provisioned datasource (through the variable that defaults to it)
            assert all(t["datasource"]["uid"] == "${datasource}" for p in shipped["panels"] for t in p["targets"])
            assert shipped["templating"]["list"][0]["current"]["value"] == "rackforge-prometheus"
