/*
 * Area "faults": what goes wrong, and when (t = seconds since the scenario
 * clock started at the first successful nvmlInit).
 *
 * Keys of a GPU:
 *   lost_at: t from which every call on the GPU answers
 *            NVML_ERROR_GPU_IS_LOST (fallen off the bus).
 *   not_supported: [call, ...]: these calls answer NVML_ERROR_NOT_SUPPORTED.
 *   errors: [{call, return, from, until}]: call answers return (a name such
 *            as "UNKNOWN" or a code) while from <= t < until (until null or
 *            absent: forever).
 *   hangs: [{call, from, seconds}]: a call made while from <= t < from +
 *            seconds blocks until t = from + seconds, then answers normally.
 * A call is named by its symbol, with or without its version suffix
 * (nvmlDeviceGetPciInfo_v3 or nvmlDeviceGetPciInfo).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>

#include "fakenvml.h"

static const char *const keys[] = {"lost_at", "not_supported", "errors", "hangs", NULL};

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)index;
	char p[128];
	if (!fake_get_time(c, gpu, "lost_at", path, &g->lost_at, INFINITY))
		return false;

	const cJSON *ns = cJSON_GetObjectItemCaseSensitive(gpu, "not_supported");
	const cJSON *errs = cJSON_GetObjectItemCaseSensitive(gpu, "errors");
	int nns = 0, nerr = 0;
	if (ns) {
		snprintf(p, sizeof p, "%s.not_supported", path);
		if (!cJSON_IsArray(ns))
			return fake_fail(c, p, "must be an array of NVML function names");
		nns = cJSON_GetArraySize(ns);
	}
	if (errs) {
		snprintf(p, sizeof p, "%s.errors", path);
		if (!cJSON_IsArray(errs))
			return fake_fail(c, p, "must be an array of {call, return, from, until}");
		nerr = cJSON_GetArraySize(errs);
	}
	if (nns > 10000 || nerr > 10000)
		return fake_fail(c, path, "too many faults");
	fake_error *out = NULL;
	if (nns + nerr > 0 && !(out = fake_alloc(c, sizeof *out * (size_t)(nns + nerr))))
		return false;
	int i = 0;
	for (const cJSON *it = ns ? ns->child : NULL; it; it = it->next, i++) {
		snprintf(p, sizeof p, "%s.not_supported[%d]", path, i);
		if (!fake_parse_call(c, it, p, &out[i].call))
			return false;
		out[i].ret = NVML_ERROR_NOT_SUPPORTED;
		out[i].from = 0;
		out[i].until = INFINITY;
	}
	int j = 0;
	for (const cJSON *it = errs ? errs->child : NULL; it; it = it->next, i++, j++) {
		snprintf(p, sizeof p, "%s.errors[%d]", path, j);
		static const char *const ekeys[] = {"call", "return", "from", "until", NULL};
		if (!fake_check_keys(c, it, p, ekeys))
			return false;
		const cJSON *call = cJSON_GetObjectItemCaseSensitive(it, "call");
		const cJSON *ret = cJSON_GetObjectItemCaseSensitive(it, "return");
		if (!call || !ret)
			return fake_fail(c, p, "\"call\" and \"return\" are required");
		char cp[160], rp[160];
		snprintf(cp, sizeof cp, "%s.call", p);
		snprintf(rp, sizeof rp, "%s.return", p);
		if (!fake_parse_call(c, call, cp, &out[i].call) || !fake_parse_return(c, ret, rp, &out[i].ret) ||
		    !fake_get_time(c, it, "from", p, &out[i].from, 0) ||
		    !fake_get_time(c, it, "until", p, &out[i].until, INFINITY))
			return false;
	}
	g->errors = out;
	g->nerrors = nns + nerr;

	const cJSON *hangs = cJSON_GetObjectItemCaseSensitive(gpu, "hangs");
	if (hangs) {
		snprintf(p, sizeof p, "%s.hangs", path);
		if (!cJSON_IsArray(hangs))
			return fake_fail(c, p, "must be an array of {call, from, seconds}");
		int n = cJSON_GetArraySize(hangs);
		if (n > 10000)
			return fake_fail(c, p, "too many hangs");
		fake_hang *h = NULL;
		if (n > 0 && !(h = fake_alloc(c, sizeof *h * (size_t)n)))
			return false;
		int k = 0;
		for (const cJSON *it = hangs->child; it; it = it->next, k++) {
			snprintf(p, sizeof p, "%s.hangs[%d]", path, k);
			static const char *const hkeys[] = {"call", "from", "seconds", NULL};
			if (!fake_check_keys(c, it, p, hkeys))
				return false;
			const cJSON *call = cJSON_GetObjectItemCaseSensitive(it, "call");
			bool has_seconds = false;
			char cp[160];
			snprintf(cp, sizeof cp, "%s.call", p);
			if (!call)
				return fake_fail(c, p, "\"call\" is required");
			if (!fake_parse_call(c, call, cp, &h[k].call) || !fake_get_time(c, it, "from", p, &h[k].from, 0) ||
			    !fake_get_number(c, it, "seconds", p, &h[k].seconds, 0, 86400, &has_seconds))
				return false;
			if (!has_seconds)
				return fake_fail(c, p, "\"seconds\" is required");
			if (!isfinite(h[k].from))
				return fake_fail(c, p, "\"from\" must be a number");
		}
		g->hangs = h;
		g->nhangs = n;
	}
	return true;
}

const fake_area fake_area_faults = {keys, parse};

double fake_hang_until(const fake_gpu *g, fake_call call, double t)
{
	double until = t;
	for (int i = 0; i < g->nhangs; i++) {
		const fake_hang *h = &g->hangs[i];
		if (h->call == call && t >= h->from && t < h->from + h->seconds && h->from + h->seconds > until)
			until = h->from + h->seconds;
	}
	return until;
}

nvmlReturn_t fake_fault(const fake_gpu *g, fake_call call, double t)
{
	for (int i = 0; i < g->nerrors; i++) {
		const fake_error *e = &g->errors[i];
		if (e->call == call && t >= e->from && t < e->until)
			return e->ret;
	}
	return NVML_SUCCESS;
}
