//go:build cgo

package nvmlclient

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/raw"
	"go.uber.org/zap"
)

// The list calls go through raw/raw.go where the library is a real one
// (bounded buffers); go-nvml's mocks answer them through the interface.

// runningProcesses lists h's compute or graphics processes; raw.ErrTooMany
// past MaxProcessesPerGPU.
func runningProcesses(c raw.Device, h nvml.Device, graphics bool) ([]nvml.ProcessInfo, nvml.Return) {
	if c.OK() {
		return c.RunningProcesses(graphics, MaxProcessesPerGPU)
	}
	var infos []nvml.ProcessInfo
	var ret nvml.Return
	if graphics {
		infos, ret = h.GetGraphicsRunningProcesses()
	} else {
		infos, ret = h.GetComputeRunningProcesses()
	}
	if ret == nvml.SUCCESS && len(infos) > MaxProcessesPerGPU {
		return nil, raw.ErrTooMany
	}
	return infos, ret
}

// processUtilization reads the process samples newer than lastSeen;
// NOT_FOUND when there is none.
func (d *Device) processUtilization(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	if d.raw.OK() {
		return d.raw.ProcessUtilization(lastSeen)
	}
	samples, ret := d.handle.GetProcessUtilization(lastSeen)
	if ret == nvml.ERROR_INSUFFICIENT_SIZE && len(samples) == 0 {
		// go-nvml's answer to a size query that found no sample.
		return nil, nvml.ERROR_NOT_FOUND
	}
	return samples, ret
}

// tooManyProcesses logs, once per GPU, that its process list was dropped.
func (r *reading) tooManyProcesses(c call) {
	r.d.logOnce("too-many-processes", func(l *zap.Logger) {
		l.Warn("More processes on this GPU than the receiver lists; its process metrics are dropped while that lasts (logged once)",
			zap.String("call", c.String()), zap.Int("max_processes", MaxProcessesPerGPU))
	})
}
