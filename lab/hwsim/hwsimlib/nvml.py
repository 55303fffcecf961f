"""hwsim's NVML side (SIMULATION): what the lab NVML library (lab/nvml) serves to the REAL nvidia-smi.

`hwsim nvml-state` prints the driver and every present GPU in the line format lab/nvml/nvml_lines.c
parses; `hwsim nvml-set SLOT|all OP ARGS...` applies a setting with NVML's rules (root only, as
NVML's set calls, unless HWSIM_ALLOW_NONROOT is set), stores it in the volatile GPU state
(/run/hwsim/gpu.json) and prints `result <nvmlReturn_t>` followed by the new state (exit status
0 on NVML_SUCCESS, else 1). The simulated nvidia-persistenced uses `nvml-set all persistence 1`.
The real nvidia-smi does every formatting, argument check and message itself: nothing here prints
text meant for an operator. One GPU's lines and the NVML values are in hwsimlib/nvml_gpu.py.

Line format (one `key values...` per line; strings run to the end of the line):
  lab-nvml 1 | init RC | library VERSION | driver VERSION | cuda N
  gpu SLOT                       starts a GPU (GPUs are listed in enumeration = PCI bus order)
  name/uuid/serial/vbios/board_part/inforom_image/gsp STRING, inforom OBJECT STRING
  brand/arch/minor/board_id/module_id/multi_gpu/persistence/compute_mode/pstate/numa N
  cc MAJOR MINOR | pci DOMAIN BUS DEVICE DEVID SUBSYS | pcie GEN MAXGEN GPUMAXGEN WIDTH MAXWIDTH
  pcie_replay N | pcie_throughput TX RX | memory TOTAL RESERVED USED | bar1 TOTAL USED (bytes)
  utilization GPU MEM | codec ENC DEC JPG OFA | virtualization N | accounting MODE BUFFER | mig CUR PENDING
  clock TYPE ID MHZ (nvmlClockType_t, nvmlClockId_t) | max_clock TYPE MHZ | gr_clocks MEM G1 G2 ...
  power USAGE LIMIT ENFORCED DEFAULT MIN MAX (mW) | temp C | temp_threshold TYPE C
  throttle CURRENT SUPPORTED | ecc CURRENT PENDING | ecc_counter ERR COUNTER LOCATION N | ecc_total ERR COUNTER N
  retired SBE DBE PENDING | remapped CORR UNC PENDING FAILURE | remap_histogram MAX HIGH PARTIAL LOW NONE
  fabric STATE STATUS PARTITION CLUSTER_UUID_HEX | cpuset WORD... (64-bit, hex) | topo POSITION LEVEL
  nvlink LINK CAPS [REMOTE_DOMAIN REMOTE_BUS REMOTE_DEVICE REMOTE_DEVID REMOTE_SUBSYS]
  p2p POSITION READ WRITE NVLINK ATOMICS PROP (nvmlGpuP2PStatus_t) | sram_ecc (12 nvmlEccSramErrorStatus_v1 counters)
  field ID SCOPE TYPE VALUE      an nvmlDeviceGetFieldValues answer (nvmlValueType_t TYPE)
  end
A key a GPU does not carry makes its getter answer NVML_ERROR_NOT_SUPPORTED.
"""

from __future__ import annotations

import fcntl
import os
import sys

from hwsimlib.nvml_gpu import (
    CLOCK_LIMIT_IDS,
    CUDA_BY_BRANCH,
    DRIVER_NOT_LOADED,
    GPU_HW_FAULTS,
    INVALID_ARGUMENT,
    LIB_RM_VERSION_MISMATCH,
    NO_PERMISSION,
    NOT_SUPPORTED,
    SUCCESS,
    _clock_floor,
    active_links,
    enumerated,
    gpu_lines,
)
from hwsimlib.state import (
    DRIVER_FILE,
    RUN,
    fabric_state,
    faults,
    gpu_state,
    installed,
    loaded_driver,
    node,
    present_gpus,
    profile,
    save_json,
)


def init_result():
    """What nvmlInit returns: no loaded driver, or installed user space != loaded kernel module."""
    version, loaded = installed(DRIVER_FILE), loaded_driver()
    if not version or not loaded:
        return DRIVER_NOT_LOADED
    if version != loaded:
        return LIB_RM_VERSION_MISMATCH
    return SUCCESS


def state_lines():
    lines = ["lab-nvml 1", "# SIMULATION: hwsim's GPUs for the lab NVML (lab/nvml)"]
    rc = init_result()
    lines.append("init %d" % rc)
    version = installed(DRIVER_FILE)
    if version:
        lines.append("library %s" % version)
    if rc != SUCCESS:
        return [*lines, "end"]
    driver = loaded_driver()
    lines += ["driver %s" % driver, "cuda %d" % CUDA_BY_BRANCH.get(driver.split(".")[0], 12020)]
    node_faults = faults()
    ctx = {
        "prof": profile(),
        "order": enumerated(),
        "driver": driver,
        "state": gpu_state(),
        "fabric": fabric_state()[0],
        "seed": node()["seed"],
        "errors": {(int(f["gpu"]), int(f["link"])): int(f.get("count", 1)) for f in node_faults if f["kind"] == "nvlink_errors"},
        "hw_faults": [f for f in node_faults if f["kind"] in GPU_HW_FAULTS],
    }
    ctx["up"] = active_links(ctx["prof"], node_faults)
    for slot in ctx["order"]:
        lines += gpu_lines(ctx, slot)
    return [*lines, "end"]


def nvml_state(_args):
    sys.stdout.write("\n".join(state_lines()) + "\n")
    return 0


def _set_one(prof, state, slot, op, args):
    """Apply one NVML set call to one GPU's volatile state; returns an nvmlReturn_t."""
    g = prof["gpu"]
    s = state[str(slot)]
    for f in faults("gpu_setting_unsupported"):
        if f.get("gpu", "all") in ("all", str(slot)) and op in (f.get("op"), "reset-%s" % f.get("op")):
            return NOT_SUPPORTED
    try:
        values = [int(a) for a in args]
    except ValueError:
        return INVALID_ARGUMENT
    if op == "persistence":
        if values[:1] not in ([0], [1]):
            return INVALID_ARGUMENT
        s["persistence"] = values[0] == 1
    elif op == "app-clocks":
        mem, graphics = values
        if graphics not in g["supported_clocks"].get(str(mem), []):
            return INVALID_ARGUMENT  # not a supported (memory, graphics) pair
        s["app_mem"], s["app_graphics"] = mem, graphics
    elif op == "reset-app-clocks":
        s["app_mem"], s["app_graphics"] = g["clocks"]["default_app_mem"], g["clocks"]["default_app_graphics"]
    elif op == "locked-clocks":
        lo, hi = values
        lo = _clock_floor(g) if lo in CLOCK_LIMIT_IDS else lo
        hi = g["clocks"]["max_graphics"] if hi in CLOCK_LIMIT_IDS else hi
        # not a valid clock combination: min above max, or max above the GPU's max graphics clock (a
        # min below the lowest supported clock is taken: the GPU cannot run slower than that anyway)
        if not 0 < lo <= hi <= g["clocks"]["max_graphics"]:
            return INVALID_ARGUMENT
        s["locked"] = [lo, hi]
    elif op == "reset-locked-clocks":
        s["locked"] = None
    elif op == "power-limit":
        scope, milliwatts = values
        if scope != 0:
            return NOT_SUPPORTED  # no module (GPU + CPU) power scope on these boards
        if not g["power"]["min"] * 1000 <= milliwatts <= g["power"]["max"] * 1000:
            return INVALID_ARGUMENT
        s["power_limit"] = milliwatts / 1000.0
    else:
        return NOT_SUPPORTED
    return SUCCESS


def nvml_set(args):
    """hwsim nvml-set SLOT|all OP ARGS...: what the lab NVML's set calls run."""
    if len(args) < 2:
        sys.stderr.write(
            "usage: hwsim nvml-set SLOT|all OP ARGS  (OP: persistence 0|1, app-clocks MEM GR, reset-app-clocks,\n"
            "       locked-clocks MIN MAX, reset-locked-clocks, power-limit SCOPE MILLIWATTS)\n"
        )
        return 2
    target, op, rest = args[0], args[1], args[2:]
    if init_result() != SUCCESS:
        rc = init_result()
    elif os.geteuid() != 0 and not os.environ.get("HWSIM_ALLOW_NONROOT"):
        rc = NO_PERMISSION  # NVML's set calls need root
    else:
        prof = profile()
        os.makedirs(RUN, exist_ok=True)
        with open(os.path.join(RUN, "gpu.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = gpu_state()
            slots = enumerated() if target == "all" else [int(target)]
            rc = SUCCESS
            for slot in slots:
                if slot not in present_gpus():
                    rc = INVALID_ARGUMENT
                    break
                rc = _set_one(prof, state, slot, op, rest)
                if rc != SUCCESS:
                    break
            if rc == SUCCESS:
                save_json(os.path.join(RUN, "gpu.json"), state)
    sys.stdout.write("result %d\n" % rc + "\n".join(state_lines()) + "\n")
    return 0 if rc == SUCCESS else 1  # the lab NVML reads the result line; the exit status is for scripts
