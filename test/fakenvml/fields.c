/*
 * nvmlDeviceGetFieldValues: the batch the receiver reads its
 * cheap figures with. Each field answers from the same signal as its getter
 * (violation counters, ECC, remapped rows, PCIe replays, power, power
 * limit, energy), with its own nvmlReturn: NOT_SUPPORTED where the getter's
 * signal is not set, and the getter's scenario fault (faults.c) where one
 * is active, so that a fault on nvmlDeviceGetViolationStatus also fails the
 * violation fields, and nothing else of the batch.
 *
 * NVML_FI_DEV_MEMORY_TEMP, which has no getter, answers from
 * memory_temperature_c (power.c); without it that field is NOT_SUPPORTED.
 *
 * Area "fields": any other field, by its NVML id, with no code here:
 * "fields": {"38": SIGNAL, ...} answers field 38 with the signal's value as
 * an unsigned long long (a counter is best given as steps). A field the
 * scenario names neither here nor above answers NOT_SUPPORTED, as on a GPU
 * without the feature (the NVLink error counters of a GPU without NVLink).
 * Each link answers the same value of a per-link field (scopeId the link),
 * up to "nvlink_links" (default 18, an H200's); a scope past them answers
 * NVML_ERROR_INVALID_ARGUMENT.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakenvml.h"

static const char *const keys[] = {"fields", "nvlink_links", NULL};

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)index;
	g->nfields = 0;
	unsigned long long links = 18; /* an H200's */
	if (!fake_get_uint(c, gpu, "nvlink_links", path, &links, NVML_NVLINK_MAX_LINKS, NULL))
		return false;
	g->nvlink_links = (unsigned int)links;
	const cJSON *fs = cJSON_GetObjectItemCaseSensitive(gpu, "fields");
	if (!fs)
		return true;
	char p[128];
	snprintf(p, sizeof p, "%s.fields", path);
	if (!cJSON_IsObject(fs))
		return fake_fail(c, p, "must be an object of field ids");
	for (const cJSON *it = fs->child; it; it = it->next) {
		char *end;
		errno = 0;
		unsigned long id = strtoul(it->string ? it->string : "", &end, 10);
		if (errno || !it->string || !*it->string || *end || id == 0 || id >= 10000)
			return fake_fail(c, p, "\"%s\" is not an NVML field id", it->string ? it->string : "");
		if (g->nfields == FAKE_FIELD_MAX)
			return fake_fail(c, p, "more than %d fields", FAKE_FIELD_MAX);
		g->field_ids[g->nfields] = (unsigned int)id;
		if (!fake_get_signal(c, fs, it->string, p, 0, 1e18, &g->fields[g->nfields]))
			return false;
		g->nfields++;
	}
	return true;
}

const fake_area fake_area_fields = {keys, parse};

static unsigned long long rounded(double v) { return v <= 0 ? 0 : (unsigned long long)llround(v); }

/* field fills one value from g at time t. */
static void field(const fake_gpu *g, double t, nvmlFieldValue_t *f)
{
	fake_call getter = FC_nvmlDeviceGetFieldValues;
	const fake_signal *s = NULL;
	double scale = 1;
	bool ull = false, integral = false;
	unsigned int id = f->fieldId;
	if (id >= NVML_FI_DEV_PERF_POLICY_POWER && id <= NVML_FI_DEV_PERF_POLICY_RELIABILITY) {
		getter = FC_nvmlDeviceGetViolationStatus;
		s = &g->violation[id - NVML_FI_DEV_PERF_POLICY_POWER];
		scale = 1e9;
		ull = integral = true;
	} else {
		switch (id) {
		case NVML_FI_DEV_ECC_SBE_VOL_TOTAL:
			getter = FC_nvmlDeviceGetTotalEccErrors, s = &g->ecc_corrected, ull = true;
			break;
		case NVML_FI_DEV_ECC_DBE_VOL_TOTAL:
			getter = FC_nvmlDeviceGetTotalEccErrors, s = &g->ecc_uncorrected, ull = true;
			break;
		case NVML_FI_DEV_REMAPPED_COR:
			getter = FC_nvmlDeviceGetRemappedRows, s = g->has_remapped_rows ? &g->remapped_correctable : NULL;
			break;
		case NVML_FI_DEV_REMAPPED_UNC:
			getter = FC_nvmlDeviceGetRemappedRows, s = g->has_remapped_rows ? &g->remapped_uncorrectable : NULL;
			break;
		case NVML_FI_DEV_REMAPPED_PENDING:
			getter = FC_nvmlDeviceGetRemappedRows, s = g->has_remapped_rows ? &g->remapped_pending : NULL;
			break;
		case NVML_FI_DEV_REMAPPED_FAILURE:
			getter = FC_nvmlDeviceGetRemappedRows, s = g->has_remapped_rows ? &g->remapped_failure : NULL;
			break;
		case NVML_FI_DEV_PCIE_REPLAY_COUNTER:
			getter = FC_nvmlDeviceGetPcieReplayCounter, s = &g->pcie_replays;
			break;
		case NVML_FI_DEV_MEMORY_TEMP:
			s = &g->memory_temperature;
			break;
		case NVML_FI_DEV_POWER_AVERAGE:
		case NVML_FI_DEV_POWER_INSTANT:
			getter = FC_nvmlDeviceGetPowerUsage, s = &g->power, scale = 1000;
			break;
		case NVML_FI_DEV_POWER_CURRENT_LIMIT:
			getter = FC_nvmlDeviceGetEnforcedPowerLimit, s = &g->power_limit, scale = 1000;
			break;
		case NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
			getter = FC_nvmlDeviceGetTotalEnergyConsumption, s = &g->power, ull = integral = true, scale = 1000;
			break;
		default:
			for (int i = 0; i < g->nfields; i++)
				if (g->field_ids[i] == id)
					s = &g->fields[i], ull = true;
		}
	}
	f->timestamp = (long long)fake_wall_us(t);
	f->latencyUsec = 0;
	memset(&f->value, 0, sizeof f->value);
	if (f->scopeId > 0 && f->scopeId >= g->nvlink_links) {
		f->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT; /* no such link */
		return;
	}
	if (!s || !fake_signal_set(s)) {
		f->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
		return;
	}
	nvmlReturn_t fault = fake_fault(g, getter, t);
	if (fault != NVML_SUCCESS) {
		f->nvmlReturn = fault;
		return;
	}
	double v = integral ? fake_signal_integral(s, t) : fake_signal_at(s, t);
	if (id == NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION)
		v += g->energy_offset_j;
	f->nvmlReturn = NVML_SUCCESS;
	if (ull) {
		f->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
		f->value.ullVal = rounded(v * scale);
	} else {
		f->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
		f->value.uiVal = (unsigned int)rounded(v * scale);
	}
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values)
{
	const fake_gpu *g;
	double t;
	if (valuesCount < 0 || (valuesCount > 0 && !values))
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetFieldValues, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	for (int i = 0; i < valuesCount; i++)
		field(g, t, &values[i]);
	return fake_leave(NVML_SUCCESS);
}
