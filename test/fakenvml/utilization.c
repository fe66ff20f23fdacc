/*
 * Area "utilization": engine busy fractions as duty patterns, served the way
 * NVML serves them: a ring buffer of samples (one every 1/sampling.hz
 * seconds, sampling.buffer of them, CPU timestamps in microseconds) through
 * nvmlDeviceGetSamples, and the newest sample through the instant getters.
 *
 * Key: utilization: {gpu, memory, encoder, decoder}, each a duty pattern
 * {busy, period_s, phase_s}. Sample k (k >= 1) is stamped at t = k/hz and is
 * the busy percentage over [(k-1)/hz, k/hz].
 *
 * In MIG mode (mig.c) these calls answer NVML_ERROR_NOT_SUPPORTED, as the
 * driver does: there is no whole-GPU utilization then.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fakenvml.h"

static const char *const keys[] = {"utilization", NULL};

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)index;
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(gpu, "utilization");
	if (!u)
		return true;
	char p[128];
	snprintf(p, sizeof p, "%s.utilization", path);
	static const char *const ukeys[] = {"gpu", "memory", "encoder", "decoder", NULL};
	return fake_check_keys(c, u, p, ukeys) && fake_get_duty(c, u, "gpu", p, &g->util[FAKE_UTIL_GPU]) &&
	       fake_get_duty(c, u, "memory", p, &g->util[FAKE_UTIL_MEMORY]) &&
	       fake_get_duty(c, u, "encoder", p, &g->util[FAKE_UTIL_ENCODER]) &&
	       fake_get_duty(c, u, "decoder", p, &g->util[FAKE_UTIL_DECODER]);
}

const fake_area fake_area_utilization = {keys, parse};

/* sample_value is sample k of d, in percent. */
static unsigned int sample_value(const fake_duty *d, double hz, long long k)
{
	return (unsigned int)lround(100.0 * fake_duty_fraction(d, (double)(k - 1) / hz, (double)k / hz));
}

/* newest_sample is the index of the newest sample taken at t (0: none yet). */
static long long newest_sample(double t, double hz)
{
	double k = floor(t * hz);
	return k < 0 ? 0 : (long long)k;
}

static unsigned int instant(const fake_duty *d, double t, double hz)
{
	long long k = newest_sample(t, hz);
	return k < 1 ? 0 : sample_value(d, hz, k);
}

nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, nvmlSamplingType_t type, unsigned long long lastSeenTimeStamp,
				  nvmlValueType_t *sampleValType, unsigned int *sampleCount, nvmlSample_t *samples)
{
	const fake_gpu *g;
	double t;
	if (!sampleValType || !sampleCount || (samples && *sampleCount == 0))
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetSamples, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (g->mig.enabled)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	int u;
	switch (type) {
	case NVML_GPU_UTILIZATION_SAMPLES:
		u = FAKE_UTIL_GPU;
		break;
	case NVML_MEMORY_UTILIZATION_SAMPLES:
		u = FAKE_UTIL_MEMORY;
		break;
	case NVML_ENC_UTILIZATION_SAMPLES:
		u = FAKE_UTIL_ENCODER;
		break;
	case NVML_DEC_UTILIZATION_SAMPLES:
		u = FAKE_UTIL_DECODER;
		break;
	default:
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	}
	const fake_duty *d = &g->util[u];
	if (!d->set)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);

	const fake_scenario *s = fake_current();
	double hz = s->sample_hz;
	long long newest = newest_sample(t, hz);
	long long first = newest - (long long)s->sample_buffer + 1;
	if (first < 1)
		first = 1;
	/* Only samples newer than lastSeenTimeStamp. */
	while (first <= newest && fake_wall_us((double)first / hz) <= lastSeenTimeStamp)
		first++;
	if (first > newest)
		return fake_leave(NVML_ERROR_NOT_FOUND);
	unsigned long long n = (unsigned long long)(newest - first + 1);

	*sampleValType = NVML_VALUE_TYPE_UNSIGNED_INT;
	if (!samples) {
		*sampleCount = (unsigned int)n;
		return fake_leave(NVML_SUCCESS);
	}
	/* Oldest first: what does not fit is returned by the next query. */
	if (n > *sampleCount)
		n = *sampleCount;
	for (unsigned long long i = 0; i < n; i++) {
		long long k = first + (long long)i;
		memset(&samples[i], 0, sizeof samples[i]);
		samples[i].timeStamp = fake_wall_us((double)k / hz);
		samples[i].sampleValue.uiVal = sample_value(d, hz, k);
	}
	*sampleCount = (unsigned int)n;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
	const fake_gpu *g;
	double t;
	if (!utilization)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetUtilizationRates, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	const fake_duty *gpu = &g->util[FAKE_UTIL_GPU], *mem = &g->util[FAKE_UTIL_MEMORY];
	if ((!gpu->set && !mem->set) || g->mig.enabled)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	double hz = fake_current()->sample_hz;
	utilization->gpu = gpu->set ? instant(gpu, t, hz) : 0;
	utilization->memory = mem->set ? instant(mem, t, hz) : 0;
	return fake_leave(NVML_SUCCESS);
}

static nvmlReturn_t codec(nvmlDevice_t device, fake_call call, int u, unsigned int *utilization,
			  unsigned int *samplingPeriodUs)
{
	const fake_gpu *g;
	double t;
	if (!utilization || !samplingPeriodUs)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, call, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (!g->util[u].set || g->mig.enabled)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	double hz = fake_current()->sample_hz;
	*utilization = instant(&g->util[u], t, hz);
	*samplingPeriodUs = (unsigned int)lround(1e6 / hz);
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *utilization,
					     unsigned int *samplingPeriodUs)
{
	return codec(device, FC_nvmlDeviceGetEncoderUtilization, FAKE_UTIL_ENCODER, utilization, samplingPeriodUs);
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *utilization,
					     unsigned int *samplingPeriodUs)
{
	return codec(device, FC_nvmlDeviceGetDecoderUtilization, FAKE_UTIL_DECODER, utilization, samplingPeriodUs);
}
