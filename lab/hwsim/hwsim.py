#!/usr/bin/python3
"""rackforge lab hardware simulator (SIMULATION, not a driver).

One multi-call program. Called as `nvidia-smi`, `ibstat`, `ibv_devinfo`, `rdma`, `mlnx_qos`,
`ethtool`, `show_gids` it prints output in the exact formats of the real tools (checked by
tests/unit/test_hwsim_fidelity.py, which parses both with the same parsers). Called as
`modinfo`, `modprobe`, `lsmod` it simulates the node's kernel modules (a container cannot load
real ones): the parameter lists are those of Debian 12's kernel (see KERNEL_MODULES). Called as
`hwsim` it administers the simulated node: `init`, `boot`, `fault`, `state`.

State:
  /etc/hwsim/profile.json     the node's hardware profile (data, lab/hwsim/profiles/)
  /var/lib/hwsim/node.json    persistent: faults, seed (survives a reboot)
  /run/hwsim/*.json           volatile: GPU clocks/power/persistence, NIC QoS, loaded driver
                              (/run is a tmpfs: a container restart is a simulated reboot)
  $HWSIM_SYSFS (default /var/lib/hwsim/sys)   the simulated sysfs tree, re-rendered at boot

The GPU side only answers once the simulated driver package (lab mirror) is installed:
/usr/lib/hwsim/driver-version holds the installed version; `hwsim boot` "loads" it.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from hwsimlib.admin import admin
from hwsimlib.gpu import nvidia_smi
from hwsimlib.kernel import lsmod, modinfo, modprobe
from hwsimlib.mlnx_qos import mlnx_qos
from hwsimlib.nic import ethtool, ibstat, ibv_devinfo, rdma, show_gids

TOOLS = {
    "nvidia-smi": nvidia_smi,
    "ibstat": ibstat,
    "ibv_devinfo": ibv_devinfo,
    "rdma": rdma,
    "show_gids": show_gids,
    "mlnx_qos": mlnx_qos,
    "ethtool": ethtool,
    "modinfo": modinfo,
    "modprobe": modprobe,
    "lsmod": lsmod,
    "hwsim": admin,
}


def main(argv):
    name = os.path.basename(argv[0])
    if name.endswith(".py"):
        name = "hwsim"
    if name == "hwsim" and len(argv) > 1 and argv[1] in TOOLS:
        name, argv = argv[1], argv[1:]
    return TOOLS.get(name, admin)(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
