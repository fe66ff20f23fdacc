//go:build cgo

package call

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/raw"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// The list calls go through raw/raw.go where the library is a real one
// (bounded buffers); go-nvml's mocks answer them through the interface.

// RunningProcesses lists h's compute or graphics processes, through c
// where it is a real library's; raw.ErrTooMany past
// sample.MaxProcessesPerGPU.
func RunningProcesses(c raw.Device, h nvml.Device, graphics bool) ([]nvml.ProcessInfo, nvml.Return) {
	if c.OK() {
		return c.RunningProcesses(graphics, sample.MaxProcessesPerGPU)
	}
	var infos []nvml.ProcessInfo
	var ret nvml.Return
	if graphics {
		infos, ret = h.GetGraphicsRunningProcesses()
	} else {
		infos, ret = h.GetComputeRunningProcesses()
	}
	if ret == nvml.SUCCESS && len(infos) > sample.MaxProcessesPerGPU {
		return nil, raw.ErrTooMany
	}
	return infos, ret
}

// MPSClients lists h's MPS clients (nvmlDeviceGetMPSComputeRunningProcesses,
// _v3 where the driver has it), as RunningProcesses lists the others.
func MPSClients(c raw.Device, h nvml.Device) ([]nvml.ProcessInfo, nvml.Return) {
	if c.OK() {
		return c.MPSProcesses(sample.MaxProcessesPerGPU)
	}
	infos, ret := h.GetMPSComputeRunningProcesses()
	if ret == nvml.SUCCESS && len(infos) > sample.MaxProcessesPerGPU {
		return nil, raw.ErrTooMany
	}
	return infos, ret
}

// ProcessUtilization reads the process samples newer than lastSeen;
// NOT_FOUND when there is none.
func (d *GPU) ProcessUtilization(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	if d.Raw.OK() {
		return d.Raw.ProcessUtilization(lastSeen)
	}
	samples, ret := d.Handle.GetProcessUtilization(lastSeen)
	if ret == nvml.ERROR_INSUFFICIENT_SIZE && len(samples) == 0 {
		// go-nvml's answer to a size query that found no sample.
		return nil, nvml.ERROR_NOT_FOUND
	}
	return samples, ret
}

// TooManyProcesses logs, once per GPU, that its process list was dropped.
func (d *GPU) TooManyProcesses(c ID) {
	d.LogOnce("too-many-processes", func(l *zap.Logger) {
		l.Warn("More processes on this GPU than the receiver lists; its process metrics are dropped while that lasts (logged once)",
			zap.String("call", c.String()), zap.Int("max_processes", sample.MaxProcessesPerGPU))
	})
}
