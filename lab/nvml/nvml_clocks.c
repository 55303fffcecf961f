/*
 * rackforge lab NVML (SIMULATION): clocks, power, persistence and thermal.
 * See nvml_hwsim.c for how the library works.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "lab_nvml_state.h"

/* ---------------------------------------------------------------- clocks */

static nvmlReturn_t clock_value(struct clockset *set, unsigned int type, unsigned int *mhz)
{
    if (!mhz || type >= 4)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!set->has[type])
        return NVML_ERROR_NOT_SUPPORTED;
    *mhz = set->mhz[type];
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, unsigned int type, unsigned int *mhz)
{
    DEVICE(g, device);
    return clock_value(&g->clock[NVML_CLOCK_ID_CURRENT], type, mhz);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, unsigned int type, unsigned int *mhz)
{
    DEVICE(g, device);
    return clock_value(&g->max_clock, type, mhz);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t device, unsigned int type, unsigned int *mhz)
{
    DEVICE(g, device);
    return clock_value(&g->clock[NVML_CLOCK_ID_APP_CLOCK_TARGET], type, mhz);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t device, unsigned int type, unsigned int *mhz)
{
    DEVICE(g, device);
    return clock_value(&g->clock[NVML_CLOCK_ID_APP_CLOCK_DEFAULT], type, mhz);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t device, unsigned int type, unsigned int id, unsigned int *mhz)
{
    DEVICE(g, device);
    if (id >= 4)
        return NVML_ERROR_INVALID_ARGUMENT;
    return clock_value(&g->clock[id], type, mhz);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetAutoBoostedClocksEnabled(nvmlDevice_t device, unsigned int *enabled, unsigned int *default_enabled)
{
    DEVICE(g, device);
    NEED(g, K_AUTOBOOST);
    OUT(enabled && default_enabled);
    *enabled = g->autoboost;
    *default_enabled = g->autoboost_default;
    return NVML_SUCCESS;
}

static nvmlReturn_t put_list(const unsigned int *values, unsigned int n, unsigned int *count, unsigned int *out)
{
    unsigned int room;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    room = *count;
    *count = n;
    if (room < n || !out)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, values, n * sizeof(*values));
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device, unsigned int *count, unsigned int *mhz)
{
    DEVICE(g, device);
    if (!g->n_mem_clocks)
        return NVML_ERROR_NOT_SUPPORTED;
    return put_list(g->mem_clocks, g->n_mem_clocks, count, mhz);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device, unsigned int mem_mhz, unsigned int *count, unsigned int *mhz)
{
    unsigned int m;
    DEVICE(g, device);
    if (!g->n_mem_clocks)
        return NVML_ERROR_NOT_SUPPORTED;
    for (m = 0; m < g->n_mem_clocks; m++)
        if (g->mem_clocks[m] == mem_mhz)
            return put_list(g->gr_clocks[m], g->n_gr_clocks[m], count, mhz);
    return NVML_ERROR_NOT_FOUND;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *reasons)
{
    DEVICE(g, device);
    NEED(g, K_THROTTLE);
    OUT(reasons);
    *reasons = g->throttle_current;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t device, unsigned long long *reasons)
{
    DEVICE(g, device);
    NEED(g, K_THROTTLE);
    OUT(reasons);
    *reasons = g->throttle_supported;
    return NVML_SUCCESS;
}

static void u2s(char *buf, size_t n, unsigned int v)
{
    snprintf(buf, n, "%u", v);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceSetApplicationsClocks(nvmlDevice_t device, unsigned int mem_mhz, unsigned int graphics_mhz)
{
    char a[16], b[16];
    DEVICE(g, device);
    u2s(a, sizeof(a), mem_mhz);
    u2s(b, sizeof(b), graphics_mhz);
    return hwsim_set(g, "app-clocks", a, b);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceResetApplicationsClocks(nvmlDevice_t device)
{
    DEVICE(g, device);
    return hwsim_set(g, "reset-app-clocks", NULL, NULL);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t device, unsigned int min_mhz, unsigned int max_mhz)
{
    char a[16], b[16];
    DEVICE(g, device);
    u2s(a, sizeof(a), min_mhz);
    u2s(b, sizeof(b), max_mhz);
    return hwsim_set(g, "locked-clocks", a, b);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t device)
{
    DEVICE(g, device);
    return hwsim_set(g, "reset-locked-clocks", NULL, NULL);
}

/* ---------------------------------------------------------------- power, persistence */

NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t device, unsigned int *mode)
{
    DEVICE(g, device);
    NEED(g, K_POWER);
    OUT(mode);
    *mode = NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int *min_mw, unsigned int *max_mw)
{
    DEVICE(g, device);
    NEED(g, K_POWER);
    OUT(min_mw && max_mw);
    *min_mw = g->power_min;
    *max_mw = g->power_max;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceSetPowerManagementLimit_v2(nvmlDevice_t device, nvmlPowerValue_v2_t *value)
{
    char a[16], b[16];
    DEVICE(g, device);
    OUT(value);
    if (value->version != nvmlPowerValue_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    u2s(a, sizeof(a), value->powerScope);
    u2s(b, sizeof(b), value->powerValueMw);
    return hwsim_set(g, "power-limit", a, b);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceSetPersistenceMode(nvmlDevice_t device, unsigned int mode)
{
    char a[16];
    DEVICE(g, device);
    u2s(a, sizeof(a), mode);
    return hwsim_set(g, "persistence", a, NULL);
}

/* ---------------------------------------------------------------- thermal */

NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, unsigned int sensor, unsigned int *temp)
{
    DEVICE(g, device);
    OUT(temp);
    if (sensor != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    NEED(g, K_TEMP);
    *temp = g->temp_gpu;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, unsigned int type, unsigned int *temp)
{
    DEVICE(g, device);
    OUT(temp);
    if (type >= 8)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->has_threshold[type])
        return NVML_ERROR_NOT_SUPPORTED;
    *temp = g->threshold[type];
    return NVML_SUCCESS;
}
