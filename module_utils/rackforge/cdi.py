"""The NVIDIA CDI spec (Container Device Interface, cncf-tags/container-device-interface): is the
spec `nvidia-ctk cdi generate` wrote still the one for this boot's driver and GPUs? Pure: the
caller reads the file and says which host paths exist.

A spec goes stale when the driver changes under it: it names the old driver's libraries
(libnvidia-ml.so.<version>, ...) and firmware, which the upgrade removed, so every container that
asks for a GPU through CDI fails to start (the runtime cannot bind-mount a missing file). A GPU
that is not in the spec cannot be handed to a pod by name at all.
"""

from __future__ import annotations

import json

from ansible.module_utils.rackforge.health import finding, not_run

KIND = "nvidia.com/gpu"


def parse(text):
    """The spec as a dict (nvidia-ctk writes JSON when the output file ends in .json). Raises
    ValueError when it is not a CDI spec of nvidia.com/gpu devices."""
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise ValueError("not JSON: %s" % exc) from None
    if not isinstance(spec, dict) or not spec.get("cdiVersion") or not isinstance(spec.get("devices"), list):
        raise ValueError("not a CDI spec (cdiVersion and devices are required)")
    if spec.get("kind") != KIND:
        raise ValueError("kind is %r, not %r" % (spec.get("kind"), KIND))
    return spec


def read(path):
    """The spec file's text, None when there is none (a missing spec is a finding, not an error)."""
    try:
        with open(path) as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def device_names(spec):
    """The names the spec offers (nvidia-ctk's defaults: each GPU by index and by UUID, and all)."""
    return [d.get("name") for d in spec["devices"] if isinstance(d, dict)]


def host_paths(spec):
    """[(host path, what it is)] for everything the runtime takes from the host: device nodes,
    bind mounts and hook binaries, in the common edits and each device's."""
    edits = [("", spec.get("containerEdits") or {})]
    edits += [(d.get("name", "?"), d.get("containerEdits") or {}) for d in spec["devices"] if isinstance(d, dict)]
    seen, out = set(), []
    for owner, edit in edits:
        where = " (device %s)" % owner if owner else ""
        items = [(n.get("hostPath") or n.get("path"), "device node") for n in edit.get("deviceNodes") or []]
        items += [(m.get("hostPath"), "mount") for m in edit.get("mounts") or []]
        items += [(h.get("path"), "hook") for h in edit.get("hooks") or []]
        for path, what in items:
            if path and path not in seen:
                seen.add(path)
                out.append((path, what + where))
    return out


def findings(path, text, gpus, exists):
    """Findings for the spec at `path` (its text, None when there is no file) against the GPUs
    the driver reports (nvidia_gpu_info's gpus: index and uuid) and `exists(host_path)`."""
    component = "CDI spec %s" % path
    if text is None:
        return [
            finding(
                "cdi_spec",
                component,
                "present",
                "missing",
                "%s is missing: no pod can be given a GPU through CDI (nvidia-ctk cdi generate writes it)" % component,
            )
        ]
    try:
        spec = parse(text)
    except ValueError as exc:
        return [not_run("cdi_spec", component, "the spec does not parse: %s" % exc, {"path": path})]
    out = []
    names = set(device_names(spec))
    for gpu in gpus:
        want = [str(gpu["index"]), gpu["uuid"]]
        absent = [n for n in want if n not in names]
        if absent:
            comp = "GPU %d (%s)" % (gpu["index"], gpu["uuid"])
            out.append(
                finding(
                    "cdi_spec",
                    comp,
                    "%s=%s" % (KIND, " and ".join(want)),
                    "not in %s" % path,
                    "%s is not in %s (generated before this GPU was seen): a pod cannot be given it" % (comp, component),
                )
            )
    missing = [(p, what) for p, what in host_paths(spec) if not exists(p)]
    if missing:
        shown = ", ".join("%s (%s)" % pw for pw in missing[:5]) + (" and %d more" % (len(missing) - 5) if len(missing) > 5 else "")
        out.append(
            finding(
                "cdi_spec_stale",
                component,
                "every host path it names exists",
                "%d missing: %s" % (len(missing), shown),
                "%s is stale (written for another driver or boot): %s. Containers given a GPU through it fail to start."
                % (component, shown),
            )
        )
    return out
