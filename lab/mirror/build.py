#!/usr/bin/env python3
"""Build the lab package mirror: a signed apt repository of SIMULATED vendor packages.

The NVIDIA driver packages carry no kernel driver. They install the REAL nvidia-smi (Debian 12
non-free's 535.261.03 binary, fetched by lab/nvml/fetch-nvidia-smi.sh) and the lab NVML
(lab/nvml: a libnvidia-ml.so.1 compiled on the host, the lab nodes have no compiler) that
answers it from the lab's hardware simulator (lab/hwsim), plus the systemd units and version
files the real packages ship, so the roles' install paths (repo + key, pinned version, hold,
services) run for real against a mirror, exactly as an air-gapped site points them at its
internal mirror. The fabric manager and persistence daemons are SIMULATED shell scripts.
Stdlib + dpkg-deb + gpg.

A second repository, /debian, carries REAL Debian packages the roles install from the distro
on a real node (DISTRO_PACKAGES, fetched with `apt-get download` on the host, which checks
Debian's signatures): it is the lab nodes' only distro source, as a real server has one.

A third, /containerd, carries Debian 13's REAL containerd 1.7.24 (mirror_trixie.py: the first
Debian containerd with CDI), which container_runtime adds as a repository of its own.

Split by concern: mirror_nvidia.py (the NVIDIA packages and runfile), mirror_k8s.py (the Kubernetes
stand-ins: lab/k8sim installed under /usr/lib/k8sim/<package>/, entry scripts in /usr/bin) and
mirror_repo.py (debs, the Debian packages, signed indexes); this file re-exports their names.

    build.py OUTDIR     (cached: rebuilt only when the mirror's code, k8sim, the lab NVML or the binary changes)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys

# the mirror_* modules beside this file (also when it is loaded by path)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mirror_k8s import (
    APISERVER_UNIT,
    CALICO_VERSION,
    DEVICE_PLUGIN,
    DEVICE_PLUGIN_VERSION,
    K8S_VERSIONS,
    K8SIM_DIR,
    K8SIM_ENTRY,
    K8SIM_LIB,
    KUBEADM_DROPIN,
    KUBELET_UNIT,
    SIM_K8S,
    TIGERA_OPERATOR,
    k8s_packages,
    k8sim_files,
    k8sim_install,
)
from mirror_nvidia import (
    CTK,
    DRIVER_POSTINST,
    DRIVER_VERSIONS,
    FABRICMANAGER,
    FABRICMANAGER_UNIT,
    NVIDIA_SMI_VERSION,
    PERSISTENCED,
    PERSISTENCED_UNIT,
    RUNFILE_SCRIPT,
    RUNFILE_VERSION,
    SIM,
    SIM_DRIVER,
    TOOLKIT_VERSION,
    driver_files,
    packages,
    real_files,
    runfile,
)
from mirror_repo import DISTRO_PACKAGES, build_deb, digest, distro_debs, file_mode, gpg, index_entry, write_flat_repo, write_repo
from mirror_trixie import CONTAINERD, trixie_debs

HERE = os.path.dirname(os.path.abspath(__file__))
LAB = os.path.dirname(HERE)

__all__ = [
    "APISERVER_UNIT",
    "CALICO_VERSION",
    "CONTAINERD",
    "CTK",
    "DEVICE_PLUGIN",
    "DEVICE_PLUGIN_VERSION",
    "DISTRO_PACKAGES",
    "DRIVER_POSTINST",
    "DRIVER_VERSIONS",
    "FABRICMANAGER",
    "FABRICMANAGER_UNIT",
    "K8SIM_DIR",
    "K8SIM_ENTRY",
    "K8SIM_LIB",
    "K8S_VERSIONS",
    "KUBEADM_DROPIN",
    "KUBELET_UNIT",
    "LAB",
    "NVIDIA_SMI_VERSION",
    "PERSISTENCED",
    "PERSISTENCED_UNIT",
    "RUNFILE_SCRIPT",
    "RUNFILE_VERSION",
    "SIM",
    "SIM_DRIVER",
    "SIM_K8S",
    "TIGERA_OPERATOR",
    "TOOLKIT_VERSION",
    "build_deb",
    "digest",
    "distro_debs",
    "driver_files",
    "file_mode",
    "gpg",
    "index_entry",
    "k8s_packages",
    "k8sim_files",
    "k8sim_install",
    "main",
    "packages",
    "real_files",
    "runfile",
    "sources_digest",
    "trixie_debs",
    "write_flat_repo",
    "write_repo",
]


def sources_digest():
    """sha256 of the code the mirror is built from: lab/mirror's and lab/k8sim's Python files."""
    h = hashlib.sha256()
    for top in (HERE, K8SIM_DIR):
        for dirpath, dirs, names in sorted(os.walk(top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    h.update(os.path.relpath(path, LAB).encode() + b"\0" + open(path, "rb").read() + b"\0")
    return h.hexdigest()


def main():
    out = os.path.abspath(sys.argv[1])
    stamp = os.path.join(out, ".stamp")
    smi, nvml = real_files()
    me = sources_digest() + hashlib.sha256(smi + nvml).hexdigest()
    if os.path.exists(stamp) and open(stamp).read().strip() == me:
        return 0
    # empty the directory but keep it: the running mirror container bind-mounts it
    os.makedirs(out, exist_ok=True)
    for entry in os.listdir(out):
        path = os.path.join(out, entry)
        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    home = os.path.join(os.path.dirname(out), "gnupg")
    if not os.path.isdir(home):
        os.makedirs(home, mode=0o700)
        gpg(home, "--passphrase", "", "--quick-generate-key", "rackforge lab mirror <lab@rackforge.invalid>", "ed25519", "sign", "never")
    # /vendor: what the roles add as the NVIDIA repository; /debian: the nodes' distro source
    vendor = write_repo(
        os.path.join(out, "vendor"),
        "rackforge lab vendor mirror (SIMULATED NVIDIA packages)",
        lambda pool: [build_deb(pkg, pool) for pkg in packages()],
        home,
    )
    debian = write_repo(os.path.join(out, "debian"), "rackforge lab distro mirror (real Debian packages)", distro_debs, home)
    # /containerd: a containerd with CDI (Debian 13's, real), added by container_runtime as a repository
    cache = os.path.join(os.path.dirname(LAB), ".cache", "realtools")
    write_repo(
        os.path.join(out, "containerd"),
        "rackforge lab containerd mirror (Debian 13's real containerd %s)" % CONTAINERD[1],
        lambda pool: trixie_debs(pool, cache),
        home,
    )
    os.makedirs(os.path.join(out, "vendor", "runfile"))
    with open(os.path.join(out, "vendor", "runfile", "NVIDIA-Linux-x86_64-%s.run" % RUNFILE_VERSION), "wb") as fh:
        fh.write(runfile(RUNFILE_VERSION))
    with open(os.path.join(out, "rackforge-lab.asc"), "w") as fh:
        gpg(home, "--armor", "--export", stdout=fh)
    for version in K8S_VERSIONS:
        minor = "v" + version.rsplit(".", 1)[0]
        flat = os.path.join(out, "kubernetes", "core:", "stable:", minor, "deb")
        if not os.path.isdir(flat):
            os.makedirs(flat)
        for pkg in k8s_packages(version):
            build_deb(pkg, flat)
    for flat in {os.path.join(out, "kubernetes", "core:", "stable:", "v" + v.rsplit(".", 1)[0], "deb") for v in K8S_VERSIONS}:
        write_flat_repo(flat, home)
    calico = os.path.join(out, "calico", CALICO_VERSION)
    os.makedirs(calico)
    with open(os.path.join(calico, "tigera-operator.yaml"), "w") as fh:
        fh.write(TIGERA_OPERATOR)
    plugin = os.path.join(out, "k8s-device-plugin", DEVICE_PLUGIN_VERSION)
    os.makedirs(plugin)
    with open(os.path.join(plugin, "nvidia-device-plugin.yml"), "w") as fh:
        fh.write(DEVICE_PLUGIN)
    with open(stamp, "w") as fh:
        fh.write(me + "\n")
    print("mirror: %d simulated vendor packages in %s/vendor, %d Debian packages in %s/debian" % (vendor, out, debian, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
