"""AWX artefacts: the execution environment's build context renders offline, and the surveys
only offer what the roles accept (generated from their argument_specs)."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_ansible_builder_create_renders_the_context(tmp_path):
    exe = shutil.which("ansible-builder") or str(pathlib.Path(sys.executable).parent / "ansible-builder")
    res = subprocess.run(
        [exe, "create", "-f", str(ROOT / "execution-environment.yml"), "-c", str(tmp_path / "ctx")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    build = tmp_path / "ctx" / "_build"
    assert yaml.safe_load((build / "requirements.yml").read_text()) == yaml.safe_load((ROOT / "requirements.yml").read_text())
    assert "netaddr==1.3.0" in (build / "requirements.txt").read_text()
    containerfile = (tmp_path / "ctx" / "Containerfile").read_text()
    assert "ansible-core==2.19.14" in containerfile and "ansible-runner==2.4.3" in containerfile


def test_surveys_are_current_and_within_the_role_specs():
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "awx_surveys.py"), "--check"], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout
    specs = {}
    for path in (ROOT / "roles").glob("*/meta/argument_specs.yml"):
        specs.update(yaml.safe_load(path.read_text())["argument_specs"]["main"]["options"])
    for path in (ROOT / "awx" / "surveys").glob("*.json"):
        for q in json.loads(path.read_text())["spec"]:
            spec = specs[q["variable"]]
            if spec.get("choices"):
                assert set(q["choices"]) <= {str(c) for c in spec["choices"]}, q["variable"]
            if spec["type"] == "int":
                assert q["type"] == "integer", q["variable"]


def test_only_node_preparation_is_sliced_and_every_template_playbook_exists():
    play = yaml.safe_load((ROOT / "playbooks" / "awx_configure.yml").read_text())[0]
    templates = next(t for t in play["tasks"] if "awx.awx.job_template" in t)["loop"]
    sliced = {t["playbook"] for t in templates if str(t["slices"]) != "1"}
    assert sliced == {"playbooks/prepare.yml"}
    for t in templates:
        assert (ROOT / t["playbook"]).exists(), t["playbook"]
        assert (ROOT / "awx" / "surveys" / (t["survey"] + ".json")).exists(), t["survey"]
    # the sliceable playbook never reaches the control plane or another host's variables
    for name in ("prepare.yml", "runtime.yml", "preflight.yml", "gpu.yml", "network.yml", "monitoring.yml", "health.yml"):
        text = (ROOT / "playbooks" / name).read_text()
        assert "kube_control_plane" not in text and "delegate_to" not in text, name
    for role in ("container_runtime", "nvidia_driver", "gpu_tuning", "rdma_roce", "network_tuning", "health_checks", "preflight"):
        for path in (ROOT / "roles" / role).rglob("*.yml"):
            assert "hostvars[" not in path.read_text() and "groups[" not in path.read_text(), path
