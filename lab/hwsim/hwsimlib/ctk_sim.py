"""SIMULATED `nvidia-ctk` of NVIDIA Container Toolkit 1.17.3 (the version the lab mirror ships):
`--version`, `cdi generate` and `cdi list`. The real tool is a Go binary from NVIDIA's repository,
which the lab cannot reach; this reproduces what its source does (NVIDIA/nvidia-container-toolkit
at v1.17.3, cb82e29c), over the lab's real userspace:

- GPUs and the driver version come from NVML, here through the REAL nvidia-smi over the lab NVML
  (`nvidia-smi -q -x`: minor numbers, UUIDs, driver version); NVML failing is fatal.
- Files are found the way the real discoverers find them (pkg/nvcdi/driver-nvml.go,
  common-nvml.go, internal/discover/*.go): `libcuda.so.<driver>` in the standard library dirs
  (fatal when missing), then every `*.so.<driver>` beside it and in its vdpau/; the five driver
  binaries on the search path; `nvidia/<driver>/gsp*.bin` firmware; the persistenced and fabric
  manager sockets; the char device nodes /dev/nvidia<minor> and the four control nodes, each only
  where it exists.
- Output: CDI's specs-go structs marshalled as Go's encoding/json does (struct field order, one
  line, no newline) when the output is JSON; `cdiVersion` is the lowest the spec needs (0.5.0 once
  a device name starts with a digit); devices sorted by name as strings; device nodes and mounts
  by path depth, then path; the file replaced atomically, mode 0644.
- 1.17.0-1.17.7 order the `--link` arguments of a create-symlinks hook (and update-ldcache's
  `--folder`s) by Go map iteration, so two runs on the same host can differ (fixed in 1.17.8,
  dd40dadb): reproduced with a random order.

Not simulated (refused with an error naming it): YAML output (rackforge writes JSON specs), MIG
devices, graphics libraries and the DRM nodes (the lab's GPUs have none).
"""

from __future__ import annotations

import glob
import json
import os
import random
import stat
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

VERSION = "1.17.3"
# where the driver's files and the device nodes are looked up (the real tool's --driver-root and
# --dev-root, default /) and, for `cdi list`, the spec directories; a unit test points it at a scratch tree
ROOT = os.environ.get("HWSIM_CTK_ROOT", "/")
NVIDIA_SMI = os.environ.get("HWSIM_NVIDIA_SMI", "nvidia-smi")
LIB_DIRS = ("/usr/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu/nvidia/current", "/lib64", "/lib/x86_64-linux-gnu")
BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
BINARIES = ("nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control", "nvidia-cuda-mps-server")
FIRMWARE_DIRS = ("/lib/firmware/updates", "/lib/firmware")
SOCKETS = ("/nvidia-persistenced/socket", "/nvidia-fabricmanager/socket")
CONTROL_NODES = ("/dev/nvidia-modeset", "/dev/nvidia-uvm-tools", "/dev/nvidia-uvm", "/dev/nvidiactl")
MOUNT_OPTIONS = ["ro", "nosuid", "nodev", "bind"]
HOOK = "/usr/bin/nvidia-cdi-hook"


class CtkError(Exception):
    pass


def _host(path):
    return os.path.join(ROOT, path.lstrip("/"))


def _unhost(host_path):
    """The path as the spec names it: the host path without ROOT."""
    return host_path[len(ROOT.rstrip("/")) :]


def _exists(path):
    return os.path.exists(_host(path))


def _is_char(path):
    try:
        return stat.S_ISCHR(os.stat(_host(path)).st_mode)
    except OSError:
        return False


def log(level, msg):
    sys.stderr.write('time="2026-01-01T00:00:00Z" level=%s msg=%s\n' % (level, json.dumps(msg)))


def nvml():
    """(driver version, [(minor, uuid)]) as NVML reports them, via the real nvidia-smi."""
    try:
        res = subprocess.run([NVIDIA_SMI, "-q", "-x"], capture_output=True, text=True, check=False)
    except OSError:
        raise CtkError("failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND") from None
    if res.returncode != 0:
        raise CtkError("failed to initialize NVML: Driver Not Loaded")
    root = ET.fromstring(res.stdout)
    gpus = [(int(g.findtext("minor_number")), g.findtext("uuid")) for g in root.findall("gpu")]
    return root.findtext("driver_version"), gpus


def mount(path, extra=()):
    return {"hostPath": path, "containerPath": path, "options": MOUNT_OPTIONS + list(extra)}


def hook(*args):
    return {"hookName": "createContainer", "path": HOOK, "args": ["nvidia-cdi-hook", *args]}


def by_depth(path):
    return (path.count("/"), path)


def driver_files(version):
    """(mounts, hooks) of the common edits: libraries, binaries, firmware, sockets."""
    libcuda = next((d for d in LIB_DIRS if os.path.isfile(_host(os.path.join(d, "libcuda.so." + version)))), None)
    if libcuda is None:
        name = "libcuda.so." + version
        raise CtkError(
            "failed to create edits common for entities: failed to create discoverer for common entities: failed to create "
            "discoverer for driver files: failed to create discoverer for driver libraries: failed to get libraries for driver "
            "version: failed to locate %s: pattern %s not found\n64-bit library %s: not found" % (name, name, name)
        )
    folders = [libcuda] + ([libcuda + "/vdpau"] if os.path.isdir(_host(libcuda + "/vdpau")) else [])
    libs = []
    for folder in folders:
        libs += sorted(_unhost(p) for p in glob.glob(_host(folder + "/*.so." + version)))
    mounts = [mount(p) for p in libs]
    for name in BINARIES:
        found = next((d + "/" + name for d in BIN_DIRS if os.path.isfile(_host(d + "/" + name))), None)
        if found:
            mounts.append(mount(found))
        else:
            log("warning", "Could not locate %s: pattern %s not found" % (name, name))
    for d in FIRMWARE_DIRS:
        fw = sorted(glob.glob(_host("%s/nvidia/%s/gsp*.bin" % (d, version))))
        if fw:
            mounts += [mount(_unhost(p)) for p in fw]
            break
    for sock in SOCKETS:
        found = next((r + sock for r in ("/run", "/var/run") if _exists(r + sock)), None)
        if found:
            mounts.append(mount(found, ["noexec"]))
    links = {"libcuda.so.1": libcuda + "/libcuda.so"}
    if os.path.isfile(_host(libcuda + "/libnvidia-opticalflow.so.1")):
        links["libnvidia-opticalflow.so.1"] = libcuda + "/libnvidia-opticalflow.so"
    pairs = ["%s::%s" % kv for kv in links.items()]
    random.shuffle(pairs)  # Go map order in 1.17.0-1.17.7
    link_args = [a for p in pairs for a in ("--link", p)]
    random.shuffle(folders)
    hooks = [hook("create-symlinks", *link_args), hook("update-ldcache", *[a for f in folders for a in ("--folder", f)])]
    return sorted(mounts, key=lambda m: by_depth(m["hostPath"])), hooks


def spec():
    version, gpus = nvml()
    log("info", "Using driver version %s" % version)
    mounts, hooks = driver_files(version)
    common_nodes = sorted((p for p in CONTROL_NODES if _is_char(p)), key=by_depth)
    devices = []
    for index, (minor, uuid) in enumerate(gpus):
        node = "/dev/nvidia%d" % minor
        edits = {"deviceNodes": [{"path": node}]} if _is_char(node) else {}
        devices += [{"name": str(index), "containerEdits": edits}, {"name": uuid, "containerEdits": edits}]
    all_nodes = sorted({n["path"] for d in devices for n in d["containerEdits"].get("deviceNodes", [])}, key=by_depth)
    devices.append({"name": "all", "containerEdits": {"deviceNodes": [{"path": p} for p in all_nodes]} if all_nodes else {}})
    devices.sort(key=lambda d: d["name"])
    common = {"env": ["NVIDIA_VISIBLE_DEVICES=void"], "deviceNodes": [{"path": p} for p in common_nodes], "hooks": hooks, "mounts": mounts}
    version_needed = "0.5.0" if any(d["name"][:1].isdigit() for d in devices) else "0.3.0"
    log("info", "Generated CDI spec with version 0.8.0")
    return {
        "cdiVersion": version_needed,
        "kind": "nvidia.com/gpu",
        "devices": devices,
        "containerEdits": {k: v for k, v in common.items() if v},
    }


def _flag(args, name):
    """--name=value or --name value; removes it from args."""
    for i, a in enumerate(args):
        if a == "--" + name and i + 1 < len(args):
            value = args[i + 1]
            del args[i : i + 2]
            return value
        if a.startswith("--" + name + "="):
            del args[i]
            return a.split("=", 1)[1]
    return None


def generate(args):
    args = list(args)
    output = _flag(args, "output")
    fmt = _flag(args, "format")
    strategies = []
    while True:
        s = _flag(args, "device-name-strategy")
        if s is None:
            break
        strategies.append(s)
    args = [a for a in args if a not in ("--quiet", "-q")]
    if args:
        raise CtkError("Incorrect Usage: flag provided but not defined: %s" % args[0])
    if output and not output.endswith((".json", ".yaml")):
        output += ".yaml"  # normalizePath
    fmt = fmt or ("json" if output and output.endswith(".json") else "yaml")
    if fmt != "json":
        raise CtkError("SIMULATED nvidia-ctk: only JSON output (--format=json or an output ending in .json) is simulated")
    if strategies and sorted(strategies) != ["index", "uuid"]:
        raise CtkError("SIMULATED nvidia-ctk: only the default device name strategies (index and uuid) are simulated")
    data = json.dumps(spec(), separators=(",", ":"))
    if not output:
        sys.stdout.write(data)
        return 0
    directory = os.path.dirname(os.path.abspath(output))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".nvidia-ctk-")
    with os.fdopen(fd, "w") as fh:
        fh.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, output)
    return 0


def list_devices(_args):
    names = []
    for d in ("/etc/cdi", "/var/run/cdi"):
        for path in sorted(glob.glob(_host(d + "/*.json"))):
            with open(path) as fh:
                data = json.load(fh)
            names += ["%s=%s" % (data["kind"], dev["name"]) for dev in data.get("devices", [])]
    names = sorted(set(names))
    log("info", "Found %d CDI devices" % len(names))
    sys.stdout.write("".join(n + "\n" for n in names))
    return 0


def nvidia_ctk(argv):
    if argv[:1] in (["--version"], ["-v"]):
        sys.stdout.write("NVIDIA Container Toolkit CLI version %s (SIMULATED)\n" % VERSION)
        return 0
    try:
        if argv[:2] == ["cdi", "generate"]:
            return generate(argv[2:])
        if argv[:2] == ["cdi", "list"]:
            return list_devices(argv[2:])
    except CtkError as exc:
        log("error", "failed to generate CDI spec: %s" % exc if argv[1] == "generate" else str(exc))
        return 1
    sys.stderr.write("nvidia-ctk (SIMULATED): only --version, cdi generate and cdi list are available in the lab\n")
    return 1
