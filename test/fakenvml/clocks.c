/*
 * Area "clocks": current clocks and the performance state.
 *
 * Keys: clocks_mhz: {graphics, sm, memory, video}, pstate (0..15); each a
 * value over time.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>

#include "fakenvml.h"

static const char *const keys[] = {"clocks_mhz", "pstate", NULL};

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)index;
	const cJSON *cl = cJSON_GetObjectItemCaseSensitive(gpu, "clocks_mhz");
	if (cl) {
		char p[128];
		snprintf(p, sizeof p, "%s.clocks_mhz", path);
		static const char *const ckeys[] = {"graphics", "sm", "memory", "video", NULL};
		if (!fake_check_keys(c, cl, p, ckeys) ||
		    !fake_get_signal(c, cl, "graphics", p, 0, 100000, &g->clocks[FAKE_CLOCK_GRAPHICS]) ||
		    !fake_get_signal(c, cl, "sm", p, 0, 100000, &g->clocks[FAKE_CLOCK_SM]) ||
		    !fake_get_signal(c, cl, "memory", p, 0, 100000, &g->clocks[FAKE_CLOCK_MEM]) ||
		    !fake_get_signal(c, cl, "video", p, 0, 100000, &g->clocks[FAKE_CLOCK_VIDEO]))
			return false;
	}
	return fake_get_signal(c, gpu, "pstate", path, 0, 15, &g->pstate);
}

const fake_area fake_area_clocks = {keys, parse};

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock)
{
	const fake_gpu *g;
	double t;
	if (!clock)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetClockInfo, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	int i;
	switch (type) {
	case NVML_CLOCK_GRAPHICS:
		i = FAKE_CLOCK_GRAPHICS;
		break;
	case NVML_CLOCK_SM:
		i = FAKE_CLOCK_SM;
		break;
	case NVML_CLOCK_MEM:
		i = FAKE_CLOCK_MEM;
		break;
	case NVML_CLOCK_VIDEO:
		i = FAKE_CLOCK_VIDEO;
		break;
	default:
		return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
	}
	if (!fake_signal_set(&g->clocks[i]))
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	*clock = (unsigned int)llround(fake_signal_at(&g->clocks[i], t));
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState)
{
	const fake_gpu *g;
	double t;
	if (!pState)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetPerformanceState, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (!fake_signal_set(&g->pstate))
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	*pState = (nvmlPstates_t)llround(fake_signal_at(&g->pstate, t));
	return fake_leave(NVML_SUCCESS);
}
