/*
 * Area "getters": the getters of the getter table (FAKE_GETTERS in
 * fakenvml.h), each answering one value of its scenario key, with no code
 * of its own here. The functions are made by signature below.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>

#include "fakenvml.h"

#define KEY1(name, key, ...) key,
#define KEY2(name, key0, key1, ...) key0, key1,
static const char *const keys[] = {FAKE_GETTERS(KEY1, KEY1, KEY2) NULL};
#undef KEY1
#undef KEY2

/* The bounds of each key, in keys' order. */
static const double bounds[][2] = {
#define BOUNDS1(name, key, min, max, ...) {min, max},
#define BOUNDS2(name, key0, key1, min, max, ...) {min, max}, {min, max},
	FAKE_GETTERS(BOUNDS1, BOUNDS1, BOUNDS2)
#undef BOUNDS1
#undef BOUNDS2
	{0, 0},
};

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)index;
	for (int k = 0; k < FAKE_GETTER_KEYS; k++)
		if (!fake_get_signal(c, gpu, keys[k], path, bounds[k][0], bounds[k][1], &g->getters[k]))
			return false;
	return true;
}

const fake_area fake_area_getters = {keys, parse};

/* value reads getter key k of device's GPU now, rounded (unused while the table is empty). */
__attribute__((unused)) static nvmlReturn_t value(nvmlDevice_t device, fake_call call, int k, bool nonnull, long long *out)
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

#define U32(name, key, min, max)                                                                   \
	nvmlReturn_t name(nvmlDevice_t device, unsigned int *out)                                  \
	{                                                                                          \
		long long v = 0;                                                                     \
		nvmlReturn_t r = value(device, FC_##name, FG_##name, out != NULL, &v);             \
		if (r == NVML_SUCCESS)                                                             \
			*out = (unsigned int)v;                                                    \
		return r;                                                                          \
	}
#define MEMBER(name, key, min, max, type, member)                                                  \
	nvmlReturn_t name(nvmlDevice_t device, type *out)                                          \
	{                                                                                          \
		long long v = 0;                                                                     \
		nvmlReturn_t r = value(device, FC_##name, FG_##name, out != NULL, &v);             \
		if (r == NVML_SUCCESS)                                                             \
			out->member = v;                                                           \
		return r;                                                                          \
	}
#define BY2(name, key0, key1, min, max, argtype, arg0, arg1)                                       \
	nvmlReturn_t name(nvmlDevice_t device, argtype arg, unsigned int *out)                     \
	{                                                                                          \
		long long v = 0;                                                                     \
		if (arg != (arg0) && arg != (arg1))                                                \
			return NVML_ERROR_INVALID_ARGUMENT;                                        \
		int k = arg == (arg0) ? FG_##name##_0 : FG_##name##_1;                             \
		nvmlReturn_t r = value(device, FC_##name, k, out != NULL, &v);                     \
		if (r == NVML_SUCCESS)                                                             \
			*out = (unsigned int)v;                                                    \
		return r;                                                                          \
	}
FAKE_GETTERS(U32, MEMBER, BY2)
