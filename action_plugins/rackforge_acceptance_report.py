"""Action plugin: judge one fabric acceptance across the nodes and write its report on the controller.

Runs once (run_once) in the controller's process. Reads every play host's `rackforge_acceptance_results`
(set by playbooks/fabric_acceptance.yml: {"rdma": rdma_acceptance's return, "nvlink":
nvlink_acceptance's return}), decides with module_utils/rackforge/acceptance_report.py (pure),
writes <report_dir>/acceptance.json and acceptance.md (temporary file, fsync, rename: a killed
run leaves the old report or the new one), and returns per node its findings and the textfile
metrics the playbook writes there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _loader():
    """module_utils/rackforge/controller.py, by path (it loads the rest)."""
    spec = importlib.util.spec_from_file_location("rackforge_controller", os.path.join(ROOT, "module_utils", "rackforge", "controller.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


controller = _loader()
report_lib = controller.load(("remedies", "health", "acceptance", "acceptance_report"))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("report_dir",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        report_dir = self._task.args.get("report_dir")
        if not report_dir:
            raise AnsibleError("rackforge_acceptance_report: report_dir is required")
        hostvars = task_vars["hostvars"]
        results = {}
        for host in task_vars.get("ansible_play_hosts") or []:
            data = hostvars[host].get("rackforge_acceptance_results")
            if data is not None:
                results[host] = controller.plain(data)
        dropped = [h for h in task_vars.get("ansible_play_hosts_all") or [] if h not in results]
        report = report_lib.fleet_verdict(results, dropped)
        report["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        os.makedirs(report_dir, exist_ok=True)
        controller.write_atomic(
            os.path.join(report_dir, "acceptance.json"), [json.dumps(report, indent=1, sort_keys=True) + "\n"], ".acceptance-tmp-"
        )
        controller.write_atomic(os.path.join(report_dir, "acceptance.md"), [report_lib.render_markdown(report)], ".acceptance-tmp-")
        result.update(
            changed=False,
            report=os.path.join(report_dir, "acceptance.md"),
            nodes={
                n: {
                    "findings": d["findings"],
                    "rdma": d["rdma"],
                    "nvlink": d["nvlink"],
                    "metrics": report_lib.metrics(n, report),
                    "time": report["time"],
                }
                for n, d in report["nodes"].items()
            },
            paths=report["paths"],
            dropped=report["dropped"],
            undecided=report["undecided"],
        )
        return result
