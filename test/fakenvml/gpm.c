/*
 * Area "gpm": GPU Performance Monitoring (Hopper and newer): samples taken
 * with nvmlGpmSampleGet, metrics computed between two of them by
 * nvmlGpmMetricsGet.
 *
 * Key: gpm: {METRIC: value over time, ...}; METRIC is the name of an
 * nvmlGpmMetricId_t without its NVML_GPM_METRIC_ prefix (SM_UTIL,
 * SM_OCCUPANCY, PCIE_TX_PER_SEC, ...) or its number ("2"). Utilizations are
 * percentages, *_PER_SEC rates in MiB/s, as NVML reports them. A metric's
 * value between two samples is the mean of its value over the time between
 * them. A metric not in the map answers NVML_ERROR_NOT_SUPPORTED in its own
 * nvmlReturn; without the key, the GPU has no GPM (isSupportedDevice = 0).
 *
 * MIG: a GPU instance's own gpm map (mig.c) answers nvmlGpmMigSampleGet on
 * the parent with its id, and nvmlGpmSampleGet on its MIG devices' handles;
 * it needs the GPU's gpm key (the GPU has GPM). Samples of different GPUs
 * or GPU instances do not make a window (INVALID_ARGUMENT).
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakenvml.h"

static const char *const keys[] = {"gpm", NULL};

static const struct {
	const char *name;
	unsigned int id;
} names[] = {
	{"GRAPHICS_UTIL", 1},     {"SM_UTIL", 2},          {"SM_OCCUPANCY", 3},
	{"INTEGER_UTIL", 4},      {"ANY_TENSOR_UTIL", 5},  {"DFMA_TENSOR_UTIL", 6},
	{"HMMA_TENSOR_UTIL", 7},  {"DMMA_TENSOR_UTIL", 8}, {"IMMA_TENSOR_UTIL", 9},
	{"DRAM_BW_UTIL", 10},     {"FP64_UTIL", 11},       {"FP32_UTIL", 12},
	{"FP16_UTIL", 13},        {"PCIE_TX_PER_SEC", 20}, {"PCIE_RX_PER_SEC", 21},
	{"NVLINK_TOTAL_RX_PER_SEC", 60}, {"NVLINK_TOTAL_TX_PER_SEC", 61},
};

bool fake_parse_gpm(fake_pctx *c, const cJSON *m, const char *p, fake_gpm *dst)
{
	memset(dst, 0, sizeof *dst);
	if (!cJSON_IsObject(m))
		return fake_fail(c, p, "must be an object of GPM metrics");
	int n = cJSON_GetArraySize(m);
	if (n > NVML_GPM_METRIC_MAX)
		return fake_fail(c, p, "too many metrics");
	fake_gpm_metric *out = NULL;
	if (n > 0 && !(out = fake_alloc(c, sizeof *out * (size_t)n)))
		return false;
	int i = 0;
	for (const cJSON *it = m->child; it; it = it->next, i++) {
		const char *key = it->string ? it->string : "";
		unsigned int id = 0;
		for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
			if (strcmp(key, names[k].name) == 0)
				id = names[k].id;
		if (id == 0) {
			char *end = NULL;
			unsigned long v = strtoul(key, &end, 10);
			if (*key && end && !*end && v > 0 && v < NVML_GPM_METRIC_MAX)
				id = (unsigned int)v;
		}
		if (id == 0)
			return fake_fail(c, p, "\"%s\" is not a GPM metric name (SM_UTIL, ...) or number", key);
		for (int j = 0; j < i; j++)
			if (out[j].id == id)
				return fake_fail(c, p, "metric %u is given twice", id);
		bool rate = strstr(key, "PER_SEC") != NULL || (id >= 20 && id <= 21) || (id >= 60 && id <= 200);
		if (!fake_get_signal(c, m, key, p, 0, rate ? 1e9 : 100, &out[i].value))
			return false;
		out[i].id = id;
	}
	dst->set = true;
	dst->metrics = out;
	dst->n = n;
	return true;
}

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)index;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(gpu, "gpm");
	if (!m)
		return true;
	char p[128];
	snprintf(p, sizeof p, "%s.gpm", path);
	return fake_parse_gpm(c, m, p, &g->gpm);
}

const fake_area fake_area_gpm = {keys, parse};

/* Samples live in a fixed table, so a handle is checked by its address and
 * never dereferenced unless it is one of ours. */
#define MAX_SAMPLES 4096

struct nvmlGpmSample_st {
	bool used, taken;
	int gpu;
	int gi; /* index in the GPU's mig.gis; -1: the whole GPU */
	double t;
};

static struct nvmlGpmSample_st samples[MAX_SAMPLES];
static pthread_mutex_t samples_mu = PTHREAD_MUTEX_INITIALIZER;

static struct nvmlGpmSample_st *sample_of(nvmlGpmSample_t s)
{
	uintptr_t p = (uintptr_t)s.handle, base = (uintptr_t)samples;
	if (p < base)
		return NULL;
	uintptr_t off = p - base;
	if (off % sizeof samples[0] != 0 || off / sizeof samples[0] >= MAX_SAMPLES)
		return NULL;
	return &samples[off / sizeof samples[0]];
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *gpmSample)
{
	if (!gpmSample)
		return NVML_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&samples_mu);
	for (int i = 0; i < MAX_SAMPLES; i++)
		if (!samples[i].used) {
			memset(&samples[i], 0, sizeof samples[i]);
			samples[i].used = true;
			pthread_mutex_unlock(&samples_mu);
			gpmSample->handle = &samples[i];
			return NVML_SUCCESS;
		}
	pthread_mutex_unlock(&samples_mu);
	return NVML_ERROR_MEMORY;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample)
{
	struct nvmlGpmSample_st *s = sample_of(gpmSample);
	pthread_mutex_lock(&samples_mu);
	nvmlReturn_t r = s && s->used ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
	if (r == NVML_SUCCESS)
		memset(s, 0, sizeof *s);
	pthread_mutex_unlock(&samples_mu);
	return r;
}

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *gpmSupport)
{
	const fake_gpu *g;
	double t;
	if (!gpmSupport)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (gpmSupport->version != NVML_GPM_SUPPORT_VERSION)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlGpmQueryDeviceSupport, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	gpmSupport->isSupportedDevice = g->gpm.set ? 1 : 0;
	return fake_leave(NVML_SUCCESS);
}

/* take stamps sample s as taken at t on GPU idx (gi: GPU instance index, -1
 * for the whole GPU). */
static nvmlReturn_t take(struct nvmlGpmSample_st *s, int idx, int gi, double t)
{
	nvmlReturn_t r = NVML_SUCCESS;
	pthread_mutex_lock(&samples_mu);
	if (s->used) {
		s->taken = true;
		s->gpu = idx;
		s->gi = gi;
		s->t = t;
	} else {
		r = NVML_ERROR_INVALID_ARGUMENT;
	}
	pthread_mutex_unlock(&samples_mu);
	return r;
}

/* On a MIG device handle, the sample is its GPU instance's. */
nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample)
{
	const fake_gpu *g;
	const fake_mig_device *mig;
	double t;
	int idx;
	struct nvmlGpmSample_st *s = sample_of(gpmSample);
	if (!s)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_any_enter(device, FC_nvmlGpmSampleGet, &g, &idx, &mig, &t);
	if (r != NVML_SUCCESS)
		return r;
	const fake_gpm *gpm = mig ? &g->mig.gis[mig->gi].gpm : &g->gpm;
	if (!g->gpm.set || !gpm->set)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	return fake_leave(take(s, idx, mig ? mig->gi : -1, t));
}

nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId, nvmlGpmSample_t gpmSample)
{
	const fake_gpu *g;
	double t;
	int idx;
	struct nvmlGpmSample_st *s = sample_of(gpmSample);
	if (!s)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlGpmMigSampleGet, &g, &idx, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (!g->gpm.set || !g->mig.enabled)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	for (int i = 0; i < g->mig.ngis; i++)
		if (g->mig.gis[i].id == gpuInstanceId)
			return fake_leave(g->mig.gis[i].gpm.set ? take(s, idx, i, t) : NVML_ERROR_NOT_SUPPORTED);
	return fake_leave(NVML_ERROR_INVALID_ARGUMENT); /* no such GPU instance */
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *metricsGet)
{
	if (!metricsGet)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (metricsGet->version != NVML_GPM_METRICS_GET_VERSION)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	if (metricsGet->numMetrics > NVML_GPM_METRIC_MAX)
		return NVML_ERROR_INVALID_ARGUMENT;
	struct nvmlGpmSample_st *s1 = sample_of(metricsGet->sample1), *s2 = sample_of(metricsGet->sample2);
	if (!s1 || !s2 || s1 == s2)
		return NVML_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&samples_mu);
	struct nvmlGpmSample_st a = *s1, b = *s2;
	pthread_mutex_unlock(&samples_mu);
	if (!a.used || !b.used || !a.taken || !b.taken || a.gpu != b.gpu || a.gi != b.gi)
		return NVML_ERROR_INVALID_ARGUMENT;

	const fake_gpu *g;
	double t;
	nvmlReturn_t r = fake_index_enter((unsigned int)a.gpu, FC_nvmlGpmMetricsGet, &g, &t);
	if (r != NVML_SUCCESS)
		return r;
	/* A GPU instance that a new scenario no longer has answers nothing. */
	if (a.gi >= g->mig.ngis)
		return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
	const fake_gpm *gpm = a.gi >= 0 ? &g->mig.gis[a.gi].gpm : &g->gpm;
	double t1 = fmin(a.t, b.t), t2 = fmax(a.t, b.t);
	for (unsigned int i = 0; i < metricsGet->numMetrics; i++) {
		nvmlGpmMetric_t *m = &metricsGet->metrics[i];
		m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
		m->value = 0;
		memset(&m->metricInfo, 0, sizeof m->metricInfo);
		for (int k = 0; k < gpm->n; k++) {
			if (gpm->metrics[k].id != m->metricId)
				continue;
			const fake_signal *sig = &gpm->metrics[k].value;
			m->value = t2 > t1 ? (fake_signal_integral(sig, t2) - fake_signal_integral(sig, t1)) / (t2 - t1)
					   : fake_signal_at(sig, t1);
			m->nvmlReturn = NVML_SUCCESS;
		}
	}
	return fake_leave(NVML_SUCCESS);
}
