"""module_utils/rackforge/prometheus_config.py: what the monitoring hosts run, held to the real
promtool and amtool (Debian's prometheus 2.42 and prometheus-alertmanager 0.25, installed by
scripts/setup.sh): every config it returns passes them, every refusal names the variable, and
the routing is what `amtool config routes test` says Alertmanager will do."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml
from test_alert_rules import promtool

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "module_utils" / "rackforge"))
import controller  # noqa: E402

pc = controller.load(("settings", "prometheus_config"))

RULES = (ROOT / "roles" / "monitoring" / "files" / "rackforge-alerts.yml").read_text()
ROUTE = {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"}


def tool(name):
    exe = shutil.which(name)
    assert exe, "%s not found: scripts/setup.sh installs Debian's prometheus and prometheus-alertmanager" % name
    return exe


def run(*argv):
    return subprocess.run(argv, check=False, capture_output=True, text=True)


def prom_settings(tmp_path, **over):
    s = {
        "targets_dir": str(tmp_path / "targets"),
        "scrape_interval": "15s",
        "evaluation_interval": "15s",
        "external_labels": {"monitor": "rackforge"},
        "servers": ["10.0.0.5", "10.0.0.6"],
        "prometheus_port": 9090,
        "alertmanager_port": 9093,
        "extra_scrape_configs": [],
    }
    s.update(over)
    return s


def check_prometheus(tmp_path, cfg):
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(cfg))
    return promtool("check", "config", str(path))


def check_alertmanager(tmp_path, cfg):
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(cfg))
    return run(tool("amtool"), "check-config", str(path)), path


# --- alert rules --------------------------------------------------------------------------------


def test_rules_without_overrides_are_the_file_itself():
    assert pc.alert_rules(RULES, {}) == RULES.rstrip("\n") + "\n"


def test_for_overrides_replace_only_the_named_alerts_and_promtool_accepts_them(tmp_path):
    out = pc.alert_rules(RULES, {"RackforgeNodeUnhealthy": "2m", "RackforgePfcPauseStorm": "30s"})
    rules = {r["alert"]: r for g in yaml.safe_load(out)["groups"] for r in g["rules"]}
    original = {r["alert"]: r for g in yaml.safe_load(RULES)["groups"] for r in g["rules"]}
    assert rules["RackforgeNodeUnhealthy"]["for"] == "2m"
    assert rules["RackforgePfcPauseStorm"]["for"] == "30s"  # had none: now it has one
    for name in set(original) - {"RackforgeNodeUnhealthy", "RackforgePfcPauseStorm"}:
        assert rules[name] == original[name], name
    # the templates of the annotations are carried as they are
    assert "{{ $labels.node }}" in out
    (tmp_path / "r.yml").write_text(out)
    res = promtool("check", "rules", str(tmp_path / "r.yml"))
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize(
    "overrides, words",
    [
        (
            {"RackforgeNodeUnhelthy": "2m"},
            ["monitoring_server_alert_for", "'RackforgeNodeUnhelthy' is not an alert", "RackforgeNodeUnhealthy"],
        ),
        ({"RackforgeNodeUnhealthy": "2 minutes"}, ["monitoring_server_alert_for[RackforgeNodeUnhealthy]", "not a Prometheus duration"]),
        ({"RackforgeNodeUnhealthy": 5}, ["monitoring_server_alert_for[RackforgeNodeUnhealthy]", "not a Prometheus duration"]),
    ],
)
def test_bad_for_overrides_are_refused_naming_the_variable(overrides, words):
    with pytest.raises(pc.ConfigError) as exc:
        pc.alert_rules(RULES, overrides)
    for word in words:
        assert word in str(exc.value)


# --- prometheus.yml -----------------------------------------------------------------------------


def test_prometheus_config_passes_promtool_and_reads_the_targets_rules_and_both_alertmanagers(tmp_path):
    cfg = pc.prometheus_config(prom_settings(tmp_path))
    res = check_prometheus(tmp_path, cfg)
    assert res.returncode == 0, res.stdout + res.stderr
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    # the job names the alert rules select on
    assert jobs["rackforge-node"]["file_sd_configs"] == [{"files": [str(tmp_path / "targets" / "file_sd" / "node" / "*.json")]}]
    assert jobs["rackforge-dcgm"]["file_sd_configs"] == [{"files": [str(tmp_path / "targets" / "file_sd" / "dcgm" / "*.json")]}]
    assert jobs["rackforge-prometheus"]["static_configs"] == [{"targets": ["10.0.0.5:9090", "10.0.0.6:9090"]}]
    assert cfg["rule_files"] == [str(tmp_path / "targets" / "rules" / "*.yml")]
    assert cfg["alerting"]["alertmanagers"] == [{"static_configs": [{"targets": ["10.0.0.5:9093", "10.0.0.6:9093"]}]}]
    # no replica label: both servers' alerts must be equal for the Alertmanagers to merge them
    assert cfg["global"]["external_labels"] == {"monitor": "rackforge"}


def test_extra_scrape_configs_go_through_and_promtool_is_what_judges_them(tmp_path):
    extra = {"job_name": "vllm", "static_configs": [{"targets": ["10.0.1.1:8000"]}]}
    cfg = pc.prometheus_config(prom_settings(tmp_path, extra_scrape_configs=[extra]))
    assert cfg["scrape_configs"][-1] == extra
    assert check_prometheus(tmp_path, cfg).returncode == 0
    # what rackforge does not parse, promtool refuses: the role never installs such a config
    broken = dict(extra, relabel_configs=[{"source_labels": ["__address__"], "regex": "([", "target_label": "x"}])
    res = check_prometheus(tmp_path, pc.prometheus_config(prom_settings(tmp_path, extra_scrape_configs=[broken])))
    assert res.returncode != 0 and "missing closing ]" in res.stdout + res.stderr


@pytest.mark.parametrize(
    "over, words",
    [
        (
            {"extra_scrape_configs": [{"job_name": "rackforge-node"}]},
            ["monitoring_server_extra_scrape_configs[0]", "'rackforge-node' is taken"],
        ),
        ({"extra_scrape_configs": [{"static_configs": []}]}, ["monitoring_server_extra_scrape_configs[0]", "job_name"]),
        ({"external_labels": {"__replica": "a"}}, ["monitoring_server_external_labels", "'__replica' is not a Prometheus label name"]),
        ({"external_labels": {"data-center": "a"}}, ["monitoring_server_external_labels", "'data-center'"]),
        ({"scrape_interval": "15"}, ["monitoring_server_scrape_interval", "not a Prometheus duration"]),
        ({"evaluation_interval": "1.5m"}, ["monitoring_server_evaluation_interval", "not a Prometheus duration"]),
    ],
)
def test_bad_prometheus_settings_are_refused_naming_the_variable(tmp_path, over, words):
    with pytest.raises(pc.ConfigError) as exc:
        pc.prometheus_config(prom_settings(tmp_path, **over))
    for word in words:
        assert word in str(exc.value)


# --- alertmanager.yml ---------------------------------------------------------------------------

RECEIVERS = [
    {"name": "ops-webhook", "type": "webhook", "url": "http://10.0.2.1:9095/alerts?token=s3cret"},
    {"name": "oncall-mail", "type": "email", "to": "oncall@example.com", "severities": ["critical"]},
    {"name": "chat", "type": "slack", "url": "https://hooks.slack.example/T000/B000/XXXX", "channel": "#gpu-fleet", "send_resolved": False},
]
SMTP = {"smarthost": "mail.example.com:587", "from": "alertmanager@example.com", "auth_username": "am", "auth_password": "pw"}


def test_alertmanager_config_passes_amtool_with_every_receiver_type(tmp_path):
    cfg = pc.alertmanager_config({"receivers": RECEIVERS, "smtp": SMTP, "route": ROUTE})
    res, _path = check_alertmanager(tmp_path, cfg)
    assert res.returncode == 0, res.stdout + res.stderr
    names = [r["name"] for r in cfg["receivers"]]
    assert names == ["rackforge-nobody", "ops-webhook", "oncall-mail", "chat"]
    assert cfg["receivers"][3]["slack_configs"] == [{"api_url": RECEIVERS[2]["url"], "send_resolved": False, "channel": "#gpu-fleet"}]
    assert cfg["global"]["smtp_smarthost"] == "mail.example.com:587" and cfg["global"]["smtp_require_tls"] is True


@pytest.mark.parametrize(
    "labels, expected",
    [
        ("severity=critical", "ops-webhook,oncall-mail,chat"),
        ("severity=warning", "ops-webhook,chat"),
        # an alert without a severity reaches nobody (every rackforge rule sets one)
        ("alertname=Other", "rackforge-nobody"),
    ],
)
def test_each_receiver_gets_the_severities_it_takes(tmp_path, labels, expected):
    cfg = pc.alertmanager_config({"receivers": RECEIVERS, "smtp": SMTP, "route": ROUTE})
    _res, path = check_alertmanager(tmp_path, cfg)
    res = run(tool("amtool"), "config", "routes", "test", "--config.file=%s" % path, "alertname=RackforgeNVLinkDown", "node=n1", labels)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip() == expected


def test_without_receivers_alerts_stay_in_alertmanager(tmp_path):
    cfg = pc.alertmanager_config({"receivers": [], "smtp": {}, "route": ROUTE})
    assert cfg["route"]["receiver"] == "rackforge-nobody" and "routes" not in cfg["route"]
    assert check_alertmanager(tmp_path, cfg)[0].returncode == 0


def test_the_node_down_inhibition_holds_back_the_nodes_other_alerts():
    cfg = pc.alertmanager_config({"receivers": [], "smtp": {}, "route": ROUTE})
    assert cfg["inhibit_rules"] == [
        {
            "source_matchers": ['alertname="RackforgeNodeExporterDown"'],
            "target_matchers": ['alertname!="RackforgeNodeExporterDown"'],
            "equal": ["node"],
        }
    ]
    # the rule it names exists, with the node label the inhibition compares
    rules = {r["alert"]: r for g in yaml.safe_load(RULES)["groups"] for r in g["rules"]}
    assert "RackforgeNodeExporterDown" in rules
    assert "inhibit_rules" not in pc.alertmanager_config({"receivers": [], "smtp": {}, "route": ROUTE, "inhibit": False})


@pytest.mark.parametrize(
    "receivers, smtp, words",
    [
        (
            [{"name": "x", "type": "pagerduty", "url": "http://a/b"}],
            {},
            ["monitoring_server_receivers[0].type", "'pagerduty'", "webhook, email, slack"],
        ),
        ([{"name": "x", "type": "webhook"}], {}, ["monitoring_server_receivers[0].url", "http(s) URL"]),
        ([{"name": "x", "type": "webhook", "url": "ftp://secret-host/x"}], {}, ["monitoring_server_receivers[0].url"]),
        ([{"name": "x", "type": "email", "to": "a@b.c"}], {}, ["monitoring_server_smtp", "smarthost"]),
        ([{"name": "x", "type": "email", "to": "nobody"}], SMTP, ["monitoring_server_receivers[0].to"]),
        (
            [{"name": "x", "type": "webhook", "url": "http://a/b", "severities": ["info"]}],
            {},
            ["monitoring_server_receivers[0].severities", "critical, warning"],
        ),
        (
            [{"name": "x", "type": "webhook", "url": "http://a/b", "send_resolved": "yes"}],
            {},
            ["monitoring_server_receivers[0].send_resolved"],
        ),
        (
            [{"name": "x", "type": "webhook", "url": "http://a/b", "urls": "http://c/d"}],
            {},
            ["monitoring_server_receivers[0]", "unknown key(s) urls"],
        ),
        (
            [{"name": "x", "type": "webhook", "url": "http://a/b"}, {"name": "x", "type": "webhook", "url": "http://a/c"}],
            {},
            ["monitoring_server_receivers[1].name", "used twice"],
        ),
        ([{"name": "rackforge-nobody", "type": "webhook", "url": "http://a/b"}], {}, ["monitoring_server_receivers[0].name"]),
        ([], {"smarthost": "mail.example.com", "from": "a@b.c"}, ["monitoring_server_smtp.smarthost", "host:port"]),
        ([], {"smarthost": "mail:25", "from": "a@b.c", "password": "x"}, ["monitoring_server_smtp", "unknown key(s) password"]),
    ],
)
def test_bad_receivers_are_refused_naming_the_variable_and_never_the_url(receivers, smtp, words):
    with pytest.raises(pc.ConfigError) as exc:
        pc.alertmanager_config({"receivers": receivers, "smtp": smtp, "route": ROUTE})
    for word in words:
        assert word in str(exc.value)
    assert "secret-host" not in str(exc.value)


@pytest.mark.parametrize(
    "route, words",
    [
        (dict(ROUTE, group_wait="30"), ["monitoring_server_route.group_wait", "not a Prometheus duration"]),
        ({"group_wait": "30s", "group_interval": "5m"}, ["monitoring_server_route.repeat_interval"]),
        (dict(ROUTE, group_by=["alertname", "gpu-id"]), ["monitoring_server_route.group_by", "'gpu-id'"]),
    ],
)
def test_bad_routes_are_refused_naming_the_variable(route, words):
    with pytest.raises(pc.ConfigError) as exc:
        pc.alertmanager_config({"receivers": [], "smtp": {}, "route": route})
    for word in words:
        assert word in str(exc.value)


# --- command lines ------------------------------------------------------------------------------


def test_prometheus_args_listen_on_the_management_address_with_the_retention():
    args = pc.prometheus_args(
        {
            "config_file": "/etc/prometheus/prometheus.yml",
            "address": "10.0.0.5",
            "port": 9090,
            "storage_path": "/srv/prometheus",
            "retention_time": "30d",
            "retention_size": "400GB",
            "external_url": "",
        }
    )
    assert args == (
        "--config.file=/etc/prometheus/prometheus.yml --web.listen-address=10.0.0.5:9090 --storage.tsdb.path=/srv/prometheus"
        " --storage.tsdb.retention.time=30d --storage.tsdb.retention.size=400GB"
    )
    with pytest.raises(pc.ConfigError, match="monitoring_server_retention_size"):
        pc.prometheus_args(
            {"config_file": "c", "address": "a", "port": 1, "storage_path": "s", "retention_time": "30d", "retention_size": "400G"}
        )


def test_prometheus_accepts_the_flags_it_is_given(tmp_path):
    """The flags exist in the real binary (an unknown flag stops Prometheus at start)."""
    out = run("prometheus", "--help").stderr + run("prometheus", "--help").stdout
    for flag in (
        "--config.file",
        "--web.listen-address",
        "--storage.tsdb.path",
        "--storage.tsdb.retention.time",
        "--storage.tsdb.retention.size",
        "--web.external-url",
    ):
        assert flag in out, flag


def test_alertmanager_args_cluster_two_hosts_and_turn_clustering_off_for_one():
    base = {
        "config_file": "/etc/prometheus/alertmanager.yml",
        "storage_path": "/var/lib/prometheus/alertmanager",
        "address": "10.0.0.5",
        "port": 9093,
        "cluster_port": 9094,
    }
    two = pc.alertmanager_args(dict(base, peers=["10.0.0.6"]))
    assert two.endswith("--cluster.listen-address=10.0.0.5:9094 --cluster.peer=10.0.0.6:9094")
    one = pc.alertmanager_args(dict(base, peers=[]))
    assert one.endswith("--cluster.listen-address=") and "--cluster.peer" not in one
    help_text = run("prometheus-alertmanager", "--help").stderr + run("prometheus-alertmanager", "--help").stdout
    for flag in ("--config.file", "--storage.path", "--web.listen-address", "--cluster.listen-address", "--cluster.peer"):
        assert flag in help_text, flag


def test_an_ipv6_management_address_is_written_in_brackets_everywhere(tmp_path):
    assert pc.hostport("fd00::6", 9093) == "[fd00::6]:9093" and pc.hostport("10.0.0.6", 9093) == "10.0.0.6:9093"
    cfg = pc.prometheus_config(prom_settings(tmp_path, servers=["fd00::5", "fd00::6"]))
    assert cfg["alerting"]["alertmanagers"] == [{"static_configs": [{"targets": ["[fd00::5]:9093", "[fd00::6]:9093"]}]}]
    assert check_prometheus(tmp_path, cfg).returncode == 0
    args = pc.alertmanager_args(
        {"config_file": "c", "storage_path": "s", "address": "fd00::5", "port": 9093, "cluster_port": 9094, "peers": ["fd00::6"]}
    )
    assert "--web.listen-address=[fd00::5]:9093 --cluster.listen-address=[fd00::5]:9094 --cluster.peer=[fd00::6]:9094" in args
