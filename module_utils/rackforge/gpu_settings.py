"""What nvidia_gpu_settings decides and does, as functions (the module is their one caller):

- read_gpus(module, smi, soft=False) -> [gpu]: nvidia-smi -q -x, each GPU with its index (the position
  in -q -x, nvidia-smi -i's enumeration order, not the minor number); fails the task with the
  evidence (soft: a failing nvidia-smi returns its message, a str, instead).
- check(gpus, request, source): GpuSettingError (prefixed with the request's source, a variable
  name) when one GPU cannot take the request; nothing is run.
- plan(gpus, request, locked_now, smi) -> {results, todo, boot_commands, locked_clocks_record}: the
  nvidia-smi calls that would change what differs (todo), and those that re-apply all of it at boot.
- apply(module, smi, todo, results): run the todo calls; fails on a non-zero exit and on the texts with
  which nvidia-smi says it did not apply a setting although it exits 0.
- normal(request, source) -> a copy with the power limit as a float (W), or GpuSettingError.
- node_requests(gpus, settings, models, clock_policy) -> [(gpu indices, request, source)]: one request
  per GPU model on the node, the model's settings over the base ones, the application-clock pair
  resolved by the clock policy (strict: as given; nearest: the nearest supported pair not above it).

A request: {application_clocks: {memory, graphics}, locked_clocks: {min, max}, reset_locked_clocks,
power_limit, persistence_mode}, each optional.
"""

from __future__ import annotations

import re

from ansible.module_utils.rackforge import C_ENV
from ansible.module_utils.rackforge.gpu import GpuSettingError, check_clock_pair, check_locked_clocks, check_power_limit, nearest_clock_pair
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


def read_gpus(module, smi, soft=False):
    """soft: a failing nvidia-smi (no usable driver) returns its message (a str) instead of failing."""
    rc, out, err = module.run_command([smi, "-q", "-x"], environ_update=C_ENV)
    if rc != 0 and soft:
        return (out + err).strip() or "nvidia-smi -q -x exited %d" % rc
    if rc != 0:
        module.fail_json(msg="nvidia-smi -q -x failed: %s" % (out + err).strip(), rc=rc, stdout=out, stderr=err)
    try:
        gpus = parse_query_xml(out)["gpus"]
    except ParseError as exc:
        module.fail_json(msg="could not parse nvidia-smi -q -x: %s" % exc, rc=rc, stdout=out, stderr=err)
    for position, g in enumerate(gpus):
        g["index"] = position
    return gpus


def normal(request, source):
    """A copy of request with the power limit as a float (W), as the module's own parameter has it."""
    out = dict(request or {})
    if out.get("power_limit") is not None:
        try:
            out["power_limit"] = float(out["power_limit"])
        except (TypeError, ValueError):
            raise GpuSettingError("%s: power_limit %r is not a number of watts" % (source, out["power_limit"])) from None
    return out


def check(gpus, request, source):
    ac, lgc = request.get("application_clocks"), request.get("locked_clocks")
    try:
        if ac is not None and not {"memory", "graphics"} <= set(ac):
            raise GpuSettingError("application_clocks needs memory and graphics (MHz), got %s" % sorted(ac))
        if lgc is not None and not {"min", "max"} <= set(lgc):
            raise GpuSettingError("locked_clocks needs min and max (MHz), got %s" % sorted(lgc))
        for g in gpus:  # every GPU before changing any
            label = "GPU %d (%s)" % (g["index"], g["name"])
            if ac is not None:
                check_clock_pair(g["supported_clocks"], ac["memory"], ac["graphics"], label)
            if request.get("power_limit") is not None:
                check_power_limit(g["power"], request["power_limit"], label)
            if lgc is not None:
                check_locked_clocks(g["max_clocks"], lgc["min"], lgc["max"], label)
    except GpuSettingError as exc:
        raise GpuSettingError("%s%s" % ("%s: " % source if source else "", exc)) from None


def plan(gpus, request, locked_now, smi):
    ac, lgc, pl, pm = (
        request.get("application_clocks"),
        request.get("locked_clocks"),
        request.get("power_limit"),
        request.get("persistence_mode"),
    )
    unlock = bool(request.get("reset_locked_clocks"))
    results, todo = [], {}
    for g in gpus:
        i = g["index"]
        before, after = {}, {}
        if pm is not None:
            before["persistence_mode"], after["persistence_mode"] = g["persistence_mode"], pm
            if g["persistence_mode"] != pm:
                todo.setdefault(("-pm", "1" if pm else "0"), []).append(i)
        if ac is not None:
            now = g["applications_clocks"] or {}
            before["application_clocks"] = {"memory": now.get("mem"), "graphics": now.get("graphics")}
            after["application_clocks"] = {"memory": int(ac["memory"]), "graphics": int(ac["graphics"])}
            if before["application_clocks"] != after["application_clocks"]:
                todo.setdefault(("-ac", "%d,%d" % (int(ac["memory"]), int(ac["graphics"]))), []).append(i)
        if lgc is not None or unlock:
            before["locked_clocks"] = locked_now.get(g["uuid"])
            after["locked_clocks"] = [int(lgc["min"]), int(lgc["max"])] if lgc is not None else None
            if before["locked_clocks"] != after["locked_clocks"]:
                flag = ("-lgc", "%d,%d" % tuple(after["locked_clocks"])) if lgc is not None else ("-rgc", None)
                todo.setdefault(flag, []).append(i)
        if pl is not None:
            before["power_limit"], after["power_limit"] = g["power"]["limit"], float(pl)
            if before["power_limit"] is None or abs(before["power_limit"] - after["power_limit"]) >= 0.5:
                todo.setdefault(("-pl", "%g" % float(pl)), []).append(i)
        results.append({"index": i, "name": g["name"], "uuid": g["uuid"], "before": before, "after": after})
    ids = ",".join(str(g["index"]) for g in gpus)
    boot = []
    if pm is not None:
        boot.append([smi, "-i", ids, "-pm", "1" if pm else "0"])
    if ac is not None:
        boot.append([smi, "-i", ids, "-ac", "%d,%d" % (int(ac["memory"]), int(ac["graphics"]))])
    if lgc is not None:
        boot.append([smi, "-i", ids, "-lgc", "%d,%d" % (int(lgc["min"]), int(lgc["max"]))])
    if pl is not None:
        boot.append([smi, "-i", ids, "-pl", "%g" % float(pl)])
    record = {}
    if lgc is not None or unlock:
        record = {g["uuid"]: ([int(lgc["min"]), int(lgc["max"])] if lgc is not None else None) for g in gpus}
    return {"results": results, "todo": todo, "boot_commands": boot, "locked_clocks_record": record}


def apply(module, smi, todo, results):
    for (flag, value), idx in sorted(todo.items()):
        argv = [smi, "-i", ",".join(str(i) for i in idx), flag] + ([value] if value is not None else [])
        rc, out, err = module.run_command(argv, environ_update=C_ENV)
        refused = not_applied(out + "\n" + err)
        if rc != 0 or refused:
            why = "; ".join(refused) if refused else (out + err).strip()
            module.fail_json(
                msg="%s failed (rc %d): %s" % (" ".join(argv), rc, why or "no output"), rc=rc, stdout=out, stderr=err, gpus=results
            )


def node_requests(gpus, settings, models, clock_policy):
    out = []
    for name in sorted({g["name"] for g in gpus}, key=lambda n: min(g["index"] for g in gpus if g["name"] == n)):
        mine = [g for g in gpus if g["name"] == name]
        source = "gpu_tuning_models['%s']" % name if name in models else "gpu_tuning_settings"
        request = normal(dict(settings or {}, **(models.get(name) or {})), source)
        ac = request.get("application_clocks")
        if ac is not None and clock_policy == "nearest" and {"memory", "graphics"} <= set(ac):
            try:
                request["application_clocks"] = nearest_clock_pair(mine[0]["supported_clocks"], ac["memory"], ac["graphics"])
            except GpuSettingError as exc:
                raise GpuSettingError("%s: %s (GPU %d, %s)" % (source, exc, mine[0]["index"], name)) from None
        out.append(([g["index"] for g in mine], request, source))
    return out
