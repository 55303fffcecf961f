/*
 * rackforge lab NVML (SIMULATION): NVLink, fabric and field values.
 * See nvml_hwsim.c for how the library works.
 */
#define _GNU_SOURCE
#include <string.h>
#include <time.h>

#include "lab_nvml_state.h"

/* ---------------------------------------------------------------- NVLink, fabric */

static struct link *link_of(struct gpu *g, unsigned int link)
{
    if (link >= MAX_LINKS || !g->links[link].present)
        return NULL;
    return &g->links[link];
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link, unsigned int capability, unsigned int *result)
{
    struct link *lk;
    DEVICE(g, device);
    OUT(result);
    if (!(lk = link_of(g, link)))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (capability >= 6)
        return NVML_ERROR_INVALID_ARGUMENT;
    *result = (lk->caps >> capability) & 1u;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci)
{
    struct link *lk;
    DEVICE(g, device);
    OUT(pci);
    if (!(lk = link_of(g, link)))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!lk->has_remote)
        return NVML_ERROR_NOT_SUPPORTED;
    *pci = lk->remote;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t *info)
{
    DEVICE(g, device);
    NEED(g, K_FABRIC);
    OUT(info);
    memset(info, 0, sizeof(*info));
    memcpy(info->clusterUuid, g->fabric_cluster, sizeof(info->clusterUuid));
    info->status = (nvmlReturn_t)g->fabric_status;
    info->partitionId = g->fabric_partition;
    info->state = (unsigned char)g->fabric_state;
    return NVML_SUCCESS;
}

/* Field values: hwsim lists the (field, scope) pairs a GPU answers; any other is NOT_SUPPORTED. */
NVML_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t *values)
{
    int i;
    struct timespec now;
    DEVICE(g, device);
    if (count < 0 || (count > 0 && !values))
        return NVML_ERROR_INVALID_ARGUMENT;
    clock_gettime(CLOCK_REALTIME, &now);
    for (i = 0; i < count; i++) {
        unsigned int f;
        nvmlFieldValue_t *v = &values[i];
        trace("  field %u scope %u", v->fieldId, v->scopeId);
        v->timestamp = (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000;
        v->latencyUsec = 0;
        v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        for (f = 0; f < g->n_fields; f++) {
            if (g->fields[f].id == v->fieldId && g->fields[f].scope == v->scopeId) {
                v->valueType = g->fields[f].type;
                v->value = g->fields[f].value;
                v->nvmlReturn = NVML_SUCCESS;
                break;
            }
        }
    }
    return NVML_SUCCESS;
}
