/*
 * rackforge lab NVML (SIMULATION): hwsim's line format (see lab/hwsim/hwsimlib/nvml.py) parsed into the state.
 * See nvml_hwsim.c for how the library works.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab_nvml_state.h"

/* ---------------------------------------------------------------- the line format */

static unsigned long long num(char **p)
{
    char *end;
    unsigned long long v;
    while (**p == ' ')
        (*p)++;
    if (**p == '-') {
        long long s = strtoll(*p, &end, 0);
        *p = end;
        return (unsigned long long)s;
    }
    v = strtoull(*p, &end, 0);
    *p = end;
    return v;
}

static void copy_str(char *dst, const char *src)
{
    while (*src == ' ')
        src++;
    snprintf(dst, STR, "%s", src);
}

static void parse_pci(nvmlPciInfo_t *pci, char **p)
{
    memset(pci, 0, sizeof(*pci));
    pci->domain = (unsigned int)num(p);
    pci->bus = (unsigned int)num(p);
    pci->device = (unsigned int)num(p);
    pci->pciDeviceId = (unsigned int)num(p);
    pci->pciSubSystemId = (unsigned int)num(p);
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", pci->domain, pci->bus, pci->device);
    snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", pci->domain, pci->bus, pci->device);
}

static void parse_gpu_line(struct gpu *g, const char *key, char *p)
{
#define IS(k) (strcmp(key, k) == 0)
    if (IS("name")) { copy_str(g->name, p); g->has[K_NAME] = 1; }
    else if (IS("uuid")) { copy_str(g->uuid, p); g->has[K_UUID] = 1; }
    else if (IS("serial")) { copy_str(g->serial, p); g->has[K_SERIAL] = 1; }
    else if (IS("vbios")) { copy_str(g->vbios, p); g->has[K_VBIOS] = 1; }
    else if (IS("board_part")) { copy_str(g->board_part, p); g->has[K_BOARD_PART] = 1; }
    else if (IS("inforom_image")) { copy_str(g->inforom_image, p); g->has[K_INFOROM_IMAGE] = 1; }
    else if (IS("inforom")) {
        unsigned int obj = (unsigned int)num(&p);
        if (obj < 3) { copy_str(g->inforom[obj], p); g->has_inforom[obj] = 1; }
    }
    else if (IS("gsp")) { copy_str(g->gsp, p); g->has[K_GSP] = 1; }
    else if (IS("brand")) { g->brand = (unsigned int)num(&p); g->has[K_BRAND] = 1; }
    else if (IS("arch")) { g->arch = (unsigned int)num(&p); g->has[K_ARCH] = 1; }
    else if (IS("minor")) { g->minor = (unsigned int)num(&p); g->has[K_MINOR] = 1; }
    else if (IS("board_id")) { g->board_id = (unsigned int)num(&p); g->has[K_BOARD_ID] = 1; }
    else if (IS("module_id")) { g->module_id = (unsigned int)num(&p); g->has[K_MODULE_ID] = 1; }
    else if (IS("multi_gpu")) { g->multi_gpu = (unsigned int)num(&p); g->has[K_MULTI_GPU] = 1; }
    else if (IS("cc")) { g->cc_major = (int)num(&p); g->cc_minor = (int)num(&p); g->has[K_CC] = 1; }
    else if (IS("pci")) { parse_pci(&g->pci, &p); g->has[K_PCI] = 1; }
    else if (IS("pcie")) {
        g->pcie_gen = (unsigned int)num(&p);
        g->pcie_max_gen = (unsigned int)num(&p);
        g->pcie_gpu_max_gen = (unsigned int)num(&p);
        g->pcie_width = (unsigned int)num(&p);
        g->pcie_max_width = (unsigned int)num(&p);
        g->has[K_PCIE] = 1;
    }
    else if (IS("pcie_replay")) { g->pcie_replay = (unsigned int)num(&p); g->has[K_PCIE_REPLAY] = 1; }
    else if (IS("pcie_throughput")) { g->pcie_tx = (unsigned int)num(&p); g->pcie_rx = (unsigned int)num(&p); g->has[K_PCIE_THROUGHPUT] = 1; }
    else if (IS("memory")) {
        g->mem_total = num(&p);
        g->mem_reserved = num(&p);
        g->mem_used = num(&p);
        g->has[K_MEMORY] = 1;
    }
    else if (IS("bar1")) { g->bar1_total = num(&p); g->bar1_used = num(&p); g->has[K_BAR1] = 1; }
    else if (IS("persistence")) { g->persistence = (unsigned int)num(&p); g->has[K_PERSISTENCE] = 1; }
    else if (IS("compute_mode")) { g->compute_mode = (unsigned int)num(&p); g->has[K_COMPUTE_MODE] = 1; }
    else if (IS("display")) { g->display_mode = (unsigned int)num(&p); g->display_active = (unsigned int)num(&p); g->has[K_DISPLAY] = 1; }
    else if (IS("pstate")) { g->pstate = (unsigned int)num(&p); g->has[K_PSTATE] = 1; }
    else if (IS("utilization")) { g->util_gpu = (unsigned int)num(&p); g->util_mem = (unsigned int)num(&p); g->has[K_UTILIZATION] = 1; }
    else if (IS("codec")) {
        g->util_enc = (unsigned int)num(&p);
        g->util_dec = (unsigned int)num(&p);
        g->util_jpg = (unsigned int)num(&p);
        g->util_ofa = (unsigned int)num(&p);
        g->has[K_CODEC] = 1;
    }
    else if (IS("autoboost")) { g->autoboost = (unsigned int)num(&p); g->autoboost_default = (unsigned int)num(&p); g->has[K_AUTOBOOST] = 1; }
    else if (IS("virtualization")) { g->virt_mode = (unsigned int)num(&p); g->has[K_VIRT] = 1; }
    else if (IS("accounting")) { g->accounting = (unsigned int)num(&p); g->accounting_buffer = (unsigned int)num(&p); g->has[K_ACCOUNTING] = 1; }
    else if (IS("mig")) { g->mig_cur = (unsigned int)num(&p); g->mig_pending = (unsigned int)num(&p); g->has[K_MIG] = 1; }
    else if (IS("clock")) {
        unsigned int type = (unsigned int)num(&p), id = (unsigned int)num(&p), mhz = (unsigned int)num(&p);
        if (type < 4 && id < 4) { g->clock[id].has[type] = 1; g->clock[id].mhz[type] = mhz; }
    }
    else if (IS("max_clock")) {
        unsigned int type = (unsigned int)num(&p), mhz = (unsigned int)num(&p);
        if (type < 4) { g->max_clock.has[type] = 1; g->max_clock.mhz[type] = mhz; }
    }
    else if (IS("gr_clocks")) {
        if (g->n_mem_clocks < MAX_MEM_CLOCKS) {
            unsigned int m = g->n_mem_clocks++;
            g->mem_clocks[m] = (unsigned int)num(&p);
            g->n_gr_clocks[m] = 0;
            while (*p && g->n_gr_clocks[m] < MAX_GR_CLOCKS) {
                while (*p == ' ')
                    p++;
                if (!*p)
                    break;
                g->gr_clocks[m][g->n_gr_clocks[m]++] = (unsigned int)num(&p);
            }
        }
    }
    else if (IS("power")) {
        g->power_usage = (unsigned int)num(&p);
        g->power_limit = (unsigned int)num(&p);
        g->power_enforced = (unsigned int)num(&p);
        g->power_default = (unsigned int)num(&p);
        g->power_min = (unsigned int)num(&p);
        g->power_max = (unsigned int)num(&p);
        g->has[K_POWER] = 1;
    }
    else if (IS("temp")) { g->temp_gpu = (unsigned int)num(&p); g->has[K_TEMP] = 1; }
    else if (IS("temp_threshold")) {
        unsigned int t = (unsigned int)num(&p);
        if (t < 8) { g->threshold[t] = (unsigned int)num(&p); g->has_threshold[t] = 1; }
    }
    else if (IS("throttle")) { g->throttle_current = num(&p); g->throttle_supported = num(&p); g->has[K_THROTTLE] = 1; }
    else if (IS("ecc")) { g->ecc_current = (unsigned int)num(&p); g->ecc_pending = (unsigned int)num(&p); g->has[K_ECC] = 1; }
    else if (IS("ecc_counter")) {
        unsigned int e = (unsigned int)num(&p), c = (unsigned int)num(&p), l = (unsigned int)num(&p);
        if (e < 2 && c < 2 && l < 8) { g->ecc_counter[e][c][l] = num(&p); g->has_ecc_counter[e][c][l] = 1; }
    }
    else if (IS("ecc_total")) {
        unsigned int e = (unsigned int)num(&p), c = (unsigned int)num(&p);
        if (e < 2 && c < 2) { g->ecc_total[e][c] = num(&p); g->has_ecc_total[e][c] = 1; }
    }
    else if (IS("retired")) {
        g->retired[0] = (unsigned int)num(&p);
        g->retired[1] = (unsigned int)num(&p);
        g->retired_pending = (unsigned int)num(&p);
        g->has[K_RETIRED] = 1;
    }
    else if (IS("remapped")) {
        g->remap_corr = (unsigned int)num(&p);
        g->remap_unc = (unsigned int)num(&p);
        g->remap_pending = (unsigned int)num(&p);
        g->remap_failure = (unsigned int)num(&p);
        g->has[K_REMAPPED] = 1;
    }
    else if (IS("remap_histogram")) {
        g->remap_hist.max = (unsigned int)num(&p);
        g->remap_hist.high = (unsigned int)num(&p);
        g->remap_hist.partial = (unsigned int)num(&p);
        g->remap_hist.low = (unsigned int)num(&p);
        g->remap_hist.none = (unsigned int)num(&p);
        g->has[K_REMAP_HIST] = 1;
    }
    else if (IS("fabric")) {
        int i;
        g->fabric_state = (unsigned int)num(&p);
        g->fabric_status = (unsigned int)num(&p);
        g->fabric_partition = (unsigned int)num(&p);
        while (*p == ' ')
            p++;
        for (i = 0; i < 16 && p[0] && p[1]; i++, p += 2) {
            char hex[3] = {p[0], p[1], 0};
            g->fabric_cluster[i] = (unsigned char)strtoul(hex, NULL, 16);
        }
        g->has[K_FABRIC] = 1;
    }
    else if (IS("numa")) { g->numa = (unsigned int)num(&p); g->has[K_NUMA] = 1; }
    else if (IS("cpuset")) {
        g->n_cpuset = 0;
        while (*p && g->n_cpuset < MAX_CPUSET_WORDS) {
            while (*p == ' ')
                p++;
            if (!*p)
                break;
            g->cpuset[g->n_cpuset++] = (unsigned long)num(&p);
        }
        g->has[K_CPUSET] = 1;
    }
    else if (IS("nvlink")) {
        unsigned int l = (unsigned int)num(&p);
        if (l < MAX_LINKS) {
            struct link *lk = &g->links[l];
            lk->present = 1;
            lk->caps = (unsigned int)num(&p);
            while (*p == ' ')
                p++;
            if (*p) {
                parse_pci(&lk->remote, &p);
                lk->has_remote = 1;
            }
        }
    }
    else if (IS("topo")) {
        unsigned int pos = (unsigned int)num(&p);
        if (pos < MAX_GPUS) { g->topo[pos] = (unsigned int)num(&p); g->has_topo[pos] = 1; }
    }
    else if (IS("p2p")) {
        unsigned int pos = (unsigned int)num(&p), i;
        if (pos < MAX_GPUS) {
            for (i = 0; i < NVML_P2P_CAPS_INDEX_COUNT; i++)
                g->p2p[pos][i] = (unsigned int)num(&p);
            g->has_p2p[pos] = 1;
        }
    }
    else if (IS("sram_ecc")) {
        unsigned int i;
        for (i = 0; i < 12; i++)
            g->sram_ecc[i] = num(&p);
        g->has[K_SRAM_ECC] = 1;
    }
    else if (IS("field")) {
        if (g->n_fields < MAX_FIELDS) {
            struct field *f = &g->fields[g->n_fields++];
            f->id = (unsigned int)num(&p);
            f->scope = (unsigned int)num(&p);
            f->type = (int)num(&p);
            while (*p == ' ')
                p++;
            if (f->type == NVML_VALUE_TYPE_DOUBLE)
                f->value.dVal = strtod(p, NULL);
            else if (f->type == NVML_VALUE_TYPE_SIGNED_INT)
                f->value.siVal = (int)strtol(p, NULL, 0);
            else if (f->type == NVML_VALUE_TYPE_SIGNED_LONG_LONG)
                f->value.sllVal = strtoll(p, NULL, 0);
            else if (f->type == NVML_VALUE_TYPE_UNSIGNED_INT)
                f->value.uiVal = (unsigned int)strtoul(p, NULL, 0);
            else if (f->type == NVML_VALUE_TYPE_UNSIGNED_LONG)
                f->value.ulVal = strtoul(p, NULL, 0);
            else
                f->value.ullVal = strtoull(p, NULL, 0);
        }
    }
#undef IS
}

/* Parses hwsim's output into `lab`; returns the `result` line's value (or -1 if none). */
int parse_state(char *text)
{
    char *line, *save = NULL;
    struct gpu *g = NULL;
    int result = -1;

    memset(lab.gpus, 0, sizeof(lab.gpus));
    lab.n_gpus = 0;
    lab.has_cuda = 0;
    lab.init_rc = NVML_ERROR_UNKNOWN;
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *p = line, *key;
        while (*p == ' ')
            p++;
        if (!*p || *p == '#')
            continue;
        key = p;
        while (*p && *p != ' ')
            p++;
        if (*p)
            *p++ = '\0';
        if (strcmp(key, "result") == 0)
            result = (int)num(&p);
        else if (strcmp(key, "init") == 0)
            lab.init_rc = (int)num(&p);
        else if (strcmp(key, "library") == 0)
            copy_str(lab.library, p);
        else if (strcmp(key, "driver") == 0)
            copy_str(lab.driver, p);
        else if (strcmp(key, "cuda") == 0) {
            lab.cuda = (int)num(&p);
            lab.has_cuda = 1;
        }
        else if (strcmp(key, "gpu") == 0) {
            if (lab.n_gpus >= MAX_GPUS)
                break;
            g = &lab.gpus[lab.n_gpus];
            g->slot = (int)num(&p);
            g->position = (int)lab.n_gpus++;
        }
        else if (strcmp(key, "end") == 0)
            break;
        else if (g)
            parse_gpu_line(g, key, p);
    }
    return result;
}
