//go:build cgo

package nvmlclient

import (
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// processWindow is the per-device state of GetProcessUtilization: like the
// device samples, NVML hands back its whole buffer unless told the newest
// timestamp already seen (a naive read drifts from 25 to 46 % on a steady
// 50 % GPU).
type processWindow struct {
	lastSeen uint64
}

type utilSum struct {
	sm, mem, enc, dec float64
	n                 int
}

// fold averages, per PID, the samples newer than lastSeen, and moves
// lastSeen to the newest. Out-of-order and repeated samples are handled as
// in window.average.
func (w *processWindow) fold(samples []nvml.ProcessUtilizationSample) map[uint32]utilSum {
	out := map[uint32]utilSum{}
	newest := w.lastSeen
	for _, s := range samples {
		if s.TimeStamp <= w.lastSeen {
			continue
		}
		u := out[s.Pid]
		u.sm += float64(s.SmUtil)
		u.mem += float64(s.MemUtil)
		u.enc += float64(s.EncUtil)
		u.dec += float64(s.DecUtil)
		u.n++
		out[s.Pid] = u
		newest = max(newest, s.TimeStamp)
	}
	w.lastSeen = newest
	for pid, u := range out {
		n := float64(u.n)
		out[pid] = utilSum{sm: u.sm / n, mem: u.mem / n, enc: u.enc / n, dec: u.dec / n, n: u.n}
	}
	return out
}

// readProcesses lists the GPU's processes with their memory, and their
// utilization when a list holds any. The lists and the utilization are all
// or nothing: a failed call leaves the processes out of this scrape.
func (r *reading) readProcesses(s *Sample) {
	if !r.d.readProcesses {
		return
	}
	h := r.d.handle
	failures := len(r.failed)
	byPID := map[uint32]*Process{}
	get := func(pid uint32, gi, ci uint32) *Process {
		p, ok := byPID[pid]
		if !ok {
			p = &Process{PID: pid, GPUInstanceID: gi, ComputeInstanceID: ci}
			byPID[pid] = p
		}
		return p
	}
	listed, tooMany := false, false
	var infos []nvml.ProcessInfo
	list := func(c call, graphics bool) bool {
		ret, made := r.call(c, func() (ret nvml.Return) { infos, ret = runningProcesses(r.d.raw, h, graphics); return })
		if made && ret == errTooMany {
			tooMany = true
			r.tooManyProcesses(c)
			return false
		}
		return made && r.result(c, ret)
	}
	if list(callComputeProcesses, false) {
		listed = true
		for _, in := range infos {
			p := get(in.Pid, in.GpuInstanceId, in.ComputeInstanceId)
			p.Compute = true
			p.ComputeMemoryBytes = addOpt(p.ComputeMemoryBytes, memoryOpt(in.UsedGpuMemory))
		}
	}
	if !tooMany && list(callGraphicsProcesses, true) {
		listed = true
		for _, in := range infos {
			p := get(in.Pid, in.GpuInstanceId, in.ComputeInstanceId)
			p.Graphics = true
			p.GraphicsMemoryBytes = addOpt(p.GraphicsMemoryBytes, memoryOpt(in.UsedGpuMemory))
		}
	}
	if !listed || tooMany || len(r.failed) > failures {
		return // a partial list would undercount: none rather than some
	}

	// GetProcessUtilization costs 1.4-1.6 ms: asked only when a list holds
	// a process.
	var util map[uint32]utilSum
	utilOK := false
	if len(byPID) > 0 {
		var samples []nvml.ProcessUtilizationSample
		ret, made := r.call(callProcessUtilization, func() (ret nvml.Return) {
			samples, ret = r.d.processUtilization(r.d.procWindow.lastSeen)
			return ret
		})
		switch {
		case !made:
		case ret == nvml.ERROR_NOT_FOUND:
			utilOK = true // no sample since the last read: every process idle
		case r.result(callProcessUtilization, ret):
			util = r.d.procWindow.fold(samples)
			utilOK = true
		}
	}
	if len(r.failed) > failures {
		return
	}
	s.ProcessesListed = true
	for _, p := range byPID {
		if utilOK {
			u := util[p.PID]
			p.SMUtil = some(percentToFraction(u.sm))
			p.MemoryControllerUtil = some(percentToFraction(u.mem))
			p.EncoderUtil = some(percentToFraction(u.enc))
			p.DecoderUtil = some(percentToFraction(u.dec))
		}
		s.Processes = append(s.Processes, *p)
	}
}

// primeProcessWindow moves the process window to the newest sample, so the
// first read averages from Open on.
func (d *Device) primeProcessWindow() {
	r := &reading{d: d}
	var samples []nvml.ProcessUtilizationSample
	ret, made := r.call(callProcessUtilization, func() (ret nvml.Return) {
		samples, ret = d.processUtilization(0)
		return ret
	})
	if made && ret != nvml.ERROR_NOT_FOUND && r.result(callProcessUtilization, ret) {
		d.procWindow.fold(samples)
	}
	d.support.flushLogs(d.logger)
}

func addOpt(a, b Opt[uint64]) Opt[uint64] {
	switch {
	case !b.OK:
		return a
	case !a.OK:
		return b
	default:
		return some(a.Value + b.Value)
	}
}

// memoryOpt reads a process's memory, absent for NVML_VALUE_NOT_AVAILABLE.
func memoryOpt(v uint64) Opt[uint64] {
	if v == math.MaxUint64 {
		return Opt[uint64]{}
	}
	return some(v)
}
