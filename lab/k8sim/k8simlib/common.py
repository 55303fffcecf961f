"""k8sim's settings, its one error and the argument helpers its tools share (SIMULATION).

VERSION is replaced by the mirror build (lab/mirror/build.py) in each package's copy; ROOT
(K8SIM_ROOT) is where the stand-in finds /etc and /var. The other modules read these as
common.<NAME> when they run, so a caller (or a test) that sets one here is heard everywhere; the
entry script (k8sim.py) forwards its own k8sim.<NAME> to these."""

from __future__ import annotations

import os
import re

VERSION = os.environ.get("K8SIM_VERSION_OVERRIDE") or "@VERSION@"  # replaced by the mirror build
ROOT = os.environ.get("K8SIM_ROOT", "/")
STATE = os.path.join(ROOT, "var/lib/k8sim/state.json")
ETC_K8S = os.path.join(ROOT, "etc/kubernetes")
PKI = os.path.join(ETC_K8S, "pki")
KUBELET_DIR = os.path.join(ROOT, "var/lib/kubelet")
PORT = 6443


class Invalid(Exception):
    pass


def _flag(args, name, default=None):
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    if default is None:
        raise Invalid("%s is required" % name)
    return default


def _pop_flag(args, name):
    """Remove `name value` or `name=value` from args; the value, or None."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            value = args[i + 1]
            del args[i : i + 2]
            return value
        if a.startswith(name + "="):
            del args[i]
            return a.split("=", 1)[1]
    return None


def _duration(text):
    total, found = 0, False
    for num, unit in re.findall(r"(\d+)([hms])", text):
        total += int(num) * {"h": 3600, "m": 60, "s": 1}[unit]
        found = True
    if not found or re.sub(r"\d+[hms]", "", text):
        raise Invalid("invalid duration %r" % text)
    return total
