/*
 * Area "processes": the processes running on each GPU.
 *
 * Key: processes: [{pid, name, used_memory_bytes, type, from, until,
 * sm_percent, memory_percent, encoder_percent, decoder_percent}], type
 * "compute" (default), "graphics" or "compute+graphics"; from/until (seconds,
 * until null = forever) bound when the process runs; the *_percent values
 * over time feed nvmlDeviceGetProcessUtilization, which serves one sample per
 * running process per sampling tick (like nvmlDeviceGetSamples), only those
 * newer than the lastSeen timestamp. Without the key, the process calls
 * answer NVML_ERROR_NOT_SUPPORTED; with an empty list, none run.
 * nvmlSystemGetProcessName answers the name of any listed pid.
 *
 * MPS: "mps": "server" or "client" on a compute process, as an H200 with
 * driver 580 shows CUDA MPS: the compute list holds the server and the
 * clients, nvmlDeviceGetMPSComputeRunningProcesses_v3 the clients alone, and
 * nvmlDeviceGetProcessUtilization samples the server alone (its sm_percent
 * stands for every client's work): a client has no sample, whatever its
 * *_percent keys say.
 *
 * MIG: gpu_instance_id and compute_instance_id (both or neither) place a
 * process on a MIG device; in MIG mode every process needs them (mig.c
 * checks them). The GPU's handle lists every process with its instance ids,
 * a MIG device's handle only its own. In MIG mode
 * nvmlDeviceGetProcessUtilization answers NVML_ERROR_NOT_SUPPORTED, as the
 * driver does.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fakenvml.h"

static const char *const keys[] = {"processes", NULL};

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	(void)index;
	const cJSON *ps = cJSON_GetObjectItemCaseSensitive(gpu, "processes");
	if (!ps)
		return true;
	char p[128];
	snprintf(p, sizeof p, "%s.processes", path);
	if (!cJSON_IsArray(ps))
		return fake_fail(c, p, "must be an array");
	int n = cJSON_GetArraySize(ps);
	if (n > 100000)
		return fake_fail(c, p, "too many processes");
	fake_process *out = NULL;
	if (n > 0 && !(out = fake_alloc(c, sizeof *out * (size_t)n)))
		return false;
	int i = 0;
	for (const cJSON *it = ps->child; it; it = it->next, i++) {
		char ip[160];
		snprintf(ip, sizeof ip, "%s[%d]", p, i);
		static const char *const pkeys[] = {"pid",             "name",           "used_memory_bytes",
						    "type",            "from",           "until",
						    "sm_percent",      "memory_percent", "encoder_percent",
						    "decoder_percent", "gpu_instance_id", "compute_instance_id",
						    "mps",             NULL};
		unsigned long long pid = 0, used = 0, gi = FAKE_NO_INSTANCE, ci = FAKE_NO_INSTANCE;
		bool has_pid = false, has_gi = false, has_ci = false;
		char type[32] = "compute", mps[16] = "";
		if (!fake_check_keys(c, it, ip, pkeys) || !fake_get_uint(c, it, "pid", ip, &pid, 0xffffffffULL, &has_pid) ||
		    !fake_get_string(c, it, "name", ip, out[i].name, sizeof out[i].name, false) ||
		    !fake_get_uint(c, it, "used_memory_bytes", ip, &used, 1ULL << 52, NULL) ||
		    !fake_get_string(c, it, "type", ip, type, sizeof type, false) ||
		    !fake_get_string(c, it, "mps", ip, mps, sizeof mps, false) ||
		    !fake_get_time(c, it, "from", ip, &out[i].from, 0) || !fake_get_time(c, it, "until", ip, &out[i].until, INFINITY) ||
		    !fake_get_signal(c, it, "sm_percent", ip, 0, 100, &out[i].sm) ||
		    !fake_get_signal(c, it, "memory_percent", ip, 0, 100, &out[i].memory) ||
		    !fake_get_signal(c, it, "encoder_percent", ip, 0, 100, &out[i].encoder) ||
		    !fake_get_signal(c, it, "decoder_percent", ip, 0, 100, &out[i].decoder) ||
		    !fake_get_uint(c, it, "gpu_instance_id", ip, &gi, FAKE_NO_INSTANCE - 1, &has_gi) ||
		    !fake_get_uint(c, it, "compute_instance_id", ip, &ci, FAKE_NO_INSTANCE - 1, &has_ci))
			return false;
		if (!has_pid)
			return fake_fail(c, ip, "\"pid\" is required");
		if (has_gi != has_ci)
			return fake_fail(c, ip, "\"gpu_instance_id\" and \"compute_instance_id\" go together");
		out[i].gpu_instance_id = (unsigned int)gi;
		out[i].compute_instance_id = (unsigned int)ci;
		out[i].pid = (unsigned int)pid;
		out[i].used_memory = used;
		if (strcmp(type, "compute") == 0)
			out[i].compute = true;
		else if (strcmp(type, "graphics") == 0)
			out[i].graphics = true;
		else if (strcmp(type, "compute+graphics") == 0)
			out[i].compute = out[i].graphics = true;
		else
			return fake_fail(c, ip, "type \"%s\" is not compute, graphics or compute+graphics", type);
		if (strcmp(mps, "server") == 0)
			out[i].mps = FAKE_MPS_SERVER;
		else if (strcmp(mps, "client") == 0)
			out[i].mps = FAKE_MPS_CLIENT;
		else if (mps[0])
			return fake_fail(c, ip, "mps \"%s\" is not server or client", mps);
		if (out[i].mps && !out[i].compute)
			return fake_fail(c, ip, "an MPS process is a compute process");
	}
	g->has_processes = true;
	g->processes = out;
	g->nprocesses = n;
	return true;
}

const fake_area fake_area_processes = {keys, parse};

/* grown answers an injected NVML_ERROR_INSUFFICIENT_SIZE the way NVML does
 * when the list grew past the caller's buffer between its size query and
 * its fill: it writes back the count needed now, one more than the buffer
 * held. (Leaving the count unchanged, as NVML never does, let go-nvml's
 * doubling loop run without bound.) */
static nvmlReturn_t grown(unsigned int *count)
{
	if (*count < 0x7fffffffu)
		(*count)++;
	return NVML_ERROR_INSUFFICIENT_SIZE;
}

enum { LIST_COMPUTE, LIST_GRAPHICS, LIST_MPS };

/* listed reports whether process p is in the list of running processes at
 * t that a GPU's handle (mig NULL) or a MIG device's handle answers. */
static bool listed(const fake_process *p, int list, const fake_mig_device *mig, double t)
{
	bool in = list == LIST_GRAPHICS ? p->graphics : list == LIST_MPS ? p->mps == FAKE_MPS_CLIENT : p->compute;
	if (!in || t < p->from || t >= p->until)
		return false;
	return !mig || (p->gpu_instance_id == mig->gpu_instance_id && p->compute_instance_id == mig->compute_instance_id);
}

/* running fills infos, an array of nvmlProcessInfo_v1_t (v1) or of
 * nvmlProcessInfo_t (v2, v3). */
static nvmlReturn_t running(nvmlDevice_t device, fake_call call, int list, unsigned int *infoCount, void *out,
			    int version)
{
	const fake_gpu *g;
	const fake_mig_device *mig;
	double t;
	if (!infoCount)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_any_enter(device, call, &g, NULL, &mig, &t);
	if (r == NVML_ERROR_INSUFFICIENT_SIZE)
		return grown(infoCount);
	if (r != NVML_SUCCESS)
		return r;
	if (!g->has_processes)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	unsigned int n = 0;
	for (int i = 0; i < g->nprocesses; i++)
		if (listed(&g->processes[i], list, mig, t))
			n++;
	if (!out || *infoCount < n) {
		/* a size query, or too small a buffer: say how many there are */
		*infoCount = n;
		return fake_leave(n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE);
	}
	unsigned int k = 0;
	for (int i = 0; i < g->nprocesses; i++) {
		const fake_process *p = &g->processes[i];
		if (!listed(p, list, mig, t))
			continue;
		if (version == 1) {
			nvmlProcessInfo_v1_t *infos = out;
			memset(&infos[k], 0, sizeof infos[k]);
			infos[k].pid = p->pid;
			infos[k].usedGpuMemory = p->used_memory;
		} else {
			nvmlProcessInfo_t *infos = out;
			memset(&infos[k], 0, sizeof infos[k]);
			infos[k].pid = p->pid;
			infos[k].usedGpuMemory = p->used_memory;
			infos[k].gpuInstanceId = p->gpu_instance_id;
			infos[k].computeInstanceId = p->compute_instance_id;
		}
		k++;
	}
	*infoCount = k;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
						     nvmlProcessInfo_t *infos)
{
	return running(device, FC_nvmlDeviceGetComputeRunningProcesses_v3, LIST_COMPUTE, infoCount, infos, 3);
}

nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
							nvmlProcessInfo_t *infos)
{
	return running(device, FC_nvmlDeviceGetMPSComputeRunningProcesses_v3, LIST_MPS, infoCount, infos, 3);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
						      nvmlProcessInfo_t *infos)
{
	return running(device, FC_nvmlDeviceGetGraphicsRunningProcesses_v3, LIST_GRAPHICS, infoCount, infos, 3);
}

/* The older versions (compat.c declares them under their own names). */
nvmlReturn_t fake_running_processes(nvmlDevice_t device, bool graphics, unsigned int *infoCount, void *infos, int version)
{
	return running(device,
		       graphics ? FC_nvmlDeviceGetGraphicsRunningProcesses_v3 : FC_nvmlDeviceGetComputeRunningProcesses_v3,
		       graphics ? LIST_GRAPHICS : LIST_COMPUTE, infoCount, infos, version);
}

nvmlReturn_t fake_mps_processes(nvmlDevice_t device, unsigned int *infoCount, void *infos, int version)
{
	return running(device, FC_nvmlDeviceGetMPSComputeRunningProcesses_v3, LIST_MPS, infoCount, infos, version);
}

nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length)
{
	const fake_scenario *s;
	double t;
	if (!name || length == 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_system_enter(&s, &t);
	if (r != NVML_SUCCESS)
		return r;
	for (int i = 0; i < s->ngpus; i++)
		for (int j = 0; j < s->gpus[i].nprocesses; j++)
			if (s->gpus[i].processes[j].pid == pid)
				return fake_leave(fake_copy_string(s->gpus[i].processes[j].name, name, length));
	return fake_leave(NVML_ERROR_NOT_FOUND);
}

static unsigned int percent(const fake_signal *s, double t)
{
	if (!fake_signal_set(s))
		return 0;
	double v = fake_signal_at(s, t);
	return (unsigned int)llround(v < 0 ? 0 : v > 100 ? 100 : v);
}

/* sampled reports whether p has a utilization sample at tk: an MPS client
 * never has (the server's stands for it). */
static bool sampled(const fake_process *p, double tk)
{
	return tk >= p->from && tk < p->until && p->mps != FAKE_MPS_CLIENT;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
					     unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp)
{
	const fake_gpu *g;
	double t;
	if (!processSamplesCount)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetProcessUtilization, &g, NULL, &t);
	if (r == NVML_ERROR_INSUFFICIENT_SIZE)
		return grown(processSamplesCount);
	if (r != NVML_SUCCESS)
		return r;
	if (!g->has_processes || g->mig.enabled)
		return fake_leave(NVML_ERROR_NOT_SUPPORTED);
	const fake_scenario *s = fake_current();
	double hz = s->sample_hz;
	long long newest = (long long)floor(t * hz);
	long long first = newest - (long long)s->sample_buffer + 1;
	if (first < 1)
		first = 1;
	while (first <= newest && fake_wall_us((double)first / hz) <= lastSeenTimeStamp)
		first++;
	unsigned long long n = 0;
	for (long long k = first; k <= newest; k++)
		for (int i = 0; i < g->nprocesses; i++)
			if (sampled(&g->processes[i], (double)k / hz))
				n++;
	if (n == 0)
		return fake_leave(NVML_ERROR_NOT_FOUND);
	if (!utilization || *processSamplesCount < n) {
		*processSamplesCount = (unsigned int)n;
		return fake_leave(NVML_ERROR_INSUFFICIENT_SIZE);
	}
	unsigned int m = 0;
	for (long long k = first; k <= newest; k++) {
		double tk = (double)k / hz;
		for (int i = 0; i < g->nprocesses; i++) {
			const fake_process *p = &g->processes[i];
			if (!sampled(p, tk))
				continue;
			memset(&utilization[m], 0, sizeof utilization[m]);
			utilization[m].pid = p->pid;
			utilization[m].timeStamp = fake_wall_us(tk);
			utilization[m].smUtil = percent(&p->sm, tk);
			utilization[m].memUtil = percent(&p->memory, tk);
			utilization[m].encUtil = percent(&p->encoder, tk);
			utilization[m].decUtil = percent(&p->decoder, tk);
			m++;
		}
	}
	*processSamplesCount = m;
	return fake_leave(NVML_SUCCESS);
}
