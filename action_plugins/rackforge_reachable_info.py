"""Action plugin of the rackforge_reachable_info module: a repository check with `needed_for` is
answered on the controller (not_needed) when the run's package snapshot (taken by the preflight's
read, module_utils/rackforge/packages_snapshot.py) shows that those packages need nothing from it;
otherwise the module runs on the node, as always."""

from __future__ import annotations

import importlib.util
import os

from ansible.plugins.action import ActionBase

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _loader():
    """module_utils/rackforge/controller.py, by path (it loads the rest)."""
    spec = importlib.util.spec_from_file_location("rackforge_controller", os.path.join(ROOT, "module_utils", "rackforge", "controller.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# made (or taken) at import, in ansible-playbook's main process, so every worker of the run shares it
RUN_ID = _loader().run_id()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        needed_for = self._task.args.get("needed_for")
        if needed_for is not None and not self._task.delegate_to:
            controller = _loader()
            if controller.decided_from_snapshot(task_vars, needed_for) is not None:
                result.update(controller.not_needed_result())
                return result
        result.update(self._execute_module(module_name="rackforge_reachable_info", module_args=dict(self._task.args), task_vars=task_vars))
        return result
