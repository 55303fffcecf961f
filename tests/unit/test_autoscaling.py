"""Autoscaling input (issue 21): prometheus-adapter's rules and the example HPA
(examples/autoscaling). Both are held to the Kubernetes 1.31 schemas (kubernetes-validate,
strict); every adapter query is rendered as the adapter renders it and checked, then evaluated
on synthetic series, by the real promtool (Debian's prometheus package); the HPA asks only for
metrics the adapter serves, with the seed's scale-down behaviour."""

from __future__ import annotations

import pathlib

import kubernetes_validate
import pytest
import yaml
from test_alert_rules import promtool

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "autoscaling"
K8S = "1.31.4"


def load(name):
    return yaml.safe_load((EXAMPLES / name).read_text())


def adapter_rules():
    return yaml.safe_load(load("prometheus-adapter-rules.yaml")["data"]["config.yaml"])["rules"]


def render(query, series, matchers, group_by):
    """The adapter's Go template (<< >> delimiters) with the values it fills in for a request."""
    return query.replace("<<.Series>>", series).replace("<<.LabelMatchers>>", matchers).replace("<<.GroupBy>>", group_by)


@pytest.mark.parametrize("name", ["prometheus-adapter-rules.yaml", "inference-hpa.yaml"])
def test_the_objects_validate_against_the_kubernetes_schemas(name):
    kubernetes_validate.validate(load(name), K8S, strict=True)


def test_the_hpa_scales_down_as_the_seed_asks_and_only_on_metrics_the_adapter_serves():
    hpa = load("inference-hpa.yaml")["spec"]
    assert hpa["behavior"]["scaleDown"] == {
        "stabilizationWindowSeconds": 300,
        "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}],
    }
    served = {rule["name"]["as"] for rule in adapter_rules()}
    wanted = {m["pods"]["metric"]["name"] for m in hpa["metrics"] if m["type"] == "Pods"}
    assert wanted and wanted <= served, "the HPA asks for %s; the adapter serves %s" % (sorted(wanted), sorted(served))
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "inference"}


def test_every_adapter_query_is_valid_promql(tmp_path):
    rules = []
    for i, rule in enumerate(adapter_rules()):
        series = rule["name"]["matches"].strip("^$")
        rules.append({"record": "adapter_series_%d" % i, "expr": rule["seriesQuery"]})
        rules.append(
            {"record": "adapter_metric_%d" % i, "expr": render(rule["metricsQuery"], series, 'namespace="inference",pod=~"a|b"', "pod")}
        )
    (tmp_path / "adapter.yml").write_text(yaml.safe_dump({"groups": [{"name": "adapter", "rules": rules}]}))
    res = promtool("check", "rules", "adapter.yml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_gpu_utilisation_metric_is_each_pods_average_over_its_gpus(tmp_path):
    """What the adapter answers for GET .../pods/*/gpu_utilization, evaluated by promtool on the
    series dcgm-exporter gives a pod with 4 GPUs and one with 2 (and a GPU no pod holds)."""
    [rule] = [r for r in adapter_rules() if r["name"]["as"] == "gpu_utilization"]
    query = render(rule["metricsQuery"], "DCGM_FI_DEV_GPU_UTIL", 'namespace="inference",pod=~"inference-a|inference-b"', "pod")
    (tmp_path / "rules.yml").write_text(
        yaml.safe_dump({"groups": [{"name": "adapter", "rules": [{"record": "pod:gpu_utilization", "expr": query}]}]})
    )
    series = [
        ('DCGM_FI_DEV_GPU_UTIL{gpu="%d",namespace="inference",pod="inference-a",container="server"}' % g, "%d+0x4" % v)
        for g, v in enumerate((90, 70, 80, 60))
    ]
    series += [('DCGM_FI_DEV_GPU_UTIL{gpu="%d",namespace="inference",pod="inference-b",container="server"}' % g, "20+0x4") for g in (4, 5)]
    series += [('DCGM_FI_DEV_GPU_UTIL{gpu="6"}', "100+0x4")]  # no pod: not any pod's utilisation
    test = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "promql_expr_test": [
                    {
                        "expr": "pod:gpu_utilization",
                        "eval_time": "2m",
                        "exp_samples": [
                            {"labels": 'pod:gpu_utilization{pod="inference-a"}', "value": 75},
                            {"labels": 'pod:gpu_utilization{pod="inference-b"}', "value": 20},
                        ],
                    }
                ],
            }
        ],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    res = promtool("test", "rules", "test.yml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
