/*
 * rackforge lab NVML (SIMULATION): the simulated state the lab library holds (what hwsim's
 * `nvml-state` printed, parsed) and the helpers its nvml_*.c files share. Internal: nothing here is
 * exported (build.py compiles with -fvisibility=hidden; only NVML_EXPORT entry points are).
 */
#ifndef LAB_NVML_STATE_H
#define LAB_NVML_STATE_H

#include "lab_nvml.h"

#define MAX_GPUS 32
#define MAX_LINKS 18
#define MAX_MEM_CLOCKS 16
#define MAX_GR_CLOCKS 512
#define MAX_FIELDS 512
#define MAX_CPUSET_WORDS 32
#define STR 96

/* keys a GPU section may carry: a getter whose key is missing answers NOT_SUPPORTED */
enum {
    K_NAME, K_UUID, K_SERIAL, K_VBIOS, K_BOARD_PART, K_INFOROM_IMAGE, K_BRAND, K_ARCH, K_MINOR,
    K_BOARD_ID, K_MODULE_ID, K_MULTI_GPU, K_CC, K_PCI, K_PCIE, K_PCIE_REPLAY, K_PCIE_THROUGHPUT,
    K_MEMORY, K_BAR1, K_PERSISTENCE, K_COMPUTE_MODE, K_DISPLAY, K_PSTATE, K_UTILIZATION, K_CODEC,
    K_POWER, K_TEMP, K_THROTTLE, K_ECC, K_RETIRED, K_REMAPPED, K_REMAP_HIST, K_FABRIC, K_NUMA,
    K_CPUSET, K_AUTOBOOST, K_VIRT, K_GSP, K_ACCOUNTING, K_MIG, K_SRAM_ECC, K_COUNT
};

struct link {
    int present;
    unsigned int caps;          /* bit n = nvmlNvLinkCapability_t n */
    nvmlPciInfo_t remote;
    int has_remote;
};

struct field {
    unsigned int id, scope;
    int type;
    nvmlValue_t value;
};

struct clockset {
    int has[4];
    unsigned int mhz[4];
};

struct gpu {
    int slot; /* hwsim's GPU slot (its profile index), for nvml-set */
    int position;
    unsigned char has[K_COUNT];
    char name[STR], uuid[STR], serial[STR], vbios[STR], board_part[STR], inforom_image[STR];
    char inforom[3][STR];
    int has_inforom[3];
    char gsp[STR];
    unsigned int brand, arch, minor, board_id, module_id, multi_gpu;
    int cc_major, cc_minor;
    nvmlPciInfo_t pci;
    unsigned int pcie_gen, pcie_max_gen, pcie_gpu_max_gen, pcie_width, pcie_max_width;
    unsigned int pcie_replay, pcie_tx, pcie_rx;
    unsigned long long mem_total, mem_reserved, mem_used, bar1_total, bar1_used;
    unsigned int persistence, compute_mode, display_mode, display_active, pstate;
    unsigned int util_gpu, util_mem, util_enc, util_dec, util_jpg, util_ofa;
    unsigned int autoboost, autoboost_default, virt_mode, accounting, accounting_buffer, mig_cur, mig_pending;
    struct clockset clock[4];   /* by nvmlClockId_t */
    struct clockset max_clock;
    unsigned int n_mem_clocks;
    unsigned int mem_clocks[MAX_MEM_CLOCKS];
    unsigned int n_gr_clocks[MAX_MEM_CLOCKS];
    unsigned int gr_clocks[MAX_MEM_CLOCKS][MAX_GR_CLOCKS];
    unsigned int power_usage, power_limit, power_enforced, power_default, power_min, power_max;
    unsigned int temp_gpu;
    int has_threshold[8];
    unsigned int threshold[8];
    unsigned long long throttle_current, throttle_supported;
    unsigned int ecc_current, ecc_pending;
    int has_ecc_counter[2][2][8];          /* [errorType][counterType][location] */
    unsigned long long ecc_counter[2][2][8];
    int has_ecc_total[2][2];
    unsigned long long ecc_total[2][2];
    unsigned int retired[2], retired_pending;
    unsigned int remap_corr, remap_unc, remap_pending, remap_failure;
    nvmlRowRemapperHistogramValues_t remap_hist;
    unsigned int fabric_state, fabric_status, fabric_partition;
    unsigned char fabric_cluster[16];
    unsigned int numa;
    unsigned int n_cpuset;
    unsigned long cpuset[MAX_CPUSET_WORDS];
    struct link links[MAX_LINKS];
    int has_topo[MAX_GPUS];
    unsigned int topo[MAX_GPUS];           /* nvmlGpuTopologyLevel_t to the GPU at that position */
    int has_p2p[MAX_GPUS];
    unsigned int p2p[MAX_GPUS][NVML_P2P_CAPS_INDEX_COUNT]; /* nvmlGpuP2PStatus_t by nvmlGpuP2PCapsIndex_t */
    unsigned long long sram_ecc[12];       /* nvmlEccSramErrorStatus_v1_t's counters, then its threshold flag */
    unsigned int n_fields;
    struct field fields[MAX_FIELDS];
};

/* the library's whole state (defined in nvml_hwsim.c) */
struct lab_state {
    int refcount;
    int init_rc;
    char library[STR], driver[STR];
    int cuda, has_cuda;
    unsigned int n_gpus;
    struct gpu gpus[MAX_GPUS];
};
extern struct lab_state lab;

#define trace lab_nvml_trace
#define TRACE() trace("%s", __func__)

/* nvml_hwsim.c: running hwsim and answering from its state */
nvmlReturn_t load_state(void);
nvmlReturn_t hwsim_set(struct gpu *g, const char *op, const char *a1, const char *a2);
struct gpu *gpu_of(nvmlDevice_t device);
nvmlReturn_t put_str(char *dst, unsigned int length, const char *src);

/* nvml_lines.c: hwsim's line format into `lab`; returns the `result` line's value (or -1 if none) */
int parse_state(char *text);

#define DEVICE(g, device)                              \
    struct gpu *g;                                     \
    TRACE();                                           \
    if (lab.refcount <= 0)                             \
        return NVML_ERROR_UNINITIALIZED;               \
    if (!(g = gpu_of(device)))                         \
        return NVML_ERROR_INVALID_ARGUMENT;

#define NEED(g, key)                \
    if (!(g)->has[key])             \
        return NVML_ERROR_NOT_SUPPORTED;

#define OUT(ptr)                    \
    if (!(ptr))                     \
        return NVML_ERROR_INVALID_ARGUMENT;

#endif
