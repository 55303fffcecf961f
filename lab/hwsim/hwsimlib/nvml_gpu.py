"""hwsim's NVML side (SIMULATION), one GPU: the NVML values (nvmlReturn_t, field ids, enums) and
the lines `hwsim nvml-state` prints for a GPU, in the format of hwsimlib/nvml.py's docstring
(which lab/nvml parses). hwsimlib/nvml.py prints the whole state and applies settings."""

from __future__ import annotations

import hashlib

from hwsimlib.state import (
    node,
    present_gpus,
    profile,
    uuid_for,
)

# nvmlReturn_t
SUCCESS, INVALID_ARGUMENT, NOT_SUPPORTED, NO_PERMISSION = 0, 2, 3, 4
DRIVER_NOT_LOADED, LIB_RM_VERSION_MISMATCH = 9, 18
ARCH = {"Kepler": 2, "Maxwell": 3, "Pascal": 4, "Volta": 5, "Turing": 6, "Ampere": 7, "Ada": 8, "Hopper": 9}
COMPUTE_CAPABILITY = {"Volta": (7, 0), "Ampere": (8, 0), "Hopper": (9, 0)}
NVLINK_VERSION = {"Volta": 2, "Ampere": 3, "Hopper": 4}
# nvmlSystemGetCudaDriverVersion_v2 per driver branch (the CUDA version each branch ships)
CUDA_BY_BRANCH = {"535": 12020, "550": 12040, "570": 12080}
BRAND_NVIDIA = 14
# nvmlFieldValue ids
FI_MEMORY_TEMP = 82
FI_PCIE_REPLAY_ROLLOVER = 95
FI_NVLINK_LINK_COUNT = 91
FI_NVLINK_ERROR_DL_REPLAY, FI_NVLINK_ERROR_DL_RECOVERY, FI_NVLINK_ERROR_DL_CRC = 161, 162, 163
FI_NVLINK_GET_SPEED, FI_NVLINK_GET_STATE, FI_NVLINK_GET_VERSION = 164, 165, 166
FI_POWER_AVERAGE, FI_POWER_INSTANT = 185, 186
FI_POWER_MIN, FI_POWER_MAX, FI_POWER_DEFAULT, FI_POWER_CURRENT, FI_POWER_REQUESTED = 187, 188, 189, 190, 192
FI_TLIMIT = {"shutdown": 193, "slowdown": 194, "mem_max": 195, "gpu_max": 196}
FI_RESET_STATUS, FI_DRAIN_AND_RESET_STATUS = 226, 227
TYPE_UINT, TYPE_ULL, TYPE_SINT = 1, 3, 5
# nvmlTemperatureThresholds_t
THRESHOLD = {"shutdown": 0, "slowdown": 1, "mem_max": 2, "gpu_max": 3}
# nvmlGpuTopologyLevel_t
TOPO_NODE, TOPO_SYSTEM = 40, 50
FABRIC_STATE = {"Not Started": 1, "In Progress": 2, "Completed": 3}
# nvmlGpuP2PStatus_t
P2P_OK, P2P_CHIPSET_NOT_SUPPORTED, P2P_NOT_SUPPORTED = 0, 1, 5
NVML_ERROR_NOT_READY = 27
# nvmlNvLinkCapability_t bits: P2P supported, P2P atomics, link valid
NVLINK_CAPS = (1 << 0) | (1 << 2) | (1 << 5)
THROTTLE_IDLE, THROTTLE_ALL = 0x1, 0x1FF
# nvmlClocksThrottleReasons: HwSlowdown, HwPowerBrakeSlowdown (the real HGX H100 capture shows both)
THROTTLE_HW_SLOWDOWN, THROTTLE_HW_POWER_BRAKE = 0x8, 0x80
# the GPU hardware faults gpu_lines applies (hwsimlib/state.py FAULTS describes them)
GPU_HW_FAULTS = ("gpu_ecc_uncorrectable", "gpu_row_remap_pending", "gpu_row_remap_failure", "gpu_pcie_downtrained", "gpu_hw_slowdown")
MIB = 1 << 20
# NVML_CLOCK_LIMIT_ID_RANGE_START / TDP / UNLIMITED: nvmlDeviceSetGpuLockedClocks' named limits
CLOCK_LIMIT_IDS = (0xFFFFFF00, 0xFFFFFF01, 0xFFFFFF02)


def _clock_floor(g):
    """The lowest supported graphics clock."""
    return min(min(v) for v in g["supported_clocks"].values())


def _mw(watts):
    return round(watts * 1000)


def _bus(prof, slot):
    return int(prof["gpu"]["bus_ids"][slot], 16)


def enumerated():
    """Present GPU slots in NVML's enumeration order: by PCI bus id."""
    prof = profile()
    return sorted(present_gpus(), key=lambda slot: _bus(prof, slot))


def gpu_uuid(slot):
    return "GPU-" + uuid_for(node()["seed"], "gpu", slot)


def _serial(seed, slot):
    h = int(hashlib.sha256(("serial/%s/%d" % (seed, slot)).encode()).hexdigest(), 16)
    return "16%011d" % (h % 10**11)


def _cpuset_words(cpus):
    """'0-51,104-155' -> 64-bit mask words as hex strings."""
    bits = set()
    for part in cpus.split(","):
        lo, _, hi = part.partition("-")
        bits.update(range(int(lo), int(hi or lo) + 1))
    words = [0] * (max(bits) // 64 + 1)
    for b in bits:
        words[b // 64] |= 1 << (b % 64)
    return ["0x%x" % w for w in words]


def active_links(prof, node_faults):
    """{slot: the NVLinks that are up}: each GPU's connected links less the injected faults."""
    g = prof["gpu"]
    up = {slot: set(range(g["nvlink"]["links"])) for slot in range(g["count"])}
    for f in node_faults:
        if f["kind"] == "gpu_links_all_inactive":
            up[int(f["gpu"])] = set()
        elif f["kind"] == "nvlink_inactive":
            up[int(f["gpu"])] -= {int(x) for x in str(f["links"]).split(",")}
    return up


def p2p_status(prof, up, fabric, slot, other):
    """nvmlGpuP2PStatus_t for (read, write, nvlink, atomics, prop) between two GPU slots (SIMULATION):
    NVLink P2P needs an active link on both GPUs and, behind NVSwitches, a trained fabric; without
    it, PCIe P2P reads and writes work within a NUMA node's root complex only."""
    nvlink = bool(up[slot]) and bool(up[other])
    if prof.get("nvswitch", {}).get("count") and fabric != "Completed":
        nvlink = False
    same_node = prof["gpu"]["numa"][slot] == prof["gpu"]["numa"][other]
    pcie = P2P_OK if nvlink or same_node else P2P_CHIPSET_NOT_SUPPORTED
    return (pcie, pcie, P2P_OK if nvlink else P2P_NOT_SUPPORTED, P2P_OK if nvlink else P2P_NOT_SUPPORTED, P2P_NOT_SUPPORTED)


def gpu_lines(ctx, slot):
    prof, order, driver = ctx["prof"], ctx["order"], ctx["driver"]
    g = prof["gpu"]
    st = ctx["state"][str(slot)]
    c = g["clocks"]
    arch = g["architecture"]
    bus = _bus(prof, slot)
    fstate = ctx["fabric"]
    link_errors = ctx["errors"]
    hw = {f["kind"]: f for f in ctx.get("hw_faults", ()) if f.get("gpu") == str(slot)}
    width = int(hw["gpu_pcie_downtrained"].get("width", 8)) if "gpu_pcie_downtrained" in hw else g["pcie"]["width"]
    throttle = THROTTLE_IDLE
    if "gpu_hw_slowdown" in hw:
        throttle = THROTTLE_HW_SLOWDOWN | THROTTLE_HW_POWER_BRAKE
    elif "gpu_pcie_downtrained" in hw:
        throttle = 0  # busy: an idle GPU's link width is not judged
    dbe = int(hw["gpu_ecc_uncorrectable"].get("count", 1)) if "gpu_ecc_uncorrectable" in hw else 0
    out = [
        "gpu %d" % slot,
        "name %s" % g["name"],
        "uuid GPU-%s" % uuid_for(ctx["seed"], "gpu", slot),
        "serial %s" % _serial(ctx["seed"], slot),
        "vbios %s" % g["vbios"],
        "brand %d" % BRAND_NVIDIA,
        "arch %d" % ARCH.get(arch, 0xFFFFFFFF),
        "minor %d" % g.get("minor_numbers", list(range(g["count"])))[slot],
        "board_id 0x%x" % (bus << 8),  # NVML's board id on these boards: PCI bus << 8 | device
        "multi_gpu 0",
        "gsp %s" % driver,
        "pci 0 0x%x 0 0x%s10de 0x%s10de" % (bus, g["pci_device"][2:], g["subsystem"][2:]),
        "pcie %d %d %d %d %d" % (g["pcie"]["gen"], g["pcie"]["gen"], g["pcie"]["gen"], width, g["pcie"]["width"]),
        "pcie_replay 0",
        "pcie_throughput 0 0",
        "memory %d %d 0" % (g["memory_mib"] * MIB, g["memory_reserved_mib"] * MIB),
        "bar1 %d %d" % (g["bar1_mib"] * MIB, MIB),
        "persistence %d" % (1 if st["persistence"] else 0),
        "compute_mode 0",
        "pstate 0",
        "utilization 0 0",
        "codec 0 0 0 0",
        "virtualization 0",
        "accounting 0 4000",
        "throttle 0x%x 0x%x" % (throttle, THROTTLE_ALL),
        "temp %d" % g["temperature"]["gpu"],
        "numa %d" % g["numa"][slot],
        "cpuset %s" % " ".join(_cpuset_words(g["cpu_affinity"][slot])),
    ]
    if "module_ids" in g:
        out.append("module_id %d" % g["module_ids"][slot])
    if "board_part_number" in g:
        out.append("board_part %s" % g["board_part_number"])
    if arch in COMPUTE_CAPABILITY:
        out.append("cc %d %d" % COMPUTE_CAPABILITY[arch])
    if g.get("mig"):
        out.append("mig 0 0")
    for obj, key in enumerate(("oem", "ecc", "power")):
        if key in g.get("inforom", {}):
            out.append("inforom %d %s" % (obj, g["inforom"][key]))
    if "image" in g.get("inforom", {}):
        out.append("inforom_image %s" % g["inforom"]["image"])
    # clocks: an idle GPU at its idle graphics clock, or at the floor of its locked range
    graphics = max(st["locked"][0], _clock_floor(g)) if st["locked"] else c["idle_graphics"]
    video = c["max_video"] // 2
    for ctype, mhz in enumerate((graphics, graphics, st["app_mem"], video)):
        out.append("clock %d 0 %d" % (ctype, mhz))
    for ctype, mhz in enumerate((c["max_graphics"], c["max_sm"], c["max_mem"], c["max_video"])):
        out.append("max_clock %d %d" % (ctype, mhz))
    out += [
        "clock 0 1 %d" % st["app_graphics"],
        "clock 2 1 %d" % st["app_mem"],
        "clock 0 2 %d" % c["default_app_graphics"],
        "clock 2 2 %d" % c["default_app_mem"],
        "clock 0 3 %d" % c["max_graphics"],
    ]
    for mem, graphics_list in g["supported_clocks"].items():
        out.append("gr_clocks %s %s" % (mem, " ".join(str(x) for x in graphics_list)))
    p = g["power"]
    limit = _mw(st["power_limit"])
    out.append("power %d %d %d %d %d %d" % (_mw(p["idle_draw"]), limit, limit, _mw(p["default"]), _mw(p["min"]), _mw(p["max"])))
    fields = [
        (FI_POWER_INSTANT, 0, TYPE_UINT, _mw(p["idle_draw"])),
        (FI_POWER_MIN, 0, TYPE_UINT, _mw(p["min"])),
        (FI_POWER_MAX, 0, TYPE_UINT, _mw(p["max"])),
        (FI_POWER_DEFAULT, 0, TYPE_UINT, _mw(p["default"])),
        (FI_POWER_CURRENT, 0, TYPE_UINT, limit),
        (FI_POWER_REQUESTED, 0, TYPE_UINT, limit),
        (FI_PCIE_REPLAY_ROLLOVER, 0, TYPE_UINT, 0),
        (FI_RESET_STATUS, 0, TYPE_UINT, 0),
        (FI_DRAIN_AND_RESET_STATUS, 0, TYPE_UINT, 0),
    ]
    if arch == "Hopper":  # averaged power: Ampere except GA100, and newer
        fields.append((FI_POWER_AVERAGE, 0, TYPE_UINT, _mw(p["idle_draw"])))
    temps = g["temperature"]
    if "memory" in temps:
        fields.append((FI_MEMORY_TEMP, 0, TYPE_UINT, temps["memory"]))
    for key, fid in FI_TLIMIT.items():
        if key in temps.get("tlimit", {}):
            fields.append((fid, 0, TYPE_SINT, temps["tlimit"][key]))
    for key, ttype in THRESHOLD.items():
        if key in temps.get("thresholds", {}):
            out.append("temp_threshold %d %d" % (ttype, temps["thresholds"][key]))
    # ECC (enabled, no errors unless a fault adds uncorrected ones: nvmlMemoryErrorType 1, both
    # the volatile and the aggregate counter, at device memory: location 2); Ampere+ retire rows
    # (row remapping) instead of pages
    ecc = g.get("ecc", {})
    if ecc:
        out.append("ecc 1 1")
        for err in (0, 1):
            for counter in (0, 1):
                n_err = dbe if err == 1 else 0
                out.append("ecc_total %d %d %d" % (err, counter, n_err))
                for location in ecc.get("locations", (2,)):
                    out.append("ecc_counter %d %d %d %d" % (err, counter, location, n_err if location == 2 else 0))
        if ecc.get("sram_status"):  # nvmlDeviceGetSramEccErrorStatus: no SRAM errors, threshold not exceeded
            out.append("sram_ecc" + " 0" * 12)
        if ecc.get("row_remapping"):
            pending, failure = int("gpu_row_remap_pending" in hw), int("gpu_row_remap_failure" in hw)
            out.append("remapped 0 %d %d %d" % (pending + failure, pending, failure))
            out.append("remap_histogram %d 0 0 0 0" % ecc["row_remapping"]["banks"])
        else:
            out.append("retired 0 0 0")
    # NVLink: a GPU reports all its links; those without a bridge or switch behind them are inactive
    connected = g["nvlink"]["links"]
    links = max(connected, g["nvlink"].get("hardware_links", 0))
    if links:
        switches = prof.get("nvswitch", {}).get("bus_ids", [])
        fields.append((FI_NVLINK_LINK_COUNT, 0, TYPE_UINT, links))
        for link in range(links):
            active = link in ctx["up"][slot]
            errors = link_errors.get((slot, link), 0)
            fields += [
                (FI_NVLINK_GET_STATE, link, TYPE_UINT, 1 if active else 0),
                (FI_NVLINK_GET_SPEED, link, TYPE_UINT, round(g["nvlink"]["speed_gbps"] * 1000) if active else 0),
                (FI_NVLINK_GET_VERSION, link, TYPE_UINT, NVLINK_VERSION.get(arch, 4)),
                (FI_NVLINK_ERROR_DL_REPLAY, link, TYPE_ULL, errors),
                (FI_NVLINK_ERROR_DL_RECOVERY, link, TYPE_ULL, 0),
                (FI_NVLINK_ERROR_DL_CRC, link, TYPE_ULL, errors),
            ]
            remote = ""
            if switches and link < connected:  # every connected link ends on one of the baseboard's NVSwitches
                sw = switches[link * len(switches) // connected]
                remote = " 0 0x%s 0 0x%s10de 0x0" % (sw, prof["nvswitch"]["pci_device"][2:])
            out.append("nvlink %d 0x%x%s" % (link, NVLINK_CAPS if link < connected else 0, remote))
    if prof.get("nvswitch", {}).get("count"):
        status = SUCCESS if fstate == "Completed" else NVML_ERROR_NOT_READY
        out.append("fabric %d %d 0 %s" % (FABRIC_STATE.get(fstate, 1), status, "0" * 32))
    for position, other in enumerate(order):
        if other != slot:
            same_node = g["numa"][other] == g["numa"][slot]
            out.append("topo %d %d" % (position, TOPO_NODE if same_node else TOPO_SYSTEM))
            out.append("p2p %d %s" % (position, " ".join(str(v) for v in p2p_status(prof, ctx["up"], fstate, slot, other))))
    out += ["field %d %d %d %s" % f for f in fields]
    return out
