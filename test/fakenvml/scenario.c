/*
 * The scenario file: the top level, and the helpers every area's parser uses.
 * The parser is strict: an unknown key, a wrong type or an out-of-range value
 * fails nvmlInit (NVML_ERROR_UNKNOWN) with a message that names the key's
 * path, so a typo never silently turns into "not supported".
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakenvml.h"

/* The areas, in the order their keys are parsed. */
static const fake_area *const areas[] = {
	&fake_area_device, &fake_area_utilization, &fake_area_memory, &fake_area_power,
	&fake_area_clocks, &fake_area_processes,   &fake_area_gpm,   &fake_area_health,
	&fake_area_events, &fake_area_mig,         &fake_area_faults, &fake_area_fields,
	&fake_area_getters,
};

const char *const fake_call_names[FC_COUNT] = {
#define FAKE_CALL_NAME(name, ...) #name,
	FAKE_CALLS(FAKE_CALL_NAME)
	FAKE_GEN_GETTERS(FAKE_CALL_NAME)
#undef FAKE_CALL_NAME
};

/* ---- arena: everything of one scenario is freed at once ---------------------- */

struct fake_arena {
	struct fake_arena *next;
	max_align_t data[];
};

void *fake_alloc(fake_pctx *c, size_t n)
{
	fake_arena *a = calloc(1, sizeof *a + n);
	if (!a) {
		fake_fail(c, "", "out of memory");
		return NULL;
	}
	a->next = c->scn->arena;
	c->scn->arena = a;
	return a->data;
}

void fake_scenario_free(fake_scenario *s)
{
	if (!s)
		return;
	for (fake_arena *a = s->arena; a;) {
		fake_arena *next = a->next;
		free(a);
		a = next;
	}
	free(s);
}

/* ---- helpers --------------------------------------------------------------------- */

bool fake_fail(fake_pctx *c, const char *path, const char *fmt, ...)
{
	if (c->err[0])
		return false; /* keep the first error */
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (path && *path)
		snprintf(c->err, sizeof c->err, "%s: %s", path, msg);
	else
		snprintf(c->err, sizeof c->err, "%s", msg);
	return false;
}

static void join(char *dst, size_t cap, const char *path, const char *key)
{
	if (path && *path)
		snprintf(dst, cap, "%s.%s", path, key);
	else
		snprintf(dst, cap, "%s", key);
}

bool fake_check_keys(fake_pctx *c, const cJSON *obj, const char *path, const char *const *keys)
{
	if (!cJSON_IsObject(obj))
		return fake_fail(c, path, "must be an object");
	for (const cJSON *it = obj->child; it; it = it->next) {
		bool known = false;
		for (const char *const *k = keys; *k; k++)
			if (it->string && strcmp(it->string, *k) == 0)
				known = true;
		if (!known)
			return fake_fail(c, path, "unknown key \"%s\"", it->string ? it->string : "");
		for (const cJSON *o = obj->child; o != it; o = o->next)
			if (o->string && it->string && strcmp(o->string, it->string) == 0)
				return fake_fail(c, path, "key \"%s\" is given twice", it->string);
	}
	return true;
}

bool fake_get_string(fake_pctx *c, const cJSON *obj, const char *key, const char *path, char *dst, size_t cap,
		     bool required)
{
	char p[256];
	join(p, sizeof p, path, key);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v) {
		if (required)
			return fake_fail(c, p, "is required");
		return true;
	}
	if (!cJSON_IsString(v) || !v->valuestring)
		return fake_fail(c, p, "must be a string");
	if (strlen(v->valuestring) >= cap)
		return fake_fail(c, p, "is longer than %zu bytes", cap - 1);
	strcpy(dst, v->valuestring);
	return true;
}

bool fake_get_number(fake_pctx *c, const cJSON *obj, const char *key, const char *path, double *dst, double min,
		     double max, bool *present)
{
	char p[256];
	join(p, sizeof p, path, key);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (present)
		*present = v != NULL;
	if (!v)
		return true;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return fake_fail(c, p, "must be a number");
	if (v->valuedouble < min || v->valuedouble > max)
		return fake_fail(c, p, "%g is out of range [%g, %g]", v->valuedouble, min, max);
	*dst = v->valuedouble;
	return true;
}

bool fake_get_uint(fake_pctx *c, const cJSON *obj, const char *key, const char *path, unsigned long long *dst,
		   unsigned long long max, bool *present)
{
	char p[256];
	join(p, sizeof p, path, key);
	double d = 0;
	bool got = false;
	if (!fake_get_number(c, obj, key, path, &d, 0, (double)max, &got))
		return false;
	if (present)
		*present = got;
	if (!got)
		return true;
	if (d != floor(d) || d > 9007199254740992.0)
		return fake_fail(c, p, "must be a whole number below 2^53");
	*dst = (unsigned long long)d;
	return true;
}

bool fake_get_time(fake_pctx *c, const cJSON *obj, const char *key, const char *path, double *dst, double dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	*dst = dflt;
	if (v && cJSON_IsNull(v)) {
		*dst = INFINITY;
		return true;
	}
	return fake_get_number(c, obj, key, path, dst, 0, 1e9, NULL);
}

static bool check_range(fake_pctx *c, const char *path, double lo, double hi, double min, double max)
{
	if (lo < min || hi > max)
		return fake_fail(c, path, "takes values in [%g, %g], outside [%g, %g]", lo, hi, min, max);
	return true;
}

static bool parse_signal(fake_pctx *c, const cJSON *v, const char *path, double min, double max, fake_signal *dst)
{
	memset(dst, 0, sizeof *dst);
	if (cJSON_IsNumber(v)) {
		if (!isfinite(v->valuedouble))
			return fake_fail(c, path, "must be finite");
		dst->kind = SIG_CONST;
		dst->value = v->valuedouble;
		return check_range(c, path, dst->value, dst->value, min, max);
	}
	if (!cJSON_IsObject(v))
		return fake_fail(c, path, "must be a number, {\"mean\", \"amplitude\", \"period_s\"} or {\"steps\"}");
	if (cJSON_GetObjectItemCaseSensitive(v, "steps")) {
		static const char *const keys[] = {"steps", NULL};
		if (!fake_check_keys(c, v, path, keys))
			return false;
		const cJSON *steps = cJSON_GetObjectItemCaseSensitive(v, "steps");
		char p[256];
		join(p, sizeof p, path, "steps");
		int n = cJSON_GetArraySize(steps);
		if (!cJSON_IsArray(steps) || n == 0 || n > 100000)
			return fake_fail(c, p, "must be a non-empty array of [t, value] pairs");
		fake_step *out = fake_alloc(c, sizeof *out * (size_t)n);
		if (!out)
			return false;
		int i = 0;
		for (const cJSON *st = steps->child; st; st = st->next, i++) {
			char sp[300];
			snprintf(sp, sizeof sp, "%s[%d]", p, i);
			if (!cJSON_IsArray(st) || cJSON_GetArraySize(st) != 2 || !cJSON_IsNumber(st->child) ||
			    !cJSON_IsNumber(st->child->next))
				return fake_fail(c, sp, "must be a [t, value] pair of numbers");
			double at = st->child->valuedouble, val = st->child->next->valuedouble;
			if (!isfinite(at) || !isfinite(val) || at < 0 || at > 1e9)
				return fake_fail(c, sp, "t must be in [0, 1e9] and value finite");
			if (i > 0 && at <= out[i - 1].at)
				return fake_fail(c, sp, "steps must be in increasing t");
			if (!check_range(c, sp, val, val, min, max))
				return false;
			out[i].at = at;
			out[i].value = val;
		}
		dst->kind = SIG_STEPS;
		dst->steps = out;
		dst->nsteps = n;
		return true;
	}
	static const char *const keys[] = {"mean", "amplitude", "period_s", "phase_s", NULL};
	if (!fake_check_keys(c, v, path, keys))
		return false;
	bool has_mean = false, has_period = false;
	dst->kind = SIG_SINE;
	if (!fake_get_number(c, v, "mean", path, &dst->mean, -1e18, 1e18, &has_mean) ||
	    !fake_get_number(c, v, "amplitude", path, &dst->amplitude, 0, 1e18, NULL) ||
	    !fake_get_number(c, v, "period_s", path, &dst->period, 1e-3, 1e9, &has_period) ||
	    !fake_get_number(c, v, "phase_s", path, &dst->phase, -1e9, 1e9, NULL))
		return false;
	if (!has_mean || !has_period)
		return fake_fail(c, path, "a sine needs \"mean\" and \"period_s\"");
	return check_range(c, path, dst->mean - dst->amplitude, dst->mean + dst->amplitude, min, max);
}

bool fake_get_signal(fake_pctx *c, const cJSON *obj, const char *key, const char *path, double min, double max,
		     fake_signal *dst)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v) {
		memset(dst, 0, sizeof *dst);
		return true;
	}
	char p[256];
	join(p, sizeof p, path, key);
	return parse_signal(c, v, p, min, max, dst);
}

bool fake_get_duty(fake_pctx *c, const cJSON *obj, const char *key, const char *path, fake_duty *dst)
{
	memset(dst, 0, sizeof *dst);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v)
		return true;
	char p[256];
	join(p, sizeof p, path, key);
	static const char *const keys[] = {"busy", "period_s", "phase_s", NULL};
	if (!fake_check_keys(c, v, p, keys))
		return false;
	const cJSON *busy = cJSON_GetObjectItemCaseSensitive(v, "busy");
	if (!busy)
		return fake_fail(c, p, "\"busy\" is required");
	char bp[300];
	join(bp, sizeof bp, p, "busy");
	if (!parse_signal(c, busy, bp, 0, 1, &dst->busy))
		return false;
	if (!fake_get_number(c, v, "period_s", p, &dst->period, 1e-3, 1e6, NULL) ||
	    !fake_get_number(c, v, "phase_s", p, &dst->phase, -1e9, 1e9, NULL))
		return false;
	dst->set = true;
	return true;
}

bool fake_parse_return(fake_pctx *c, const cJSON *v, const char *path, nvmlReturn_t *dst)
{
	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;
		if (d != floor(d) || d < 1 || d > 999)
			return fake_fail(c, path, "must be an NVML error code (1..999)");
		*dst = (nvmlReturn_t)(int)d;
		return true;
	}
	if (cJSON_IsString(v) && v->valuestring && fake_return_from_name(v->valuestring, dst) &&
	    *dst != NVML_SUCCESS)
		return true;
	return fake_fail(c, path, "must be an NVML error such as \"NOT_SUPPORTED\" or \"NVML_ERROR_GPU_IS_LOST\"");
}

bool fake_parse_call(fake_pctx *c, const cJSON *v, const char *path, fake_call *dst)
{
	if (!cJSON_IsString(v) || !v->valuestring)
		return fake_fail(c, path, "must be the name of an NVML function");
	const char *name = v->valuestring;
	size_t n = strlen(name);
	for (int i = 0; i < FC_COUNT; i++) {
		const char *cn = fake_call_names[i];
		/* the exact name, or the name without its _vN suffix */
		if (strcmp(cn, name) == 0 ||
		    (strncmp(cn, name, n) == 0 && cn[n] == '_' && cn[n + 1] == 'v' && cn[n + 2] >= '0' && cn[n + 2] <= '9')) {
			*dst = (fake_call)i;
			return true;
		}
	}
	return fake_fail(c, path, "\"%s\" is not an NVML function this library can fault", name);
}

/* ---- the top level ------------------------------------------------------------------ */

static const char *const top_keys[] = {"comment", "driver_version", "nvml_version", "cuda_driver_version", "sampling",
				       "init", "gpus", NULL};

static bool parse_gpu(fake_pctx *c, const cJSON *v, int index, fake_gpu *g)
{
	char path[64];
	snprintf(path, sizeof path, "gpus[%d]", index);
	if (!cJSON_IsObject(v))
		return fake_fail(c, path, "must be an object");
	/* Every key must belong to some area (or be a comment). */
	for (const cJSON *it = v->child; it; it = it->next) {
		bool known = it->string && strcmp(it->string, "comment") == 0;
		for (size_t a = 0; a < sizeof areas / sizeof areas[0] && !known; a++)
			for (const char *const *k = areas[a]->keys; *k && !known; k++)
				known = it->string && strcmp(it->string, *k) == 0;
		if (!known)
			return fake_fail(c, path, "unknown key \"%s\"", it->string ? it->string : "");
		for (const cJSON *o = v->child; o != it; o = o->next)
			if (o->string && it->string && strcmp(o->string, it->string) == 0)
				return fake_fail(c, path, "key \"%s\" is given twice", it->string);
	}
	for (size_t a = 0; a < sizeof areas / sizeof areas[0]; a++)
		if (!areas[a]->parse(c, v, path, index, g))
			return false;
	return true;
}

fake_scenario *fake_scenario_parse(const char *text, size_t len, char *err, size_t errlen)
{
	fake_pctx c = {.err = {0}};
	fake_scenario *s = calloc(1, sizeof *s);
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c.scn = s;
	strcpy(s->driver_version, "550.54.15");
	s->cuda_driver_version = 12040;
	s->sample_hz = 6;
	s->sample_buffer = 120;
	s->init_fail_return = NVML_ERROR_DRIVER_NOT_LOADED;

	/* text[len] is NUL: parsing through it rejects anything after the value. */
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);
	if (!root) {
		/* end points at the error (cJSON_GetErrorPtr is a global). */
		long off = (end && end >= text && end <= text + len) ? (long)(end - text) : -1;
		fake_fail(&c, "", "not valid JSON (near byte %ld)", off);
		goto fail;
	}
	if (!fake_check_keys(&c, root, "", top_keys))
		goto fail;
	bool has_nvml = false;
	if (!fake_get_string(&c, root, "driver_version", "", s->driver_version, sizeof s->driver_version, false))
		goto fail;
	const cJSON *nv = cJSON_GetObjectItemCaseSensitive(root, "nvml_version");
	has_nvml = nv != NULL;
	if (!fake_get_string(&c, root, "nvml_version", "", s->nvml_version, sizeof s->nvml_version, false))
		goto fail;
	if (!has_nvml)
		snprintf(s->nvml_version, sizeof s->nvml_version, "12.%.70s", s->driver_version);
	unsigned long long cuda = (unsigned long long)s->cuda_driver_version;
	if (!fake_get_uint(&c, root, "cuda_driver_version", "", &cuda, 1000000, NULL))
		goto fail;
	s->cuda_driver_version = (int)cuda;

	const cJSON *sampling = cJSON_GetObjectItemCaseSensitive(root, "sampling");
	if (sampling) {
		static const char *const keys[] = {"hz", "buffer", NULL};
		unsigned long long buf = s->sample_buffer;
		if (!fake_check_keys(&c, sampling, "sampling", keys) ||
		    !fake_get_number(&c, sampling, "hz", "sampling", &s->sample_hz, 0.1, 1000, NULL) ||
		    !fake_get_uint(&c, sampling, "buffer", "sampling", &buf, 100000, NULL))
			goto fail;
		if (buf == 0) {
			fake_fail(&c, "sampling.buffer", "must be at least 1");
			goto fail;
		}
		s->sample_buffer = (unsigned int)buf;
	}

	const cJSON *init = cJSON_GetObjectItemCaseSensitive(root, "init");
	if (init) {
		static const char *const keys[] = {"fail_first", "return", NULL};
		unsigned long long n = 0;
		if (!fake_check_keys(&c, init, "init", keys) ||
		    !fake_get_uint(&c, init, "fail_first", "init", &n, 1000000, NULL))
			goto fail;
		s->init_fail_first = (unsigned int)n;
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(init, "return");
		if (r && !fake_parse_return(&c, r, "init.return", &s->init_fail_return))
			goto fail;
	}

	const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(root, "gpus");
	if (!cJSON_IsArray(gpus)) {
		fake_fail(&c, "gpus", "is required: an array of GPU objects");
		goto fail;
	}
	int n = cJSON_GetArraySize(gpus);
	if (n > FAKE_MAX_GPUS) {
		fake_fail(&c, "gpus", "at most %d GPUs", FAKE_MAX_GPUS);
		goto fail;
	}
	if (n > 0) {
		s->gpus = fake_alloc(&c, sizeof *s->gpus * (size_t)n);
		if (!s->gpus)
			goto fail;
	}
	s->ngpus = n;
	int i = 0;
	for (const cJSON *g = gpus->child; g; g = g->next, i++)
		if (!parse_gpu(&c, g, i, &s->gpus[i]))
			goto fail;
	for (int a = 0; a < n; a++)
		for (int b = 0; b < a; b++)
			if (strcasecmp(s->gpus[a].uuid, s->gpus[b].uuid) == 0) {
				char p[64];
				snprintf(p, sizeof p, "gpus[%d].uuid", a);
				fake_fail(&c, p, "\"%s\" is also the UUID of gpus[%d]", s->gpus[a].uuid, b);
				goto fail;
			}
	if (!fake_mig_check_uuids(&c, s))
		goto fail;
	cJSON_Delete(root);
	return s;

fail:
	cJSON_Delete(root);
	snprintf(err, errlen, "%s", c.err[0] ? c.err : "invalid scenario");
	fake_scenario_free(s);
	return NULL;
}
