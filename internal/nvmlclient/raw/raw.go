//go:build cgo

package raw

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

// The NVML entry points go-nvml wraps in unbounded loops, called directly.
typedef int (*nvml_by_uuid_fn)(const char *uuid, void **device);
typedef int (*nvml_procs_fn)(void *device, unsigned int *count, void *infos);
typedef int (*nvml_putil_fn)(void *device, void *samples, unsigned int *count, unsigned long long last_seen);

// nvml_lookup finds name in the NVML library that go-nvml already loaded
// from path (RTLD_NOLOAD: never loads a second copy).
static void *nvml_lookup(const char *path, const char *name) {
	void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return NULL;
	void *sym = dlsym(h, name);
	dlclose(h);
	return sym;
}

static int nvml_by_uuid(void *fn, const char *uuid, void **device) {
	return ((nvml_by_uuid_fn)fn)(uuid, device);
}

static int nvml_procs(void *fn, void *device, unsigned int *count, void *infos) {
	return ((nvml_procs_fn)fn)(device, count, infos);
}

static int nvml_putil(void *fn, void *device, void *samples, unsigned int *count, unsigned long long last_seen) {
	return ((nvml_putil_fn)fn)(device, samples, count, last_seen);
}
*/
import "C"

import (
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// maxProcessSamples caps the GetProcessUtilization buffer: NVML keeps a
// ring of samples per process.
const maxProcessSamples = 1 << 16

// listAttempts bounds the size-query-then-fill rounds of one list call:
// a list that keeps growing between them is given up for the scrape.
const listAttempts = 3

// Lib holds the entry points that the client calls itself rather than
// through go-nvml, whose wrappers of these loop without bound or re-slice
// past their buffer (GetProcessUtilization: "slice bounds out of range
// [:10] with capacity 5" when samples arrive between its size query and
// its fill, as NVML then writes the larger count back).
type Lib struct {
	byUUID, computeProcs, graphicsProcs, mpsProcs, procUtil unsafe.Pointer
}

// Load looks the entry points up in the library go-nvml loaded from
// path; nil when it has none of them (go-nvml's mocks).
func Load(path string) *Lib {
	if path == "" {
		path = "libnvidia-ml.so.1"
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	sym := func(names ...string) unsafe.Pointer {
		for _, n := range names {
			cn := C.CString(n)
			p := C.nvml_lookup(cpath, cn)
			C.free(unsafe.Pointer(cn))
			if p != nil {
				return p
			}
		}
		return nil
	}
	r := &Lib{
		byUUID: sym("nvmlDeviceGetHandleByUUID"),
		// v2 and v3 share nvmlProcessInfo_t, which nvml.ProcessInfo mirrors.
		computeProcs:  sym("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"),
		graphicsProcs: sym("nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2"),
		mpsProcs:      sym("nvmlDeviceGetMPSComputeRunningProcesses_v3", "nvmlDeviceGetMPSComputeRunningProcesses_v2"),
		procUtil:      sym("nvmlDeviceGetProcessUtilization"),
	}
	if r.byUUID == nil {
		return nil
	}
	return r
}

// Device is one GPU's handle as the C library knows it.
type Device struct {
	lib    *Lib
	handle unsafe.Pointer
}

// Device resolves uuid to its C handle.
func (r *Lib) Device(uuid string) (Device, nvml.Return) {
	if r == nil {
		return Device{}, nvml.ERROR_FUNCTION_NOT_FOUND
	}
	cu := C.CString(uuid)
	defer C.free(unsafe.Pointer(cu))
	var h unsafe.Pointer
	ret := nvml.Return(C.nvml_by_uuid(r.byUUID, cu, &h))
	return Device{lib: r, handle: h}, ret
}

// OK reports whether d has a handle to call with.
func (d Device) OK() bool { return d.lib != nil && d.handle != nil }

// ErrTooMany is what RunningProcesses answers past its limit.
const ErrTooMany = nvml.Return(-2) // -1 is call's panicked (call/reading.go)

// RunningProcesses lists the compute or graphics processes with a buffer of
// at most most entries: ErrTooMany past it.
func (d Device) RunningProcesses(graphics bool, most int) ([]nvml.ProcessInfo, nvml.Return) {
	fn := d.lib.computeProcs
	if graphics {
		fn = d.lib.graphicsProcs
	}
	return d.list(fn, most)
}

// MPSProcesses lists the MPS clients among the compute processes, as
// RunningProcesses does.
func (d Device) MPSProcesses(most int) ([]nvml.ProcessInfo, nvml.Return) {
	return d.list(d.lib.mpsProcs, most)
}

// list calls one of the process-list entry points.
func (d Device) list(fn unsafe.Pointer, most int) ([]nvml.ProcessInfo, nvml.Return) {
	if fn == nil {
		return nil, nvml.ERROR_FUNCTION_NOT_FOUND
	}
	var count C.uint
	ret := nvml.Return(C.nvml_procs(fn, d.handle, &count, nil))
	for attempt := 0; attempt < listAttempts; attempt++ {
		switch {
		case ret == nvml.SUCCESS && count == 0:
			return []nvml.ProcessInfo{}, nvml.SUCCESS
		case ret != nvml.SUCCESS && ret != nvml.ERROR_INSUFFICIENT_SIZE:
			return nil, ret
		case int(count) > most:
			return nil, ErrTooMany
		}
		// Room for a few that start between the query and the fill.
		infos := make([]nvml.ProcessInfo, min(int(count)+int(count)/8+8, most))
		n := C.uint(len(infos))
		ret = nvml.Return(C.nvml_procs(fn, d.handle, &n, unsafe.Pointer(&infos[0])))
		if ret == nvml.SUCCESS && int(n) <= len(infos) {
			return infos[:n], nvml.SUCCESS
		}
		// INSUFFICIENT_SIZE: NVML wrote back the count it needs now.
		count = max(n, C.uint(len(infos)+1))
	}
	return nil, nvml.ERROR_INSUFFICIENT_SIZE
}

// ProcessUtilization reads the samples newer than lastSeen: NOT_FOUND when
// there are none.
func (d Device) ProcessUtilization(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	fn := d.lib.procUtil
	if fn == nil {
		return nil, nvml.ERROR_FUNCTION_NOT_FOUND
	}
	var count C.uint
	ret := nvml.Return(C.nvml_putil(fn, d.handle, nil, &count, C.ulonglong(lastSeen)))
	for attempt := 0; attempt < listAttempts; attempt++ {
		switch {
		case (ret == nvml.SUCCESS || ret == nvml.ERROR_INSUFFICIENT_SIZE) && count == 0:
			return nil, nvml.ERROR_NOT_FOUND
		case ret != nvml.SUCCESS && ret != nvml.ERROR_INSUFFICIENT_SIZE:
			return nil, ret
		case int(count) > maxProcessSamples:
			return nil, nvml.ERROR_INSUFFICIENT_SIZE
		}
		samples := make([]nvml.ProcessUtilizationSample, min(int(count)+int(count)/4+16, maxProcessSamples))
		n := C.uint(len(samples))
		ret = nvml.Return(C.nvml_putil(fn, d.handle, unsafe.Pointer(&samples[0]), &n, C.ulonglong(lastSeen)))
		if ret == nvml.SUCCESS && int(n) <= len(samples) {
			return samples[:n], nvml.SUCCESS
		}
		count = max(n, C.uint(len(samples)+1))
	}
	return nil, nvml.ERROR_INSUFFICIENT_SIZE
}
