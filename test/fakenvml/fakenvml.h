/*
 * fakenvml: a simulated libnvidia-ml.so.1 for tests and demos without a GPU.
 *
 * It exports the NVML entry points that the nvml receiver calls, with the real
 * ABI (it is compiled against the nvml.h that go-nvml ships), and answers
 * them from a JSON scenario named by the FAKE_NVML_SCENARIO environment
 * variable. See README.md beside this file for the scenario format.
 *
 * Layout: one .c file per area. Each area parses its own keys of a GPU object
 * (a FAKE_AREA entry in scenario.c) and implements the NVML calls of that
 * area. Adding an area means: a new .c file, its fields in fake_gpu below,
 * its calls in FAKE_CALLS and one line in the areas table of scenario.c (the
 * Makefile compiles every .c file here).
 *
 * This header is internal: only names starting with "nvml" are exported from
 * the shared library (exports.map).
 */
#ifndef FAKENVML_H
#define FAKENVML_H

#include <stdbool.h>
#include <stddef.h>

#include "nvml.h"

#define FAKE_MAX_GPUS 64
/* MIG devices (compute instances) and GPU instances per GPU. */
#define FAKE_MAX_MIG 16
#define FAKE_MAX_GI 16
/* NVML's "no MIG instance" id (process infos, event data). */
#define FAKE_NO_INSTANCE 0xFFFFFFFFu

/* The generic getters (getters_gen.h, getters_gen.c, written by gen/ from
 * nvml.h): every simple device getter, answering the value of its key in the
 * GPU's getter table (getters.c) with no code here. A key is the function's
 * name, or name(SELECTOR) for a getter whose second argument is an enum
 * (nvmlDeviceGetMaxClockInfo(SM)). They are weak: a function written by hand
 * in another file wins, and keeps its own scenario keys. */
#include "getters_gen.h"

/* Every device-level call that the scenario can fault (errors, hangs); the
 * generic getters follow (FCG_ names, after these: the first name wins, so a
 * hand-written one's FC_ call). X takes the name first, then anything. The
 * name is the exported symbol; a scenario may also name it without its
 * version suffix (nvmlDeviceGetPciInfo for nvmlDeviceGetPciInfo_v3). */
#define FAKE_CALLS(X)                                                                              \
	X(nvmlDeviceGetHandleByIndex_v2)                                                           \
	X(nvmlDeviceGetUUID)                                                                       \
	X(nvmlDeviceGetName)                                                                       \
	X(nvmlDeviceGetSerial)                                                                     \
	X(nvmlDeviceGetIndex)                                                                      \
	X(nvmlDeviceGetPciInfo_v3)                                                                 \
	X(nvmlDeviceGetMinorNumber)                                                                \
	X(nvmlDeviceGetArchitecture)                                                               \
	X(nvmlDeviceGetCudaComputeCapability)                                                      \
	X(nvmlDeviceGetSamples)                                                                    \
	X(nvmlDeviceGetUtilizationRates)                                                           \
	X(nvmlDeviceGetEncoderUtilization)                                                         \
	X(nvmlDeviceGetDecoderUtilization)                                                         \
	X(nvmlDeviceGetMemoryInfo)                                                                 \
	X(nvmlDeviceGetMemoryInfo_v2)                                                              \
	X(nvmlDeviceGetTemperature)                                                                \
	X(nvmlDeviceGetFieldValues)                                                                \
	X(nvmlDeviceGetPowerUsage)                                                                 \
	X(nvmlDeviceGetEnforcedPowerLimit)                                                         \
	X(nvmlDeviceGetTotalEnergyConsumption)                                                     \
	X(nvmlDeviceGetFanSpeed)                                                                   \
	X(nvmlDeviceGetClockInfo)                                                                  \
	X(nvmlDeviceGetPerformanceState)                                                           \
	X(nvmlDeviceGetComputeRunningProcesses_v3)                                                 \
	X(nvmlDeviceGetGraphicsRunningProcesses_v3)                                                \
	X(nvmlDeviceGetProcessUtilization)                                                         \
	X(nvmlGpmQueryDeviceSupport)                                                               \
	X(nvmlGpmSampleGet)                                                                        \
	X(nvmlGpmMetricsGet)                                                                       \
	X(nvmlDeviceGetTotalEccErrors)                                                             \
	X(nvmlDeviceGetRemappedRows)                                                               \
	X(nvmlDeviceGetCurrentClocksEventReasons)                                                  \
	X(nvmlDeviceGetViolationStatus)                                                            \
	X(nvmlDeviceGetPcieReplayCounter)                                                          \
	X(nvmlDeviceGetCurrPcieLinkGeneration)                                                     \
	X(nvmlDeviceGetCurrPcieLinkWidth)                                                          \
	X(nvmlDeviceGetSupportedEventTypes)                                                        \
	X(nvmlDeviceRegisterEvents)                                                                \
	X(nvmlDeviceGetMigMode)                                                                    \
	X(nvmlDeviceGetMaxMigDeviceCount)                                                          \
	X(nvmlDeviceGetMigDeviceHandleByIndex)                                                     \
	X(nvmlDeviceGetGpuInstanceId)                                                              \
	X(nvmlDeviceGetComputeInstanceId)                                                          \
	X(nvmlDeviceGetGpuInstanceProfileInfo)                                                     \
	X(nvmlDeviceGetGpuInstanceProfileInfoV)                                                    \
	X(nvmlDeviceGetGpuInstanceProfileInfoByIdV)                                                \
	X(nvmlDeviceGetGpuInstanceById)                                                            \
	X(nvmlGpuInstanceGetInfo)                                                                  \
	X(nvmlDeviceIsMigDeviceHandle)                                                             \
	X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)                                            \
	X(nvmlDeviceGetAttributes_v2)                                                              \
	X(nvmlGpmMigSampleGet)                                                                     \
	X(nvmlDeviceGetMPSComputeRunningProcesses_v3)

typedef enum {
#define FAKE_CALL_ENUM(name, ...) FC_##name,
	FAKE_CALLS(FAKE_CALL_ENUM)
#undef FAKE_CALL_ENUM
#define FAKE_GEN_CALL_ENUM(name) FCG_##name,
	FAKE_GEN_GETTERS(FAKE_GEN_CALL_ENUM)
#undef FAKE_GEN_CALL_ENUM
	FC_COUNT
} fake_call;

extern const char *const fake_call_names[FC_COUNT];

/* The generic getters' functions (own: a hand-written function of that name
 * won at link time, so the getter table does not answer it), NULL-ended,
 * and their keys, with the bounds of the out type. */
typedef struct {
	const char *name;
	bool (*own)(void);
} fake_gen_func;

typedef struct {
	const char *key;
	int func; /* index in fake_gen_funcs */
	double min, max;
} fake_gen_key;

extern const fake_gen_func fake_gen_funcs[];
extern const fake_gen_key fake_gen_keys[FAKE_GEN_KEYS];

/* The compiled-in default values of the getter table: test/nvmltest/getters.json,
 * as a C string the Makefile writes (getters_defaults.c in the build folder). */
extern const char fake_getter_defaults[];

/* ---- time-varying values ------------------------------------------------ */

typedef enum { SIG_NONE = 0, SIG_CONST, SIG_SINE, SIG_STEPS } fake_signal_kind;

typedef struct {
	double at, value;
} fake_step;

/* A value over time (t = seconds since the scenario's clock started, at the
 * first successful nvmlInit). SIG_NONE: not in the scenario, so the call that
 * reads it answers NVML_ERROR_NOT_SUPPORTED. */
typedef struct {
	fake_signal_kind kind;
	double value;                           /* SIG_CONST */
	double mean, amplitude, period, phase;  /* SIG_SINE */
	const fake_step *steps;                 /* SIG_STEPS, sorted by at */
	int nsteps;
} fake_signal;

bool fake_signal_set(const fake_signal *s);
double fake_signal_at(const fake_signal *s, double t);
/* The integral of s over [0, t]. */
double fake_signal_integral(const fake_signal *s, double t);

/* A duty pattern: busy for the first busy*period seconds of every period
 * (shifted by phase). Without a period, busy is a plain level. */
typedef struct {
	bool set;
	double period, phase; /* period 0: level mode */
	fake_signal busy;     /* fraction, 0..1 */
} fake_duty;

/* The busy fraction over [a, b]. */
double fake_duty_fraction(const fake_duty *d, double a, double b);

/* ---- faults --------------------------------------------------------------- */

typedef struct {
	fake_call call;
	nvmlReturn_t ret;
	double from, until;
} fake_error;

typedef struct {
	fake_call call;
	double from, seconds;
} fake_hang;

/* ---- the scenario ----------------------------------------------------------- */

enum { FAKE_UTIL_GPU, FAKE_UTIL_MEMORY, FAKE_UTIL_ENCODER, FAKE_UTIL_DECODER, FAKE_UTIL_COUNT };
enum { FAKE_CLOCK_GRAPHICS, FAKE_CLOCK_SM, FAKE_CLOCK_MEM, FAKE_CLOCK_VIDEO, FAKE_CLOCK_COUNT };

typedef struct {
	unsigned int pid;
	char name[256];
	unsigned long long used_memory;
	bool compute, graphics;
	/* "mps": FAKE_MPS_SERVER or FAKE_MPS_CLIENT (processes.c) */
	int mps;
	double from, until;
	/* the MIG device it runs on; FAKE_NO_INSTANCE outside MIG */
	unsigned int gpu_instance_id, compute_instance_id;
	/* nvmlDeviceGetProcessUtilization, percent; unset reads 0 */
	fake_signal sm, memory, encoder, decoder;
} fake_process;

enum { FAKE_MPS_NONE, FAKE_MPS_SERVER, FAKE_MPS_CLIENT };

typedef struct {
	double at;
	unsigned long long type; /* nvmlEventType* bit */
	unsigned long long data; /* the Xid for nvmlEventTypeXidCriticalError */
	unsigned int gpu_instance_id, compute_instance_id; /* FAKE_NO_INSTANCE: the whole GPU */
} fake_event;

typedef struct {
	unsigned int id; /* nvmlGpmMetricId_t */
	fake_signal value;
} fake_gpm_metric;

/* GPM metrics of a GPU or of a GPU instance (gpm.c). set: the key is there. */
typedef struct {
	bool set;
	const fake_gpm_metric *metrics;
	int n;
} fake_gpm;

/* Framebuffer memory of a GPU or of a GPU instance (memory.c). */
typedef struct {
	bool set;
	unsigned long long total, reserved;
	fake_signal used; /* never above total - reserved */
} fake_memory;

/* ---- MIG (mig.c) ------------------------------------------------------------ */

/* A GPU instance profile: what nvmlDeviceGetGpuInstanceProfileInfo answers
 * for profile (an NVML_GPU_INSTANCE_PROFILE_* index); id is the profile ID
 * that GPU instances carry (nvmlGpuInstanceInfo_t.profileId). */
typedef struct {
	unsigned int profile, id;
	unsigned int slice_count, instance_count, multiprocessor_count;
	unsigned long long memory_mib;
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} fake_mig_profile;

typedef struct {
	unsigned int id;
	const fake_mig_profile *profile;
	unsigned int placement_start;
	fake_memory memory; /* what its MIG devices report */
	fake_gpm gpm;       /* nvmlGpmMigSampleGet */
} fake_gpu_instance;

/* A MIG device: one compute instance on a GPU instance. */
typedef struct {
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	int gi; /* index in fake_mig.gis */
	unsigned int gpu_instance_id, compute_instance_id;
	unsigned int slice_count;
	/* created at from, destroyed at until (seconds; INFINITY: never) */
	double from, until;
} fake_mig_device;

typedef struct {
	bool set;     /* MIG capable: the key is there */
	bool enabled; /* MIG mode */
	unsigned int max_devices;
	const fake_mig_profile *profiles;
	int nprofiles;
	const fake_gpu_instance *gis;
	int ngis;
	const fake_mig_device *devices; /* slot i: nvmlDeviceGetMigDeviceHandleByIndex(i) */
	int ndevices;
} fake_mig;

/* The most field values a scenario may give one GPU by id (fields.c). */
#define FAKE_FIELD_MAX 32

typedef struct {
	/* identity (device.c) */
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	char serial[NVML_DEVICE_SERIAL_BUFFER_SIZE];
	char pci_bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
	unsigned int pci_domain, pci_bus, pci_device, pci_device_id, pci_subsystem_id;
	unsigned int minor_number;
	unsigned int architecture;
	int cc_major, cc_minor;

	/* utilization.c */
	fake_duty util[FAKE_UTIL_COUNT];

	/* memory.c */
	fake_memory memory;

	/* power.c */
	fake_signal temperature, memory_temperature, power, power_limit, fan;
	double energy_offset_j;

	/* clocks.c */
	fake_signal clocks[FAKE_CLOCK_COUNT];
	fake_signal pstate;

	/* processes.c */
	bool has_processes;
	const fake_process *processes;
	int nprocesses;

	/* gpm.c */
	fake_gpm gpm;

	/* health.c */
	fake_signal ecc_corrected, ecc_uncorrected;
	bool has_remapped_rows;
	fake_signal remapped_correctable, remapped_uncorrectable, remapped_pending, remapped_failure;
	fake_signal clocks_event_reasons;
	fake_signal violation[6]; /* fraction of time, by nvmlPerfPolicyType_t 0..5 */
	fake_signal pcie_generation, pcie_width, pcie_replays;

	/* getters.c: the getter table, by fake_gen_keys index (SIG_NONE: NOT_SUPPORTED) */
	fake_signal getters[FAKE_GEN_KEYS];
	/* fields.c: field values by id, with no getter of their own */
	int nfields;
	/* a field asked for a scope (an NVLink) past these answers
	 * NVML_ERROR_INVALID_ARGUMENT */
	unsigned int nvlink_links;
	unsigned int field_ids[FAKE_FIELD_MAX];
	fake_signal fields[FAKE_FIELD_MAX];

	/* events.c */
	bool has_events;
	const fake_event *events; /* sorted by at */
	int nevents;

	/* mig.c */
	fake_mig mig;

	/* faults.c */
	double lost_at; /* INFINITY: never */
	const fake_error *errors;
	int nerrors;
	const fake_hang *hangs;
	int nhangs;
} fake_gpu;

typedef struct fake_arena fake_arena;

typedef struct {
	char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
	char nvml_version[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
	int cuda_driver_version;
	double sample_hz;
	unsigned int sample_buffer;
	unsigned int init_fail_first;
	nvmlReturn_t init_fail_return;
	fake_gpu *gpus;
	int ngpus;
	fake_arena *arena;
} fake_scenario;

/* ---- parsing (scenario.c) ---------------------------------------------------- */

struct cJSON;

typedef struct {
	char err[512];
	fake_scenario *scn;
} fake_pctx;

/* fake_scenario_parse parses text, which must have a NUL at text[len]; on
 * error it returns NULL and fills err. */
fake_scenario *fake_scenario_parse(const char *text, size_t len, char *err, size_t errlen);
void fake_scenario_free(fake_scenario *s);

void *fake_alloc(fake_pctx *c, size_t n);
bool fake_fail(fake_pctx *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool fake_check_keys(fake_pctx *c, const struct cJSON *obj, const char *path, const char *const *keys);
bool fake_get_string(fake_pctx *c, const struct cJSON *obj, const char *key, const char *path, char *dst,
		     size_t cap, bool required);
/* present may be NULL; then a missing key leaves dst unchanged. */
bool fake_get_number(fake_pctx *c, const struct cJSON *obj, const char *key, const char *path, double *dst,
		     double min, double max, bool *present);
bool fake_get_uint(fake_pctx *c, const struct cJSON *obj, const char *key, const char *path, unsigned long long *dst,
		   unsigned long long max, bool *present);
bool fake_get_signal(fake_pctx *c, const struct cJSON *obj, const char *key, const char *path, double min,
		     double max, fake_signal *dst);
bool fake_get_duty(fake_pctx *c, const struct cJSON *obj, const char *key, const char *path, fake_duty *dst);
bool fake_parse_return(fake_pctx *c, const struct cJSON *v, const char *path, nvmlReturn_t *dst);
bool fake_parse_call(fake_pctx *c, const struct cJSON *v, const char *path, fake_call *dst);
/* fake_time parses a time in seconds since the clock start; null means never. */
bool fake_get_time(fake_pctx *c, const struct cJSON *obj, const char *key, const char *path, double *dst,
		   double dflt);

/* Shared parsers of values that appear at more than one place. */
bool fake_parse_memory(fake_pctx *c, const struct cJSON *m, const char *path, fake_memory *dst);
bool fake_parse_gpm(fake_pctx *c, const struct cJSON *m, const char *path, fake_gpm *dst);
/* fake_mig_check_uuids fails when a MIG UUID repeats one of any GPU or MIG device. */
bool fake_mig_check_uuids(fake_pctx *c, const fake_scenario *s);

/* The areas: each names its keys of a GPU object and parses them. */
typedef struct {
	const char *const *keys;
	bool (*parse)(fake_pctx *c, const struct cJSON *gpu, const char *path, int index, fake_gpu *g);
} fake_area;

extern const fake_area fake_area_device, fake_area_utilization, fake_area_memory, fake_area_power,
	fake_area_clocks, fake_area_processes, fake_area_gpm, fake_area_health, fake_area_events, fake_area_mig,
	fake_area_faults, fake_area_fields, fake_area_getters;

/* ---- library state (state.c) ----------------------------------------------------- */

/* fake_device_enter checks that NVML is initialized and device is a valid
 * handle, applies the scenario's faults for call on that GPU (hang, lost,
 * injected error) and, on NVML_SUCCESS, returns the GPU and the scenario time
 * with the scenario read-locked: the caller must then return through
 * fake_leave. On any other return nothing is held. A MIG device handle gets
 * its parent's checks, then NVML_ERROR_NOT_SUPPORTED: calls that serve MIG
 * devices use fake_any_enter. */
nvmlReturn_t fake_device_enter(nvmlDevice_t device, fake_call call, const fake_gpu **gpu, int *index, double *t);
/* fake_any_enter is fake_device_enter that also takes MIG device handles:
 * gpu and index are then the parent's (whose faults apply) and *mig the MIG
 * device; NULL for a GPU handle. */
nvmlReturn_t fake_any_enter(nvmlDevice_t device, fake_call call, const fake_gpu **gpu, int *index,
			    const fake_mig_device **mig, double *t);
/* fake_index_enter is fake_device_enter for calls that take a GPU index. */
nvmlReturn_t fake_index_enter(unsigned int index, fake_call call, const fake_gpu **gpu, double *t);
/* fake_system_enter is for calls that name no GPU. */
nvmlReturn_t fake_system_enter(const fake_scenario **scn, double *t);
nvmlReturn_t fake_leave(nvmlReturn_t ret);

nvmlDevice_t fake_handle(int index);
/* The handle of MIG device slot of GPU index. */
nvmlDevice_t fake_mig_handle(int index, int slot);
/* fake_mig_present says MIG device d exists at t (mig.c). */
bool fake_mig_present(const fake_mig_device *d, double t);

/* Memory answers at t (memory.c). */
void fake_memory_v1(const fake_memory *m, double t, nvmlMemory_t *out);
void fake_memory_v2(const fake_memory *m, double t, nvmlMemory_v2_t *out);

/* The current scenario, valid between an enter and its leave. */
const fake_scenario *fake_current(void);

/* Seconds on the scenario clock now, and a sleep until scenario time t. */
double fake_now(void);
void fake_sleep_until(double t);

/* Microseconds since the Unix epoch at scenario time t. */
unsigned long long fake_wall_us(double t);

/* fake_copy_string copies s into an NVML output buffer. */
nvmlReturn_t fake_copy_string(const char *s, char *dst, unsigned int length);

const char *fake_return_name(nvmlReturn_t r);
bool fake_return_from_name(const char *name, nvmlReturn_t *out);

/* ---- faults (faults.c) ------------------------------------------------------------ */

/* fake_hang_until is when a call made at t returns from a hang (t: no hang). */
double fake_hang_until(const fake_gpu *g, fake_call call, double t);
/* fake_fault is the error injected for a call at t, or NVML_SUCCESS. */
nvmlReturn_t fake_fault(const fake_gpu *g, fake_call call, double t);

/* ---- the getter table (getters.c) ------------------------------------------------ */

/* fake_gen_value answers key k of device's GPU now, rounded, for a generic
 * getter: INVALID_ARGUMENT unless nonnull, NOT_SUPPORTED without a value. */
nvmlReturn_t fake_gen_value(nvmlDevice_t device, fake_call call, int k, bool nonnull, long long *out);

#endif
