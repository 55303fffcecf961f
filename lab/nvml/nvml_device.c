/*
 * rackforge lab NVML (SIMULATION): device identity, PCI, memory and utilization.
 * See nvml_hwsim.c for how the library works.
 */
#define _GNU_SOURCE
#include <string.h>

#include "lab_nvml_state.h"

/* ---------------------------------------------------------------- identity */

NVML_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    DEVICE(g, device);
    OUT(index);
    *index = (unsigned int)g->position;
    return NVML_SUCCESS;
}

#define STRING_GETTER(fn, key, member)                                                   \
    NVML_EXPORT nvmlReturn_t fn(nvmlDevice_t device, char *out, unsigned int length)     \
    {                                                                                    \
        DEVICE(g, device);                                                               \
        NEED(g, key);                                                                    \
        return put_str(out, length, g->member);                                          \
    }

STRING_GETTER(nvmlDeviceGetName, K_NAME, name)
STRING_GETTER(nvmlDeviceGetUUID, K_UUID, uuid)
STRING_GETTER(nvmlDeviceGetSerial, K_SERIAL, serial)
STRING_GETTER(nvmlDeviceGetVbiosVersion, K_VBIOS, vbios)
STRING_GETTER(nvmlDeviceGetBoardPartNumber, K_BOARD_PART, board_part)
STRING_GETTER(nvmlDeviceGetInforomImageVersion, K_INFOROM_IMAGE, inforom_image)

#define UINT_GETTER(fn, key, member)                                                     \
    NVML_EXPORT nvmlReturn_t fn(nvmlDevice_t device, unsigned int *out)                  \
    {                                                                                    \
        DEVICE(g, device);                                                               \
        NEED(g, key);                                                                    \
        OUT(out);                                                                        \
        *out = g->member;                                                                \
        return NVML_SUCCESS;                                                             \
    }

UINT_GETTER(nvmlDeviceGetBrand, K_BRAND, brand)
UINT_GETTER(nvmlDeviceGetArchitecture, K_ARCH, arch)
UINT_GETTER(nvmlDeviceGetMinorNumber, K_MINOR, minor)
UINT_GETTER(nvmlDeviceGetBoardId, K_BOARD_ID, board_id)
UINT_GETTER(nvmlDeviceGetModuleId, K_MODULE_ID, module_id)
UINT_GETTER(nvmlDeviceGetMultiGpuBoard, K_MULTI_GPU, multi_gpu)
UINT_GETTER(nvmlDeviceGetPersistenceMode, K_PERSISTENCE, persistence)
UINT_GETTER(nvmlDeviceGetComputeMode, K_COMPUTE_MODE, compute_mode)
UINT_GETTER(nvmlDeviceGetDisplayMode, K_DISPLAY, display_mode)
UINT_GETTER(nvmlDeviceGetDisplayActive, K_DISPLAY, display_active)
UINT_GETTER(nvmlDeviceGetPerformanceState, K_PSTATE, pstate)
UINT_GETTER(nvmlDeviceGetPowerState, K_PSTATE, pstate)
UINT_GETTER(nvmlDeviceGetVirtualizationMode, K_VIRT, virt_mode)
UINT_GETTER(nvmlDeviceGetAccountingMode, K_ACCOUNTING, accounting)
UINT_GETTER(nvmlDeviceGetAccountingBufferSize, K_ACCOUNTING, accounting_buffer)
UINT_GETTER(nvmlDeviceGetCurrPcieLinkGeneration, K_PCIE, pcie_gen)
UINT_GETTER(nvmlDeviceGetMaxPcieLinkGeneration, K_PCIE, pcie_max_gen)
UINT_GETTER(nvmlDeviceGetGpuMaxPcieLinkGeneration, K_PCIE, pcie_gpu_max_gen)
UINT_GETTER(nvmlDeviceGetCurrPcieLinkWidth, K_PCIE, pcie_width)
UINT_GETTER(nvmlDeviceGetMaxPcieLinkWidth, K_PCIE, pcie_max_width)
UINT_GETTER(nvmlDeviceGetPcieReplayCounter, K_PCIE_REPLAY, pcie_replay)
UINT_GETTER(nvmlDeviceGetPowerUsage, K_POWER, power_usage)
UINT_GETTER(nvmlDeviceGetPowerManagementLimit, K_POWER, power_limit)
UINT_GETTER(nvmlDeviceGetEnforcedPowerLimit, K_POWER, power_enforced)
UINT_GETTER(nvmlDeviceGetPowerManagementDefaultLimit, K_POWER, power_default)

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending)
{
    DEVICE(g, device);
    NEED(g, K_MIG);
    OUT(current && pending);
    *current = g->mig_cur;
    *pending = g->mig_pending;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetInforomVersion(nvmlDevice_t device, unsigned int object, char *version, unsigned int length)
{
    DEVICE(g, device);
    if (object >= 3)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->has_inforom[object])
        return NVML_ERROR_NOT_SUPPORTED;
    return put_str(version, length, g->inforom[object]);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGspFirmwareVersion(nvmlDevice_t device, char *version)
{
    DEVICE(g, device);
    NEED(g, K_GSP);
    return put_str(version, 80, g->gsp);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGspFirmwareMode(nvmlDevice_t device, unsigned int *enabled, unsigned int *default_mode)
{
    DEVICE(g, device);
    NEED(g, K_GSP);
    OUT(enabled && default_mode);
    *enabled = 1;
    *default_mode = 1;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    DEVICE(g, device);
    NEED(g, K_CC);
    OUT(major && minor);
    *major = g->cc_major;
    *minor = g->cc_minor;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    DEVICE(g, device);
    NEED(g, K_PCI);
    OUT(pci);
    *pci = g->pci;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, unsigned int counter, unsigned int *value)
{
    DEVICE(g, device);
    NEED(g, K_PCIE_THROUGHPUT);
    OUT(value);
    if (counter > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    *value = counter == 0 ? g->pcie_tx : g->pcie_rx;
    return NVML_SUCCESS;
}

/* ---------------------------------------------------------------- memory, utilization */

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    DEVICE(g, device);
    NEED(g, K_MEMORY);
    OUT(memory);
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = g->mem_total;
    memory->reserved = g->mem_reserved;
    memory->used = g->mem_used;
    memory->free = g->mem_total - g->mem_reserved - g->mem_used;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1)
{
    DEVICE(g, device);
    NEED(g, K_BAR1);
    OUT(bar1);
    bar1->bar1Total = g->bar1_total;
    bar1->bar1Used = g->bar1_used;
    bar1->bar1Free = g->bar1_total - g->bar1_used;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util)
{
    DEVICE(g, device);
    NEED(g, K_UTILIZATION);
    OUT(util);
    util->gpu = g->util_gpu;
    util->memory = g->util_mem;
    return NVML_SUCCESS;
}

#define CODEC_GETTER(fn, member)                                                                       \
    NVML_EXPORT nvmlReturn_t fn(nvmlDevice_t device, unsigned int *util, unsigned int *period_us)      \
    {                                                                                                  \
        DEVICE(g, device);                                                                             \
        NEED(g, K_CODEC);                                                                              \
        OUT(util && period_us);                                                                        \
        *util = g->member;                                                                             \
        *period_us = 167000;                                                                           \
        return NVML_SUCCESS;                                                                           \
    }

CODEC_GETTER(nvmlDeviceGetEncoderUtilization, util_enc)
CODEC_GETTER(nvmlDeviceGetDecoderUtilization, util_dec)
CODEC_GETTER(nvmlDeviceGetJpgUtilization, util_jpg)
CODEC_GETTER(nvmlDeviceGetOfaUtilization, util_ofa)

NVML_EXPORT nvmlReturn_t nvmlDeviceGetEncoderStats(nvmlDevice_t device, unsigned int *sessions, unsigned int *fps, unsigned int *latency)
{
    DEVICE(g, device);
    NEED(g, K_CODEC);
    OUT(sessions && fps && latency);
    *sessions = *fps = *latency = 0;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetFBCStats(nvmlDevice_t device, nvmlFBCStats_t *stats)
{
    DEVICE(g, device);
    NEED(g, K_CODEC);
    OUT(stats);
    memset(stats, 0, sizeof(*stats));
    return NVML_SUCCESS;
}
