/*
 * Area "memory": framebuffer memory, through nvmlDeviceGetMemoryInfo and the
 * versioned nvmlDeviceGetMemoryInfo_v2 (which checks its struct version).
 *
 * Key: memory: {total_bytes, reserved_bytes, used_bytes}; used_bytes is a
 * value over time and never exceeds total - reserved. v2 reports used and
 * reserved apart; v1, like the real driver, counts reserved in used.
 *
 * A GPU instance's memory (mig.c) has the same form; a MIG device handle
 * answers its GPU instance's.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fakenvml.h"

static const char *const keys[] = {"memory", NULL};

bool fake_parse_memory(fake_pctx *c, const cJSON *m, const char *p, fake_memory *dst)
{
	static const char *const mkeys[] = {"total_bytes", "reserved_bytes", "used_bytes", NULL};
	bool has_total = false;
	memset(dst, 0, sizeof *dst);
	if (!fake_check_keys(c, m, p, mkeys) ||
	    !fake_get_uint(c, m, "total_bytes", p, &dst->total, 1ULL << 52, &has_total) ||
	    !fake_get_uint(c, m, "reserved_bytes", p, &dst->reserved, 1ULL << 52, NULL))
		return false;
	if (!has_total)
		return fake_fail(c, p, "\"total_bytes\" is required");
	if (dst->reserved > dst->total)
		return fake_fail(c, p, "reserved_bytes exceeds total_bytes");
	if (!fake_get_signal(c, m, "used_bytes", p, 0, (double)(dst->total - dst->reserved), &dst->used))
		return false;
	dst->set = true;
	return true;
}

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)index;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(gpu, "memory");
	if (!m)
		return true;
	char p[128];
	snprintf(p, sizeof p, "%s.memory", path);
	return fake_parse_memory(c, m, p, &g->memory);
}

const fake_area fake_area_memory = {keys, parse};

static unsigned long long used_at(const fake_memory *m, double t)
{
	if (!fake_signal_set(&m->used))
		return 0;
	double u = fake_signal_at(&m->used, t);
	double max = (double)(m->total - m->reserved);
	return (unsigned long long)llround(u < 0 ? 0 : u > max ? max : u);
}

void fake_memory_v1(const fake_memory *m, double t, nvmlMemory_t *out)
{
	unsigned long long used = used_at(m, t);
	out->total = m->total;
	out->free = m->total - m->reserved - used;
	out->used = used + m->reserved;
}

void fake_memory_v2(const fake_memory *m, double t, nvmlMemory_v2_t *out)
{
	unsigned long long used = used_at(m, t);
	out->total = m->total;
	out->reserved = m->reserved;
	out->used = used;
	out->free = m->total - m->reserved - used;
}

/* memory_of is what device answers: a GPU's memory, or a MIG device's GPU
 * instance's. */
static const fake_memory *memory_of(const fake_gpu *g, const fake_mig_device *mig)
{
	return mig ? &g->mig.gis[mig->gi].memory : &g->memory;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	const fake_gpu *g;
	const fake_mig_device *mig;
	double t;
	if (!memory)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_any_enter(device, FC_nvmlDeviceGetMemoryInfo, &g, NULL, &mig, &t);
	if (r != NVML_SUCCESS)
		return r;
	const fake_memory *m = memory_of(g, mig);
	if (!m->set)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	fake_memory_v1(m, t, memory);
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	const fake_gpu *g;
	const fake_mig_device *mig;
	double t;
	if (!memory)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (memory->version != nvmlMemory_v2)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	nvmlReturn_t r = fake_any_enter(device, FC_nvmlDeviceGetMemoryInfo_v2, &g, NULL, &mig, &t);
	if (r != NVML_SUCCESS)
		return r;
	const fake_memory *m = memory_of(g, mig);
	if (!m->set)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	fake_memory_v2(m, t, memory);
	return fake_leave(NVML_SUCCESS);
}
