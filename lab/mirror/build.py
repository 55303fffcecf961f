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

    build.py OUTDIR     (cached: rebuilt only when this file, the lab NVML or the binary changes)
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

LAB = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _lab_nvml():
    """lab/nvml/build.py, loaded by path (its module name, build, is too common to import)."""
    spec = importlib.util.spec_from_file_location("rackforge_lab_nvml_build", os.path.join(LAB, "nvml", "build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the 535 branch, whose real nvidia-smi (535.261.03) the lab runs: both versions ship that binary,
# the lab NVML reports each package's own driver version (the upgrade tests need two)
DRIVER_VERSIONS = ("535.247.01", "535.261.03")
NVIDIA_SMI_VERSION = "535.261.03"
TOOLKIT_VERSION = "1.17.3"
# what the roles install from the distro, plus the dependencies the lab image lacks
DISTRO_PACKAGES = (
    "prometheus-node-exporter",
    "rdma-core",
    "ibverbs-providers",
    "ibverbs-utils",
    "infiniband-diags",
    "rdmacm-utils",
    "libibverbs1",
    "librdmacm1",
    "libibmad5",
    "libibnetdisc5",
    "libibumad3",
    "libnl-3-200",
    "libnl-route-3-200",
    "lsb-base",
    "udev",
    # container_runtime: the real containerd and runc; python3-yaml for the Kubernetes stand-ins
    "containerd",
    "runc",
    "python3-yaml",
    "libyaml-0-2",
    # host_firewall
    "nftables",
    "libnftables1",
    "libnftnl11",
    "libjansson4",
)
# SIMULATED Kubernetes packages (lab/k8sim), published like pkgs.k8s.io: a flat repository per
# minor version at /kubernetes/core:/stable:/v<minor>/deb/ with its Release.key
K8S_VERSIONS = ("1.31.4", "1.31.5")
K8SIM = os.path.join(LAB, "k8sim", "k8sim.py")
CALICO_VERSION = "v3.29.1"
SIM = "SIMULATED package for the rackforge lab (hwsim): no driver, no hardware access."
SIM_DRIVER = (
    "SIMULATED driver package for the rackforge lab: no kernel driver, no hardware access.\n"
    " It installs the REAL nvidia-smi %s binary (Debian 12 non-free; every lab driver version\n"
    " ships that same binary) over the lab NVML (libnvidia-ml.so.1, lab/nvml), which answers from\n"
    " the lab's hardware simulator and reports this package's driver version." % NVIDIA_SMI_VERSION
)

PERSISTENCED = """#!/bin/sh
# SIMULATED nvidia-persistenced: keeps the simulated GPUs in persistence mode while running
/usr/lib/hwsim/hwsim nvml-set all persistence 1 >/dev/null || exit 1
exec sleep infinity
"""

PERSISTENCED_UNIT = """[Unit]
Description=NVIDIA Persistence Daemon (SIMULATED, rackforge lab)
Wants=syslog.target

[Service]
Type=simple
ExecStart=/usr/bin/nvidia-persistenced
ExecStopPost=-/usr/lib/hwsim/hwsim nvml-set all persistence 0

[Install]
WantedBy=multi-user.target
"""

FABRICMANAGER = """#!/bin/sh
# SIMULATED nv-fabricmanager: trains the simulated NVSwitch fabric, refuses a driver mismatch
/usr/lib/hwsim/hwsim hwsim fabricmanager start || exit 1
exec sleep infinity
"""

FABRICMANAGER_UNIT = """[Unit]
Description=NVIDIA fabric manager service (SIMULATED, rackforge lab)
After=network-online.target nvidia-persistenced.service

[Service]
Type=simple
ExecStart=/usr/bin/nv-fabricmanager
ExecStopPost=-/usr/lib/hwsim/hwsim hwsim fabricmanager stop

[Install]
WantedBy=multi-user.target
"""

CTK = (
    """#!/bin/sh
# SIMULATED nvidia-ctk: version only (configuring containerd belongs to the container_runtime role)
case "$1" in
  --version|-v) echo "NVIDIA Container Toolkit CLI version %s (SIMULATED)";;
  *) echo "nvidia-ctk (SIMULATED): only --version is available in the lab" >&2; exit 1;;
esac
"""
    % TOOLKIT_VERSION
)


def real_files():
    """The real nvidia-smi and the host-built lab NVML, as bytes."""
    fetch = os.path.join(LAB, "nvml", "fetch-nvidia-smi.sh")
    smi = subprocess.run([fetch, "--print"], check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    with open(smi, "rb") as fh:
        smi_bytes = fh.read()
    with open(_lab_nvml().build(), "rb") as fh:
        nvml_bytes = fh.read()
    return smi_bytes, nvml_bytes


DRIVER_POSTINST = """#!/bin/sh
set -e
ldconfig
/usr/lib/hwsim/hwsim hwsim load-driver || true
systemctl daemon-reload >/dev/null 2>&1 || true
"""


def driver_files(version, smi, nvml):
    return {
        "usr/lib/hwsim/driver-version": version + "\n",
        "usr/bin/nvidia-smi": smi,
        "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1": nvml,
        "usr/bin/nvidia-persistenced": PERSISTENCED,
        "lib/systemd/system/nvidia-persistenced.service": PERSISTENCED_UNIT,
    }


def packages():
    smi, nvml = real_files()
    pkgs = []
    for v in DRIVER_VERSIONS:
        branch = v.split(".")[0]
        pkgs.append(
            {
                "Package": "nvidia-driver-%s" % branch,
                "Version": "%s-1" % v,
                "Architecture": "amd64",
                "Description": "NVIDIA driver metapackage %s\n %s" % (v, SIM_DRIVER),
                "files": driver_files(v, smi, nvml),
                "postinst": DRIVER_POSTINST,
                "postrm": "#!/bin/sh\nldconfig\n",
            }
        )
        pkgs.append(
            {
                "Package": "nvidia-fabricmanager-%s" % branch,
                "Version": "%s-1" % v,
                "Description": "NVIDIA fabric manager %s\n %s" % (v, SIM),
                "files": {
                    "usr/lib/hwsim/fabricmanager-version": v + "\n",
                    "usr/bin/nv-fabricmanager": FABRICMANAGER,
                    "lib/systemd/system/nvidia-fabricmanager.service": FABRICMANAGER_UNIT,
                },
                "postinst": "#!/bin/sh\nsystemctl daemon-reload >/dev/null 2>&1 || true\n",
            }
        )
    pkgs.append(
        {
            "Package": "nvidia-container-toolkit",
            "Version": "%s-1" % TOOLKIT_VERSION,
            "Description": "NVIDIA container toolkit\n %s" % SIM,
            "files": {
                "usr/bin/nvidia-ctk": CTK,
                # the OCI runtime containerd's "nvidia" runtime calls (the real one injects the GPUs)
                "usr/bin/nvidia-container-runtime": '#!/bin/sh\n# SIMULATED nvidia-container-runtime: plain runc\nexec runc "$@"\n',
            },
            "postinst": None,
        }
    )
    return pkgs


KUBELET_UNIT = """[Unit]
Description=kubelet: The Kubernetes Node Agent (SIMULATED, rackforge lab)
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
"""

KUBEADM_DROPIN = """# as pkgs.k8s.io's kubeadm ships it
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \\
--kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""

APISERVER_UNIT = """[Unit]
Description=SIMULATED kube-apiserver (rackforge lab k8sim; started by kubeadm init)
After=network-online.target

[Service]
ExecStart=/usr/bin/kubeadm-apiserver-sim
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
"""


def k8s_packages(version):
    with open(K8SIM) as fh:
        tool = fh.read().replace("@VERSION@", version)
    deb_version = "%s-1.1" % version  # pkgs.k8s.io's version scheme
    common = "python3, python3-yaml"
    return [
        {
            "Package": "kubelet",
            "Version": deb_version,
            "Depends": common,
            "Description": "Kubernetes node agent\n %s" % SIM_K8S,
            "files": {"usr/bin/kubelet": tool, "lib/systemd/system/kubelet.service": KUBELET_UNIT},
            "postinst": "#!/bin/sh\nsystemctl daemon-reload >/dev/null 2>&1 || true\n"
            "systemctl enable kubelet.service >/dev/null 2>&1 || true\n",
        },
        {
            "Package": "kubectl",
            "Version": deb_version,
            "Depends": common,
            "Description": "Kubernetes command-line tool\n %s" % SIM_K8S,
            "files": {"usr/bin/kubectl": tool},
            "postinst": None,
        },
        {
            "Package": "kubeadm",
            "Version": deb_version,
            "Depends": common + ", openssl, kubelet (>= %s), kubectl (>= %s)" % (version.rsplit(".", 1)[0], version.rsplit(".", 1)[0]),
            "Description": "Kubernetes cluster bootstrapping tool\n %s" % SIM_K8S,
            "files": {
                "usr/bin/kubeadm": tool,
                "usr/bin/kubeadm-apiserver-sim": tool.replace("prog = os.path.basename(sys.argv[0])", 'prog = "apiserver"'),
                "lib/systemd/system/kubelet.service.d/10-kubeadm.conf": KUBEADM_DROPIN,
                "lib/systemd/system/k8sim-apiserver.service": APISERVER_UNIT,
            },
            "postinst": "#!/bin/sh\nsystemctl daemon-reload >/dev/null 2>&1 || true\n",
        },
    ]


SIM_K8S = "SIMULATED stand-in for the rackforge lab (lab/k8sim): validates configs, records joins; runs no containers."

TIGERA_OPERATOR = (
    """# SIMULATED stand-in for Calico's tigera-operator.yaml (%s), rackforge lab: the real manifest
# (CRDs, RBAC, the operator Deployment) is published on GitHub, which the lab cannot reach.
apiVersion: v1
kind: Namespace
metadata:
  name: tigera-operator
  labels:
    name: tigera-operator
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: tigera-operator
  namespace: tigera-operator
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: tigera-operator
  namespace: tigera-operator
  labels:
    k8s-app: tigera-operator
spec:
  replicas: 1
  selector:
    matchLabels:
      name: tigera-operator
  template:
    metadata:
      labels:
        name: tigera-operator
        k8s-app: tigera-operator
    spec:
      serviceAccountName: tigera-operator
      hostNetwork: true
      tolerations:
        - effect: NoExecute
          operator: Exists
        - effect: NoSchedule
          operator: Exists
      containers:
        - name: tigera-operator
          image: quay.io/tigera/operator:v1.36.2
          imagePullPolicy: IfNotPresent
          command: ["operator"]
"""
    % CALICO_VERSION
)


RUNFILE_VERSION = DRIVER_VERSIONS[0]


RUNFILE_SCRIPT = """#!/bin/sh
# SIMULATED NVIDIA driver runfile %(version)s for the rackforge lab: no kernel module, no hardware
# access. Like the real one it is a shell script with an archive appended; the archive holds the
# same files as the lab's nvidia-driver-%(branch)s package: the REAL nvidia-smi %(smi)s and the lab
# NVML (libnvidia-ml.so.1) over the hardware simulator.
set -e
for a in "$@"; do
  case "$a" in
    --silent|--dkms|--no-opengl-files|--kernel-module-type=open|--kernel-module-type=proprietary|-m=kernel-open) ;;
    *) echo "ERROR: unknown option $a" >&2; exit 2;;
  esac
done
[ -x /usr/lib/hwsim/hwsim ] || { echo "ERROR: Unable to find a supported NVIDIA GPU (no lab simulator here)" >&2; exit 1; }
sed '1,/^__RACKFORGE_PAYLOAD__$/d' "$0" | base64 -d | tar -xzmf - -C / --no-same-owner
ldconfig
/usr/lib/hwsim/hwsim hwsim load-driver || true
systemctl daemon-reload >/dev/null 2>&1 || true
echo "SIMULATED: NVIDIA driver %(version)s installed"
exit 0
__RACKFORGE_PAYLOAD__
"""


def file_mode(rel):
    return 0o755 if "/bin/" in "/" + rel else 0o644


def runfile(version):
    """A SIMULATED `NVIDIA-Linux-x86_64-<version>.run`: a shell script that takes the deployment
    guides' options, followed by a base64 tar.gz payload of the driver package's files (the real
    runfile is a self-extracting makeself archive), which it unpacks into / before it "loads" the
    driver. Returns bytes."""
    pkg = next(p for p in packages() if p["Package"].startswith("nvidia-driver-") and p["Version"].startswith(version))
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for rel, content in sorted(pkg["files"].items()):
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(data), file_mode(rel), 0
            tar.addfile(info, io.BytesIO(data))
    head = RUNFILE_SCRIPT % {"version": version, "branch": version.split(".")[0], "smi": NVIDIA_SMI_VERSION}
    return head.encode() + base64.encodebytes(buf.getvalue())


def build_deb(pkg, pool):
    arch = pkg.get("Architecture", "all")
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)  # the package's ./ (dpkg leaves an existing / as it is)
        os.makedirs(os.path.join(tmp, "DEBIAN"))
        for rel, content in pkg["files"].items():
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(content.encode() if isinstance(content, str) else content)
            os.chmod(path, file_mode(rel))
        control = [
            "Package: %s" % pkg["Package"],
            "Version: %s" % pkg["Version"],
            "Architecture: %s" % arch,
            "Maintainer: rackforge lab <lab@rackforge.invalid>",
            "Section: non-free/libs",
            "Priority: optional",
            *(["Depends: %s" % pkg["Depends"]] if pkg.get("Depends") else []),
            "Description: %s" % pkg["Description"],
        ]
        with open(os.path.join(tmp, "DEBIAN", "control"), "w") as fh:
            fh.write("\n".join(control) + "\n")
        for script in ("postinst", "postrm"):
            if pkg.get(script):
                path = os.path.join(tmp, "DEBIAN", script)
                with open(path, "w") as fh:
                    fh.write(pkg[script])
                os.chmod(path, 0o755)
        out = os.path.join(pool, "%s_%s_%s.deb" % (pkg["Package"], pkg["Version"], arch))
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", tmp, out], check=True, stdout=subprocess.DEVNULL)
        return out


def distro_debs(pool):
    """The real Debian packages of DISTRO_PACKAGES, downloaded into the pool."""
    cmd = ["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", *DISTRO_PACKAGES]
    if subprocess.run(cmd, check=False, cwd=pool, stdout=subprocess.DEVNULL).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], check=True)  # stale package lists
        subprocess.run(cmd, check=True, cwd=pool, stdout=subprocess.DEVNULL)
    return sorted(os.path.join(pool, f) for f in os.listdir(pool) if f.endswith(".deb") and f.split("_")[0] in DISTRO_PACKAGES)


def index_entry(deb, repo):
    """The deb's stanza of the Packages index."""
    control = subprocess.run(["dpkg-deb", "-f", deb], check=True, capture_output=True, text=True).stdout.rstrip("\n")
    return "%s\nFilename: %s\nSize: %d\nMD5sum: %s\nSHA256: %s\n" % (
        control,
        os.path.relpath(deb, repo),
        os.path.getsize(deb),
        digest(deb, "md5"),
        digest(deb, "sha256"),
    )


def digest(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as fh:
        h.update(fh.read())
    return h.hexdigest()


def gpg(home, *args, **kw):
    return subprocess.run(["gpg", "--batch", "--quiet", "--homedir", home, *args], check=True, **kw)


def write_repo(repo, label, debs_for_pool, home):
    """A signed apt repository (suite bookworm, component main) at repo/ with the debs that
    debs_for_pool(pool) puts into its pool; returns how many packages it holds."""
    pool = os.path.join(repo, "pool", "main")
    bindir = os.path.join(repo, "dists", "bookworm", "main", "binary-amd64")
    os.makedirs(pool)
    os.makedirs(bindir)
    entries = [index_entry(deb, repo) for deb in debs_for_pool(pool)]
    packages_path = os.path.join(bindir, "Packages")
    with open(packages_path, "w") as fh:
        fh.write("\n".join(entries))
    with open(packages_path, "rb") as fin, gzip.open(packages_path + ".gz", "wb") as fout:
        fout.write(fin.read())
    dist = os.path.join(repo, "dists", "bookworm")
    lines = [
        "Origin: rackforge-lab",
        "Label: %s" % label,
        "Suite: bookworm",
        "Codename: bookworm",
        "Date: %s" % time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()),
        "Architectures: amd64 all",
        "Components: main",
        "SHA256:",
    ]
    for rel in ("main/binary-amd64/Packages", "main/binary-amd64/Packages.gz"):
        path = os.path.join(dist, rel)
        lines.append(" %s %d %s" % (digest(path, "sha256"), os.path.getsize(path), rel))
    with open(os.path.join(dist, "Release"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    gpg(home, "--yes", "--clearsign", "-o", os.path.join(dist, "InRelease"), os.path.join(dist, "Release"))
    gpg(home, "--yes", "-abs", "-o", os.path.join(dist, "Release.gpg"), os.path.join(dist, "Release"))
    return len(entries)


def write_flat_repo(repo, home):
    """A flat apt repository (`deb URL /`, as pkgs.k8s.io publishes) over the debs in repo/."""
    entries = [index_entry(os.path.join(repo, f), repo) for f in sorted(os.listdir(repo)) if f.endswith(".deb")]
    with open(os.path.join(repo, "Packages"), "w") as fh:
        fh.write("\n".join(entries))
    with open(os.path.join(repo, "Packages"), "rb") as fin, gzip.open(os.path.join(repo, "Packages.gz"), "wb") as fout:
        fout.write(fin.read())
    lines = ["Origin: rackforge-lab", "Label: rackforge lab kubernetes mirror (SIMULATED packages)", "Architectures: amd64 all", "SHA256:"]
    for rel in ("Packages", "Packages.gz"):
        lines.append(" %s %d %s" % (digest(os.path.join(repo, rel), "sha256"), os.path.getsize(os.path.join(repo, rel)), rel))
    with open(os.path.join(repo, "Release"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    gpg(home, "--yes", "--clearsign", "-o", os.path.join(repo, "InRelease"), os.path.join(repo, "Release"))
    with open(os.path.join(repo, "Release.key"), "w") as fh:
        gpg(home, "--armor", "--export", stdout=fh)


def main():
    out = os.path.abspath(sys.argv[1])
    stamp = os.path.join(out, ".stamp")
    smi, nvml = real_files()
    me = digest(__file__, "sha256") + digest(K8SIM, "sha256") + hashlib.sha256(smi + nvml).hexdigest()
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
    with open(stamp, "w") as fh:
        fh.write(me + "\n")
    print("mirror: %d simulated vendor packages in %s/vendor, %d Debian packages in %s/debian" % (vendor, out, debian, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
