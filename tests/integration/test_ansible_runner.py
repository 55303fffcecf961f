"""site.yml through ansible-runner with an AWX-like private_data_dir (the way AWX runs it):
survey answers in env/extravars, the lab inventory in inventory/, the project checked out in
project/. The run succeeds and its artifacts (status, rc, per-host stats) say so."""

from __future__ import annotations

import json
import shutil

import ansible_runner
import yaml
from conftest import ROOT


def test_site_yml_through_ansible_runner(converged, gpu_nodes, tmp_path):
    pdd = tmp_path / "awx"
    (pdd / "env").mkdir(parents=True)
    # answers a bootstrap job template's survey would give (awx/surveys/bootstrap.json)
    answers = {"health_checks_enforce": True, "gpu_tuning_clock_policy": "nearest", "rdma_roce_lossless_priority": 3}
    (pdd / "env" / "extravars").write_text(yaml.safe_dump(answers))
    (pdd / "env" / "envvars").write_text(yaml.safe_dump({"ANSIBLE_NOCOLOR": "1", "RACKFORGE_REPORT_DIR": str(tmp_path / "reports")}))
    shutil.copytree(ROOT / "inventories" / "lab", pdd / "inventory")
    (pdd / "project").symlink_to(ROOT)
    run = ansible_runner.run(private_data_dir=str(pdd), playbook="site.yml", ident="bootstrap", quiet=True)
    assert run.status == "successful" and run.rc == 0, run.stdout.read()[-3000:]
    artifacts = pdd / "artifacts" / "bootstrap"
    assert (artifacts / "status").read_text() == "successful"
    assert (artifacts / "rc").read_text() == "0"
    stats = run.stats
    assert sorted(stats["ok"]) == sorted(gpu_nodes + [h for h in stats["ok"] if h not in gpu_nodes])
    assert all(stats["changed"].get(h, 0) == 0 for h in gpu_nodes)  # converged lab: nothing to change
    assert not stats["failures"] and not stats["dark"]
    events = [json.loads(p.read_text()) for p in (artifacts / "job_events").glob("*.json")]
    assert any(e.get("event") == "playbook_on_stats" for e in events)
    assert json.loads((tmp_path / "reports" / "fleet.json").read_text())["nodes"]
