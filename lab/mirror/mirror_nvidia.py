"""The lab mirror's SIMULATED NVIDIA packages (driver with the REAL nvidia-smi over the lab NVML,
fabric manager, container toolkit) and the driver runfile. Part of lab/mirror/build.py."""

from __future__ import annotations

import base64
import gzip
import importlib.util
import io
import os
import subprocess
import tarfile

from mirror_repo import file_mode

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
# SIMULATED nvidia-ctk (lab/hwsim/hwsimlib/ctk_sim.py: --version, cdi generate, cdi list, from the
# toolkit's source) and nvidia-cdi-hook (the hooks a CDI spec names; runc in the lab never calls it)
CTK = '#!/bin/sh\n# SIMULATED nvidia-ctk %s (hwsim)\nexec /usr/lib/hwsim/hwsim nvidia-ctk "$@"\n' % TOOLKIT_VERSION
CDI_HOOK = "#!/bin/sh\n# SIMULATED nvidia-cdi-hook %s: the lab's containers get no GPU\nexit 0\n" % TOOLKIT_VERSION
LIBCUDA = "SIMULATED libcuda.so.%s for the rackforge lab: not a library (no CUDA in the lab)\n"
GSP = "SIMULATED GSP firmware %s for the rackforge lab\n"
# the real package's postinst runs `nvidia-ctk --quiet config --config-file=... --in-place`, which
# on a fresh install writes the toolkit's defaults; the lab writes the same text, taken from
# upstream's own test of that output (provenance beside the fixture). A file already there is kept,
# as the real command keeps every value that differs from a default.
CAPTURED = os.path.join(os.path.dirname(LAB), "tests", "fixtures", "captured")
TOOLKIT_CONFIG = os.path.join(CAPTURED, "nvidia-container-toolkit-%s-config.toml" % TOOLKIT_VERSION)


def toolkit_postinst():
    with open(TOOLKIT_CONFIG) as fh:
        text = fh.read()
    return (
        "#!/bin/sh\nset -e\nconf=/etc/nvidia-container-runtime/config.toml\n"
        'if [ ! -e "$conf" ]; then\n  mkdir -p /etc/nvidia-container-runtime\n  cat > "$conf" <<\'EOF\'\n%sEOF\nfi\n' % text
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


def driver_files(version, smi, nvml, flavor):
    return {
        "usr/lib/hwsim/driver-version": version + "\n",
        # which kernel module the lab's driver "loads" (hwsimlib/kernel.py driver_loaded: its taint):
        # as in NVIDIA's repository, nvidia-driver-<branch> carries the proprietary module and
        # nvidia-driver-<branch>-open the open one (the runfile records what its options chose)
        "usr/lib/hwsim/driver-flavor": flavor + "\n",
        "usr/bin/nvidia-smi": smi,
        "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1": nvml,
        # what the real driver installs with its version in the name (nvidia-ctk cdi generate
        # looks for libcuda.so.<version> and mounts every *.so.<version> beside it), so a CDI spec
        # written for one version names files an upgrade removes
        "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.%s" % version: nvml,
        "usr/lib/x86_64-linux-gnu/libcuda.so.%s" % version: LIBCUDA % version,
        "lib/firmware/nvidia/%s/gsp_ga10x.bin" % version: GSP % version,
        "lib/firmware/nvidia/%s/gsp_tu10x.bin" % version: GSP % version,
        "usr/bin/nvidia-persistenced": PERSISTENCED,
        "lib/systemd/system/nvidia-persistenced.service": PERSISTENCED_UNIT,
    }


def packages():
    smi, nvml = real_files()
    pkgs = []
    for v in DRIVER_VERSIONS:
        branch = v.split(".")[0]
        for suffix, flavor in (("", "proprietary"), ("-open", "open")):
            other = "nvidia-driver-%s%s" % (branch, "-open" if not suffix else "")
            pkgs.append(
                {
                    "Package": "nvidia-driver-%s%s" % (branch, suffix),
                    "Version": "%s-1" % v,
                    "Architecture": "amd64",
                    "Description": "NVIDIA driver metapackage %s (%s kernel module)\n %s" % (v, flavor, SIM_DRIVER),
                    "Conflicts": other,
                    "Replaces": other,
                    "files": driver_files(v, smi, nvml, flavor),
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
                "usr/bin/nvidia-cdi-hook": CDI_HOOK,
                # the OCI runtime containerd's "nvidia" runtime calls (the real one injects the GPUs)
                "usr/bin/nvidia-container-runtime": '#!/bin/sh\n# SIMULATED nvidia-container-runtime: plain runc\nexec runc "$@"\n',
            },
            "postinst": toolkit_postinst(),
        }
    )
    return pkgs


RUNFILE_VERSION = DRIVER_VERSIONS[0]
RUNFILE_SCRIPT = """#!/bin/sh
# SIMULATED NVIDIA driver runfile %(version)s for the rackforge lab: no kernel module, no hardware
# access. Like the real one it is a shell script with an archive appended; the archive holds the
# same files as the lab's nvidia-driver-%(branch)s package: the REAL nvidia-smi %(smi)s and the lab
# NVML (libnvidia-ml.so.1) over the hardware simulator.
set -e
flavor=%(default_flavor)s
for a in "$@"; do
  case "$a" in
    --kernel-module-type=open|-m=kernel-open) flavor=open;;
    --kernel-module-type=proprietary) flavor=proprietary;;
    --silent|--dkms|--no-opengl-files) ;;
    *) echo "ERROR: unknown option $a" >&2; exit 2;;
  esac
done
[ -x /usr/lib/hwsim/hwsim ] || { echo "ERROR: Unable to find a supported NVIDIA GPU (no lab simulator here)" >&2; exit 1; }
sed '1,/^__RACKFORGE_PAYLOAD__$/d' "$0" | base64 -d | tar -xzmf - -C / --no-same-owner
echo "$flavor" > /usr/lib/hwsim/driver-flavor
ldconfig
/usr/lib/hwsim/hwsim hwsim load-driver || true
systemctl daemon-reload >/dev/null 2>&1 || true
echo "SIMULATED: NVIDIA driver %(version)s installed"
exit 0
__RACKFORGE_PAYLOAD__
"""


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
    branch = version.split(".")[0]
    # the installer's default module: proprietary before 560, open from 560 on
    flavor = "open" if int(branch) >= 560 else "proprietary"
    head = RUNFILE_SCRIPT % {"version": version, "branch": branch, "smi": NVIDIA_SMI_VERSION, "default_flavor": flavor}
    return head.encode() + base64.encodebytes(buf.getvalue())
