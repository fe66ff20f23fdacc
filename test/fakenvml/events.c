/*
 * Area "events": event sets (nvmlEventSetCreate, nvmlDeviceRegisterEvents,
 * nvmlEventSetWait_v2) that deliver the scenario's events when their time
 * comes.
 *
 * Key: events: [{at, type, xid, gpu_instance_id, compute_instance_id}], type
 * one of xid (default), single_bit_ecc, double_bit_ecc, pstate, clock; xid is
 * the Xid of an xid event; the instance ids (MIG mode; mig.c checks them)
 * say which GPU instance, and compute instance, the event hit: the event
 * data's gpuInstanceId and computeInstanceId (v2), else both 0xFFFFFFFF. With the
 * key, the GPU supports those five types (nvmlDeviceGetSupportedEventTypes);
 * without it, the event calls answer NVML_ERROR_NOT_SUPPORTED. A set delivers
 * each event of a registered type once, in time order, the ones due at or
 * after its registration; nvmlEventSetWait_v2 waits up to its timeout for the
 * next one and answers NVML_ERROR_TIMEOUT when none comes.
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

static const char *const keys[] = {"events", NULL};

#define SUPPORTED_EVENTS                                                                           \
	(nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | \
	 nvmlEventTypePState | nvmlEventTypeClock)

static const struct {
	const char *name;
	unsigned long long type;
} types[] = {
	{"xid", nvmlEventTypeXidCriticalError},     {"single_bit_ecc", nvmlEventTypeSingleBitEccError},
	{"double_bit_ecc", nvmlEventTypeDoubleBitEccError}, {"pstate", nvmlEventTypePState},
	{"clock", nvmlEventTypeClock},
};

static int by_time(const void *a, const void *b)
{
	double x = ((const fake_event *)a)->at, y = ((const fake_event *)b)->at;
	return (x > y) - (x < y);
}

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)index;
	const cJSON *ev = cJSON_GetObjectItemCaseSensitive(gpu, "events");
	if (!ev)
		return true;
	char p[128];
	snprintf(p, sizeof p, "%s.events", path);
	if (!cJSON_IsArray(ev))
		return fake_fail(c, p, "must be an array of {at, type, xid}");
	int n = cJSON_GetArraySize(ev);
	if (n > 100000)
		return fake_fail(c, p, "too many events");
	fake_event *out = NULL;
	if (n > 0 && !(out = fake_alloc(c, sizeof *out * (size_t)n)))
		return false;
	int i = 0;
	for (const cJSON *it = ev->child; it; it = it->next, i++) {
		char ip[160];
		snprintf(ip, sizeof ip, "%s[%d]", p, i);
		static const char *const ekeys[] = {"at", "type", "xid", "gpu_instance_id", "compute_instance_id", NULL};
		char type[32] = "xid";
		unsigned long long xid = 0, gi = FAKE_NO_INSTANCE, ci = FAKE_NO_INSTANCE;
		bool has_at = false, has_gi = false, has_ci = false;
		if (!fake_check_keys(c, it, ip, ekeys) || !fake_get_number(c, it, "at", ip, &out[i].at, 0, 1e9, &has_at) ||
		    !fake_get_string(c, it, "type", ip, type, sizeof type, false) ||
		    !fake_get_uint(c, it, "xid", ip, &xid, 0xffffffffULL, NULL) ||
		    !fake_get_uint(c, it, "gpu_instance_id", ip, &gi, FAKE_NO_INSTANCE - 1, &has_gi) ||
		    !fake_get_uint(c, it, "compute_instance_id", ip, &ci, FAKE_NO_INSTANCE - 1, &has_ci))
			return false;
		if (!has_at)
			return fake_fail(c, ip, "\"at\" is required");
		if (has_ci && !has_gi)
			return fake_fail(c, ip, "\"compute_instance_id\" needs \"gpu_instance_id\"");
		out[i].gpu_instance_id = (unsigned int)gi;
		out[i].compute_instance_id = (unsigned int)ci;
		out[i].type = 0;
		for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
			if (strcmp(type, types[k].name) == 0)
				out[i].type = types[k].type;
		if (!out[i].type)
			return fake_fail(c, ip, "type \"%s\" is not xid, single_bit_ecc, double_bit_ecc, pstate or clock", type);
		out[i].data = out[i].type == nvmlEventTypeXidCriticalError ? xid : 0;
	}
	if (n > 1)
		qsort(out, (size_t)n, sizeof *out, by_time);
	g->has_events = true;
	g->events = out;
	g->nevents = n;
	return true;
}

const fake_area fake_area_events = {keys, parse};

/* Event sets live in a fixed table, checked by address like device handles. */
#define MAX_SETS 256

struct nvmlEventSet_st {
	bool used;
	unsigned long long types[FAKE_MAX_GPUS]; /* registered types per GPU */
	int next[FAKE_MAX_GPUS];                 /* the GPU's next event to deliver */
};

static struct nvmlEventSet_st sets[MAX_SETS];
static pthread_mutex_t sets_mu = PTHREAD_MUTEX_INITIALIZER;

static struct nvmlEventSet_st *set_of(nvmlEventSet_t s)
{
	uintptr_t p = (uintptr_t)s.handle, base = (uintptr_t)sets;
	if (p < base)
		return NULL;
	uintptr_t off = p - base;
	if (off % sizeof sets[0] != 0 || off / sizeof sets[0] >= MAX_SETS)
		return NULL;
	return &sets[off / sizeof sets[0]];
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
	const fake_scenario *s;
	double t;
	if (!set)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_system_enter(&s, &t);
	if (r != NVML_SUCCESS)
		return r;
	pthread_mutex_lock(&sets_mu);
	r = NVML_ERROR_MEMORY;
	for (int i = 0; i < MAX_SETS; i++)
		if (!sets[i].used) {
			memset(&sets[i], 0, sizeof sets[i]);
			sets[i].used = true;
			set->handle = &sets[i];
			r = NVML_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&sets_mu);
	return fake_leave(r);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
	struct nvmlEventSet_st *es = set_of(set);
	pthread_mutex_lock(&sets_mu);
	nvmlReturn_t r = es && es->used ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
	if (r == NVML_SUCCESS)
		memset(es, 0, sizeof *es);
	pthread_mutex_unlock(&sets_mu);
	return r;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes)
{
	const fake_gpu *g;
	double t;
	if (!eventTypes)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetSupportedEventTypes, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (!g->has_events)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	*eventTypes = SUPPORTED_EVENTS;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set)
{
	const fake_gpu *g;
	double t;
	int idx;
	struct nvmlEventSet_st *es = set_of(set);
	if (!es)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceRegisterEvents, &g, &idx, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (!g->has_events || (eventTypes & ~(unsigned long long)SUPPORTED_EVENTS))
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	int next = 0;
	while (next < g->nevents && g->events[next].at < t)
		next++; /* what happened before the registration is not delivered */
	pthread_mutex_lock(&sets_mu);
	if (es->used) {
		es->types[idx] |= eventTypes;
		es->next[idx] = next;
	} else {
		r = NVML_ERROR_INVALID_ARGUMENT;
	}
	pthread_mutex_unlock(&sets_mu);
	return fake_leave(r);
}

/* wait delivers the set's next due event into data; v1 callers' struct has
 * no instance ids. */
static nvmlReturn_t wait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms, bool v2)
{
	struct nvmlEventSet_st *es = set_of(set);
	if (!es || !data)
		return NVML_ERROR_INVALID_ARGUMENT;
	double deadline = -1;
	for (;;) {
		const fake_scenario *s;
		double t;
		nvmlReturn_t r = fake_system_enter(&s, &t);
		if (r != NVML_SUCCESS)
			return r;
		if (deadline < 0)
			deadline = t + timeoutms / 1000.0;
		double wake = deadline;
		pthread_mutex_lock(&sets_mu);
		if (!es->used) {
			pthread_mutex_unlock(&sets_mu);
			return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
		}
		int best = -1;
		double best_at = INFINITY;
		for (int i = 0; i < s->ngpus && i < FAKE_MAX_GPUS; i++) {
			const fake_gpu *g = &s->gpus[i];
			if (!es->types[i])
				continue;
			while (es->next[i] < g->nevents && !(g->events[es->next[i]].type & es->types[i]))
				es->next[i]++;
			if (es->next[i] < g->nevents && g->events[es->next[i]].at < best_at) {
				best = i;
				best_at = g->events[es->next[i]].at;
			}
		}
		if (best >= 0 && best_at <= t) {
			const fake_event *e = &s->gpus[best].events[es->next[best]++];
			pthread_mutex_unlock(&sets_mu);
			data->device = fake_handle(best);
			data->eventType = e->type;
			data->eventData = e->data;
			if (v2) {
				data->gpuInstanceId = e->gpu_instance_id;
				data->computeInstanceId = e->compute_instance_id;
			}
			return fake_leave(NVML_SUCCESS);
		}
		pthread_mutex_unlock(&sets_mu);
		fake_leave(NVML_SUCCESS);
		if (t >= deadline)
			return NVML_ERROR_TIMEOUT;
		if (best >= 0 && best_at < wake)
			wake = best_at;
		/* Wake at least every 100 ms, to notice a shutdown or a free. */
		fake_sleep_until(fmin(wake, t + 0.1));
	}
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
	return wait(set, data, timeoutms, true);
}

nvmlReturn_t fake_event_set_wait_v1(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
	return wait(set, data, timeoutms, false);
}
