"""Run an Ansible module's main() in-process with its arguments (check mode on request) and return
what it printed: the one place the unit tests do that (the Kubernetes modules, kernel_modules, rackforge_files)."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args


def call_module(module, args, capsys, check_mode=False):
    """module.main() with args; its JSON result (a failure included)."""
    args = dict(args, _ansible_check_mode=True) if check_mode else dict(args)
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)
