/*
 * Area "getters": the getter table, which answers the generic getters
 * (getters_gen.c, written by gen/ from nvml.h: every simple device getter)
 * with no code of their own.
 *
 * Key of a GPU:
 *   getters: {KEY: signal or null, ...}: KEY is a getter's name, or
 *            name(SELECTOR) for a getter that takes an enum, SELECTOR being
 *            the enum constant without the prefix its enum's constants share
 *            (nvmlDeviceGetMaxClockInfo(SM), nvmlDeviceGetPcieThroughput(TX_BYTES)).
 *            null makes the getter answer NVML_ERROR_NOT_SUPPORTED.
 * Every GPU starts from the compiled-in defaults (test/nvmltest/getters.json,
 * which the Go mock embeds too); a key without a value answers
 * NVML_ERROR_NOT_SUPPORTED.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "fakenvml.h"

static const char *const keys[] = {"getters", NULL};

static int find_key(const char *key)
{
	for (int k = 0; key && k < FAKE_GEN_KEYS; k++)
		if (strcmp(fake_gen_keys[k].key, key) == 0)
			return k;
	return -1;
}

/* set applies the getter keys of obj to g. */
static bool set(fake_pctx *c, const cJSON *obj, const char *path, fake_gpu *g)
{
	if (!cJSON_IsObject(obj))
		return fake_fail(c, path, "must be an object of getter keys");
	for (const cJSON *it = obj->child; it; it = it->next) {
		int k = find_key(it->string);
		if (k < 0)
			return fake_fail(c, path,
					 "unknown getter key \"%s\" (a simple nvmlDeviceGet function of nvml.h, "
					 "with (SELECTOR) where it takes an enum, e.g. \"nvmlDeviceGetMaxClockInfo(SM)\")",
					 it->string ? it->string : "");
		const fake_gen_func *f = &fake_gen_funcs[fake_gen_keys[k].func];
		if (f->own())
			return fake_fail(c, path, "getter key \"%s\": %s is written by hand, with scenario keys of its own",
					 it->string, f->name);
		for (const cJSON *o = obj->child; o != it; o = o->next)
			if (o->string && strcmp(o->string, it->string) == 0)
				return fake_fail(c, path, "key \"%s\" is given twice", it->string);
		if (cJSON_IsNull(it)) {
			memset(&g->getters[k], 0, sizeof g->getters[k]);
			continue;
		}
		if (!fake_get_signal(c, obj, it->string, path, fake_gen_keys[k].min, fake_gen_keys[k].max,
				     &g->getters[k]))
			return false;
	}
	return true;
}

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)index;
	memset(g->getters, 0, sizeof g->getters);
	cJSON *defaults = cJSON_Parse(fake_getter_defaults);
	if (!defaults)
		return fake_fail(c, "test/nvmltest/getters.json (the compiled-in defaults)", "not valid JSON");
	bool ok = set(c, defaults, "test/nvmltest/getters.json (the compiled-in defaults)", g);
	cJSON_Delete(defaults);
	if (!ok)
		return false;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(gpu, "getters");
	if (!v)
		return true;
	char p[96];
	snprintf(p, sizeof p, "%s.getters", path);
	return set(c, v, p, g);
}

const fake_area fake_area_getters = {keys, parse};

nvmlReturn_t fake_gen_value(nvmlDevice_t device, fake_call call, int k, bool nonnull, long long *out)
{
	const fake_gpu *g;
	double t;
	if (!nonnull)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, call, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (!fake_signal_set(&g->getters[k]))
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	*out = llround(fake_signal_at(&g->getters[k], t));
	return fake_leave(NVML_SUCCESS);
}
