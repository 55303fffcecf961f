"""host_firewall in the lab (real nftables in each node's own network namespace): with it on, the
monitoring hosts (lab-mon1, lab-mon2, where Prometheus runs) still scrape a node and the control plane
still reaches its kubelet port, while another node is cut off from both; changed rules are loaded
by a reload; off again, the table and its unit are gone."""

from __future__ import annotations

import json

from conftest import on_node, playbook
from monitoring_helper import monitoring_hosts

NODE, OTHER, CP = "lab-node1", "lab-node2", "lab-cp1"
PROBE = (
    "import socket,sys\n"
    "s=socket.socket(); s.settimeout(3)\n"
    "try:\n    s.connect((sys.argv[1], int(sys.argv[2]))); print('open')\n"
    "except socket.timeout:\n    print('dropped')\n"
    "except ConnectionRefusedError:\n    print('refused')\n"
)


def probe(src, ip, port):
    return on_node(src, "python3", "-c", PROBE, ip, str(port)).stdout.strip()


def started():
    """When the firewall unit last entered the active state (monotonic µs)."""
    return on_node(NODE, "systemctl", "show", "-p", "ActiveEnterTimestampMonotonic", "--value", "rackforge-firewall.service").stdout.strip()


def test_exporter_and_kubelet_ports_only_from_monitoring_and_control_plane(converged):
    ip = json.loads(on_node(NODE, "ip", "-j", "-4", "addr", "show", "eth0").stdout)[0]["addr_info"][0]["local"]
    mons = [m + "/32" for m in monitoring_hosts().values()]
    cp_ip = json.loads(on_node(CP, "ip", "-j", "-4", "addr", "show", "eth0").stdout)[0]["addr_info"][0]["local"]
    assert probe(OTHER, ip, 9100) == "open"
    on = {
        "host_firewall_enabled": True,
        "host_firewall_scrape_sources": mons,
        "host_firewall_kubelet_sources": [cp_ip + "/32"],
    }
    try:
        res = playbook("playbooks/monitoring.yml", "--limit", NODE, "-e", json.dumps(on))
        assert res.returncode == 0 and res.recap[NODE]["changed"] >= 1, res.stdout[-3000:]
        assert "rackforge_filter" in on_node(NODE, "nft", "list", "tables").stdout
        assert probe(OTHER, ip, 9100) == "dropped"
        assert probe(OTHER, ip, 10250) == "dropped"
        assert probe(CP, ip, 10250) == "refused"  # let through; nothing listens there in the lab (no real kubelet)
        for mon in monitoring_hosts():  # the monitoring hosts scrape
            assert "node_exporter_build_info" in on_node(mon, "curl", "-sf", "--max-time", "5", "http://%s:9100/metrics" % ip).stdout
        again = playbook("playbooks/monitoring.yml", "--limit", NODE, "-e", json.dumps(on))
        assert again.returncode == 0 and again.recap[NODE]["changed"] == 0
        since = started()
        # changed rules are loaded by the unit's reload, while it keeps running: the other node
        # is let through to the exporter port now, and still kept from the kubelet's
        wider = dict(
            on,
            host_firewall_scrape_sources=[
                *mons,
                json.loads(on_node(OTHER, "ip", "-j", "-4", "addr", "show", "eth0").stdout)[0]["addr_info"][0]["local"] + "/32",
            ],
        )
        res = playbook("playbooks/monitoring.yml", "--limit", NODE, "-e", json.dumps(wider))
        assert res.returncode == 0 and res.recap[NODE]["changed"] >= 1, res.stdout[-3000:]
        assert started() == since  # reloaded, not restarted (a restart drops the table for a moment)
        assert probe(OTHER, ip, 9100) == "open"
        assert probe(OTHER, ip, 10250) == "dropped"
    finally:
        off = playbook("playbooks/monitoring.yml", "--limit", NODE)
    assert off.returncode == 0, off.stdout[-3000:]
    assert "rackforge_filter" not in on_node(NODE, "nft", "list", "tables").stdout
    assert on_node(NODE, "test", "-e", "/etc/systemd/system/rackforge-firewall.service", check=False).returncode != 0
    assert probe(OTHER, ip, 9100) == "open"
