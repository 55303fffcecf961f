"""The REAL nvidia-smi (Debian 12 non-free 535.261.03) over the lab NVML (lab/nvml) and hwsim.

The library is a thin transport: what it answers comes from the simulator's state, every entry
point it does not model answers NVML_ERROR_NOT_SUPPORTED, and everything the binary prints, every
argument check and exit code, is the real binary's own."""

from __future__ import annotations

import base64
import ctypes
import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile

import pytest
from ansible.module_utils.rackforge import nvidia_smi as n
from conftest import ROOT
from hwsim_helper import PROFILES, Sim, lab_nvml, real_nvidia_smi

NVML = ROOT / "lab" / "nvml"


@pytest.fixture
def sim(tmp_path):
    return Sim(tmp_path)


def symbols():
    return [ln.strip() for ln in (NVML / "symbols.txt").read_text().splitlines() if ln.startswith("nvml")]


def test_symbol_list_is_what_the_real_binary_looks_up():
    data = open(real_nvidia_smi(), "rb").read()
    # what `strings -a nvidia-smi | grep -E '^nvml[A-Za-z0-9_]+$'` finds: NUL-terminated names
    asked = {m.decode() for m in re.findall(rb"(?<=\x00)(nvml[A-Za-z0-9_]+)(?=\x00)", data)}
    assert asked == set(symbols())
    assert len(asked) == 234 and {"nvmlInit_v2", "nvmlDeviceGetFieldValues", "nvmlDeviceSetPowerManagementLimit_v2"} <= asked


def test_library_exports_every_name_the_binary_asks_for_and_nothing_else():
    lib = ctypes.CDLL(lab_nvml())
    missing = [name for name in symbols() if not hasattr(lib, name)]
    assert missing == []
    if shutil.which("nm"):
        out = subprocess.run(["nm", "-D", "--defined-only", lab_nvml()], capture_output=True, text=True, check=True).stdout
        exported = {ln.split()[-1] for ln in out.splitlines() if " T " in ln}
        assert exported == set(symbols())


def test_error_strings_are_nvmls():
    lib = ctypes.CDLL(lab_nvml())
    lib.nvmlErrorString.restype = ctypes.c_char_p
    lib.nvmlErrorString.argtypes = [ctypes.c_int]
    strings = {code: lib.nvmlErrorString(code).decode() for code in (0, 1, 2, 3, 4, 6, 9, 15, 18, 25, 999, 12345)}
    assert strings == {
        0: "Success",
        1: "Uninitialized",
        2: "Invalid Argument",
        3: "Not Supported",
        4: "Insufficient Permissions",
        6: "Not Found",
        9: "Driver Not Loaded",
        15: "GPU is lost",
        18: "Driver/library version mismatch",
        25: "Argument version mismatch",
        999: "Unknown Error",
        12345: "Unknown Error",
    }


def test_unmodelled_entry_points_answer_not_supported():
    lib = ctypes.CDLL(lab_nvml())
    for name in ("nvmlDeviceGetFanSpeed", "nvmlUnitGetHandleByIndex", "nvmlDeviceSetEccMode", "nvmlVgpuTypeGetName"):
        assert getattr(lib, name)() == 3, name


# (argv, exit code, the start of what the real 535 binary prints on stdout)
ARGUMENT_CHECKS = [
    (["--version"], 255, "ERROR: Option --version is not recognized. Please run 'nvidia-smi -h'."),  # 545+ has --version
    (["--bogus"], 255, "ERROR: Option --bogus is not recognized. Please run 'nvidia-smi -h'."),
    (["-h"], 0, "NVIDIA System Management Interface -- v535.261.03"),
    (["-pm", "2"], 2, "Invalid persistence mode: 2"),
    (["-q", "-d", "BOGUS"], 2, "Failed to parse --display/-d flags"),
    (["-ac", "1500"], 2, 'Specified clocks "1500" are not valid. Please format input as memClk,smClk'),
    (["-pl", "abc"], 2, "ERROR: Option abc is invalid for -pl."),
    (
        ["-i", "0", "-pl", "500", "-ac", "2619,1755"],
        2,
        "Invalid combination of input arguments. Only one device modification may be done at a time.",
    ),
    (["-pm", "1", "-pl", "500"], 2, "Invalid combination of input arguments. Only one device modification may be done at a time."),
    (["--query-gpu=bogus", "--format=csv"], 2, 'Field "bogus" is not a valid field to query.'),
    (["-i", "9", "-pl", "500"], 6, "No devices were found"),
    (["nvlink", "--error-counters"], 2, 'Option "--error-counters" is not recognized.'),  # the long form is --errorcounters
]


@pytest.mark.parametrize(("argv", "rc", "start"), ARGUMENT_CHECKS, ids=[" ".join(a[0]) for a in ARGUMENT_CHECKS])
def test_argument_checks_are_the_real_binarys(sim, argv, rc, start):
    before = (sim.tmp / "run" / "gpu.json").read_text() if (sim.tmp / "run" / "gpu.json").exists() else None
    res = sim.run("nvidia-smi", *argv, check=False)
    assert res.returncode == rc, res.stdout + res.stderr
    assert res.stdout.startswith(start), res.stdout[:300]
    after = (sim.tmp / "run" / "gpu.json").read_text() if (sim.tmp / "run" / "gpu.json").exists() else None
    assert after == before  # nothing was changed


def gpu_state(sim):
    return json.loads(sim.run("hwsim", "state"))["gpu"]


def query(sim, fields, gpu=None):
    argv = ["nvidia-smi", "--query-gpu=" + fields, "--format=csv,noheader"] + (["-i", str(gpu)] if gpu is not None else [])
    return [[c.strip() for c in ln.split(",")] for ln in sim.run(*argv).splitlines()]


def test_power_limit_changes_hwsim_state_and_reads_back(sim):
    out = sim.run("nvidia-smi", "-pl", "500")
    assert out.count("was set to 500.00 W from 700.00 W.") == 8 and out.rstrip().endswith("All done.")
    assert {s["power_limit"] for s in gpu_state(sim).values()} == {500.0}
    assert query(sim, "power.limit,power.default_limit") == [["500.00 W", "700.00 W"]] * 8
    assert {g["power"]["limit"] for g in n.parse_query_xml(sim.run("nvidia-smi", "-q", "-x"))["gpus"]} == {500.0}


def test_power_limit_outside_the_constraints_is_refused_by_nvidia_smi(sim):
    res = sim.run("nvidia-smi", "-i", "0", "-pl", "800", check=False)
    assert res.returncode == 2
    assert res.stdout.startswith("Provided power limit 800.00 W is not a valid power limit which should be between 200.00 W and 700.00 W")
    assert gpu_state(sim)["0"]["power_limit"] == 700.0


def test_application_clocks_set_read_back_and_reset(sim):
    out = sim.run("nvidia-smi", "-i", "1", "-ac", "2619,1755")
    assert out.startswith('Applications clocks set to "(MEM 2619, SM 1755)" for GPU 00000000:3B:00.0')
    assert (gpu_state(sim)["1"]["app_mem"], gpu_state(sim)["1"]["app_graphics"]) == (2619, 1755)
    assert query(sim, "clocks.applications.memory,clocks.applications.graphics", gpu=1) == [["2619 MHz", "1755 MHz"]]
    assert query(sim, "clocks.applications.graphics", gpu=0) == [["1980 MHz"]]  # -i 1 only
    sim.run("nvidia-smi", "-i", "1", "-rac")
    assert query(sim, "clocks.applications.graphics", gpu=1) == [["1980 MHz"]]


def test_unsupported_clock_pair_is_only_a_warning_to_nvidia_smi(sim):
    res = sim.run("nvidia-smi", "-i", "0", "-ac", "1500,1500", check=False)
    assert res.returncode == 0  # the real binary treats NVML's INVALID_ARGUMENT here as a warning
    assert res.stdout.splitlines()[:2] == [
        'Specified clock combination "(MEM 1500, SM 1500)" is not supported for GPU 00000000:19:00.0. '
        "Run 'nvidia-smi -q -d SUPPORTED_CLOCKS' to see list of supported clock combinations",
        "Treating as warning and moving on.",
    ]
    assert gpu_state(sim)["0"]["app_graphics"] == 1980


def test_locked_clocks_set_and_reset(sim):
    out = sim.run("nvidia-smi", "-i", "2", "-lgc", "1500,1755")
    assert 'GPU clocks set to "(gpuClkMin 1500, gpuClkMax 1755)" for GPU 00000000:4C:00.0' in out
    assert gpu_state(sim)["2"]["locked"] == [1500, 1755]
    assert query(sim, "clocks.gr", gpu=2) == [["1500 MHz"]]  # an idle GPU sits at the floor of its locked range
    assert "gpuClkMin 1000, gpuClkMax 1000" in sim.run("nvidia-smi", "-i", "2", "-lgc", "1000")  # one value: min = max
    bad = sim.run("nvidia-smi", "-i", "2", "-lgc", "1500,2500")
    assert 'Specified clock combination "(gpuClkMin 1500, gpuClkMax 2500)" is not supported' in bad
    assert gpu_state(sim)["2"]["locked"] == [1000, 1000]
    sim.run("nvidia-smi", "-i", "2", "-rgc")
    assert gpu_state(sim)["2"]["locked"] is None


def test_persistence_mode(sim):
    assert sim.run("nvidia-smi", "-i", "3", "-pm", "1").startswith("Enabled persistence mode for GPU 00000000:5D:00.0.")
    assert sim.run("nvidia-smi", "-i", "3", "-pm", "ENABLED").startswith("Persistence mode is already Enabled for GPU 00000000:5D:00.0.")
    assert gpu_state(sim)["3"]["persistence"] is True
    assert [row[0] for row in query(sim, "persistence_mode")] == ["Disabled"] * 3 + ["Enabled"] + ["Disabled"] * 4


def test_a_setting_the_gpu_does_not_support_is_a_warning_with_rc_0(sim):
    sim.run("hwsim", "fault", "add", "gpu_setting_unsupported", "gpu=0", "op=app-clocks")
    res = sim.run("nvidia-smi", "-i", "0", "-ac", "2619,1755", check=False)
    assert res.returncode == 0
    assert res.stdout.splitlines()[:2] == [
        "Setting applications clocks is not supported for GPU 00000000:19:00.0.",
        "Treating as warning and moving on.",
    ]
    sim.run("hwsim", "fault", "add", "gpu_setting_unsupported", "gpu=all", "op=persistence")
    res = sim.run("nvidia-smi", "-i", "1", "-pm", "1", check=False)
    assert res.returncode == 0 and res.stdout.startswith("Unable to set persistence mode for GPU 00000000:3B:00.0: Not Supported")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists("/usr/bin/python3"), reason="needs root")
def test_settings_need_root():
    """As another user (HWSIM_ALLOW_NONROOT unset) NVML refuses every set call: rc 4."""
    tmp = tempfile.mkdtemp(prefix="rackforge-nonroot-")  # outside pytest's 0700 directory
    try:
        os.chmod(tmp, 0o755)
        sim = Sim(tmp)
        for path in sim.tmp.rglob("*"):
            os.chmod(path, 0o777 if path.is_dir() or os.access(path, os.X_OK) else 0o666)
        # the hwsim wrapper with the system python, which another user can run
        (sim.bin / "hwsim").write_text('#!/bin/sh\nexec /usr/bin/python3 %s/lab/hwsim/hwsim.py hwsim "$@"\n' % ROOT)
        env = {k: v for k, v in sim.env.items() if k != "HWSIM_ALLOW_NONROOT"}
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(sim.bin / "nvidia-smi")]
        if subprocess.run([*nobody, "-L"], env=env, capture_output=True, check=False).returncode != 0:
            pytest.skip("the repository is not readable by another user here")
        for argv, text in (
            (["-i", "0", "-pl", "500"], "Failed to set power management limit for GPU 00000000:19:00.0: Insufficient Permissions"),
            (["-i", "0", "-pm", "1"], "Unable to set persistence mode for GPU 00000000:19:00.0: Insufficient Permissions"),
            (["-i", "0", "-ac", "2619,1755"], "The current user does not have permission to change clocks for GPU 00000000:19:00.0."),
        ):
            res = subprocess.run([*nobody, *argv], env=env, capture_output=True, text=True, check=False)
            assert res.returncode == 4 and res.stdout.startswith(text), res.stdout + res.stderr
        assert gpu_state(sim)["0"]["power_limit"] == 700.0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_enumeration_is_pci_bus_order_and_i_counts_in_it(tmp_path):
    prof = json.loads((PROFILES / "pcie-a100-4gpu.json").read_text())
    order = [2, 0, 3, 1]  # the profile lists its GPUs (minor numbers 0..3) out of bus order
    for key in ("bus_ids", "numa", "cpu_affinity"):
        prof["gpu"][key] = [prof["gpu"][key][i] for i in order]
    custom = tmp_path / "shuffled.json"
    custom.write_text(json.dumps(prof))
    (tmp_path / "sim").mkdir()
    sim = Sim(tmp_path / "sim", profile="pcie-a100-4gpu")
    sim.run("hwsim", "init", str(custom), "--seed", "test", "--index", "1")
    gpus = n.parse_query_xml(sim.run("nvidia-smi", "-q", "-x"))["gpus"]
    assert [g["bus_id"] for g in gpus] == ["00000000:12:00.0", "00000000:37:00.0", "00000000:8A:00.0", "00000000:B3:00.0"]
    assert [g["minor_number"] for g in gpus] == [1, 3, 0, 2]
    assert query(sim, "pci.bus_id", gpu=0) == [["00000000:12:00.0"]]
    sim.run("nvidia-smi", "-i", "0", "-pl", "200")
    assert gpu_state(sim)["1"]["power_limit"] == 200.0  # slot 1 (minor 1) is the GPU at bus 12


def test_a_missing_gpu_shifts_the_indices_but_not_the_minor_numbers(sim):
    sim.run("hwsim", "fault", "add", "gpu_missing", "gpu=5")
    assert not (sim.sysfs / "bus/pci/devices/0000:bb:00.0").exists()
    gpus = n.parse_query_xml(sim.run("nvidia-smi", "-q", "-x"))["gpus"]
    assert len(gpus) == 7 and [g["minor_number"] for g in gpus] == [0, 1, 2, 3, 4, 6, 7]
    assert query(sim, "index,pci.bus_id", gpu=5) == [["5", "00000000:CB:00.0"]]


def test_driver_not_loaded_and_version_mismatch(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    none = Sim(tmp_path / "a", driver=None)
    res = none.run("nvidia-smi", "-L", check=False)
    assert res.returncode == 9 and "couldn't communicate with the NVIDIA driver" in res.stdout
    old = Sim(tmp_path / "b", driver="535.247.01")
    assert query(old, "driver_version") == [["535.247.01"]] * 8  # NVML reports the loaded driver's version
    (old.tmp / "driver-version").write_text("535.261.03\n")
    res = old.run("nvidia-smi", "-q", "-x", check=False)
    assert res.returncode == 18 and res.stdout.startswith("Failed to initialize NVML: Driver/library version mismatch")


def test_no_simulator_is_no_driver(sim):
    env = dict(sim.env, HWSIM_BIN=str(sim.tmp / "no-such-hwsim"))
    res = subprocess.run([str(sim.bin / "nvidia-smi"), "-L"], env=env, capture_output=True, text=True, check=False)
    assert res.returncode == 9
    assert "lab NVML (SIMULATION): cannot run the hardware simulator %s" % env["HWSIM_BIN"] in res.stderr


def test_trace_names_every_nvml_call(sim):
    res = subprocess.run(
        [str(sim.bin / "nvidia-smi"), "-q", "-i", "0"], env=dict(sim.env, HWSIM_NVML_TRACE="1"), capture_output=True, text=True, check=True
    )
    calls = [ln[len("lab-nvml: ") :] for ln in res.stderr.splitlines() if ln.startswith("lab-nvml: ")]
    assert calls[0] == "nvmlInitWithFlags flags=0x0" and "nvmlDeviceGetPciInfo_v3" in calls
    assert "nvmlDeviceGetFanSpeed (not modelled: Not Supported)" in calls
    assert "  field 91 scope 0" not in calls and "  field 190 scope 0" in calls


# every nvidia-smi argv the product runs (library/, roles/, playbooks/), with what the lab answers
PRODUCT_ARGVS = [
    (["-q", "-x"], 0),  # nvidia_gpu_info, nvidia_gpu_settings
    (["-q"], 0),  # nvidia_gpu_info, nvlink_health (fabric)
    (["nvlink", "-s"], 0),  # nvlink_health
    (["nvlink", "-e"], 0),  # nvlink_health
    (["-L"], 0),  # nvidia_driver handler's reboot test
    (["-pm", "1"], 0),  # nvidia_driver legacy persistence
    (["--query-gpu=driver_version", "--format=csv,noheader"], 0),  # upgrade_gpu_driver.yml
    (["-i", "0,1", "-ac", "2619,1755"], 0),  # nvidia_gpu_settings and the gpu_tuning boot script
    (["-i", "0,1", "-lgc", "1410,1755"], 0),
    (["-i", "0,1", "-rgc"], 0),
    (["-i", "0,1", "-pl", "600"], 0),
    (["-i", "0,1", "-pm", "0"], 0),
    (["topo", "-m"], 255),  # nvlink_health check_topology: needs NVML's private tables (see the fidelity test)
]


@pytest.mark.parametrize(("argv", "rc"), PRODUCT_ARGVS, ids=[" ".join(a[0]) for a in PRODUCT_ARGVS])
def test_every_argv_the_product_runs_is_valid_for_the_real_binary(sim, argv, rc):
    res = sim.run("nvidia-smi", *argv, check=False)
    assert res.returncode == rc, res.stdout + res.stderr
    assert "not recognized" not in res.stdout and "Invalid combination" not in res.stdout


def _mirror_build():
    spec = importlib.util.spec_from_file_location("lab_mirror_build", ROOT / "lab" / "mirror" / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _sha(data):
    return hashlib.sha256(data).hexdigest()


@pytest.mark.skipif(not shutil.which("dpkg-deb"), reason="needs dpkg-deb")
def test_driver_package_ships_the_real_binary_and_the_lab_nvml(tmp_path):
    build = _mirror_build()
    pkg = next(p for p in build.packages() if p["Package"] == "nvidia-driver-535" and p["Version"] == "535.247.01-1")
    deb = build.build_deb(pkg, str(tmp_path))
    assert deb.endswith("nvidia-driver-535_535.247.01-1_amd64.deb")
    control = subprocess.run(["dpkg-deb", "-f", deb], capture_output=True, text=True, check=True).stdout
    assert "Architecture: amd64" in control and "ships that same binary" in control
    tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        files = {m.name.lstrip("./"): m for m in tf.getmembers() if m.isfile()}
        assert _sha(tf.extractfile(files["usr/bin/nvidia-smi"]).read()) == _sha(open(real_nvidia_smi(), "rb").read())
        assert _sha(tf.extractfile(files["usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"]).read()) == _sha(open(lab_nvml(), "rb").read())
        assert tf.extractfile(files["usr/lib/hwsim/driver-version"]).read() == b"535.247.01\n"
        assert files["usr/bin/nvidia-smi"].mode == 0o755
    scripts = subprocess.run(["dpkg-deb", "-I", deb, "postinst"], capture_output=True, text=True, check=True).stdout
    assert "ldconfig" in scripts


def test_runfile_is_a_script_with_the_packages_files_appended(tmp_path):
    build = _mirror_build()
    run = build.runfile("535.247.01")
    head, _, payload = run.partition(b"\n__RACKFORGE_PAYLOAD__\n")
    assert head.startswith(b"#!/bin/sh\n") and b"SIMULATED NVIDIA driver runfile 535.247.01" in head
    pkg = next(p for p in build.packages() if p["Package"] == "nvidia-driver-535" and p["Version"] == "535.247.01-1")
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(payload)), mode="r:gz") as tf:
        got = {m.name: tf.extractfile(m).read() for m in tf.getmembers()}
    want = {rel: (c.encode() if isinstance(c, str) else c) for rel, c in pkg["files"].items()}
    assert {k: _sha(v) for k, v in got.items()} == {k: _sha(v) for k, v in want.items()}
    script = tmp_path / "NVIDIA-Linux-x86_64-535.247.01.run"
    script.write_bytes(run)
    res = subprocess.run(["sh", str(script), "--bogus"], capture_output=True, text=True, check=False)
    assert res.returncode == 2 and "ERROR: unknown option --bogus" in res.stderr
