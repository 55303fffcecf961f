"""Run the lab simulator locally (no container): state in a temp dir, tools as argv[0] names.

`nvidia-smi` is the REAL binary (Debian 12 non-free, fetched by lab/nvml/fetch-nvidia-smi.sh into
.cache/realtools/) over the lab NVML (lab/nvml, built with the host's gcc), which asks this Sim's
simulator (HWSIM_BIN) for its GPUs. The other tools are the simulator's (SIMULATION)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from ibsim_helper import install_real_tools

ROOT = pathlib.Path(__file__).resolve().parents[2]
HWSIM = ROOT / "lab" / "hwsim" / "hwsim.py"
PROFILES = ROOT / "lab" / "hwsim" / "profiles"
NVML_DIR = ROOT / "lab" / "nvml"
_REAL = {}


def real_nvidia_smi():
    """Path of the real nvidia-smi (fetched once; scripts/setup.sh normally has it cached)."""
    if "smi" not in _REAL:
        res = subprocess.run([str(NVML_DIR / "fetch-nvidia-smi.sh"), "--print"], capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise RuntimeError("the real nvidia-smi is not available (lab/nvml/fetch-nvidia-smi.sh): %s" % res.stderr.strip())
        _REAL["smi"] = res.stdout.strip().splitlines()[-1]
    return _REAL["smi"]


def lab_nvml():
    """Path of the host-built lab libnvidia-ml.so.1 (built once per source change)."""
    if "nvml" not in _REAL:
        res = subprocess.run([sys.executable, str(NVML_DIR / "build.py")], capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise RuntimeError("lab/nvml/build.py failed: %s%s" % (res.stdout, res.stderr))
        _REAL["nvml"] = res.stdout.strip().splitlines()[-1]
    return _REAL["nvml"]


class Sim:
    def __init__(self, tmp, profile="hgx-h100-8gpu", driver="535.261.03", fabricmanager=True):
        self.tmp = pathlib.Path(tmp)
        self.bin = self.tmp / "bin"
        self.bin.mkdir()
        self.env = dict(
            os.environ,
            HWSIM_ETC=str(self.tmp / "etc"),
            HWSIM_VARLIB=str(self.tmp / "var"),
            HWSIM_RUN=str(self.tmp / "run"),
            HWSIM_DRIVER_FILE=str(self.tmp / "driver-version"),
            HWSIM_DRIVER_FLAVOR_FILE=str(self.tmp / "driver-flavor"),
            HWSIM_FM_FILE=str(self.tmp / "fm-version"),
            HWSIM_ALLOW_NONROOT="1",
            HWSIM_MODPROBE_D=str(self.tmp / "etc" / "modprobe.d"),
            HWSIM_MODULES_LOAD_D=str(self.tmp / "etc" / "modules-load.d"),
            PATH="%s:%s" % (self.bin, os.environ["PATH"]),
            HWSIM_BIN=str(self.bin / "hwsim"),
            HWSIM_DEV=str(self.tmp / "dev"),
        )
        tools = ("ibv_devinfo", "rdma", "mlnx_qos", "ethtool", "show_gids", "modinfo", "modprobe", "lsmod", "hwsim")
        tools += ("ib_write_bw", "ib_write_lat", "nvbandwidth", "all_reduce_perf")
        tools += ("lsblk", "mdadm", "wipefs", "mkfs.xfs")  # block_sim.py (mount.xfs needs a mount namespace)
        for tool in tools:
            link = self.bin / tool
            link.write_text('#!/bin/sh\nexec %s %s %s "$@"\n' % (sys.executable, HWSIM, tool))
            link.chmod(0o755)
        # the real nvidia-smi, with the lab NVML (and only it) on its loader path
        smi = self.bin / "nvidia-smi"
        smi.write_text('#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' % (os.path.dirname(lab_nvml()), real_nvidia_smi()))
        smi.chmod(0o755)
        self.sysfs = self.tmp / "var" / "sys"
        install_real_tools(self.bin, self.sysfs)  # the REAL ibstat/ibstatus over this Sim's sysfs tree
        self.run("hwsim", "init", str(PROFILES / (profile + ".json")), "--seed", "test", "--index", "1")
        if driver:
            (self.tmp / "driver-version").write_text(driver + "\n")
            self.run("hwsim", "load-driver")
            if fabricmanager:
                (self.tmp / "fm-version").write_text(driver + "\n")
                self.run("hwsim", "fabricmanager", "start")

    def run(self, *argv, check=True):
        res = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, check=False)
        if check and res.returncode != 0:
            raise AssertionError("%s failed (%d): %s%s" % (argv, res.returncode, res.stdout, res.stderr))
        return res.stdout if check else res

    def get_bin_path(self):
        """An AnsibleModule.get_bin_path that finds only the simulator's tools (monkeypatch it in):
        anything else, systemctl included, is "not installed" on the simulated node."""
        bindir = self.bin

        def get_bin_path(module, name, required=False, opt_dirs=None):
            path = os.path.join(bindir, name)
            return path if os.path.exists(path) else None

        return get_bin_path
