/*
 * rackforge lab NVML (SIMULATION): the NVML types, constants and struct layouts the lab library
 * needs, declared by this project from the NVML API's documented facts (NVML 12.2, driver 535).
 * Only what the nvml_*.c files use is here; every layout is the ABI the real nvidia-smi binary expects.
 */
#ifndef LAB_NVML_H
#define LAB_NVML_H

#define NVML_EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;

/* HWSIM_NVML_TRACE=1: one stderr line per call (hidden: not part of the library's exports) */
void lab_nvml_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* nvmlReturn_t values */
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_ALREADY_INITIALIZED 5
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_INSUFFICIENT_POWER 8
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_IRQ_ISSUE 11
#define NVML_ERROR_LIBRARY_NOT_FOUND 12
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_CORRUPTED_INFOROM 14
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_RESET_REQUIRED 16
#define NVML_ERROR_OPERATING_SYSTEM 17
#define NVML_ERROR_LIB_RM_VERSION_MISMATCH 18
#define NVML_ERROR_IN_USE 19
#define NVML_ERROR_MEMORY 20
#define NVML_ERROR_NO_DATA 21
#define NVML_ERROR_VGPU_ECC_NOT_SUPPORTED 22
#define NVML_ERROR_INSUFFICIENT_RESOURCES 23
#define NVML_ERROR_FREQ_NOT_SUPPORTED 24
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define NVML_ERROR_DEPRECATED 26
#define NVML_ERROR_NOT_READY 27
#define NVML_ERROR_UNKNOWN 999

/* opaque handles: the lab's are pointers into its own tables */
typedef struct lab_nvml_device *nvmlDevice_t;
typedef struct lab_nvml_event_set *nvmlEventSet_t;

#define NVML_FEATURE_DISABLED 0
#define NVML_FEATURE_ENABLED 1

/* nvmlClockId_t */
#define NVML_CLOCK_ID_CURRENT 0
#define NVML_CLOCK_ID_APP_CLOCK_TARGET 1
#define NVML_CLOCK_ID_APP_CLOCK_DEFAULT 2
#define NVML_CLOCK_ID_CUSTOMER_BOOST_MAX 3

#define NVML_TEMPERATURE_GPU 0

/* nvmlGpuTopologyLevel_t */
#define NVML_TOPOLOGY_INTERNAL 0
#define NVML_TOPOLOGY_SINGLE 10
#define NVML_TOPOLOGY_MULTIPLE 20
#define NVML_TOPOLOGY_HOSTBRIDGE 30
#define NVML_TOPOLOGY_NODE 40
#define NVML_TOPOLOGY_SYSTEM 50

/* nvmlGpuP2PCapsIndex_t and nvmlGpuP2PStatus_t */
#define NVML_P2P_CAPS_INDEX_COUNT 5     /* read, write, nvlink, atomics, prop */

/* nvmlValueType_t */
#define NVML_VALUE_TYPE_DOUBLE 0
#define NVML_VALUE_TYPE_UNSIGNED_INT 1
#define NVML_VALUE_TYPE_UNSIGNED_LONG 2
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3
#define NVML_VALUE_TYPE_SIGNED_LONG_LONG 4
#define NVML_VALUE_TYPE_SIGNED_INT 5

/* a versioned struct's version word: its size in the low bits, the version in the top byte */
#define LAB_NVML_STRUCT_VERSION(type, ver) ((unsigned int)(sizeof(type) | ((ver) << 24U)))

typedef struct {
    char busIdLegacy[16];       /* "%04X:%02X:%02X.0" */
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;   /* device id << 16 | vendor id */
    unsigned int pciSubSystemId;
    char busId[32];             /* "%08X:%02X:%02X.0" */
} nvmlPciInfo_t;

typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 LAB_NVML_STRUCT_VERSION(nvmlMemory_v2_t, 2)

typedef struct {
    unsigned long long bar1Total;
    unsigned long long bar1Free;
    unsigned long long bar1Used;
} nvmlBAR1Memory_t;

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct {
    unsigned int sessionsCount;
    unsigned int averageFPS;
    unsigned int averageLatency;
} nvmlFBCStats_t;

typedef struct {
    unsigned int max;
    unsigned int high;
    unsigned int partial;
    unsigned int low;
    unsigned int none;
} nvmlRowRemapperHistogramValues_t;

typedef struct {
    unsigned int version;
    unsigned char powerScope;   /* 0 = GPU, 1 = module */
    unsigned int powerValueMw;
} nvmlPowerValue_v2_t;
#define nvmlPowerValue_v2 LAB_NVML_STRUCT_VERSION(nvmlPowerValue_v2_t, 2)

typedef struct {
    char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int partitionId;
    unsigned char state;        /* 0 not supported, 1 not started, 2 in progress, 3 completed */
} nvmlGpuFabricInfo_t;

typedef struct {
    unsigned int version;
    unsigned long long aggregateUncParity;
    unsigned long long aggregateUncSecDed;
    unsigned long long aggregateCor;
    unsigned long long volatileUncParity;
    unsigned long long volatileUncSecDed;
    unsigned long long volatileCor;
    unsigned long long aggregateUncBucketL2;
    unsigned long long aggregateUncBucketSm;
    unsigned long long aggregateUncBucketPcie;
    unsigned long long aggregateUncBucketMcu;
    unsigned long long aggregateUncBucketOther;
    unsigned int bThresholdExceeded;
} nvmlEccSramErrorStatus_v1_t;
#define nvmlEccSramErrorStatus_v1 LAB_NVML_STRUCT_VERSION(nvmlEccSramErrorStatus_v1_t, 1)

typedef union {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
} nvmlValue_t;

typedef struct {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

#endif
