/*
 * Area "device": the GPUs' identity, the device count and handles.
 *
 * Keys: name, uuid, serial, pci_bus_id, pci_device_id, pci_subsystem_id,
 * minor_number, architecture, cuda_compute_capability.
 *
 * nvmlDeviceGetUUID and nvmlDeviceGetHandleByUUID also serve MIG devices
 * (mig.c); the other identity calls answer NOT_SUPPORTED on a MIG handle.
 *
 * Nothing here may pass for a real GPU: a name without "SIMULATED" gets
 * " (SIMULATED)" appended, a serial without it gets a "SIMULATED-" prefix.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "fakenvml.h"

static const char *const keys[] = {"name",         "uuid",         "serial",
				   "pci_bus_id",   "pci_device_id", "pci_subsystem_id",
				   "minor_number", "architecture",  "cuda_compute_capability",
				   NULL};

static const struct {
	const char *name;
	unsigned int arch;
} archs[] = {
	{"kepler", NVML_DEVICE_ARCH_KEPLER}, {"maxwell", NVML_DEVICE_ARCH_MAXWELL}, {"pascal", NVML_DEVICE_ARCH_PASCAL},
	{"volta", NVML_DEVICE_ARCH_VOLTA},   {"turing", NVML_DEVICE_ARCH_TURING},   {"ampere", NVML_DEVICE_ARCH_AMPERE},
	{"ada", NVML_DEVICE_ARCH_ADA},       {"hopper", NVML_DEVICE_ARCH_HOPPER},   {"blackwell", NVML_DEVICE_ARCH_BLACKWELL},
	{"unknown", NVML_DEVICE_ARCH_UNKNOWN},
};

static bool parse(fake_pctx *c, const cJSON *gpu, const char *path, int index, fake_gpu *g)
{
	char p[128];
	snprintf(g->name, sizeof g->name, "NVIDIA H200 (SIMULATED)");
	snprintf(g->uuid, sizeof g->uuid, "GPU-51a1a7ed-0000-4000-8000-%012d", index);
	snprintf(g->serial, sizeof g->serial, "SIMULATED-%04d", index);
	snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "00000000:%02X:00.0", 0x18 + index);
	g->pci_device_id = 0x233510DE; /* H200 */
	g->pci_subsystem_id = 0x18BE10DE;
	g->minor_number = (unsigned int)index;
	g->architecture = NVML_DEVICE_ARCH_HOPPER;
	g->cc_major = 9;
	g->cc_minor = 0;

	if (!fake_get_string(c, gpu, "name", path, g->name, sizeof g->name, false) ||
	    !fake_get_string(c, gpu, "uuid", path, g->uuid, sizeof g->uuid, false) ||
	    !fake_get_string(c, gpu, "serial", path, g->serial, sizeof g->serial, false) ||
	    !fake_get_string(c, gpu, "pci_bus_id", path, g->pci_bus_id, sizeof g->pci_bus_id, false))
		return false;
	if (!g->uuid[0]) {
		snprintf(p, sizeof p, "%s.uuid", path);
		return fake_fail(c, p, "must not be empty");
	}
	if (!strstr(g->name, "SIMULATED")) {
		size_t room = sizeof g->name - sizeof " (SIMULATED)";
		g->name[room] = 0;
		strcat(g->name, " (SIMULATED)");
	}
	if (!strstr(g->serial, "SIMULATED")) {
		char s[sizeof g->serial];
		if (snprintf(s, sizeof s, "SIMULATED-%s", g->serial) >= (int)sizeof s) {
			snprintf(p, sizeof p, "%s.serial", path);
			return fake_fail(c, p, "is too long to carry the \"SIMULATED-\" prefix (%zu bytes at most)",
					 sizeof g->serial - sizeof "SIMULATED-");
		}
		strcpy(g->serial, s);
	}
	unsigned int dom, bus, dev, fn;
	char tail;
	if (sscanf(g->pci_bus_id, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4 || bus > 0xff || dev > 0x1f ||
	    fn > 7) {
		snprintf(p, sizeof p, "%s.pci_bus_id", path);
		return fake_fail(c, p, "\"%s\" is not a PCI bus id like 00000000:19:00.0", g->pci_bus_id);
	}
	g->pci_domain = dom;
	g->pci_bus = bus;
	g->pci_device = dev;

	unsigned long long v = g->pci_device_id;
	if (!fake_get_uint(c, gpu, "pci_device_id", path, &v, 0xffffffffULL, NULL))
		return false;
	g->pci_device_id = (unsigned int)v;
	v = g->pci_subsystem_id;
	if (!fake_get_uint(c, gpu, "pci_subsystem_id", path, &v, 0xffffffffULL, NULL))
		return false;
	g->pci_subsystem_id = (unsigned int)v;
	v = g->minor_number;
	if (!fake_get_uint(c, gpu, "minor_number", path, &v, 0xffff, NULL))
		return false;
	g->minor_number = (unsigned int)v;

	char arch[32] = "";
	if (!fake_get_string(c, gpu, "architecture", path, arch, sizeof arch, false))
		return false;
	if (arch[0]) {
		bool found = false;
		for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
			if (strcmp(arch, archs[i].name) == 0) {
				g->architecture = archs[i].arch;
				found = true;
			}
		if (!found) {
			snprintf(p, sizeof p, "%s.architecture", path);
			return fake_fail(c, p, "\"%s\" is not one of kepler ... blackwell, unknown", arch);
		}
	}
	char cc[16] = "";
	if (!fake_get_string(c, gpu, "cuda_compute_capability", path, cc, sizeof cc, false))
		return false;
	if (cc[0] && (sscanf(cc, "%d.%d%c", &g->cc_major, &g->cc_minor, &tail) != 2 || g->cc_major < 0 ||
		      g->cc_minor < 0)) {
		snprintf(p, sizeof p, "%s.cuda_compute_capability", path);
		return fake_fail(c, p, "\"%s\" is not like \"9.0\"", cc);
	}
	return true;
}

const fake_area fake_area_device = {keys, parse};

/* ---- NVML ------------------------------------------------------------------------ */

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
	const fake_scenario *s;
	double t;
	if (!deviceCount)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_system_enter(&s, &t);
	if (r != NVML_SUCCESS)
		return r;
	*deviceCount = (unsigned int)s->ngpus;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	const fake_gpu *g;
	double t;
	if (!device)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_index_enter(index, FC_nvmlDeviceGetHandleByIndex_v2, &g, &t);
	if (r != NVML_SUCCESS)
		return r;
	*device = fake_handle((int)index);
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
	const fake_scenario *s;
	double t;
	if (!uuid || !device)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_system_enter(&s, &t);
	if (r != NVML_SUCCESS)
		return r;
	for (int i = 0; i < s->ngpus; i++) {
		const fake_gpu *g = &s->gpus[i];
		nvmlReturn_t found = t >= g->lost_at ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
		if (strcmp(g->uuid, uuid) == 0) {
			*device = fake_handle(i);
			return fake_leave(found);
		}
		for (int k = 0; g->mig.enabled && k < g->mig.ndevices; k++)
			if (strcmp(g->mig.devices[k].uuid, uuid) == 0 && fake_mig_present(&g->mig.devices[k], t)) {
				*device = fake_mig_handle(i, k); /* a MIG UUID names its MIG device */
				return fake_leave(found);
			}
	}
	return fake_leave(NVML_ERROR_NOT_FOUND);
}

#define STRING_GETTER(fn, field)                                                                   \
	nvmlReturn_t fn(nvmlDevice_t device, char *out, unsigned int length)                        \
	{                                                                                          \
		const fake_gpu *g;                                                                 \
		double t;                                                                          \
		if (!out)                                                                          \
			return NVML_ERROR_INVALID_ARGUMENT;                                        \
		nvmlReturn_t r = fake_device_enter(device, FC_##fn, &g, NULL, &t);                 \
		if (r != NVML_SUCCESS)                                                             \
			return r;                                                                  \
		return fake_leave(fake_copy_string(g->field, out, length));                        \
	}

STRING_GETTER(nvmlDeviceGetName, name)
STRING_GETTER(nvmlDeviceGetSerial, serial)

/* A MIG device handle answers its MIG UUID. */
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	const fake_gpu *g;
	const fake_mig_device *mig;
	double t;
	if (!uuid)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_any_enter(device, FC_nvmlDeviceGetUUID, &g, NULL, &mig, &t);
	if (r != NVML_SUCCESS)
		return r;
	return fake_leave(fake_copy_string(mig ? mig->uuid : g->uuid, uuid, length));
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
	const fake_gpu *g;
	double t;
	int idx;
	if (!index)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetIndex, &g, &idx, &t);
	if (r != NVML_SUCCESS)
		return r;
	*index = (unsigned int)idx;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	const fake_gpu *g;
	double t;
	if (!pci)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetPciInfo_v3, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	memset(pci, 0, sizeof *pci);
	snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT,
		 g->pci_domain & 0xffff, g->pci_bus, g->pci_device);
	snprintf(pci->busId, sizeof pci->busId, "%s", g->pci_bus_id);
	pci->domain = g->pci_domain;
	pci->bus = g->pci_bus;
	pci->device = g->pci_device;
	pci->pciDeviceId = g->pci_device_id;
	pci->pciSubSystemId = g->pci_subsystem_id;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
	const fake_gpu *g;
	double t;
	if (!minorNumber)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetMinorNumber, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	*minorNumber = g->minor_number;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch)
{
	const fake_gpu *g;
	double t;
	if (!arch)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetArchitecture, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	*arch = g->architecture;
	return fake_leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
	const fake_gpu *g;
	double t;
	if (!major || !minor)
		return NVML_ERROR_INVALID_ARGUMENT;
	nvmlReturn_t r = fake_device_enter(device, FC_nvmlDeviceGetCudaComputeCapability, &g, NULL, &t);
	if (r != NVML_SUCCESS)
		return r;
	*major = g->cc_major;
	*minor = g->cc_minor;
	return fake_leave(NVML_SUCCESS);
}
