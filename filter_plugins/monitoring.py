"""rackforge filters for the monitoring hosts (roles/monitoring_server): Prometheus's and
Alertmanager's config and command lines, and the alert rules with the operator's `for:`
durations. The decisions live in module_utils/rackforge/prometheus_config.py (unit tested);
these pass data in and out, and turn its errors into the task's failure."""

from __future__ import annotations

import importlib.util
import os

import yaml
from ansible.errors import AnsibleFilterError

_SPEC = importlib.util.spec_from_file_location(
    "rackforge_controller", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils", "rackforge", "controller.py")
)
controller = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(controller)
PC = controller.load(("settings", "prometheus_config"))


def _wrap(fn, dump):
    def filt(value, *args):
        try:
            out = fn(controller.plain(value), *[controller.plain(a) for a in args])
        except PC.ConfigError as exc:
            raise AnsibleFilterError(str(exc)) from exc
        if dump:
            return "# Managed by rackforge (roles/monitoring_server)\n" + yaml.safe_dump(out, sort_keys=False, width=200)
        return out

    filt.__name__ = fn.__name__
    return filt


class FilterModule:
    def filters(self):
        return {
            "rackforge_alert_rules": _wrap(PC.alert_rules, False),
            "rackforge_prometheus_config": _wrap(PC.prometheus_config, True),
            "rackforge_alertmanager_config": _wrap(PC.alertmanager_config, True),
            "rackforge_prometheus_args": _wrap(PC.prometheus_args, False),
            "rackforge_alertmanager_args": _wrap(PC.alertmanager_args, False),
        }
