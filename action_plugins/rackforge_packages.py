"""Action plugin of the rackforge_packages module: one read of a node's packages per run.

The first call of a run on a node runs the module with this run's id (its `snapshot` option): it
decides and acts as always, and also returns every package, key and source it read (after any change)
as the fact rackforge_packages_snapshot. A later call of the same run that the snapshot shows
nothing to do for is answered here, on the controller, with the result the module would give
(`decided_on_controller: true`); anything else runs the module on the node. The decision is the
module's own (module_utils/rackforge/packages.py plan, through packages_snapshot.py decide).

RUN_ID is the run's id (module_utils/rackforge/controller.py run_id), taken when ansible-playbook's
main process loads this plugin, so a snapshot an earlier run left in the fact cache never matches."""

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
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        if not self._task.delegate_to:
            decided = _loader().decided_from_snapshot(task_vars, args)
            if decided is not None:
                result.update(decided)
                return result
            args["snapshot"] = RUN_ID
        result.update(self._execute_module(module_name="rackforge_packages", module_args=args, task_vars=task_vars))
        return result
