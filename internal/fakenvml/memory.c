/*
 * Area "memory": framebuffer memory, through nvmlDeviceGetMemoryInfo and the
 * versioned nvmlDeviceGetMemoryInfo_v2 (which checks its struct version).
 *
 * Key: memory: {total_bytes, reserved_bytes, used_bytes}; used_bytes is a
 * value over time and never exceeds total - reserved. v2 reports used and
 * reserved apart; v1, like the real driver, counts reserved in used.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fakenvml.h"

static const char *const keys[] = {"memory", NULL};

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)index;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(gpu, "memory");
	if (!m)
		return true;
	char p[128];
	snprintf(p, sizeof p, "%s.memory", path);
	static const char *const mkeys[] = {"total_bytes", "reserved_bytes", "used_bytes", NULL};
	bool has_total = false;
	if (!fake_check_keys(c, m, p, mkeys) ||
	    !fake_get_uint(c, m, "total_bytes", p, &g->memory_total, 1ULL << 52, &has_total) ||
	    !fake_get_uint(c, m, "reserved_bytes", p, &g->memory_reserved, 1ULL << 52, NULL))
		return false;
	if (!has_total)
		return fake_fail(c, p, "\"total_bytes\" is required");
	if (g->memory_reserved > g->memory_total)
		return fake_fail(c, p, "reserved_bytes exceeds total_bytes");
	if (!fake_get_signal(c, m, "used_bytes", p, 0, (double)(g->memory_total - g->memory_reserved), &g->memory_used))
		return false;
	g->has_memory = true;
	return true;
}

const fake_area fake_area_memory = {keys, parse};

static unsigned long long used_at(const fake_gpu *g, double t)
{
	if (!fake_signal_set(&g->memory_used))
		return 0;
	double u = fake_signal_at(&g->memory_used, t);
	double max = (double)(g->memory_total - g->memory_reserved);
	return (unsigned long long)llround(u < 0 ? 0 : u > max ? max : u);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	const fake_gpu *g;
	double t;
	if (!memory)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetMemoryInfo, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (!g->has_memory)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	unsigned long long used = used_at(g, t);
	memory->total = g->memory_total;
	memory->free = g->memory_total - g->memory_reserved - used;
	memory->used = used + g->memory_reserved;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	const fake_gpu *g;
	double t;
	if (!memory)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (memory->version != nvmlMemory_v2)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetMemoryInfo_v2, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (!g->has_memory)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	unsigned long long used = used_at(g, t);
	memory->total = g->memory_total;
	memory->reserved = g->memory_reserved;
	memory->used = used;
	memory->free = g->memory_total - g->memory_reserved - used;
	return fake_leave(NVML_SUCCESS);
}
