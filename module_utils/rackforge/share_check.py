"""The model share's health (roles/model_storage mounts it; rackforge_health checks it).

A hung NFS server must not hang the health check: a hard mount blocks every stat() of it in
the kernel, uninterruptibly. So the share is looked at by a child process, and the check waits
for it at most `timeout_s`; a child that has not answered by then is killed and never waited for
(one stuck in the kernel would block a wait), and the share is a finding.

Public API:

- probe(path, timeout_s, argv=None) -> {"answered": bool, "seconds": float, "rc": int | None,
  "stdout": str, "stderr": str}: run the probe (argv overrides it, for tests) under the timeout.
- read_probe(result) -> (state, detail): what a probe result says (hung, not_run, not_mounted or
  mounted), shared with the local cache's check (cache_check.py).
- share_findings(path, timeout_s, result) -> [finding]: what the probe's result means:
  model_share_hung (no answer in time), model_share_not_mounted (the path is missing or not a
  mount point: pods would read the node's own empty directory), model_share_not_run (the probe
  failed otherwise, with its evidence).
- check_share(path, timeout_s, argv=None) -> {"findings": [...], "share": {path, answered, up}}:
  the share's summary goes into the verdict (health["share"]) and its textfile metrics.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from ansible.module_utils.rackforge.health import finding, not_run

# prints {"exists", "mount", "free"} of the path: a mount point by the mount table (a bind mount of
# the same filesystem has its parent's st_dev, so os.path.ismount alone misses it); the statvfs is
# what a mounted NFS share must answer from its server (it blocks while the server is hung), and
# its free bytes (the local cache's check reads them: cache_check.py)
PROBE = (
    "import json, os, sys\n"
    "p = os.path.realpath(sys.argv[1])\n"
    "if not os.path.isdir(p):\n"
    "    print(json.dumps({'exists': False})); sys.exit(0)\n"
    "with open('/proc/self/mountinfo') as fh:\n"
    "    points = {line.split()[4].encode().decode('unicode_escape') for line in fh if len(line.split()) > 4}\n"
    "st = os.statvfs(p)\n"
    "print(json.dumps({'exists': True, 'mount': p in points or os.path.ismount(p), 'free': st.f_bavail * st.f_frsize}))\n"
)


def probe(path, timeout_s, argv=None):
    """Run the probe; see the module docstring."""
    began = time.monotonic()
    child = subprocess.Popen(
        argv or [sys.executable, "-c", PROBE, path],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    while child.poll() is None:
        if time.monotonic() - began >= timeout_s:
            child.kill()  # not waited for: a process stuck in an NFS call may never exit
            return {"answered": False, "seconds": round(time.monotonic() - began, 3), "rc": None, "stdout": "", "stderr": ""}
        time.sleep(0.02)
    out, err = child.communicate()
    return {
        "answered": True,
        "seconds": round(time.monotonic() - began, 3),
        "rc": child.returncode,
        "stdout": out.decode("utf-8", "replace"),
        "stderr": err.decode("utf-8", "replace"),
    }


def read_probe(result):
    """What one probe result says, for the share's and the cache's checks (cache_check.py):
    ("hung", None), ("not_run", why), ("not_mounted", what is there) or ("mounted", the probe's
    {"exists", "mount", "free"})."""
    if not result["answered"]:
        return "hung", None
    try:
        seen = json.loads(result["stdout"]) if result["rc"] == 0 else None
    except ValueError:
        seen = None
    if not isinstance(seen, dict) or "exists" not in seen:
        return "not_run", "the probe exited %s" % result["rc"] if result["rc"] != 0 else "the probe printed no JSON"
    if not seen["exists"] or not seen.get("mount"):
        return "not_mounted", "no such directory" if not seen["exists"] else "a plain directory, nothing mounted"
    return "mounted", seen


def share_findings(path, timeout_s, result):
    """The findings of one probe result (see the module docstring)."""
    component = "model share %s" % path
    state, detail = read_probe(result)
    if state == "hung":
        return [
            finding(
                "model_share_hung",
                component,
                "answers within %g s" % timeout_s,
                "no answer in %g s" % result["seconds"],
                "%s did not answer within %g s: its NFS server is hung or unreachable (a hard mount blocks every reader)"
                % (component, timeout_s),
            )
        ]
    if state == "not_run":
        return [not_run("model_share", component, detail, {"rc": result["rc"], "stdout": result["stdout"], "stderr": result["stderr"]})]
    if state == "not_mounted":
        return [
            finding(
                "model_share_not_mounted",
                component,
                "mounted",
                detail,
                "%s is not mounted (%s): pods would read the node's own directory, not the models" % (component, detail),
            )
        ]
    return []


def check_share(path, timeout_s, argv=None):
    """The findings and the share's summary for the verdict and its metrics: {path, answered, up
    (no finding)}; how long it took stays in the findings (a verdict that changed with every
    run's timing would rewrite the metrics and the fleet state on a re-run that found nothing new)."""
    result = probe(path, timeout_s, argv)
    findings = share_findings(path, timeout_s, result)
    share = {"path": path, "answered": result["answered"], "up": not findings}
    return {"findings": findings, "share": share}
