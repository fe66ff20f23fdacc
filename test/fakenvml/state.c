/*
 * Library state: nvmlInit/nvmlShutdown, the scenario clock, the system-wide
 * getters, nvmlErrorString, and the entry checks every device call makes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fakenvml.h"

#define SCENARIO_ENV "FAKE_NVML_SCENARIO"
#define MAX_SCENARIO_BYTES (16 << 20)

/* A handle is the address of one of these; it stays valid for the life of
 * the process, so a stale handle is answered, never dereferenced wildly.
 * (go-nvml's nvml.h wraps the pointer in a one-member struct, nvmlDevice_t;
 * passed by value it has the ABI of the bare pointer of NVIDIA's header.) */
struct nvmlDevice_st {
	unsigned int index; /* the GPU's */
	int mig_slot;       /* -1: the GPU itself (and MIG handles never equal GPU handles in content) */
};
static struct nvmlDevice_st handles[FAKE_MAX_GPUS];
/* MIG device handles: slot s of GPU i is mig_handles[i * FAKE_MAX_MIG + s],
 * apart from every GPU handle. */
static struct nvmlDevice_st mig_handles[FAKE_MAX_GPUS * FAKE_MAX_MIG];

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
/* Guards scn: device calls read it under the read lock, a reload swaps it
 * under the write lock. */
static pthread_rwlock_t scn_lock = PTHREAD_RWLOCK_INITIALIZER;
static fake_scenario *scn;

/* Under init_mu. */
static char *scn_text;
static size_t scn_len;
static unsigned int init_attempts;
static bool clock_started;
static struct timespec t0_mono;
static long long t0_wall_us;

/* Written under init_mu, read anywhere. */
static int refcount;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	fprintf(stderr, "fakenvml: %s\n", buf);
	fflush(stderr);
}

static bool initialized(void) { return __atomic_load_n(&refcount, __ATOMIC_ACQUIRE) > 0; }

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)(ts.tv_sec - t0_mono.tv_sec) + (double)(ts.tv_nsec - t0_mono.tv_nsec) / 1e9;
}

unsigned long long fake_wall_us(double t)
{
	return (unsigned long long)(t0_wall_us + llround(t * 1e6));
}

static void sleep_until(double t)
{
	double whole = floor(t);
	struct timespec ts = t0_mono;
	ts.tv_sec += (time_t)whole;
	ts.tv_nsec += (long)((t - whole) * 1e9);
	while (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	/* The Go runtime signals its threads (preemption): sleep on. */
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
	}
}

double fake_now(void) { return now_s(); }

void fake_sleep_until(double t) { sleep_until(t); }

/* read_file reads at most MAX_SCENARIO_BYTES of path into a NUL-terminated
 * buffer. */
static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		logf_("cannot open scenario %s (%s=%s): %s", path, SCENARIO_ENV, path, strerror(errno));
		return NULL;
	}
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);
	while (buf) {
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
		if (n == cap) {
			if (cap >= MAX_SCENARIO_BYTES) {
				logf_("scenario %s is larger than %d bytes", path, MAX_SCENARIO_BYTES);
				free(buf);
				buf = NULL;
				break;
			}
			cap *= 2;
			char *nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				buf = NULL;
			}
			buf = nb;
		}
	}
	if (buf && ferror(f)) {
		logf_("cannot read scenario %s: %s", path, strerror(errno));
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf) {
		buf[n] = 0;
		*len = n;
	}
	return buf;
}

static nvmlReturn_t init_locked(void)
{
	if (refcount > 0) {
		__atomic_store_n(&refcount, refcount + 1, __ATOMIC_RELEASE);
		return NVML_SUCCESS;
	}
	const char *path = getenv(SCENARIO_ENV);
	if (!path || !*path) {
		logf_("SIMULATED NVML: %s is not set; nvmlInit fails (point it at a scenario JSON file)", SCENARIO_ENV);
		return NVML_ERROR_UNKNOWN;
	}
	size_t len = 0;
	char *text = read_file(path, &len);
	if (!text)
		return NVML_ERROR_UNKNOWN;

	if (!scn || len != scn_len || memcmp(text, scn_text, len) != 0) {
		/* A new scenario: its clock and its init attempts start over. The
		 * same scenario again (a re-init after nvmlShutdown) keeps them. */
		char err[512];
		fake_scenario *next = fake_scenario_parse(text, len, err, sizeof err);
		if (!next) {
			logf_("scenario %s is invalid, nvmlInit fails with NVML_ERROR_UNKNOWN: %s", path, err);
			free(text);
			return NVML_ERROR_UNKNOWN;
		}
		for (int i = 0; i < FAKE_MAX_GPUS; i++)
			handles[i] = (struct nvmlDevice_st){.index = (unsigned int)i, .mig_slot = -1};
		for (int i = 0; i < FAKE_MAX_GPUS * FAKE_MAX_MIG; i++)
			mig_handles[i] = (struct nvmlDevice_st){.index = (unsigned int)(i / FAKE_MAX_MIG), .mig_slot = i % FAKE_MAX_MIG};
		pthread_rwlock_wrlock(&scn_lock);
		fake_scenario *old = scn;
		scn = next;
		pthread_rwlock_unlock(&scn_lock);
		fake_scenario_free(old);
		free(scn_text);
		scn_text = text;
		scn_len = len;
		init_attempts = 0;
		clock_started = false;
	} else {
		free(text);
	}

	init_attempts++;
	if (init_attempts <= scn->init_fail_first) {
		logf_("SIMULATED NVML: injected nvmlInit failure %u of %u: %s", init_attempts, scn->init_fail_first,
		      fake_return_name(scn->init_fail_return));
		return scn->init_fail_return;
	}
	if (!clock_started) {
		struct timespec wall;
		clock_gettime(CLOCK_MONOTONIC, &t0_mono);
		clock_gettime(CLOCK_REALTIME, &wall);
		t0_wall_us = (long long)wall.tv_sec * 1000000LL + wall.tv_nsec / 1000;
		clock_started = true;
	}
	__atomic_store_n(&refcount, 1, __ATOMIC_RELEASE);
	logf_("SIMULATED NVML, not a real NVIDIA driver: scenario %s, %d GPU(s), driver %s; "
	      "scenario clock t=0 at unix_us=%lld, now t=%.3f",
	      path, scn->ngpus, scn->driver_version, t0_wall_us, now_s());
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void)
{
	pthread_mutex_lock(&init_mu);
	nvmlReturn_t ret = init_locked();
	pthread_mutex_unlock(&init_mu);
	return ret;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	(void)flags;
	return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown(void)
{
	pthread_mutex_lock(&init_mu);
	nvmlReturn_t ret = NVML_SUCCESS;
	if (refcount == 0)
		ret = NVML_ERROR_UNINITIALIZED;
	else
		__atomic_store_n(&refcount, refcount - 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&init_mu);
	return ret;
}

/* ---- entry checks ---------------------------------------------------------- */

/* slot_of finds p in table (n entries): its index, or -1. */
static int slot_of(const void *p, const struct nvmlDevice_st *table, size_t n)
{
	uintptr_t a = (uintptr_t)p, base = (uintptr_t)table;
	if (a < base)
		return -1;
	uintptr_t off = a - base;
	if (off % sizeof table[0] != 0 || off / sizeof table[0] >= n)
		return -1;
	return (int)(off / sizeof table[0]);
}

/* handle_index returns the GPU index of device, a GPU or MIG device handle
 * (-1: neither), and in *mig_slot the MIG slot (-1 for a GPU handle). */
static int handle_index(nvmlDevice_t device, int *mig_slot)
{
	*mig_slot = -1;
	int i = slot_of(device.handle, handles, FAKE_MAX_GPUS);
	if (i >= 0)
		return i;
	i = slot_of(device.handle, mig_handles, (size_t)FAKE_MAX_GPUS * FAKE_MAX_MIG);
	if (i < 0)
		return -1;
	*mig_slot = i % FAKE_MAX_MIG;
	return i / FAKE_MAX_MIG;
}

nvmlDevice_t fake_handle(int index)
{
	nvmlDevice_t d = {.handle = &handles[index]};
	return d;
}

nvmlDevice_t fake_mig_handle(int index, int slot)
{
	nvmlDevice_t d = {.handle = &mig_handles[index * FAKE_MAX_MIG + slot]};
	return d;
}

static nvmlReturn_t enter(int idx, fake_call call, const fake_gpu **gpu, double *t)
{
	for (;;) {
		if (!initialized())
			return NVML_ERROR_UNINITIALIZED;
		pthread_rwlock_rdlock(&scn_lock);
		if (!scn || idx < 0 || idx >= scn->ngpus) {
			pthread_rwlock_unlock(&scn_lock);
			return NVML_ERROR_INVALID_ARGUMENT;
		}
		const fake_gpu *g = &scn->gpus[idx];
		double now = now_s();
		if (now >= g->lost_at) {
			pthread_rwlock_unlock(&scn_lock);
			return NVML_ERROR_GPU_IS_LOST;
		}
		double until = fake_hang_until(g, call, now);
		if (until > now) {
			/* Hang without holding anything, then look again. */
			pthread_rwlock_unlock(&scn_lock);
			sleep_until(until);
			continue;
		}
		nvmlReturn_t r = fake_fault(g, call, now);
		if (r != NVML_SUCCESS) {
			pthread_rwlock_unlock(&scn_lock);
			return r;
		}
		*gpu = g;
		*t = now;
		return NVML_SUCCESS;
	}
}

nvmlReturn_t fake_any_enter(nvmlDevice_t device, fake_call call, const fake_gpu **gpu, int *index,
			    const fake_mig_device **mig, double *t)
{
	if (!initialized())
		return NVML_ERROR_UNINITIALIZED;
	int slot;
	int idx = handle_index(device, &slot);
	if (idx < 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (index)
		*index = idx;
	nvmlReturn_t r = enter(idx, call, gpu, t);
	if (r != NVML_SUCCESS)
		return r;
	*mig = NULL;
	if (slot >= 0) {
		/* A MIG handle is valid while its parent is in MIG mode with a
		 * MIG device in that slot, until that device is destroyed. */
		const fake_mig *m = &(*gpu)->mig;
		if (!m->enabled || slot >= m->ndevices || !fake_mig_present(&m->devices[slot], *t))
			return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
		*mig = &m->devices[slot];
	}
	return NVML_SUCCESS;
}

nvmlReturn_t fake_device_enter(nvmlDevice_t device, fake_call call, const fake_gpu **gpu, int *index, double *t)
{
	const fake_mig_device *mig;
	nvmlReturn_t r = fake_any_enter(device, call, gpu, index, &mig, t);
	if (r == NVML_SUCCESS && mig)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED); /* a whole-GPU call on a MIG device */
	return r;
}

nvmlReturn_t fake_index_enter(unsigned int index, fake_call call, const fake_gpu **gpu, double *t)
{
	if (!initialized())
		return NVML_ERROR_UNINITIALIZED;
	if (index >= FAKE_MAX_GPUS)
		return NVML_ERROR_INVALID_ARGUMENT;
	return enter((int)index, call, gpu, t);
}

nvmlReturn_t fake_system_enter(const fake_scenario **out, double *t)
{
	if (!initialized())
		return NVML_ERROR_UNINITIALIZED;
	pthread_rwlock_rdlock(&scn_lock);
	if (!scn) {
		pthread_rwlock_unlock(&scn_lock);
		return NVML_ERROR_UNINITIALIZED;
	}
	*out = scn;
	*t = now_s();
	return NVML_SUCCESS;
}

nvmlReturn_t fake_leave(nvmlReturn_t ret)
{
	pthread_rwlock_unlock(&scn_lock);
	return ret;
}

const fake_scenario *fake_current(void) { return scn; }

nvmlReturn_t fake_copy_string(const char *s, char *dst, unsigned int length)
{
	size_t n = strlen(s);
	if (!dst)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (length < n + 1)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(dst, s, n + 1);
	return NVML_SUCCESS;
}

/* ---- system getters ----------------------------------------------------------- */

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	const fake_scenario *s;
	double t;
	if (!version)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_system_enter(&s, &t);
	if (r != NVML_SUCCESS)
		return r;
	return fake_leave(fake_copy_string(s->driver_version, version, length));
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
	const fake_scenario *s;
	double t;
	if (!version)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_system_enter(&s, &t);
	if (r != NVML_SUCCESS)
		return r;
	return fake_leave(fake_copy_string(s->nvml_version, version, length));
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
	const fake_scenario *s;
	double t;
	if (!cudaDriverVersion)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_system_enter(&s, &t);
	if (r != NVML_SUCCESS)
		return r;
	*cudaDriverVersion = s->cuda_driver_version;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
	return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
}

/* ---- return codes ---------------------------------------------------------------- */

static const struct {
	nvmlReturn_t code;
	const char *name;    /* without the NVML_ prefix */
	const char *message; /* what nvmlErrorString says */
} returns[] = {
	{NVML_SUCCESS, "SUCCESS", "Success"},
	{NVML_ERROR_UNINITIALIZED, "ERROR_UNINITIALIZED", "Uninitialized"},
	{NVML_ERROR_INVALID_ARGUMENT, "ERROR_INVALID_ARGUMENT", "Invalid Argument"},
	{NVML_ERROR_NOT_SUPPORTED, "ERROR_NOT_SUPPORTED", "Not Supported"},
	{NVML_ERROR_NO_PERMISSION, "ERROR_NO_PERMISSION", "Insufficient Permissions"},
	{NVML_ERROR_ALREADY_INITIALIZED, "ERROR_ALREADY_INITIALIZED", "Already Initialized"},
	{NVML_ERROR_NOT_FOUND, "ERROR_NOT_FOUND", "Not Found"},
	{NVML_ERROR_INSUFFICIENT_SIZE, "ERROR_INSUFFICIENT_SIZE", "Insufficient Size"},
	{NVML_ERROR_INSUFFICIENT_POWER, "ERROR_INSUFFICIENT_POWER", "Insufficient External Power"},
	{NVML_ERROR_DRIVER_NOT_LOADED, "ERROR_DRIVER_NOT_LOADED", "Driver Not Loaded"},
	{NVML_ERROR_TIMEOUT, "ERROR_TIMEOUT", "Timeout"},
	{NVML_ERROR_IRQ_ISSUE, "ERROR_IRQ_ISSUE", "Interrupt request issue"},
	{NVML_ERROR_LIBRARY_NOT_FOUND, "ERROR_LIBRARY_NOT_FOUND", "NVML Shared Library Not Found"},
	{NVML_ERROR_FUNCTION_NOT_FOUND, "ERROR_FUNCTION_NOT_FOUND", "Function Not Found"},
	{NVML_ERROR_CORRUPTED_INFOROM, "ERROR_CORRUPTED_INFOROM", "Corrupted infoROM"},
	{NVML_ERROR_GPU_IS_LOST, "ERROR_GPU_IS_LOST", "GPU is lost"},
	{NVML_ERROR_RESET_REQUIRED, "ERROR_RESET_REQUIRED", "GPU requires restart"},
	{NVML_ERROR_OPERATING_SYSTEM, "ERROR_OPERATING_SYSTEM", "The operating system has blocked the request"},
	{NVML_ERROR_LIB_RM_VERSION_MISMATCH, "ERROR_LIB_RM_VERSION_MISMATCH", "RM has detected an NVML/RM version mismatch"},
	{NVML_ERROR_IN_USE, "ERROR_IN_USE", "In use by another client"},
	{NVML_ERROR_MEMORY, "ERROR_MEMORY", "Insufficient Memory"},
	{NVML_ERROR_NO_DATA, "ERROR_NO_DATA", "No Data"},
	{NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "ERROR_VGPU_ECC_NOT_SUPPORTED", "vGPU ECC Not Supported"},
	{NVML_ERROR_INSUFFICIENT_RESOURCES, "ERROR_INSUFFICIENT_RESOURCES", "Insufficient Resources"},
	{NVML_ERROR_FREQ_NOT_SUPPORTED, "ERROR_FREQ_NOT_SUPPORTED", "Frequency Not Supported"},
	{NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "ERROR_ARGUMENT_VERSION_MISMATCH", "Argument Version Mismatch"},
	{NVML_ERROR_DEPRECATED, "ERROR_DEPRECATED", "Deprecated"},
	{NVML_ERROR_NOT_READY, "ERROR_NOT_READY", "Not Ready"},
	{NVML_ERROR_GPU_NOT_FOUND, "ERROR_GPU_NOT_FOUND", "GPU Not Found"},
	{NVML_ERROR_INVALID_STATE, "ERROR_INVALID_STATE", "Invalid State"},
	{NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, "ERROR_RESET_TYPE_NOT_SUPPORTED", "Reset Type Not Supported"},
	{NVML_ERROR_UNKNOWN, "ERROR_UNKNOWN", "Unknown Error"},
};

const char *fake_return_name(nvmlReturn_t r)
{
	for (size_t i = 0; i < sizeof returns / sizeof returns[0]; i++)
		if (returns[i].code == r)
			return returns[i].name;
	return "ERROR_UNKNOWN";
}

bool fake_return_from_name(const char *name, nvmlReturn_t *out)
{
	if (strncmp(name, "NVML_", 5) == 0)
		name += 5;
	for (size_t i = 0; i < sizeof returns / sizeof returns[0]; i++) {
		const char *n = returns[i].name;
		if (strcmp(name, n) == 0 || (strncmp(n, "ERROR_", 6) == 0 && strcmp(name, n + 6) == 0)) {
			*out = returns[i].code;
			return true;
		}
	}
	return false;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
	for (size_t i = 0; i < sizeof returns / sizeof returns[0]; i++)
		if (returns[i].code == result)
			return returns[i].message;
	return "Unknown Error";
}
