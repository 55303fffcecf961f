"""The simulated kubelet: it runs, registers nothing and runs no containers (SIMULATION)."""

from __future__ import annotations

import os
import sys
import time

from k8simlib import common


def kubelet(argv):
    if argv[:1] in (["--version"], ["version"]):
        print("Kubernetes v" + common.VERSION)
        return 0
    conf = os.path.join(common.ETC_K8S, "kubelet.conf")
    if not os.path.exists(conf) and not os.path.exists(os.path.join(common.ETC_K8S, "admin.conf")):
        sys.stderr.write("kubelet (SIMULATED): %s not found: this node has not joined a cluster yet\n" % conf)
        return 1
    print("kubelet (SIMULATED, rackforge lab): running with %s" % " ".join(argv))
    sys.stdout.flush()
    while True:
        time.sleep(3600)
