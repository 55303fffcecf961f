"""The monitoring hosts' configuration, decided in one place (no I/O): Prometheus's and
Alertmanager's config files and command lines, and the alert rules with the operator's `for:`
durations. Used on the controller by filter_plugins/monitoring.py (roles/monitoring_server);
promtool and amtool check what these return before it replaces a running config. Loaded on the
controller through module_utils/rackforge/controller.py (with settings.py, whose formats it uses).

Public API (each raises ConfigError naming the variable and what is allowed):

- alert_rules(text, for_overrides) -> str: the rules file (YAML text) with each named alert's
  `for:` replaced; an override that names no alert of the file, or is not a Prometheus duration,
  is refused.
- prometheus_config(s) -> dict: prometheus.yml. s: {targets_dir, scrape_interval,
  evaluation_interval, external_labels, servers [every monitoring host's address],
  prometheus_port, alertmanager_port, extra_scrape_configs}: every server's Alertmanager gets the
  alerts, and every server's Prometheus and Alertmanager are scraped.
- alertmanager_config(s) -> dict: alertmanager.yml. s: {receivers, smtp, route, inhibit}.
  Every receiver gets a child route of the root (continue: true), matched on the severities it
  takes; the root's own receiver notifies nobody, so an alert no receiver takes is only shown in
  Alertmanager. The inhibition: while a node's node_exporter is down (the host is down or cut
  off), its other alerts are held back (equal node).
- prometheus_args(s), alertmanager_args(s) -> str: the ARGS line of /etc/default/prometheus and
  /etc/default/prometheus-alertmanager (Debian's units run `$ARGS`). s: {address, port, ...};
  alertmanager_args also {cluster_port, peers [the other monitoring hosts' addresses]}.
- hostport(address, port) -> str: address:port, an IPv6 address in brackets.
"""

from __future__ import annotations

import re

import yaml
from ansible.module_utils.rackforge.settings import FORMATS

# the formats the settings check knows (one home): durations, sizes, label names, URLs, host:port
DURATION, SIZE, LABEL_NAME, URL, HOSTPORT = (FORMATS[f][0] for f in ("prom_duration", "prom_size", "label_name", "url", "hostport"))
RECEIVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
SEVERITIES = ("critical", "warning")
RECEIVER_TYPES = ("webhook", "email", "slack")
# the route's own receiver: no configs, so nobody is notified of an alert no receiver takes
NOBODY = "rackforge-nobody"
NODE_DOWN_ALERT = "RackforgeNodeExporterDown"


class ConfigError(ValueError):
    pass


def _duration(var, value):
    if not isinstance(value, str) or not DURATION.match(value):
        raise ConfigError(
            "%s: %r is not a Prometheus duration (a number and a unit of ms, s, m, h, d, w, y, e.g. 5m or 1h30m)" % (var, value)
        )
    return value


def alert_rules(text, for_overrides):
    """The rules file with the operator's `for:` durations ({} keeps the file's own)."""
    doc = yaml.safe_load(text)
    rules = [r for g in doc["groups"] for r in g["rules"] if "alert" in r]
    names = {r["alert"] for r in rules}
    for name, value in sorted((for_overrides or {}).items()):
        if name not in names:
            raise ConfigError(
                "monitoring_server_alert_for: %r is not an alert of the rules; the alerts are: %s" % (name, ", ".join(sorted(names)))
            )
        _duration("monitoring_server_alert_for[%s]" % name, value)
    if not for_overrides:
        return text.rstrip("\n") + "\n"
    for rule in rules:
        if rule["alert"] in for_overrides:
            rule["for"] = for_overrides[rule["alert"]]
    return (
        "# Managed by rackforge (roles/monitoring_server): roles/monitoring/files/rackforge-alerts.yml with monitoring_server_alert_for\n"
        + yaml.safe_dump(doc, sort_keys=False, width=200)
    )


def hostport(address, port):
    return "[%s]:%d" % (address, int(port)) if ":" in address else "%s:%d" % (address, int(port))


def prometheus_config(s):
    for var in ("scrape_interval", "evaluation_interval"):
        _duration("monitoring_server_%s" % var, s[var])
    labels = dict(s.get("external_labels") or {})
    for key in labels:
        if not isinstance(key, str) or not LABEL_NAME.match(key):
            raise ConfigError(
                "monitoring_server_external_labels: %r is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)"
                % (key,)
            )
    d = s["targets_dir"].rstrip("/")
    jobs = [
        {"job_name": "rackforge-node", "file_sd_configs": [{"files": ["%s/file_sd/node/*.json" % d]}]},
        {"job_name": "rackforge-dcgm", "file_sd_configs": [{"files": ["%s/file_sd/dcgm/*.json" % d]}]},
    ]
    servers = list(s.get("servers") or [])
    alertmanagers = [hostport(a, s["alertmanager_port"]) for a in servers]
    # the monitoring hosts watch each other: the other Prometheus alerts when one goes down
    if servers:
        jobs.append(
            {"job_name": "rackforge-prometheus", "static_configs": [{"targets": [hostport(a, s["prometheus_port"]) for a in servers]}]}
        )
        jobs.append({"job_name": "rackforge-alertmanager", "static_configs": [{"targets": alertmanagers}]})
    names = {j["job_name"] for j in jobs}
    for i, extra in enumerate(s.get("extra_scrape_configs") or []):
        if not isinstance(extra, dict) or not extra.get("job_name"):
            raise ConfigError("monitoring_server_extra_scrape_configs[%d]: a scrape config (a mapping with a job_name)" % i)
        if extra["job_name"] in names:
            raise ConfigError(
                "monitoring_server_extra_scrape_configs[%d]: job_name %r is taken (rackforge's jobs: %s)"
                % (i, extra["job_name"], ", ".join(sorted(names)))
            )
        names.add(extra["job_name"])
        jobs.append(extra)
    cfg = {"global": {"scrape_interval": s["scrape_interval"], "evaluation_interval": s["evaluation_interval"]}}
    if labels:
        cfg["global"]["external_labels"] = labels
    cfg["rule_files"] = ["%s/rules/*.yml" % d]
    if alertmanagers:
        # a list of its own: one object in two places would be written as a YAML anchor and alias
        cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": list(alertmanagers)}]}]}
    cfg["scrape_configs"] = jobs
    return cfg


def _receiver(i, r, smtp):
    var = "monitoring_server_receivers[%d]" % i
    if not isinstance(r, dict):
        raise ConfigError("%s: a mapping {name, type, ...}" % var)
    unknown = sorted(set(r) - {"name", "type", "url", "to", "channel", "severities", "send_resolved"})
    if unknown:
        raise ConfigError(
            "%s: unknown key(s) %s; allowed: name, type, url, to, channel, severities, send_resolved" % (var, ", ".join(unknown))
        )
    name, kind = r.get("name"), r.get("type")
    if not isinstance(name, str) or not RECEIVER_NAME.match(name) or name == NOBODY:
        raise ConfigError("%s.name: %r is not a receiver name (letters, digits, _ . -; not %s)" % (var, name, NOBODY))
    if kind not in RECEIVER_TYPES:
        raise ConfigError("%s.type: %r; allowed: %s" % (var, kind, ", ".join(RECEIVER_TYPES)))
    severities = r.get("severities", list(SEVERITIES))
    if not isinstance(severities, list) or not severities or any(v not in SEVERITIES for v in severities):
        raise ConfigError("%s.severities: a non-empty list of %s" % (var, ", ".join(SEVERITIES)))
    resolved = r.get("send_resolved", True)
    if not isinstance(resolved, bool):
        raise ConfigError("%s.send_resolved: true or false" % var)
    # the URLs carry tokens: errors name the key, never the value
    if kind in ("webhook", "slack") and not (isinstance(r.get("url"), str) and URL.match(r["url"])):
        raise ConfigError("%s.url: a %s receiver needs an http(s) URL" % (var, kind))
    if kind == "email":
        if not (isinstance(r.get("to"), str) and EMAIL.match(r["to"])):
            raise ConfigError("%s.to: an e-mail receiver needs an address" % var)
        if not smtp.get("smarthost") or not smtp.get("from"):
            raise ConfigError("monitoring_server_smtp: an e-mail receiver (%s) needs smarthost (host:port) and from" % var)
    if kind == "webhook":
        conf = {"webhook_configs": [{"url": r["url"], "send_resolved": resolved}]}
    elif kind == "slack":
        slack = {"api_url": r["url"], "send_resolved": resolved}
        if r.get("channel"):
            slack["channel"] = r["channel"]
        conf = {"slack_configs": [slack]}
    else:
        conf = {"email_configs": [{"to": r["to"], "send_resolved": resolved}]}
    return dict({"name": name}, **conf), severities


def _smtp_global(smtp):
    unknown = sorted(set(smtp) - {"smarthost", "from", "auth_username", "auth_password", "require_tls"})
    if unknown:
        raise ConfigError(
            "monitoring_server_smtp: unknown key(s) %s; allowed: smarthost, from, auth_username, auth_password, require_tls"
            % ", ".join(unknown)
        )
    if not smtp:
        return {}
    if not (isinstance(smtp.get("smarthost"), str) and HOSTPORT.match(smtp["smarthost"])):
        raise ConfigError("monitoring_server_smtp.smarthost: host:port of the mail relay")
    if not (isinstance(smtp.get("from"), str) and EMAIL.match(smtp["from"])):
        raise ConfigError("monitoring_server_smtp.from: the sender's address")
    out = {"smtp_smarthost": smtp["smarthost"], "smtp_from": smtp["from"], "smtp_require_tls": bool(smtp.get("require_tls", True))}
    for key in ("auth_username", "auth_password"):
        if smtp.get(key):
            out["smtp_" + key] = str(smtp[key])
    return out


def alertmanager_config(s):
    smtp = s.get("smtp") or {}
    if not isinstance(smtp, dict):
        raise ConfigError("monitoring_server_smtp: a mapping {smarthost, from, auth_username, auth_password, require_tls}")
    route_in = s.get("route") or {}
    for key in ("group_wait", "group_interval", "repeat_interval"):
        _duration("monitoring_server_route.%s" % key, route_in.get(key))
    group_by = route_in.get("group_by") or ["alertname", "node"]
    for label in group_by:
        if not isinstance(label, str) or not LABEL_NAME.match(label):
            raise ConfigError("monitoring_server_route.group_by: %r is not a label name" % (label,))
    receivers, routes, seen = [{"name": NOBODY}], [], set()
    for i, r in enumerate(s.get("receivers") or []):
        conf, severities = _receiver(i, r, smtp)
        if conf["name"] in seen:
            raise ConfigError("monitoring_server_receivers[%d].name: %r is used twice" % (i, conf["name"]))
        seen.add(conf["name"])
        receivers.append(conf)
        routes.append({"receiver": conf["name"], "matchers": ['severity=~"%s"' % "|".join(severities)], "continue": True})
    route = {
        "receiver": NOBODY,
        "group_by": list(group_by),
        "group_wait": route_in["group_wait"],
        "group_interval": route_in["group_interval"],
        "repeat_interval": route_in["repeat_interval"],
    }
    if routes:
        route["routes"] = routes
    cfg = {}
    smtp_global = _smtp_global(smtp)
    if smtp_global:
        cfg["global"] = smtp_global
    cfg["route"] = route
    cfg["receivers"] = receivers
    if s.get("inhibit", True):
        cfg["inhibit_rules"] = [
            {
                "source_matchers": ['alertname="%s"' % NODE_DOWN_ALERT],
                "target_matchers": ['alertname!="%s"' % NODE_DOWN_ALERT],
                "equal": ["node"],
            }
        ]
    return cfg


def prometheus_args(s):
    _duration("monitoring_server_retention_time", s["retention_time"])
    size = s.get("retention_size") or ""
    if size and not SIZE.match(size):
        raise ConfigError(
            "monitoring_server_retention_size: %r is not a size such as 500GB (B, KB, MB, GB, TB, PB, EB), or empty for none" % size
        )
    args = [
        "--config.file=%s" % s["config_file"],
        "--web.listen-address=%s" % hostport(s["address"], s["port"]),
        "--storage.tsdb.path=%s" % s["storage_path"],
        "--storage.tsdb.retention.time=%s" % s["retention_time"],
    ]
    if size:
        args.append("--storage.tsdb.retention.size=%s" % size)
    if s.get("external_url"):
        args.append("--web.external-url=%s" % s["external_url"])
    return " ".join(args)


def alertmanager_args(s):
    """One Alertmanager alone has clustering off; two or more gossip on the cluster port, each with
    the others as --cluster.peer (Alertmanager's high availability)."""
    listen = hostport(s["address"], s["port"])
    args = ["--config.file=%s" % s["config_file"], "--storage.path=%s" % s["storage_path"], "--web.listen-address=%s" % listen]
    peers = list(s.get("peers") or [])
    if peers:
        args.append("--cluster.listen-address=%s" % hostport(s["address"], s["cluster_port"]))
        args.extend("--cluster.peer=%s" % hostport(p, s["cluster_port"]) for p in peers)
    else:
        args.append("--cluster.listen-address=")
    return " ".join(args)
