/*
 * Area "health": ECC errors, remapped rows, clock event (throttle) reasons,
 * clock violation time, PCIe link and replays.
 *
 * Keys (each value over time; counters should not decrease):
 *   ecc_errors: {corrected, uncorrected}   nvmlDeviceGetTotalEccErrors (the
 *                                          same count for volatile and aggregate)
 *   remapped_rows: {correctable, uncorrectable, pending, failure}
 *                                          nvmlDeviceGetRemappedRows (pending
 *                                          and failure: 0 or 1)
 *   clocks_event_reasons: bitmask          nvmlDeviceGetCurrentClocksEventReasons
 *   violation: {power, thermal, sync_boost, board_limit, low_utilization,
 *               reliability}: fraction of time held below application clocks;
 *                                          nvmlDeviceGetViolationStatus answers
 *                                          its integral since t = 0, in ns
 *   pcie: {link_generation, link_width, replays}
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "fakenvml.h"

static const char *const keys[] = {"ecc_errors", "remapped_rows", "clocks_event_reasons", "violation", "pcie", NULL};

static const char *const policies[6] = {"power", "thermal", "sync_boost", "board_limit", "low_utilization", "reliability"};

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)index;
	char p[128];
	const cJSON *v;
	if ((v = cJSON_GetObjectItemCaseSensitive(gpu, "ecc_errors"))) {
		static const char *const k[] = {"corrected", "uncorrected", NULL};
		snprintf(p, sizeof p, "%s.ecc_errors", path);
		if (!fake_check_keys(c, v, p, k) || !fake_get_signal(c, v, "corrected", p, 0, 1e15, &g->ecc_corrected) ||
		    !fake_get_signal(c, v, "uncorrected", p, 0, 1e15, &g->ecc_uncorrected))
			return false;
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(gpu, "remapped_rows"))) {
		static const char *const k[] = {"correctable", "uncorrectable", "pending", "failure", NULL};
		snprintf(p, sizeof p, "%s.remapped_rows", path);
		if (!fake_check_keys(c, v, p, k) ||
		    !fake_get_signal(c, v, "correctable", p, 0, 1e9, &g->remapped_correctable) ||
		    !fake_get_signal(c, v, "uncorrectable", p, 0, 1e9, &g->remapped_uncorrectable) ||
		    !fake_get_signal(c, v, "pending", p, 0, 1, &g->remapped_pending) ||
		    !fake_get_signal(c, v, "failure", p, 0, 1, &g->remapped_failure))
			return false;
		g->has_remapped_rows = true;
	}
	if (!fake_get_signal(c, gpu, "clocks_event_reasons", path, 0, 1.8e19, &g->clocks_event_reasons))
		return false;
	if ((v = cJSON_GetObjectItemCaseSensitive(gpu, "violation"))) {
		static const char *const k[] = {"power", "thermal", "sync_boost", "board_limit", "low_utilization", "reliability", NULL};
		snprintf(p, sizeof p, "%s.violation", path);
		if (!fake_check_keys(c, v, p, k))
			return false;
		for (int i = 0; i < 6; i++)
			if (!fake_get_signal(c, v, policies[i], p, 0, 1, &g->violation[i]))
				return false;
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(gpu, "pcie"))) {
		static const char *const k[] = {"link_generation", "link_width", "replays", NULL};
		snprintf(p, sizeof p, "%s.pcie", path);
		if (!fake_check_keys(c, v, p, k) ||
		    !fake_get_signal(c, v, "link_generation", p, 1, 7, &g->pcie_generation) ||
		    !fake_get_signal(c, v, "link_width", p, 1, 32, &g->pcie_width) ||
		    !fake_get_signal(c, v, "replays", p, 0, 4e9, &g->pcie_replays))
			return false;
	}
	return true;
}

const fake_area fake_area_health = {keys, parse};

/* get32 answers signal at offset of the GPU, rounded, as an unsigned int. */
static nvmlReturn_t get32(nvmlDevice_t device, fake_call call, size_t offset, unsigned int *out)
{
	const fake_gpu *g;
	double t;
	if (!out)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, call, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	const fake_signal *s = (const fake_signal *)((const char *)g + offset);
	if (!fake_signal_set(s))
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	double v = fake_signal_at(s, t);
	*out = (unsigned int)llround(v < 0 ? 0 : v);
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
					 nvmlEccCounterType_t counterType, unsigned long long *eccCounts)
{
	const fake_gpu *g;
	double t;
	if (!eccCounts || (errorType != NVML_MEMORY_ERROR_TYPE_CORRECTED && errorType != NVML_MEMORY_ERROR_TYPE_UNCORRECTED) ||
	    (counterType != NVML_VOLATILE_ECC && counterType != NVML_AGGREGATE_ECC))
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetTotalEccErrors, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	const fake_signal *s = errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED ? &g->ecc_corrected : &g->ecc_uncorrected;
	if (!fake_signal_set(s))
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	double v = fake_signal_at(s, t);
	*eccCounts = (unsigned long long)llround(v < 0 ? 0 : v);
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,
				       unsigned int *isPending, unsigned int *failureOccurred)
{
	const fake_gpu *g;
	double t;
	if (!corrRows || !uncRows || !isPending || !failureOccurred)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetRemappedRows, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (!g->has_remapped_rows)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	const fake_signal *s[4] = {&g->remapped_correctable, &g->remapped_uncorrectable, &g->remapped_pending,
				   &g->remapped_failure};
	unsigned int *out[4] = {corrRows, uncRows, isPending, failureOccurred};
	for (int i = 0; i < 4; i++) {
		double v = fake_signal_set(s[i]) ? fake_signal_at(s[i], t) : 0;
		*out[i] = (unsigned int)llround(v < 0 ? 0 : v);
	}
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *clocksEventReasons)
{
	const fake_gpu *g;
	double t;
	if (!clocksEventReasons)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetCurrentClocksEventReasons, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (!fake_signal_set(&g->clocks_event_reasons))
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	double v = fake_signal_at(&g->clocks_event_reasons, t);
	*clocksEventReasons = v <= 0 ? 0 : (unsigned long long)v;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t device, nvmlPerfPolicyType_t perfPolicyType,
					  nvmlViolationTime_t *violTime)
{
	const fake_gpu *g;
	double t;
	if (!violTime)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetViolationStatus, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	if ((int)perfPolicyType < 0 || (int)perfPolicyType >= 6 || !fake_signal_set(&g->violation[perfPolicyType]))
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	violTime->referenceTime = fake_wall_us(t);
	violTime->violationTime = (unsigned long long)llround(fake_signal_integral(&g->violation[perfPolicyType], t) * 1e9);
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value)
{
	return get32(device, FC_nvmlDeviceGetPcieReplayCounter, offsetof(fake_gpu, pcie_replays), value);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen)
{
	return get32(device, FC_nvmlDeviceGetCurrPcieLinkGeneration, offsetof(fake_gpu, pcie_generation), currLinkGen);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth)
{
	return get32(device, FC_nvmlDeviceGetCurrPcieLinkWidth, offsetof(fake_gpu, pcie_width), currLinkWidth);
}
