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
"""

RETURN = r"""
gpus: {description: "Per GPU: index, name, uuid, before, after.", type: list, returned: always}
boot_commands: {description: nvidia-smi argument lists that re-apply the request., type: list, returned: always}
locked_clocks_record:
  description: "{uuid: [min, max]} the state_dir record holds after the request; a boot script writes it too."
  type: dict
  returned: always
"""

import json
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge.gpu import GpuSettingError, check_clock_pair, check_locked_clocks, check_power_limit
from ansible.module_utils.rackforge.nvidia_smi import ParseError, parse_query_xml

# nvidia-smi's texts for a setting it did not apply although it exits 0: 'Specified clock combination
# "(MEM m, SM g)" is not supported for GPU ...', "Setting applications clocks is not supported for GPU ...",
# "Setting locked gpu clocks is not supported ..." (casing varies), "Unable to set persistence mode for
# GPU ...: Not Supported", "Changing power management limit is not supported ...", each followed by
# "Treating as warning and moving on."
NOT_APPLIED_RE = re.compile(r"not supported|treating as warning|insufficient permissions", re.IGNORECASE)


def not_applied(out):
    """The lines of nvidia-smi's output that say a setting was not applied ([] when none)."""
    return [ln.strip() for ln in out.splitlines() if NOT_APPLIED_RE.search(ln)]


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
        },
        mutually_exclusive=[["locked_clocks", "reset_locked_clocks"]],
        supports_check_mode=True,
    )
    p = module.params
    smi = module.get_bin_path("nvidia-smi")
    if not smi:
        module.fail_json(msg="nvidia-smi not found: the NVIDIA driver is not installed")
    rc, out, err = module.run_command([smi, "-q", "-x"], environ_update=C_ENV)
    if rc != 0:
        module.fail_json(msg="nvidia-smi -q -x failed: %s" % (out + err).strip(), rc=rc, stdout=out, stderr=err)
    try:
        gpus = parse_query_xml(out)["gpus"]
    except ParseError as exc:
        module.fail_json(msg="could not parse nvidia-smi -q -x: %s" % exc, rc=rc, stdout=out, stderr=err)
    # nvidia-smi -i counts GPUs in its enumeration (PCI bus) order: their position in -q -x, which
    # can differ from the minor number (/dev/nvidiaN)
    by_index = {}
    for position, g in enumerate(gpus):
        g["index"] = position
        by_index[position] = g
    missing = sorted(set(p["gpus"]) - set(by_index))
    if missing:
        module.fail_json(msg="gpus: no GPU with index %s (this node has %s)" % (missing, sorted(by_index)))
    selected = [by_index[i] for i in (p["gpus"] or sorted(by_index))]
    if not selected:
        module.fail_json(msg="no GPU found by nvidia-smi")

    record_path = os.path.join(p["state_dir"], "gpu-locked-clocks.json")
    try:
        with open(record_path) as fh:
            locked_now = json.load(fh)
    except (OSError, ValueError):
        locked_now = {}
    ac, lgc = p["application_clocks"], p["locked_clocks"]
    try:
        if ac is not None and not {"memory", "graphics"} <= set(ac):
            raise GpuSettingError("application_clocks needs memory and graphics (MHz), got %s" % sorted(ac))
        if lgc is not None and not {"min", "max"} <= set(lgc):
            raise GpuSettingError("locked_clocks needs min and max (MHz), got %s" % sorted(lgc))
        for g in selected:  # validate every GPU before changing any
            label = "GPU %d (%s)" % (g["index"], g["name"])
            if ac is not None:
                check_clock_pair(g["supported_clocks"], ac["memory"], ac["graphics"], label)
            if p["power_limit"] is not None:
                check_power_limit(g["power"], p["power_limit"], label)
            if lgc is not None:
                check_locked_clocks(g["max_clocks"], lgc["min"], lgc["max"], label)
    except GpuSettingError as exc:
        prefix = "%s: " % p["source"] if p["source"] else ""
        module.fail_json(msg="%s%s; nothing was changed" % (prefix, exc))

    results, todo = [], {}
    for g in selected:
        i = g["index"]
        before, after = {}, {}
        if p["persistence_mode"] is not None:
            before["persistence_mode"], after["persistence_mode"] = g["persistence_mode"], p["persistence_mode"]
            if g["persistence_mode"] != p["persistence_mode"]:
                todo.setdefault(("-pm", "1" if p["persistence_mode"] else "0"), []).append(i)
        if ac is not None:
            now = g["applications_clocks"] or {}
            before["application_clocks"] = {"memory": now.get("mem"), "graphics": now.get("graphics")}
            after["application_clocks"] = {"memory": int(ac["memory"]), "graphics": int(ac["graphics"])}
            if before["application_clocks"] != after["application_clocks"]:
                todo.setdefault(("-ac", "%d,%d" % (int(ac["memory"]), int(ac["graphics"]))), []).append(i)
        if lgc is not None or p["reset_locked_clocks"]:
            before["locked_clocks"] = locked_now.get(g["uuid"])
            after["locked_clocks"] = [int(lgc["min"]), int(lgc["max"])] if lgc is not None else None
            if before["locked_clocks"] != after["locked_clocks"]:
                flag = ("-lgc", "%d,%d" % tuple(after["locked_clocks"])) if lgc is not None else ("-rgc", None)
                todo.setdefault(flag, []).append(i)
        if p["power_limit"] is not None:
            before["power_limit"], after["power_limit"] = g["power"]["limit"], float(p["power_limit"])
            if before["power_limit"] is None or abs(before["power_limit"] - after["power_limit"]) >= 0.5:
                todo.setdefault(("-pl", "%g" % float(p["power_limit"])), []).append(i)
        results.append({"index": i, "name": g["name"], "uuid": g["uuid"], "before": before, "after": after})

    ids = ",".join(str(g["index"]) for g in selected)
    boot = []
    if p["persistence_mode"] is not None:
        boot.append([smi, "-i", ids, "-pm", "1" if p["persistence_mode"] else "0"])
    if ac is not None:
        boot.append([smi, "-i", ids, "-ac", "%d,%d" % (int(ac["memory"]), int(ac["graphics"]))])
    if lgc is not None:
        boot.append([smi, "-i", ids, "-lgc", "%d,%d" % (int(lgc["min"]), int(lgc["max"]))])
    if p["power_limit"] is not None:
        boot.append([smi, "-i", ids, "-pl", "%g" % float(p["power_limit"])])

    if todo and not module.check_mode:
        for (flag, value), idx in sorted(todo.items()):
            argv = [smi, "-i", ",".join(str(i) for i in idx), flag] + ([value] if value is not None else [])
            rc, out, err = module.run_command(argv, environ_update=C_ENV)
            refused = not_applied(out + "\n" + err)
            if rc != 0 or refused:
                why = "; ".join(refused) if refused else (out + err).strip()
                module.fail_json(
                    msg="%s failed (rc %d): %s" % (" ".join(argv), rc, why or "no output"), rc=rc, stdout=out, stderr=err, gpus=results
                )
        if lgc is not None or p["reset_locked_clocks"]:
            for g in selected:
                locked_now[g["uuid"]] = [int(lgc["min"]), int(lgc["max"])] if lgc is not None else None
            os.makedirs(p["state_dir"], exist_ok=True)
            with open(record_path, "w") as fh:
                json.dump(locked_now, fh)
    record = {}
    if lgc is not None or p["reset_locked_clocks"]:
        record = {g["uuid"]: ([int(lgc["min"]), int(lgc["max"])] if lgc is not None else None) for g in selected}
    module.exit_json(
        changed=bool(todo),
        gpus=results,
        boot_commands=boot,
        locked_clocks_record=record,
        diff={"before": {str(r["index"]): r["before"] for r in results}, "after": {str(r["index"]): r["after"] for r in results}},
    )


if __name__ == "__main__":
    main()
