#!/usr/bin/python
"""Ansible module: application clocks, locked clocks, power limit (and legacy persistence)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_gpu_settings
short_description: Set GPU application clocks, locked clocks and power limit, changing only what differs
description:
  - Reads every selected GPU with C(nvidia-smi -q -x), validates the whole request first
    (application clocks must be a supported pair, power limit within the GPU's min..max,
    locked clocks within the max graphics clock) and fails before any change when one GPU
    cannot take it, naming the setting and the valid values. Then runs C(nvidia-smi) only for
    the settings that differ. Check mode and diff are supported.
  - Locked clocks cannot be read back through nvidia-smi; the module records what it locked in
    C(state_dir) (a tmpfs, cleared by a reboot exactly as the lock is) and compares with that.
  - Returns C(boot_commands), the nvidia-smi argument lists that re-apply the whole request
    (clocks and power limits are lost on reboot). Every nvidia-smi call makes one device
    modification, the most nvidia-smi accepts at a time.
  - nvidia-smi exits 0 for some settings it did not apply (an unsupported clock pair, a setting the
    GPU does not support: "... Treating as warning and moving on."); the module reads its text and
    fails on those as on a non-zero exit (4 = insufficient permissions).
options:
  gpus:
    description:
      - GPU indices as C(nvidia-smi -i) counts them (enumeration = PCI bus order, the position in
        C(nvidia-smi -q -x)), not minor numbers; empty = every GPU.
    type: list
    elements: int
    default: []
  application_clocks:
    description: "{memory: MHz, graphics: MHz}; must be a supported pair (see nearest_clock_pair filter)."
    type: dict
  locked_clocks: {description: "{min: MHz, max: MHz} for nvidia-smi -lgc.", type: dict}
  reset_locked_clocks: {description: Unlock the GPU clocks (nvidia-smi -rgc)., type: bool, default: false}
  power_limit: {description: Power limit in W (nvidia-smi -pl)., type: float}
  persistence_mode:
    description: Legacy nvidia-smi -pm; nvidia-persistenced is the supported way. Null leaves it.
    type: bool
  state_dir: {description: Where the locked-clock record lives (tmpfs)., type: path, default: /run/rackforge}
  source: {description: Where the request came from (a variable name), to prefix error messages., type: str}
  settings:
    description:
      - The node plan (instead of O(gpus) and the single request): the base request for every GPU,
        {application_clocks, locked_clocks, power_limit}. With it the module reads the GPUs once,
        makes one request per GPU model (O(models) over O(settings), the clock pair resolved by
        O(clock_policy)), checks every model's request and every O(schedules) profile against the
        GPUs before any change, checks the schedules' calendar expressions (systemd-analyze
        calendar), then applies the models' requests. A node without a usable driver is
        C(driver_loaded=false) with its C(error), not a failure. Its messages name the gpu_tuning
        role's variables (gpu_tuning_settings, gpu_tuning_models['<model>'],
        gpu_tuning_schedules[<name>]), the role whose call this is.
    type: dict
  models: {description: "Per GPU model (product name as nvidia-smi prints it): settings over O(settings).", type: dict, default: {}}
  clock_policy: {description: "strict: the pair as given; nearest: the nearest supported pair not above it.", type: str, default: strict}
  schedules:
    description: "Timed profiles [{name, on_calendar, settings}], checked (never applied) for their boot commands."
    type: list
    elements: dict
    default: []
  require_driver:
    description:
      - "Node plan: a node without a usable driver fails (C(gpu_tuning needs a loaded NVIDIA driver: <error>)) instead of
        returning C(driver_loaded=false); in check mode it warns and returns C(driver_loaded=false) (the driver would be
        installed first)."
    type: bool
    default: false
"""

RETURN = r"""
gpus: {description: "Per GPU: index, name, uuid, before, after.", type: list, returned: always}
boot_commands: {description: nvidia-smi argument lists that re-apply the request., type: list, returned: always}
locked_clocks_record:
  description: "{uuid: [min, max]} the state_dir record holds after the request; a boot script writes it too."
  type: dict
  returned: always
driver_loaded:
  description: "Node plan: false when nvidia-smi is missing or fails (then only error is returned)."
  type: bool
  returned: with settings
error: {description: "Node plan: nvidia-smi's message when the driver is not usable.", type: str, returned: when driver_loaded is false}
schedules:
  description: "Node plan: per timed profile, {name, boot_commands, locked_clocks_record}, in O(schedules)' order."
  type: list
  returned: with settings
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge.gpu import GpuSettingError
from ansible.module_utils.rackforge.gpu_settings import apply, check, node_requests, normal, plan, read_gpus


def read_record(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def write_record(state_dir, path, locked_now, record):
    """Keep plan()'s locked_clocks_record (empty: the request neither locks nor unlocks) in the record file."""
    if not record:
        return
    locked_now.update(record)
    os.makedirs(state_dir, exist_ok=True)
    with open(path, "w") as fh:
        json.dump(locked_now, fh)


def single(module, smi, p):
    """One request for the GPUs in O(gpus) (every GPU when empty)."""
    gpus = read_gpus(module, smi)
    by_index = {g["index"]: g for g in gpus}
    missing = sorted(set(p["gpus"]) - set(by_index))
    if missing:
        module.fail_json(msg="gpus: no GPU with index %s (this node has %s)" % (missing, sorted(by_index)))
    selected = [by_index[i] for i in (p["gpus"] or sorted(by_index))]
    if not selected:
        module.fail_json(msg="no GPU found by nvidia-smi")
    request = {k: p[k] for k in ("application_clocks", "locked_clocks", "reset_locked_clocks", "power_limit", "persistence_mode")}
    try:
        check(selected, request, p["source"])
    except GpuSettingError as exc:
        module.fail_json(msg="%s; nothing was changed" % exc)
    record_path = os.path.join(p["state_dir"], "gpu-locked-clocks.json")
    locked_now = read_record(record_path)
    done = plan(selected, request, locked_now, smi)
    if done["todo"] and not module.check_mode:
        apply(module, smi, done["todo"], done["results"])
        write_record(p["state_dir"], record_path, locked_now, done["locked_clocks_record"])
    results = done["results"]
    module.exit_json(
        changed=bool(done["todo"]),
        gpus=results,
        boot_commands=done["boot_commands"],
        locked_clocks_record=done["locked_clocks_record"],
        diff={"before": {str(r["index"]): r["before"] for r in results}, "after": {str(r["index"]): r["after"] for r in results}},
    )


def no_driver(module, error, required):
    """A node without a usable driver: driver_loaded false, or (required) a failure outside check mode
    and a warning in it (check mode runs before the driver is installed)."""
    if required and not module.check_mode:
        module.fail_json(msg="gpu_tuning needs a loaded NVIDIA driver: %s" % error, driver_loaded=False, error=error)
    if required:
        module.warn("no loaded driver in check mode (it would be installed first): GPU settings are validated and applied on the real run")
    module.exit_json(changed=False, driver_loaded=False, error=error)


def node(module, smi, p):
    """The node plan (O(settings)): see the module's description."""
    if not smi:
        no_driver(module, "nvidia-smi not installed", p["require_driver"])
    gpus = read_gpus(module, smi, soft=True)
    if isinstance(gpus, str):
        no_driver(module, gpus, p["require_driver"])
    if not gpus:
        module.fail_json(msg="no GPU found by nvidia-smi")
    analyze = module.get_bin_path("systemd-analyze")
    for profile in p["schedules"]:
        if not analyze:
            module.fail_json(msg="systemd-analyze is not installed: the schedules' calendar expressions cannot be checked")
        rc, out, err = module.run_command([analyze, "calendar", str(profile.get("on_calendar"))], environ_update=C_ENV)
        if rc != 0:
            module.fail_json(
                msg="gpu_tuning_schedules[%s].on_calendar = %r: systemd-analyze calendar refuses it: %s; nothing was changed"
                % (profile.get("name"), profile.get("on_calendar"), (err or out).strip()),
                rc=rc,
                stdout=out,
                stderr=err,
            )
    by_index = {g["index"]: g for g in gpus}
    record_path = os.path.join(p["state_dir"], "gpu-locked-clocks.json")
    locked_now = read_record(record_path)
    try:
        requests = node_requests(gpus, p["settings"], p["models"], p["clock_policy"])
        for indices, request, source in requests:
            request["persistence_mode"] = p["persistence_mode"]
            check([by_index[i] for i in indices], request, source)
        timed = []  # every timed profile too: a bad one cannot fail after the base settings were applied
        for profile in p["schedules"]:
            source = "gpu_tuning_schedules[%s].settings" % profile.get("name")
            timed.append((profile.get("name"), normal(profile.get("settings"), source)))
            check(gpus, timed[-1][1], source)
    except GpuSettingError as exc:
        module.fail_json(msg="%s; nothing was changed" % exc)
    plans = [plan([by_index[i] for i in indices], request, locked_now, smi) for indices, request, _ in requests]
    todo = [pl for pl in plans if pl["todo"]]
    if todo and not module.check_mode:
        for pl in todo:
            apply(module, smi, pl["todo"], pl["results"])
            write_record(p["state_dir"], record_path, locked_now, pl["locked_clocks_record"])
    results = [r for pl in plans for r in pl["results"]]
    schedules = []
    for name, request in timed:
        boot = plan(gpus, request, {}, smi)
        schedules.append({"name": name, "boot_commands": boot["boot_commands"], "locked_clocks_record": boot["locked_clocks_record"]})
    record = {}
    for pl in plans:
        record.update(pl["locked_clocks_record"])
    module.exit_json(
        changed=bool(todo),
        driver_loaded=True,
        gpus=results,
        boot_commands=[argv for pl in plans for argv in pl["boot_commands"]],
        locked_clocks_record=record,
        schedules=schedules,
        diff={"before": {str(r["index"]): r["before"] for r in results}, "after": {str(r["index"]): r["after"] for r in results}},
    )


def main():
    module = AnsibleModule(
        argument_spec={
            "gpus": {"type": "list", "elements": "int", "default": []},
            "application_clocks": {"type": "dict"},
            "locked_clocks": {"type": "dict"},
            "reset_locked_clocks": {"type": "bool", "default": False},
            "power_limit": {"type": "float"},
            "persistence_mode": {"type": "bool"},
            "state_dir": {"type": "path", "default": "/run/rackforge"},
            "source": {"type": "str"},
            "settings": {"type": "dict"},
            "models": {"type": "dict", "default": {}},
            "clock_policy": {"type": "str", "default": "strict", "choices": ["strict", "nearest"]},
            "schedules": {"type": "list", "elements": "dict", "default": []},
            "require_driver": {"type": "bool", "default": False},
        },
        mutually_exclusive=[["locked_clocks", "reset_locked_clocks"], ["settings", "application_clocks"]],
        supports_check_mode=True,
    )
    p = module.params
    smi = module.get_bin_path("nvidia-smi")
    if p["settings"] is not None:
        node(module, smi, p)
    if not smi:
        module.fail_json(msg="nvidia-smi not found: the NVIDIA driver is not installed")
    single(module, smi, p)


if __name__ == "__main__":
    main()
