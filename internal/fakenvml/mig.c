/*
 * Area "mig": Multi-Instance GPU. No scenario key yet: every GPU is a GPU
 * without MIG, as NVML reports a board that does not support it
 * (nvmlDeviceGetMigMode answers NVML_ERROR_NOT_SUPPORTED), and this library
 * never hands out a MIG device or a GPU instance. The MIG issue extends this
 * area with instances, their handles and their GPM samples.
 */
#include <cjson/cJSON.h>

#include "fakenvml.h"

static const char *const keys[] = {NULL};

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)c, (void)gpu, (void)path, (void)index, (void)g;
	return true;
}

const fake_area fake_area_mig = {keys, parse};

/* not_supported checks the device (lost, faults) and answers NOT_SUPPORTED. */
static nvmlReturn_t not_supported(nvmlDevice_t device, fake_call call)
{
	const fake_gpu *g;
	double t;
	nvmlReturn_t r = fake_device_enter(device, call, &g, NULL, &t);
	return r != NVML_SUCCESS ? r : fake_leave(NVML_ERROR_NOT_SUPPORTED);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode)
{
	if (!currentMode || !pendingMode)
		return NVML_ERROR_INVALID_ARGUMENT;
	return not_supported(device, FC_nvmlDeviceGetMigMode);
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	return not_supported(device, FC_nvmlDeviceGetMaxMigDeviceCount);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice)
{
	(void)index;
	if (!migDevice)
		return NVML_ERROR_INVALID_ARGUMENT;
	return not_supported(device, FC_nvmlDeviceGetMigDeviceHandleByIndex);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
	if (!id)
		return NVML_ERROR_INVALID_ARGUMENT;
	return not_supported(device, FC_nvmlDeviceGetGpuInstanceId);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
	if (!id)
		return NVML_ERROR_INVALID_ARGUMENT;
	return not_supported(device, FC_nvmlDeviceGetComputeInstanceId);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
						 nvmlGpuInstanceProfileInfo_t *info)
{
	(void)profile;
	if (!info)
		return NVML_ERROR_INVALID_ARGUMENT;
	return not_supported(device, FC_nvmlDeviceGetGpuInstanceProfileInfo);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gpuInstance)
{
	(void)id;
	if (!gpuInstance)
		return NVML_ERROR_INVALID_ARGUMENT;
	return not_supported(device, FC_nvmlDeviceGetGpuInstanceById);
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info)
{
	(void)gpuInstance, (void)info;
	return NVML_ERROR_INVALID_ARGUMENT; /* no GPU instance is ever handed out */
}

nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId, nvmlGpmSample_t gpmSample)
{
	(void)gpuInstanceId, (void)gpmSample;
	return not_supported(device, FC_nvmlGpmMigSampleGet);
}
