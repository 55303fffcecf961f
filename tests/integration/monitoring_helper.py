"""The lab's monitoring hosts (lab-mon1, lab-mon2: roles/monitoring_server) seen from the tests:
their Prometheus and Alertmanager APIs over the lab network, and waiting."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request

from conftest import ROOT, on_node

PROMETHEUS_PORT, ALERTMANAGER_PORT = 9090, 9093


def monitoring_hosts():
    """{name: ip} of the lab's monitoring hosts (lab/.state/lab.json)."""
    data = json.loads((ROOT / "lab" / ".state" / "lab.json").read_text())
    return {n: h["ip"] for n, h in sorted(data.items()) if h.get("group") == "monitoring_hosts"}


def http_json(url, data=None, timeout=5):
    req = urllib.request.Request(
        url, data=None if data is None else json.dumps(data).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        body = resp.read()
    return json.loads(body) if body else None


def prometheus(ip):
    """api(path, **params) -> the `data` of a Prometheus HTTP API answer."""

    def api(path, **params):
        url = "http://%s:%d/api/v1/%s" % (ip, PROMETHEUS_PORT, path) + ("?" + urllib.parse.urlencode(params) if params else "")
        return http_json(url)["data"]

    return api


def alertmanager(ip, path, data=None):
    return http_json("http://%s:%d/api/v2/%s" % (ip, ALERTMANAGER_PORT, path), data)


def ready(ip, port):
    try:
        with urllib.request.urlopen("http://%s:%d/-/ready" % (ip, port), timeout=3) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


def wait_for(fn, timeout=60, interval=0.5):
    """fn's first truthy value; AssertionError naming fn (its docstring) after timeout seconds."""
    deadline = time.time() + timeout
    while True:
        try:
            value = fn()
            if value:
                return value
        except OSError:
            pass
        if time.time() > deadline:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, fn.__doc__ or fn))
        time.sleep(interval)


def file_sha(host, path):
    return on_node(host, "sha256sum", path).stdout.split()[0]
