/*
 * rackforge lab NVML (SIMULATION): init and shutdown, error strings, system queries, device handles, events.
 * See nvml_hwsim.c for how the library works.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "lab_nvml_state.h"

/* ---------------------------------------------------------------- init and system */

static nvmlReturn_t init(void)
{
    nvmlReturn_t rc;
    if (lab.refcount > 0) {
        lab.refcount++;
        return NVML_SUCCESS;
    }
    rc = load_state();
    if (rc == NVML_SUCCESS)
        lab.refcount = 1;
    trace("init -> %d (%d GPUs)", rc, lab.n_gpus);
    return rc;
}

NVML_EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    TRACE();
    return init();
}

NVML_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    trace("%s flags=0x%x", __func__, flags);
    return init();
}

NVML_EXPORT nvmlReturn_t nvmlShutdown(void)
{
    TRACE();
    if (lab.refcount <= 0)
        return NVML_ERROR_UNINITIALIZED;
    lab.refcount--;
    return NVML_SUCCESS;
}

NVML_EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    TRACE();
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires reset";
    case NVML_ERROR_OPERATING_SYSTEM: return "GPU access blocked by the operating system";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "Driver/library version mismatch";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: return "vGPU ECC not supported";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient Resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return "Invalid Frequency";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED: return "Requested functionality has been deprecated";
    case NVML_ERROR_NOT_READY: return "System is not in ready state";
    default: return "Unknown Error";
    }
}

/* NVML's private export tables are not modelled: answering success with no table makes the
 * binary skip what it reads through them (it prints those fields as "Uninitialized"). */
NVML_EXPORT nvmlReturn_t nvmlInternalGetExportTable(const void **table, const void *id)
{
    (void)id;
    TRACE();
    if (table)
        *table = NULL;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    TRACE();
    if (lab.refcount <= 0)
        return NVML_ERROR_UNINITIALIZED;
    return put_str(version, length, lab.driver);
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    char text[STR + 8];
    TRACE();
    if (!lab.library[0])
        load_state();
    snprintf(text, sizeof(text), "12.%s", lab.library);
    return put_str(version, length, text);
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version)
{
    TRACE();
    OUT(version);
    if (!lab.has_cuda)
        return NVML_ERROR_LIBRARY_NOT_FOUND;
    *version = lab.cuda;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    TRACE();
    if (lab.refcount <= 0)
        return NVML_ERROR_UNINITIALIZED;
    OUT(count);
    *count = lab.n_gpus;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    trace("%s %u", __func__, index);
    if (lab.refcount <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (index >= lab.n_gpus || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = (nvmlDevice_t)&lab.gpus[index];
    return NVML_SUCCESS;
}

static int bus_id_equal(const char *a, const nvmlPciInfo_t *pci)
{
    unsigned int domain = 0, bus = 0, device = 0, fn = 0;
    if (sscanf(a, "%x:%x:%x.%x", &domain, &bus, &device, &fn) == 4 ||
        (domain = 0, sscanf(a, "%x:%x.%x", &bus, &device, &fn) == 3))
        return domain == pci->domain && bus == pci->bus && device == pci->device && fn == 0;
    return 0;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device)
{
    unsigned int i;
    trace("%s %s", __func__, bus_id ? bus_id : "(null)");
    if (lab.refcount <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!bus_id || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (i = 0; i < lab.n_gpus; i++) {
        if (bus_id_equal(bus_id, &lab.gpus[i].pci)) {
            *device = (nvmlDevice_t)&lab.gpus[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

NVML_EXPORT nvmlReturn_t nvmlGetExcludedDeviceCount(unsigned int *count)
{
    TRACE();
    OUT(count);
    *count = 0;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlUnitGetCount(unsigned int *count)
{
    TRACE();
    if (lab.refcount <= 0)
        return NVML_ERROR_UNINITIALIZED;
    OUT(count);
    *count = 0;
    return NVML_SUCCESS;
}

/* Events: a set exists and never fires (no XID or clock events in the lab). */
static int event_set_token;

NVML_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    TRACE();
    if (lab.refcount <= 0)
        return NVML_ERROR_UNINITIALIZED;
    OUT(set);
    *set = (nvmlEventSet_t)&event_set_token;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    (void)set;
    TRACE();
    return NVML_SUCCESS;
}
