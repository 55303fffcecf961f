"""The local NVMe model cache's health (roles/model_storage makes it; rackforge_health checks it).

The array: /dev/md/<name> must point at an array /proc/mdstat lists active and not degraded, every
member's device node present (devtmpfs removes the node of a disk that is gone; a RAID0 that lost
a member is broken although Debian 12's 6.1 kernel still prints it "active"). The filesystem:
mounted at its directory, with at least min_free_gb free. The mount is looked at by a child process
under a timeout (share_check.probe), as the share is: a disk that stopped answering must not hang
the check.

Public API:

- check_cache(where, device, min_free_gb, timeout_s, proc_mdstat="/proc/mdstat", dev_root="/dev",
  argv=None) -> {"findings": [...], "cache": {"path", "device", "up"}}:
  model_cache_array (the array is missing, inactive, degraded or lost a member),
  model_cache_not_mounted, model_cache_full (free space below min_free_gb), model_cache_not_run
  (the probe failed otherwise, or /proc/mdstat cannot be read).
"""

from __future__ import annotations

import os

from ansible.module_utils.rackforge.health import finding, not_run
from ansible.module_utils.rackforge.mdstat import ParseError, parse_mdstat
from ansible.module_utils.rackforge.share_check import probe, read_probe


def _array_problem(device, proc_mdstat, dev_root):
    """(why the array is not serving, or None; not_run evidence, or None)."""
    link = os.path.join(dev_root, os.path.relpath(device, "/dev"))
    if not os.path.exists(link):
        return "%s does not exist: the array is not assembled (or inactive: a member missing at boot)" % device, None
    md = os.path.basename(os.path.realpath(link))
    try:
        with open(proc_mdstat) as fh:
            arrays = parse_mdstat(fh.read())["arrays"]
    except (OSError, ParseError) as exc:
        return None, str(exc)
    array = arrays.get(md)
    if array is None:
        return "%s (%s) is not in %s" % (device, md, proc_mdstat), None
    gone = sorted(d["name"] for d in array["devices"] if not os.path.exists(os.path.join(dev_root, d["name"])))
    if gone:
        return "%s (%s) has lost %s: the disk is gone, and a RAID0 without a member is broken" % (device, md, ", ".join(gone)), None
    if array["state"] != "active" or array["degraded"]:
        return "%s (%s) is %s%s" % (device, md, array["state"], ", degraded" if array["degraded"] else ""), None
    return None, None


def check_cache(where, device, min_free_gb, timeout_s, proc_mdstat="/proc/mdstat", dev_root="/dev", argv=None):
    """The findings and the cache's summary (see the module docstring)."""
    component = "model cache %s" % where
    findings = []
    why, evidence = _array_problem(device, proc_mdstat, dev_root)
    if evidence is not None:
        findings.append(not_run("model_cache", component, "%s could not be read" % proc_mdstat, {"error": evidence}))
    elif why:
        findings.append(finding("model_cache_array", component, "an active array, every member present", why, "%s: %s" % (component, why)))
    result = probe(where, timeout_s, argv)
    state, detail = read_probe(result)
    if state == "hung":
        findings.append(
            finding(
                "model_cache_not_mounted",
                component,
                "answers within %g s" % timeout_s,
                "no answer",
                "%s did not answer in time" % component,
            )
        )
    elif state == "not_run":
        findings.append(not_run("model_cache", component, detail, {k: result[k] for k in ("rc", "stdout", "stderr")}))
    elif state == "not_mounted":
        findings.append(
            finding(
                "model_cache_not_mounted",
                component,
                "mounted",
                detail,
                "%s is not mounted (%s): models would fill the root disk" % (component, detail),
            )
        )
    elif min_free_gb and detail["free"] < min_free_gb * 1e9:
        free = "%.1f GB free" % (detail["free"] / 1e9)
        findings.append(
            finding(
                "model_cache_full",
                component,
                ">= %g GB free" % min_free_gb,
                free,
                "%s has %s, below %g GB: evict models" % (component, free, min_free_gb),
            )
        )
    return {"findings": findings, "cache": {"path": where, "device": device, "up": not findings}}
