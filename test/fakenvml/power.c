/*
 * Area "power": temperatures, power draw and limit, the energy counter, fan.
 *
 * Keys: temperature_c, memory_temperature_c, power_w, power_limit_w,
 * fan_percent (values over time), energy_offset_j (the counter's value at
 * t = 0). memory_temperature_c is served as the field value
 * NVML_FI_DEV_MEMORY_TEMP (nvmlDeviceGetFieldValues, fields.c); without it
 * the field reports NVML_ERROR_NOT_SUPPORTED, as on a board without a memory
 * sensor. The energy counter
 * (mJ) is energy_offset_j plus power_w integrated over time, so it never
 * decreases; it needs power_w.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>

#include "fakenvml.h"

static const char *const keys[] = {"temperature_c", "memory_temperature_c", "power_w", "power_limit_w", "fan_percent",
				   "energy_offset_j", NULL};

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)index;
	return fake_get_signal(c, gpu, "temperature_c", path, 0, 200, &g->temperature) &&
	       fake_get_signal(c, gpu, "memory_temperature_c", path, 0, 200, &g->memory_temperature) &&
	       fake_get_signal(c, gpu, "power_w", path, 0, 100000, &g->power) &&
	       fake_get_signal(c, gpu, "power_limit_w", path, 0, 100000, &g->power_limit) &&
	       fake_get_signal(c, gpu, "fan_percent", path, 0, 100, &g->fan) &&
	       fake_get_number(c, gpu, "energy_offset_j", path, &g->energy_offset_j, 0, 1e15, NULL);
}

const fake_area fake_area_power = {keys, parse};

/* get reads signal s of the GPU behind device as a rounded unsigned value. */
static nvmlReturn_t get(nvmlDevice_t device, fake_call call, size_t offset, double scale, unsigned int *out)
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
	double v = fake_signal_at(s, t) * scale;
	*out = (unsigned int)llround(v < 0 ? 0 : v);
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp)
{
	if (sensorType != NVML_TEMPERATURE_GPU) {
		if (!temp)
			return NVML_ERROR_INVALID_ARGUMENT;
		const fake_gpu *g;
		double t;
		nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetTemperature, &g, NULL, &t);
		return r != NVML_SUCCESS ? r : fake_leave(NVML_ERROR_NOT_SUPPORTED);
	}
	return get(device, FC_nvmlDeviceGetTemperature, offsetof(fake_gpu, temperature), 1, temp);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
	return get(device, FC_nvmlDeviceGetPowerUsage, offsetof(fake_gpu, power), 1000, power);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
	return get(device, FC_nvmlDeviceGetEnforcedPowerLimit, offsetof(fake_gpu, power_limit), 1000, limit);
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
	return get(device, FC_nvmlDeviceGetFanSpeed, offsetof(fake_gpu, fan), 1, speed);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy)
{
	const fake_gpu *g;
	double t;
	if (!energy)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetTotalEnergyConsumption, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (!fake_signal_set(&g->power))
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	double j = g->energy_offset_j + fake_signal_integral(&g->power, t);
	*energy = (unsigned long long)llround(j * 1000);
	return fake_leave(NVML_SUCCESS);
}
