"""Action plugin of the rackforge_preflight_facts module: the preflight's one read of the node also
takes the run's package snapshot (module_utils/rackforge/packages_snapshot.py), so that the run's
package calls and repository checks decide on the controller without a read of their own. The module
is given the run's id (module_utils/rackforge/controller.py run_id); everything else is the module's."""

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


RUN_ID = _loader().run_id()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        if not self._task.delegate_to:
            args["packages_snapshot"] = RUN_ID
        result.update(self._execute_module(module_name="rackforge_preflight_facts", module_args=args, task_vars=task_vars or {}))
        return result
