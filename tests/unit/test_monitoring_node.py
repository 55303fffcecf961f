"""The monitoring role on the nodes: the dcgm-exporter container unit as rendered (the lab runs
dcgm-exporter in external mode, so these lines are held here) and the scrape labels' rule."""

from __future__ import annotations

import pathlib
import shlex

import jinja2
import pytest
import yaml
from ansible.module_utils.rackforge import settings

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "monitoring"


def render(**over):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, keep_trailing_newline=True)
    env.filters["ansible.utils.ipwrap"] = lambda a: "[%s]" % a if ":" in a else a
    env.filters["bool"] = lambda v: v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes", "on")
    values = {
        "ansible_managed": "managed",
        "inventory_hostname": "gpu-017",
        "monitoring_dcgm_exporter_engine": "podman",
        "monitoring_oom_score_adjust": -999,
        "monitoring_listen_address": "10.0.0.17",
        "monitoring_dcgm_exporter_port": 9400,
        "monitoring_dcgm_exporter_config_dir": "/etc/rackforge/dcgm-exporter",
        "monitoring_dcgm_exporter_image": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04",
        "monitoring_dcgm_exporter_pod_mapping": True,
        **over,
    }
    return env.from_string((ROLE / "templates" / "rackforge-dcgm-exporter.service.j2").read_text()).render(values)


def exec_start(unit):
    """ExecStart's argv, as systemd joins the continuation lines."""
    line = unit.split("ExecStart=", 1)[1].split("\nExecStop=", 1)[0].replace("\\\n", " ")
    return shlex.split(line)


def test_the_exporter_names_its_node_and_maps_gpus_to_pods():
    argv = exec_start(render())
    image = argv.index("nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04")
    options = argv[:image]
    # the alerts print the node: without NODE_NAME dcgm-exporter's Hostname label is its container's id
    assert options[options.index("-e") + 1] == "NODE_NAME=gpu-017"
    # the autoscaling rules select pod/namespace: dcgm-exporter adds them only with its Kubernetes
    # mapping on and the kubelet's pod-resources socket inside the container
    assert "DCGM_EXPORTER_KUBERNETES=true" in options
    assert "/var/lib/kubelet/pod-resources:/var/lib/kubelet/pod-resources:ro" in options
    assert options[options.index("--device") + 1] == "nvidia.com/gpu=all"  # podman: the CDI spec nvidia_driver writes
    assert "10.0.0.17:9400:9400" in options


def test_without_a_kubelet_there_is_no_pod_mapping():
    argv = exec_start(render(monitoring_dcgm_exporter_pod_mapping=False, monitoring_dcgm_exporter_engine="docker"))
    assert "DCGM_EXPORTER_KUBERNETES=true" not in argv and not [a for a in argv if "pod-resources" in a]
    assert argv[argv.index("--gpus") + 1] == "all"


RULES = yaml.safe_load((ROLE / "meta" / "rules.yml").read_text())["rules"]


@pytest.mark.parametrize(
    ("labels", "refused"),
    [
        ({"rack": "r12", "zone": "a"}, None),
        ({"bad label": "x"}, "must be a Prometheus label name"),
        ({"__meta": "x"}, "must be a Prometheus label name"),
        ({"job": "gpu"}, "other than job, instance, node"),
        ({"instance": "x"}, "other than job, instance, node"),
        ({"node": "x"}, "other than job, instance, node"),
        ({"jobs": "fine"}, None),
    ],
)
def test_scrape_labels_that_would_break_the_targets_or_the_rules_are_refused(labels, refused):
    problems = settings.check_rules(RULES, {"monitoring_scrape_labels": labels}, {})
    text = " ".join(settings.format_problems(problems))
    if refused is None:
        assert problems == []
    else:
        assert refused in text and "monitoring_scrape_labels" in text
