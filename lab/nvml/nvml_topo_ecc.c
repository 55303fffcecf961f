/*
 * rackforge lab NVML (SIMULATION): ECC, retired pages and row remapping; topology, affinity and P2P.
 * See nvml_hwsim.c for how the library works.
 */
#define _GNU_SOURCE
#include <string.h>

#include "lab_nvml_state.h"

/* ---------------------------------------------------------------- ECC, retired pages, row remapping */

NVML_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending)
{
    DEVICE(g, device);
    NEED(g, K_ECC);
    OUT(current && pending);
    *current = g->ecc_current;
    *pending = g->ecc_pending;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t device, unsigned int error_type, unsigned int counter_type,
                                                        unsigned int location, unsigned long long *count)
{
    DEVICE(g, device);
    OUT(count);
    if (error_type >= 2 || counter_type >= 2 || location >= 8)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->has_ecc_counter[error_type][counter_type][location])
        return NVML_ERROR_NOT_SUPPORTED;
    *count = g->ecc_counter[error_type][counter_type][location];
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, unsigned int error_type, unsigned int counter_type,
                                                    unsigned long long *count)
{
    DEVICE(g, device);
    OUT(count);
    if (error_type >= 2 || counter_type >= 2)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->has_ecc_total[error_type][counter_type])
        return NVML_ERROR_NOT_SUPPORTED;
    *count = g->ecc_total[error_type][counter_type];
    return NVML_SUCCESS;
}

static nvmlReturn_t retired_pages(struct gpu *g, unsigned int cause, unsigned int *count, unsigned long long *addresses,
                                  unsigned long long *timestamps)
{
    unsigned int n, room, i;
    NEED(g, K_RETIRED);
    if (cause >= 2 || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    n = g->retired[cause];
    room = *count;
    *count = n;
    if (room == 0 && n > 0)
        return NVML_SUCCESS; /* a size query */
    if (room < n)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    for (i = 0; i < n && addresses; i++) {
        addresses[i] = 0x100000ULL * (i + 1) + cause;
        if (timestamps)
            timestamps[i] = 0;
    }
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, unsigned int cause, unsigned int *count, unsigned long long *addresses)
{
    DEVICE(g, device);
    return retired_pages(g, cause, count, addresses, NULL);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t device, unsigned int cause, unsigned int *count,
                                                     unsigned long long *addresses, unsigned long long *timestamps)
{
    DEVICE(g, device);
    return retired_pages(g, cause, count, addresses, timestamps);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, unsigned int *pending)
{
    DEVICE(g, device);
    NEED(g, K_RETIRED);
    OUT(pending);
    *pending = g->retired_pending;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corr, unsigned int *unc, unsigned int *pending,
                                                  unsigned int *failure)
{
    DEVICE(g, device);
    NEED(g, K_REMAPPED);
    OUT(corr && unc && pending && failure);
    *corr = g->remap_corr;
    *unc = g->remap_unc;
    *pending = g->remap_pending;
    *failure = g->remap_failure;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetRowRemapperHistogram(nvmlDevice_t device, nvmlRowRemapperHistogramValues_t *values)
{
    DEVICE(g, device);
    NEED(g, K_REMAP_HIST);
    OUT(values);
    *values = g->remap_hist;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetSramEccErrorStatus(nvmlDevice_t device, nvmlEccSramErrorStatus_v1_t *status)
{
    const unsigned long long *v;
    DEVICE(g, device);
    NEED(g, K_SRAM_ECC);
    OUT(status);
    if (status->version != nvmlEccSramErrorStatus_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    v = g->sram_ecc;
    status->aggregateUncParity = v[0];
    status->aggregateUncSecDed = v[1];
    status->aggregateCor = v[2];
    status->volatileUncParity = v[3];
    status->volatileUncSecDed = v[4];
    status->volatileCor = v[5];
    status->aggregateUncBucketL2 = v[6];
    status->aggregateUncBucketSm = v[7];
    status->aggregateUncBucketPcie = v[8];
    status->aggregateUncBucketMcu = v[9];
    status->aggregateUncBucketOther = v[10];
    status->bThresholdExceeded = (unsigned int)v[11];
    return NVML_SUCCESS;
}
/* ---------------------------------------------------------------- topology */

NVML_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2, unsigned int *level)
{
    struct gpu *other;
    DEVICE(g, device1);
    OUT(level);
    if (!(other = gpu_of(device2)))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (other == g) {
        *level = NVML_TOPOLOGY_INTERNAL;
        return NVML_SUCCESS;
    }
    if (!g->has_topo[other->position])
        return NVML_ERROR_NOT_SUPPORTED;
    *level = g->topo[other->position];
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetTopologyNearestGpus(nvmlDevice_t device, unsigned int level, unsigned int *count, nvmlDevice_t *devices)
{
    unsigned int i, n = 0, room;
    nvmlDevice_t found[MAX_GPUS];
    DEVICE(g, device);
    OUT(count);
    for (i = 0; i < lab.n_gpus; i++) {
        if ((int)i == g->position || !g->has_topo[i])
            continue;
        if (g->topo[i] <= level)
            found[n++] = (nvmlDevice_t)&lab.gpus[i];
    }
    room = *count;
    *count = n;
    if (room == 0)
        return NVML_SUCCESS;
    if (room < n || !devices)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(devices, found, n * sizeof(*found));
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetTopologyGpuSet(unsigned int cpu, unsigned int *count, nvmlDevice_t *devices)
{
    unsigned int i, n = 0, room;
    nvmlDevice_t found[MAX_GPUS];
    TRACE();
    if (lab.refcount <= 0)
        return NVML_ERROR_UNINITIALIZED;
    OUT(count);
    for (i = 0; i < lab.n_gpus; i++) {
        struct gpu *g = &lab.gpus[i];
        unsigned int word = cpu / (8 * sizeof(unsigned long));
        if (g->has[K_CPUSET] && word < g->n_cpuset && (g->cpuset[word] >> (cpu % (8 * sizeof(unsigned long)))) & 1ul)
            found[n++] = (nvmlDevice_t)g;
    }
    room = *count;
    *count = n;
    if (room == 0)
        return NVML_SUCCESS;
    if (room < n || !devices)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(devices, found, n * sizeof(*found));
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int size, unsigned long *set)
{
    unsigned int i;
    DEVICE(g, device);
    NEED(g, K_CPUSET);
    if (!set || size == 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (i = 0; i < size; i++)
        set[i] = i < g->n_cpuset ? g->cpuset[i] : 0;
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int size, unsigned long *set, unsigned int scope)
{
    unsigned int i, bits = 8 * sizeof(unsigned long);
    DEVICE(g, device);
    NEED(g, K_NUMA);
    (void)scope;
    if (!set || size == 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (i = 0; i < size; i++)
        set[i] = 0;
    if (g->numa / bits < size)
        set[g->numa / bits] = 1ul << (g->numa % bits);
    return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, unsigned int index, unsigned int *status)
{
    struct gpu *other;
    DEVICE(g, device1);
    OUT(status);
    if (!(other = gpu_of(device2)) || index >= NVML_P2P_CAPS_INDEX_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->has_p2p[other->position])
        return NVML_ERROR_NOT_SUPPORTED;
    *status = g->p2p[other->position][index];
    return NVML_SUCCESS;
}
