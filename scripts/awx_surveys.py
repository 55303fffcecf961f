#!/usr/bin/env python3
"""Render the AWX survey specs in awx/surveys/*.json from the roles' meta/argument_specs.yml, so
a survey can never offer a value a role rejects: types, defaults and choices come from the
specs. `--check` fails when a survey file is out of date.

SURVEYS below says which variables each job template asks for."""

from __future__ import annotations

import json
import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
SURVEYS = {
    "bootstrap": {
        "name": "rackforge node preparation (playbooks/prepare.yml)",
        "description": "Take servers to healthy, monitored GPU nodes with containerd and the Kubernetes packages (sliceable)",
        "variables": [
            "nvidia_driver_version",
            "nvidia_driver_install_method",
            "nvidia_driver_reboot_ok",
            "gpu_tuning_clock_policy",
            "rdma_roce_lossless_priority",
            "rdma_roce_cable_len_m",
            "rdma_roce_buffer_mode",
            "network_tuning_buffers",
            "network_tuning_profile",
            "health_checks_enforce",
            "kubernetes_node_version",
        ],
    },
    "kubernetes": {
        "name": "rackforge kubernetes (playbooks/kubernetes.yml)",
        "description": "Control plane, Calico and the NVIDIA device plugin, then the join of healthy nodes (never sliced)",
        "variables": [
            "kubernetes_node_version",
            "kubernetes_node_hardware_labels",
            "kubernetes_control_plane_init",
            "kubernetes_control_plane_gpu_bin_packing",
            "kubernetes_control_plane_gpu_weight",
            "calico_encapsulation",
            "calico_autodetection",
            "nvidia_device_plugin_mig_strategy",
            "nvidia_device_plugin_time_slicing_replicas",
        ],
    },
    "driver_upgrade": {
        "name": "rackforge GPU driver upgrade (playbooks/upgrade_gpu_driver.yml)",
        "description": "Rolling driver and fabric manager upgrade or rollback, canary first (never sliced)",
        "variables": ["nvidia_driver_version", "nvidia_driver_branch", "health_checks_lossless_priority"],
    },
    "health_check": {
        "name": "rackforge health check (playbooks/health_check.yml)",
        "description": "Read-only NVLink/fabric/RDMA checks and the fleet report",
        "variables": ["health_checks_lossless_priority", "health_checks_check_topology", "health_checks_reset_baseline"],
    },
}


def specs():
    found = {}
    for path in sorted((ROOT / "roles").glob("*/meta/argument_specs.yml")):
        for name, spec in yaml.safe_load(path.read_text())["argument_specs"]["main"]["options"].items():
            found[name] = spec
    return found


def question(name, spec):
    desc = " ".join(spec["description"]) if isinstance(spec["description"], list) else spec["description"]
    q = {"variable": name, "question_name": name.replace("_", " "), "question_description": desc.strip(), "required": False}
    default = spec.get("default")
    if isinstance(default, str) and "{{" in default:
        default = None  # derived from other settings on the node: an unanswered question keeps that
    if spec.get("choices"):
        q["type"] = "multiplechoice"
        q["choices"] = [str(c) for c in spec["choices"]]
        q["default"] = "" if default is None else str(default)
    elif spec["type"] == "bool":
        q.update(type="multiplechoice", choices=["true", "false"], default=str(bool(default)).lower())
    elif spec["type"] == "int":
        q.update(type="integer", default="" if default is None else default)
    elif spec["type"] == "float":
        q.update(type="float", default="" if default is None else default)
    else:
        q.update(type="text", default="" if default is None else str(default))
    if name == "nvidia_driver_version":
        q["required"] = True
    return q


def render():
    all_specs = specs()
    out = {}
    for key, survey in SURVEYS.items():
        missing = [v for v in survey["variables"] if v not in all_specs]
        if missing:
            raise SystemExit("awx_surveys: %s asks for %s, which no role declares" % (key, ", ".join(missing)))
        spec = [question(v, all_specs[v]) for v in survey["variables"]]
        out[key] = json.dumps({"name": survey["name"], "description": survey["description"], "spec": spec}, indent=2) + "\n"
    return out


def main():
    stale = []
    for key, text in render().items():
        path = ROOT / "awx" / "surveys" / ("%s.json" % key)
        if not path.exists() or path.read_text() != text:
            stale.append(path.name)
            if "--check" not in sys.argv:
                path.write_text(text)
    if stale and "--check" in sys.argv:
        print("awx surveys out of date (run scripts/awx_surveys.py): %s" % ", ".join(stale))
        return 1
    print("awx surveys: %d current" % len(SURVEYS) if not stale else "awx surveys: wrote %s" % ", ".join(stale))
    return 0


if __name__ == "__main__":
    sys.exit(main())
