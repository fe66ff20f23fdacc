/*
 * Area "mig": Multi-Instance GPU. A GPU is cut into GPU instances (memory
 * and SM slices, of a profile), each with compute instances on it; each
 * compute instance is a MIG device with a handle and a UUID of its own.
 *
 * Key: mig: {
 *   enabled: true,          MIG mode (nvmlDeviceGetMigMode); false: a MIG
 *                           capable GPU with MIG off (no instances then)
 *   max_devices: 7,         nvmlDeviceGetMaxMigDeviceCount in MIG mode
 *   profiles: [{profile, id, slice_count, memory_mib, instance_count,
 *               multiprocessor_count, name}],
 *                           nvmlDeviceGetGpuInstanceProfileInfo(profile):
 *                           profile is the NVML_GPU_INSTANCE_PROFILE_* index
 *                           (0 = 1_SLICE, 2 = 3_SLICE, ...), id the profile
 *                           ID that GPU instances carry (on an H100 or H200,
 *                           1g = 19, 3g = 9, 7g = 0: not the index)
 *   gpu_instances: [{id, profile_id, placement_start, memory, gpm}],
 *                           memory as a GPU's (what its MIG devices
 *                           report), gpm as a GPU's (nvmlGpmMigSampleGet;
 *                           needs the GPU's gpm key)
 *   devices: [{uuid, gpu_instance_id, compute_instance_id, slice_count,
 *              from, until}]
 *                           the MIG devices, in handle index order; indices
 *                           from there up to max_devices are empty slots
 *                           (NVML_ERROR_NOT_FOUND). from/until (seconds,
 *                           until null = forever) bound when the device
 *                           exists: a layout change without a driver
 *                           reload (nvidia-smi mig -cci, -dci). The handle
 *                           indices count the devices that exist at t; a
 *                           destroyed device's handle answers
 *                           NVML_ERROR_INVALID_ARGUMENT.
 * }
 * Without the key the GPU has no MIG: nvmlDeviceGetMigMode and the profile
 * calls answer NVML_ERROR_NOT_SUPPORTED, nvmlDeviceGetMaxMigDeviceCount 0.
 *
 * A MIG device handle is distinct from every GPU handle. It answers
 * nvmlDeviceGetUUID, nvmlDeviceGetGpuInstanceId, nvmlDeviceGetComputeInstanceId,
 * nvmlDeviceGetMemoryInfo(_v2) (its GPU instance's memory),
 * nvmlDeviceGetAttributes_v2, nvmlDeviceGetDeviceHandleFromMigDeviceHandle,
 * the running-process calls (its own processes) and nvmlGpmSampleGet (its
 * GPU instance's GPM); every other device call answers NOT_SUPPORTED. The
 * parent's lost_at, faults and hangs apply to its MIG devices' calls too.
 *
 * In MIG mode every process of the GPU must name the MIG device it runs on
 * (processes[].gpu_instance_id, compute_instance_id); an event may name a
 * GPU instance (and a compute instance). Outside MIG mode neither may.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "fakenvml.h"

static const char *const keys[] = {"mig", NULL};

#define DEFAULT_MAX_DEVICES 7 /* what an A100, H100 or H200 answers */

static bool parse_profiles(fake_pctx *c, const cJSON *arr, const char *p, fake_mig *m)
{
	if (!arr)
		return true;
	if (!cJSON_IsArray(arr))
		return fake_fail(c, p, "must be an array of {profile, id, slice_count, memory_mib}");
	int n = cJSON_GetArraySize(arr);
	if (n > NVML_GPU_INSTANCE_PROFILE_COUNT)
		return fake_fail(c, p, "at most %d profiles (one per NVML_GPU_INSTANCE_PROFILE_*)",
				 NVML_GPU_INSTANCE_PROFILE_COUNT);
	fake_mig_profile *out = NULL;
	if (n > 0 && !(out = fake_alloc(c, sizeof *out * (size_t)n)))
		return false;
	int i = 0;
	for (const cJSON *it = arr->child; it; it = it->next, i++) {
		char ip[200];
		snprintf(ip, sizeof ip, "%s[%d]", p, i);
		static const char *const pkeys[] = {"profile",        "id",   "slice_count", "memory_mib", "instance_count",
						    "multiprocessor_count", "name", NULL};
		unsigned long long profile = 0, id = 0, slices = 0, mib = 0, instances = 0, sms = 0;
		bool has_profile = false, has_id = false, has_slices = false, has_mib = false, has_instances = false,
		     has_sms = false;
		if (!fake_check_keys(c, it, ip, pkeys) ||
		    !fake_get_uint(c, it, "profile", ip, &profile, NVML_GPU_INSTANCE_PROFILE_COUNT - 1, &has_profile) ||
		    !fake_get_uint(c, it, "id", ip, &id, FAKE_NO_INSTANCE - 1, &has_id) ||
		    !fake_get_uint(c, it, "slice_count", ip, &slices, 8, &has_slices) ||
		    !fake_get_uint(c, it, "memory_mib", ip, &mib, 1ULL << 32, &has_mib) ||
		    !fake_get_uint(c, it, "instance_count", ip, &instances, 8, &has_instances) ||
		    !fake_get_uint(c, it, "multiprocessor_count", ip, &sms, 1000, &has_sms) ||
		    !fake_get_string(c, it, "name", ip, out[i].name, sizeof out[i].name, false))
			return false;
		if (!has_profile || !has_id || !has_slices || !has_mib)
			return fake_fail(c, ip, "\"profile\", \"id\", \"slice_count\" and \"memory_mib\" are required");
		if (slices == 0 || mib == 0)
			return fake_fail(c, ip, "slice_count and memory_mib must be positive");
		for (int j = 0; j < i; j++) {
			if (out[j].profile == profile)
				return fake_fail(c, ip, "profile %llu is also profiles[%d]", profile, j);
			if (out[j].id == id)
				return fake_fail(c, ip, "id %llu is also the id of profiles[%d]", id, j);
		}
		out[i].profile = (unsigned int)profile;
		out[i].id = (unsigned int)id;
		out[i].slice_count = (unsigned int)slices;
		out[i].memory_mib = mib;
		out[i].instance_count = has_instances ? (unsigned int)instances : (unsigned int)(7 / slices ? 7 / slices : 1);
		out[i].multiprocessor_count = has_sms ? (unsigned int)sms : (unsigned int)slices * 16;
		if (!out[i].name[0])
			snprintf(out[i].name, sizeof out[i].name, "MIG %ug.%llugb", out[i].slice_count,
				 (unsigned long long)ceil((double)mib / 1024));
	}
	m->profiles = out;
	m->nprofiles = n;
	return true;
}

static bool parse_gpu_instances(fake_pctx *c, const cJSON *arr, const char *p, const fake_gpu *g, fake_mig *m)
{
	if (!arr)
		return true;
	if (!cJSON_IsArray(arr))
		return fake_fail(c, p, "must be an array of {id, profile_id, memory, gpm}");
	int n = cJSON_GetArraySize(arr);
	if (n > FAKE_MAX_GI)
		return fake_fail(c, p, "at most %d GPU instances", FAKE_MAX_GI);
	fake_gpu_instance *out = NULL;
	if (n > 0 && !(out = fake_alloc(c, sizeof *out * (size_t)n)))
		return false;
	unsigned int start = 0;
	int i = 0;
	for (const cJSON *it = arr->child; it; it = it->next, i++) {
		char ip[200], kp[240];
		snprintf(ip, sizeof ip, "%s[%d]", p, i);
		static const char *const gkeys[] = {"id", "profile_id", "placement_start", "memory", "gpm", NULL};
		unsigned long long id = 0, profile_id = 0, placement = start;
		bool has_id = false, has_profile = false;
		if (!fake_check_keys(c, it, ip, gkeys) || !fake_get_uint(c, it, "id", ip, &id, 1000, &has_id) ||
		    !fake_get_uint(c, it, "profile_id", ip, &profile_id, FAKE_NO_INSTANCE - 1, &has_profile) ||
		    !fake_get_uint(c, it, "placement_start", ip, &placement, 7, NULL))
			return false;
		if (!has_id || !has_profile)
			return fake_fail(c, ip, "\"id\" and \"profile_id\" are required");
		for (int j = 0; j < i; j++)
			if (out[j].id == id)
				return fake_fail(c, ip, "id %llu is also the id of gpu_instances[%d]", id, j);
		out[i].id = (unsigned int)id;
		for (int k = 0; k < m->nprofiles; k++)
			if (m->profiles[k].id == profile_id)
				out[i].profile = &m->profiles[k];
		if (!out[i].profile)
			return fake_fail(c, ip, "profile_id %llu is the id of none of mig.profiles", profile_id);
		out[i].placement_start = (unsigned int)placement;
		start = (unsigned int)placement + out[i].profile->slice_count;
		const cJSON *v;
		if ((v = cJSON_GetObjectItemCaseSensitive(it, "memory"))) {
			snprintf(kp, sizeof kp, "%s.memory", ip);
			if (!fake_parse_memory(c, v, kp, &out[i].memory))
				return false;
		}
		if ((v = cJSON_GetObjectItemCaseSensitive(it, "gpm"))) {
			snprintf(kp, sizeof kp, "%s.gpm", ip);
			if (!g->gpm.set)
				return fake_fail(c, kp, "needs the GPU's own \"gpm\" key (the GPU has GPM)");
			if (!fake_parse_gpm(c, v, kp, &out[i].gpm))
				return false;
		}
	}
	m->gis = out;
	m->ngis = n;
	return true;
}

static bool parse_devices(fake_pctx *c, const cJSON *arr, const char *p, fake_mig *m)
{
	if (!arr)
		return true;
	if (!cJSON_IsArray(arr))
		return fake_fail(c, p, "must be an array of {uuid, gpu_instance_id, compute_instance_id}");
	int n = cJSON_GetArraySize(arr);
	if (n > FAKE_MAX_MIG)
		return fake_fail(c, p, "%d MIG devices, more than %d", n, FAKE_MAX_MIG);
	fake_mig_device *out = NULL;
	if (n > 0 && !(out = fake_alloc(c, sizeof *out * (size_t)n)))
		return false;
	int i = 0;
	for (const cJSON *it = arr->child; it; it = it->next, i++) {
		char ip[200];
		snprintf(ip, sizeof ip, "%s[%d]", p, i);
		static const char *const dkeys[] = {"uuid",        "gpu_instance_id", "compute_instance_id",
						    "slice_count", "from",            "until",
						    NULL};
		unsigned long long gi = 0, ci = 0, slices = 0;
		bool has_gi = false, has_ci = false, has_slices = false;
		if (!fake_check_keys(c, it, ip, dkeys) ||
		    !fake_get_string(c, it, "uuid", ip, out[i].uuid, sizeof out[i].uuid, true) ||
		    !fake_get_uint(c, it, "gpu_instance_id", ip, &gi, 1000, &has_gi) ||
		    !fake_get_uint(c, it, "compute_instance_id", ip, &ci, 1000, &has_ci) ||
		    !fake_get_uint(c, it, "slice_count", ip, &slices, 8, &has_slices) ||
		    !fake_get_time(c, it, "from", ip, &out[i].from, 0) || !fake_get_time(c, it, "until", ip, &out[i].until, INFINITY))
			return false;
		if (out[i].until <= out[i].from)
			return fake_fail(c, ip, "\"until\" must be after \"from\"");
		if (!out[i].uuid[0])
			return fake_fail(c, ip, "\"uuid\" must not be empty");
		if (!has_gi || !has_ci)
			return fake_fail(c, ip, "\"gpu_instance_id\" and \"compute_instance_id\" are required");
		out[i].gi = -1;
		for (int k = 0; k < m->ngis; k++)
			if (m->gis[k].id == gi)
				out[i].gi = k;
		if (out[i].gi < 0)
			return fake_fail(c, ip, "gpu_instance_id %llu is the id of none of mig.gpu_instances", gi);
		for (int j = 0; j < i; j++)
			if (out[j].gpu_instance_id == gi && out[j].compute_instance_id == ci && out[j].from < out[i].until &&
			    out[i].from < out[j].until)
				return fake_fail(c, ip, "GPU instance %llu, compute instance %llu is also devices[%d]", gi, ci, j);
		/* The devices that exist at once fit the slots: count them where
		 * this one begins. */
		unsigned int at_once = 1;
		for (int j = 0; j < i; j++)
			at_once += fake_mig_present(&out[j], out[i].from);
		if (at_once > m->max_devices)
			return fake_fail(c, ip, "%u MIG devices at t = %g, more than max_devices (%u)", at_once, out[i].from,
					 m->max_devices);
		unsigned int gi_slices = m->gis[out[i].gi].profile->slice_count;
		if (has_slices && (slices == 0 || slices > gi_slices))
			return fake_fail(c, ip, "slice_count %llu is not in 1..%u, the GPU instance's", slices, gi_slices);
		out[i].gpu_instance_id = (unsigned int)gi;
		out[i].compute_instance_id = (unsigned int)ci;
		out[i].slice_count = has_slices ? (unsigned int)slices : gi_slices;
	}
	m->devices = out;
	m->ndevices = n;
	return true;
}

/* check_instances checks the instance ids that the GPU's processes and
 * events carry against its MIG devices. */
static bool check_instances(fake_pctx *c, const char *path, const fake_gpu *g)
{
	const fake_mig *m = &g->mig;
	char p[200];
	for (int i = 0; i < g->nprocesses; i++) {
		const fake_process *pr = &g->processes[i];
		snprintf(p, sizeof p, "%s.processes[%d]", path, i);
		bool has = pr->gpu_instance_id != FAKE_NO_INSTANCE;
		if (!m->enabled) {
			if (has)
				return fake_fail(c, p, "names a MIG device, but the GPU is not in MIG mode (mig.enabled)");
			continue;
		}
		if (!has)
			return fake_fail(c, p, "the GPU is in MIG mode: give the MIG device it runs on "
					       "(gpu_instance_id, compute_instance_id)");
		bool found = false;
		for (int k = 0; k < m->ndevices; k++)
			found = found || (m->devices[k].gpu_instance_id == pr->gpu_instance_id &&
					  m->devices[k].compute_instance_id == pr->compute_instance_id);
		if (!found)
			return fake_fail(c, p, "GPU instance %u, compute instance %u is none of mig.devices",
					 pr->gpu_instance_id, pr->compute_instance_id);
	}
	snprintf(p, sizeof p, "%s.events", path);
	for (int i = 0; i < g->nevents; i++) {
		const fake_event *e = &g->events[i];
		if (e->gpu_instance_id == FAKE_NO_INSTANCE)
			continue;
		if (!m->enabled)
			return fake_fail(c, p, "the event at t=%g names GPU instance %u, but the GPU is not in MIG mode", e->at,
					 e->gpu_instance_id);
		bool gi_found = false, dev_found = false;
		for (int k = 0; k < m->ngis; k++)
			gi_found = gi_found || m->gis[k].id == e->gpu_instance_id;
		for (int k = 0; k < m->ndevices; k++)
			dev_found = dev_found || (m->devices[k].gpu_instance_id == e->gpu_instance_id &&
						  m->devices[k].compute_instance_id == e->compute_instance_id);
		bool found = e->compute_instance_id == FAKE_NO_INSTANCE ? gi_found : dev_found;
		if (!found)
			return fake_fail(c, p, "the event at t=%g names GPU instance %u, compute instance %d: no such MIG %s",
					 e->at, e->gpu_instance_id,
					 e->compute_instance_id == FAKE_NO_INSTANCE ? -1 : (int)e->compute_instance_id,
					 e->compute_instance_id == FAKE_NO_INSTANCE ? "GPU instance" : "device");
	}
	return true;
}

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)index;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(gpu, "mig");
	if (!v)
		return check_instances(c, path, g);
	char p[128], kp[160];
	snprintf(p, sizeof p, "%s.mig", path);
	static const char *const mkeys[] = {"enabled", "max_devices", "profiles", "gpu_instances", "devices", NULL};
	if (!fake_check_keys(c, v, p, mkeys))
		return false;
	fake_mig *m = &g->mig;
	m->set = true;
	m->enabled = true;
	const cJSON *en = cJSON_GetObjectItemCaseSensitive(v, "enabled");
	if (en) {
		if (!cJSON_IsBool(en)) {
			snprintf(kp, sizeof kp, "%s.enabled", p);
			return fake_fail(c, kp, "must be true or false");
		}
		m->enabled = cJSON_IsTrue(en);
	}
	unsigned long long max = DEFAULT_MAX_DEVICES;
	if (!fake_get_uint(c, v, "max_devices", p, &max, FAKE_MAX_MIG, NULL))
		return false;
	m->max_devices = (unsigned int)max;
	snprintf(kp, sizeof kp, "%s.profiles", p);
	if (!parse_profiles(c, cJSON_GetObjectItemCaseSensitive(v, "profiles"), kp, m))
		return false;
	snprintf(kp, sizeof kp, "%s.gpu_instances", p);
	if (!parse_gpu_instances(c, cJSON_GetObjectItemCaseSensitive(v, "gpu_instances"), kp, g, m))
		return false;
	snprintf(kp, sizeof kp, "%s.devices", p);
	if (!parse_devices(c, cJSON_GetObjectItemCaseSensitive(v, "devices"), kp, m))
		return false;
	if (!m->enabled && (m->ngis > 0 || m->ndevices > 0))
		return fake_fail(c, p, "MIG mode is off (enabled: false): no gpu_instances or devices");
	return check_instances(c, path, g);
}

const fake_area fake_area_mig = {keys, parse};

bool fake_mig_check_uuids(fake_pctx *c, const fake_scenario *s)
{
	for (int a = 0; a < s->ngpus; a++)
		for (int k = 0; k < s->gpus[a].mig.ndevices; k++) {
			const char *u = s->gpus[a].mig.devices[k].uuid;
			char p[96];
			snprintf(p, sizeof p, "gpus[%d].mig.devices[%d].uuid", a, k);
			for (int b = 0; b < s->ngpus; b++) {
				if (strcasecmp(u, s->gpus[b].uuid) == 0)
					return fake_fail(c, p, "\"%s\" is also the UUID of gpus[%d]", u, b);
				for (int j = 0; j < s->gpus[b].mig.ndevices && (b < a || (b == a && j < k)); j++)
					if (strcasecmp(u, s->gpus[b].mig.devices[j].uuid) == 0)
						return fake_fail(c, p, "\"%s\" is also gpus[%d].mig.devices[%d]", u, b, j);
			}
		}
	return true;
}

/* ---- GPU instance handles ---------------------------------------------------- */

/* Checked by address, like device handles: GPU instance slot s of GPU i is
 * gi_handles[i * FAKE_MAX_GI + s]. */
struct nvmlGpuInstance_st {
	int unused;
};
static struct nvmlGpuInstance_st gi_handles[FAKE_MAX_GPUS * FAKE_MAX_GI];

static int gi_slot_of(nvmlGpuInstance_t h)
{
	uintptr_t p = (uintptr_t)h.handle, base = (uintptr_t)gi_handles;
	if (p < base)
		return -1;
	uintptr_t off = p - base;
	if (off % sizeof gi_handles[0] != 0 || off / sizeof gi_handles[0] >= (uintptr_t)FAKE_MAX_GPUS * FAKE_MAX_GI)
		return -1;
	return (int)(off / sizeof gi_handles[0]);
}

/* ---- NVML ------------------------------------------------------------------------ */

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode)
{
	const fake_gpu *g;
	double t;
	if (!currentMode || !pendingMode)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetMigMode, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (!g->mig.set)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	*currentMode = *pendingMode = g->mig.enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
	return fake_leave(NVML_SUCCESS);
}

/* Zero when MIG is not supported or not enabled, as NVML documents. */
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
	const fake_gpu *g;
	double t;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetMaxMigDeviceCount, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	*count = g->mig.enabled ? g->mig.max_devices : 0;
	return fake_leave(NVML_SUCCESS);
}

bool fake_mig_present(const fake_mig_device *d, double t)
{
	return d->from <= t && t < d->until;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice)
{
	const fake_gpu *g;
	double t;
	int idx;
	if (!migDevice)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetMigDeviceHandleByIndex, &g, &idx, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (!g->mig.enabled)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	if (index >= g->mig.max_devices)
		return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
	/* Index i is the i-th device that exists now. */
	unsigned int seen = 0;
	for (int k = 0; k < g->mig.ndevices; k++) {
		if (!fake_mig_present(&g->mig.devices[k], t))
			continue;
		if (seen++ == index) {
			*migDevice = fake_mig_handle(idx, k);
			return fake_leave(NVML_SUCCESS);
		}
	}
	return fake_leave(NVML_ERROR_NOT_FOUND); /* an empty slot */
}

/* mig_enter is fake_any_enter for calls that only MIG device handles
 * answer: a GPU handle gets not_gpu. */
static nvmlReturn_t mig_enter(nvmlDevice_t device, fake_call call, nvmlReturn_t not_gpu, const fake_gpu **g, int *idx,
			      const fake_mig_device **mig, double *t)
{
	nvmlReturn_t r = fake_any_enter(device, call, g, idx, mig, t);
	if (r == NVML_SUCCESS && !*mig)
		return fake_leave(not_gpu);
	return r;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
	const fake_gpu *g;
	const fake_mig_device *mig;
	double t;
	if (!id)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = mig_enter(device, FC_nvmlDeviceGetGpuInstanceId, NVML_ERROR_NOT_SUPPORTED, &g, NULL, &mig, &t);
	if (r != NVML_SUCCESS)
		return r;
	*id = mig->gpu_instance_id;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
	const fake_gpu *g;
	const fake_mig_device *mig;
	double t;
	if (!id)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = mig_enter(device, FC_nvmlDeviceGetComputeInstanceId, NVML_ERROR_NOT_SUPPORTED, &g, NULL, &mig, &t);
	if (r != NVML_SUCCESS)
		return r;
	*id = mig->compute_instance_id;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
	const fake_gpu *g;
	const fake_mig_device *mig;
	double t;
	if (!isMigDevice)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_any_enter(device, FC_nvmlDeviceIsMigDeviceHandle, &g, NULL, &mig, &t);
	if (r != NVML_SUCCESS)
		return r;
	*isMigDevice = mig != NULL;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t *device)
{
	const fake_gpu *g;
	const fake_mig_device *mig;
	double t;
	int idx;
	if (!device)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = mig_enter(migDevice, FC_nvmlDeviceGetDeviceHandleFromMigDeviceHandle,
				   NVML_ERROR_INVALID_ARGUMENT, &g, &idx, &mig, &t);
	if (r != NVML_SUCCESS)
		return r;
	*device = fake_handle(idx);
	return fake_leave(NVML_SUCCESS);
}

/* MIG device handles only, as NVML documents. */
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes)
{
	const fake_gpu *g;
	const fake_mig_device *mig;
	double t;
	if (!attributes)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = mig_enter(device, FC_nvmlDeviceGetAttributes_v2, NVML_ERROR_NOT_SUPPORTED, &g, NULL, &mig, &t);
	if (r != NVML_SUCCESS)
		return r;
	const fake_gpu_instance *gi = &g->mig.gis[mig->gi];
	memset(attributes, 0, sizeof *attributes);
	attributes->multiprocessorCount = gi->profile->multiprocessor_count * mig->slice_count / gi->profile->slice_count;
	attributes->gpuInstanceSliceCount = gi->profile->slice_count;
	attributes->computeInstanceSliceCount = mig->slice_count;
	attributes->memorySizeMB = gi->memory.set ? gi->memory.total >> 20 : gi->profile->memory_mib;
	return fake_leave(NVML_SUCCESS);
}

/* profile_enter enters device for a profile query: the GPU must be MIG
 * capable. */
static nvmlReturn_t profile_enter(nvmlDevice_t device, fake_call call, const fake_gpu **g)
{
	double t;
	nvmlReturn_t r = fake_device_enter(device, call, g, NULL, &t);
	if (r == NVML_SUCCESS && !(*g)->mig.set)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	return r;
}

/* by_index finds the profile of NVML_GPU_INSTANCE_PROFILE_* index profile. */
static nvmlReturn_t by_index(const fake_gpu *g, unsigned int profile, const fake_mig_profile **out)
{
	if (profile >= NVML_GPU_INSTANCE_PROFILE_COUNT)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < g->mig.nprofiles; i++)
		if (g->mig.profiles[i].profile == profile) {
			*out = &g->mig.profiles[i];
			return NVML_SUCCESS;
		}
	return NVML_ERROR_NOT_SUPPORTED; /* a profile this GPU does not have */
}

static nvmlReturn_t by_id(const fake_gpu *g, unsigned int id, const fake_mig_profile **out)
{
	for (int i = 0; i < g->mig.nprofiles; i++)
		if (g->mig.profiles[i].id == id) {
			*out = &g->mig.profiles[i];
			return NVML_SUCCESS;
		}
	return NVML_ERROR_INVALID_ARGUMENT;
}

/* fill_versioned fills a v2 or v3 profile info after checking its version. */
static nvmlReturn_t fill_versioned(const fake_mig_profile *p, nvmlGpuInstanceProfileInfo_v2_t *info)
{
	if (info->version == nvmlGpuInstanceProfileInfo_v2) {
		memset(info, 0, sizeof *info);
		info->version = nvmlGpuInstanceProfileInfo_v2;
		info->id = p->id;
		info->isP2pSupported = 1;
		info->sliceCount = p->slice_count;
		info->instanceCount = p->instance_count;
		info->multiprocessorCount = p->multiprocessor_count;
		info->memorySizeMB = p->memory_mib;
		snprintf(info->name, sizeof info->name, "%s", p->name);
		return NVML_SUCCESS;
	}
	if (info->version == nvmlGpuInstanceProfileInfo_v3) {
		nvmlGpuInstanceProfileInfo_v3_t *v3 = (nvmlGpuInstanceProfileInfo_v3_t *)info;
		memset(v3, 0, sizeof *v3);
		v3->version = nvmlGpuInstanceProfileInfo_v3;
		v3->id = p->id;
		v3->sliceCount = p->slice_count;
		v3->instanceCount = p->instance_count;
		v3->multiprocessorCount = p->multiprocessor_count;
		v3->memorySizeMB = p->memory_mib;
		snprintf(v3->name, sizeof v3->name, "%s", p->name);
		v3->capabilities = NVML_GPU_INSTANCE_PROFILE_CAPS_P2P;
		return NVML_SUCCESS;
	}
	return NVML_ERROR_INVALID_ARGUMENT;
}

/* profile is an NVML_GPU_INSTANCE_PROFILE_* index, not a profile ID. */
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
						 nvmlGpuInstanceProfileInfo_t *info)
{
	const fake_gpu *g;
	const fake_mig_profile *p = NULL;
	if (!info)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = profile_enter(device, FC_nvmlDeviceGetGpuInstanceProfileInfo, &g);
	if (r != NVML_SUCCESS)
		return r;
	if ((r = by_index(g, profile, &p)) != NVML_SUCCESS)
		return fake_leave(r);
	memset(info, 0, sizeof *info);
	info->id = p->id;
	info->isP2pSupported = 1;
	info->sliceCount = p->slice_count;
	info->instanceCount = p->instance_count;
	info->multiprocessorCount = p->multiprocessor_count;
	info->memorySizeMB = p->memory_mib;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
						  nvmlGpuInstanceProfileInfo_v2_t *info)
{
	const fake_gpu *g;
	const fake_mig_profile *p = NULL;
	if (!info)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = profile_enter(device, FC_nvmlDeviceGetGpuInstanceProfileInfoV, &g);
	if (r != NVML_SUCCESS)
		return r;
	if ((r = by_index(g, profile, &p)) != NVML_SUCCESS)
		return fake_leave(r);
	return fake_leave(fill_versioned(p, info));
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoByIdV(nvmlDevice_t device, unsigned int profileId,
						      nvmlGpuInstanceProfileInfo_v2_t *info)
{
	const fake_gpu *g;
	const fake_mig_profile *p = NULL;
	if (!info)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = profile_enter(device, FC_nvmlDeviceGetGpuInstanceProfileInfoByIdV, &g);
	if (r != NVML_SUCCESS)
		return r;
	if ((r = by_id(g, profileId, &p)) != NVML_SUCCESS)
		return fake_leave(r);
	return fake_leave(fill_versioned(p, info));
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gpuInstance)
{
	const fake_gpu *g;
	double t;
	int idx;
	if (!gpuInstance)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetGpuInstanceById, &g, &idx, &t);
	if (r != NVML_SUCCESS)
		return r;
	if (!g->mig.enabled)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	for (int i = 0; i < g->mig.ngis; i++)
		if (g->mig.gis[i].id == id) {
			gpuInstance->handle = &gi_handles[idx * FAKE_MAX_GI + i];
			return fake_leave(NVML_SUCCESS);
		}
	return fake_leave(NVML_ERROR_NOT_FOUND);
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info)
{
	const fake_gpu *g;
	double t;
	int slot = gi_slot_of(gpuInstance);
	if (slot < 0 || !info)
		return NVML_ERROR_INVALID_ARGUMENT;
	int idx = slot / FAKE_MAX_GI, i = slot % FAKE_MAX_GI;
	nvmlReturn_t r = fake_index_enter((unsigned int)idx, FC_nvmlGpuInstanceGetInfo, &g, &t);
	if (r != NVML_SUCCESS)
		return r;
	/* A handle from an earlier scenario may name an instance no longer there. */
	if (!g->mig.enabled || i >= g->mig.ngis)
		return fake_leave(NVML_ERROR_INVALID_ARGUMENT);
	const fake_gpu_instance *gi = &g->mig.gis[i];
	memset(info, 0, sizeof *info);
	info->device = fake_handle(idx);
	info->id = gi->id;
	info->profileId = gi->profile->id;
	info->placement.start = gi->placement_start;
	info->placement.size = gi->profile->slice_count;
	return fake_leave(NVML_SUCCESS);
}
