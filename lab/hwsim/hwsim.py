#!/usr/bin/python3
"""rackforge lab hardware simulator (SIMULATION, not a driver).

One multi-call program. Called as `ibv_devinfo`, `rdma`, `mlnx_qos`, `ethtool`, `show_gids`
it prints output in the exact formats of the real tools (checked by
tests/unit/test_hwsim_fidelity.py, which parses both with the same parsers). Called as `ib_write_bw`,
`ib_write_lat` (perftest, hwsimlib/perftest_sim.py), `nvbandwidth` and `all_reduce_perf`
(hwsimlib/gpu_bench_sim.py) it answers the fabric acceptance's benchmarks in their real formats
with simulated numbers. Called as
`modinfo`, `modprobe`, `lsmod` it simulates the node's kernel modules (a container cannot load
real ones): the parameter lists are those of Debian 12's kernel (see KERNEL_MODULES). Called as
`mount.nfs` it is the kernel's NFS client (hwsimlib/nfs_client.py). Called as `lsblk`, `mdadm`,
`wipefs`, `mkfs.xfs` and `mount.xfs` it is the node's NVMe disks, md arrays and xfs
(hwsimlib/block_sim.py, which also writes the /proc/mdstat the preload library shows). Called as
`hwsim` it administers the simulated node: `init`, `boot`, `block-boot`, `fault`, `state`.

nvidia-smi is not simulated here: the lab runs the REAL nvidia-smi binary over the lab NVML
library (lab/nvml/, libnvidia-ml.so.1), which asks this program for the GPUs with
`hwsim nvml-state` and applies settings with `hwsim nvml-set` (hwsimlib/nvml.py).

State:
  /etc/hwsim/profile.json     the node's hardware profile (data, lab/hwsim/profiles/)
  /var/lib/hwsim/node.json    persistent: faults, seed (survives a reboot)
  /var/lib/hwsim/block.json   persistent: the disks' signatures, md arrays and filesystems
  /run/hwsim/*.json           volatile: GPU clocks/power/persistence, NIC QoS, loaded driver
                              (/run is a tmpfs: a container restart is a simulated reboot)
  $HWSIM_SYSFS (default /var/lib/hwsim/sys)   the simulated sysfs tree, re-rendered at boot

The GPU side only answers once the simulated driver package (lab mirror) is installed:
/usr/lib/hwsim/driver-version holds the installed version; `hwsim boot` "loads" it.
"""

from __future__ import annotations

import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

# tool name -> (module, function); imported on use, so that each call loads only its own module
TOOLS = {
    "ibv_devinfo": ("hwsimlib.nic", "ibv_devinfo"),
    "rdma": ("hwsimlib.nic", "rdma"),
    "show_gids": ("hwsimlib.nic", "show_gids"),
    "mlnx_qos": ("hwsimlib.mlnx_qos", "mlnx_qos"),
    "ethtool": ("hwsimlib.nic", "ethtool"),
    "modinfo": ("hwsimlib.kernel", "modinfo"),
    "modprobe": ("hwsimlib.kernel", "modprobe"),
    "lsmod": ("hwsimlib.kernel", "lsmod"),
    "ib_write_bw": ("hwsimlib.perftest_sim", "ib_write_bw"),
    "ib_write_lat": ("hwsimlib.perftest_sim", "ib_write_lat"),
    "nvbandwidth": ("hwsimlib.gpu_bench_sim", "nvbandwidth"),
    "all_reduce_perf": ("hwsimlib.gpu_bench_sim", "all_reduce_perf"),
    "nvidia-ctk": ("hwsimlib.ctk_sim", "nvidia_ctk"),
    "mount.nfs": ("hwsimlib.nfs_client", "mount_nfs"),
    "lsblk": ("hwsimlib.block_sim", "lsblk"),
    "mdadm": ("hwsimlib.block_sim", "mdadm"),
    "wipefs": ("hwsimlib.block_sim", "wipefs"),
    "mkfs.xfs": ("hwsimlib.block_sim", "mkfs_xfs"),
    "mount.xfs": ("hwsimlib.block_sim", "mount_xfs"),
    "hwsim": ("hwsimlib.admin", "admin"),
}
# the lab NVML (lab/nvml) runs these for every nvidia-smi call: only the NVML module is loaded
NVML_COMMANDS = {"nvml-state": "nvml_state", "nvml-set": "nvml_set"}


def tool(module, function):
    return getattr(importlib.import_module(module), function)


def main(argv):
    name = os.path.basename(argv[0])
    if name.endswith(".py"):
        name = "hwsim"
    if name == "hwsim" and len(argv) > 1 and argv[1] in TOOLS:
        name, argv = argv[1], argv[1:]
    if name == "hwsim" and len(argv) > 1 and argv[1] in NVML_COMMANDS:
        return tool("hwsimlib.nvml", NVML_COMMANDS[argv[1]])(argv[2:])
    return tool(*TOOLS.get(name, TOOLS["hwsim"]))(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
