//go:build cgo

package collect

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/raw"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// NVML keeps one utilization sample per process (docs/runs/h200-runs.md): the
// newest, a smoothed recent reading whose value changes between reads even
// at one timestamp. It is a share of the GPU's busy time, not of its SM
// work. So a process's reading is its newest sample, an instant reading, and
// what is true over a window is the GPU's busy time split by the shares,
// sampled at every read and, with WithShareInterval, in between
// (SampleShares).

// shareHorizon is how far back a process's newest sample still counts: the
// sample of a busy process moves every 0.4-0.6 s, that of a lightly loaded
// one with gaps of up to 5 s; an older sample is of a process gone idle.
const shareHorizon = 10 * time.Second

// processCollector reads the process lists, their utilization and busy
// shares.
type processCollector struct {
	on     bool // WithProcesses
	shares processShares
	// listed says the newest read listed a process: the share sampler
	// samples only such GPUs.
	listed atomic.Bool
}

func (*processCollector) baseline(*call.GPU) {}

// processShares is the per-device state of the share sampling.
type processShares struct {
	mu sync.Mutex
	// sums adds up, per PID, the process's share in each sample taken
	// since the previous read; samples counts those samples.
	sums    map[uint32]float64
	samples int
	last    time.Time // when the newest sample was taken
}

// newest keeps each PID's newest sample.
func newestByPID(samples []nvml.ProcessUtilizationSample) map[uint32]nvml.ProcessUtilizationSample {
	out := make(map[uint32]nvml.ProcessUtilizationSample, len(samples))
	for _, s := range samples {
		if o, ok := out[s.Pid]; !ok || s.TimeStamp >= o.TimeStamp {
			out[s.Pid] = s
		}
	}
	return out
}

// add folds one reading into the shares: each process's SM reading over the
// sum of all of them. A reading in which no process was busy adds nothing.
func (ps *processShares) add(newest map[uint32]nvml.ProcessUtilizationSample, at time.Time) {
	var total float64
	for _, s := range newest {
		total += float64(s.SmUtil)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.last = at
	if total <= 0 {
		return
	}
	if ps.sums == nil {
		ps.sums = map[uint32]float64{}
	}
	for pid, s := range newest {
		ps.sums[pid] += float64(s.SmUtil) / total
	}
	ps.samples++
}

// take returns each listed PID's share of the busy time since the previous
// take, renormalized over the PIDs listed now, and starts over. ok is false
// when no sample since then saw a busy process.
func (ps *processShares) take(listed map[uint32]*sample.Process) (shares map[uint32]float64, ok bool) {
	ps.mu.Lock()
	sums := ps.sums
	ps.sums, ps.samples = nil, 0
	ps.mu.Unlock()
	var total float64
	for pid := range listed {
		total += sums[pid]
	}
	if total <= 0 {
		return nil, false
	}
	shares = make(map[uint32]float64, len(listed))
	for pid := range listed {
		shares[pid] = sums[pid] / total
	}
	return shares, true
}

// shareSince is the lastSeen argument that returns every process's sample of
// the last shareHorizon.
func shareSince(d *call.GPU) uint64 {
	return uint64(max(d.Plan.Now().Add(-shareHorizon).UnixMicro(), 0))
}

// read lists the GPU's processes with their memory, and their
// utilization when a list holds any. The lists and the utilization are all
// or nothing: a failed call leaves the processes out of this scrape.
func (pc *processCollector) read(r *reading, s *sample.Sample) {
	if !pc.on {
		return
	}
	h := r.GPU.Handle
	failures := len(r.Failed)
	byPID := map[uint32]*sample.Process{}
	get := func(pid uint32, gi, ci uint32) *sample.Process {
		p, ok := byPID[pid]
		if !ok {
			p = &sample.Process{PID: pid, GPUInstanceID: gi, ComputeInstanceID: ci}
			byPID[pid] = p
		}
		return p
	}
	listed, tooMany := false, false
	var infos []nvml.ProcessInfo
	list := func(c call.ID, graphics bool) bool {
		ret, made := r.Call(c, func() (ret nvml.Return) { infos, ret = call.RunningProcesses(r.GPU.Raw, h, graphics); return })
		if made && ret == raw.ErrTooMany {
			tooMany = true
			r.GPU.TooManyProcesses(c)
			return false
		}
		return made && r.Result(c, ret)
	}
	if list(call.ComputeProcesses, false) {
		listed = true
		for _, in := range infos {
			p := get(in.Pid, in.GpuInstanceId, in.ComputeInstanceId)
			p.Compute = true
			p.ComputeMemoryBytes = addOpt(p.ComputeMemoryBytes, memoryOpt(in.UsedGpuMemory))
		}
	}
	if !tooMany && list(call.GraphicsProcesses, true) {
		listed = true
		for _, in := range infos {
			p := get(in.Pid, in.GpuInstanceId, in.ComputeInstanceId)
			p.Graphics = true
			p.GraphicsMemoryBytes = addOpt(p.GraphicsMemoryBytes, memoryOpt(in.UsedGpuMemory))
		}
	}
	if listed && !tooMany && len(r.Failed) == failures {
		tooMany = !r.markMPS(r.GPU.Raw, h, byPID)
	}
	if !listed || tooMany || len(r.Failed) > failures {
		return // a partial list would undercount: none rather than some
	}

	// GetProcessUtilization costs 1.4-1.9 ms: asked only when a list holds
	// a process.
	var newest map[uint32]nvml.ProcessUtilizationSample
	utilOK := false
	if len(byPID) > 0 {
		var samples []nvml.ProcessUtilizationSample
		ret, made := r.Call(call.ProcessUtilization, func() (ret nvml.Return) {
			samples, ret = r.GPU.ProcessUtilization(shareSince(r.GPU))
			return ret
		})
		switch {
		case !made:
		case ret == nvml.ERROR_NOT_FOUND:
			utilOK = true // no sample of late: every process idle
		case r.Result(call.ProcessUtilization, ret):
			newest = newestByPID(samples)
			utilOK = true
		}
	}
	if len(r.Failed) > failures {
		return
	}
	if utilOK {
		pc.shares.add(newest, s.Time)
	}
	shares, sharesOK := pc.shares.take(byPID)
	pc.listed.Store(len(byPID) > 0)
	s.ProcessesListed = true
	for _, p := range byPID {
		if p.MPS == sample.MPSClient {
			// NVML samples the MPS server, for all its clients together:
			// a client's own readings are not observable, so absent.
			s.Processes = append(s.Processes, *p)
			continue
		}
		if utilOK {
			u := newest[p.PID]
			p.SMUtil = sample.Some(percentToFraction(float64(u.SmUtil)))
			p.MemoryControllerUtil = sample.Some(percentToFraction(float64(u.MemUtil)))
			p.EncoderUtil = sample.Some(percentToFraction(float64(u.EncUtil)))
			p.DecoderUtil = sample.Some(percentToFraction(float64(u.DecUtil)))
		}
		if sharesOK {
			p.BusyShare = sample.Some(shares[p.PID])
		}
		s.Processes = append(s.Processes, *p)
	}
	// By PID, not the map's order: the same answers make the same Sample.
	slices.SortFunc(s.Processes, func(a, b sample.Process) int { return cmp.Compare(a.PID, b.PID) })
}

// sampleShares takes one sample of the processes' shares between reads
// (Device.SampleShares), on r; it reports whether one was taken.
func (pc *processCollector) sampleShares(r *call.Reading) bool {
	var samples []nvml.ProcessUtilizationSample
	ret, made := r.Call(call.ProcessUtilization, func() (ret nvml.Return) {
		samples, ret = r.GPU.ProcessUtilization(shareSince(r.GPU))
		return ret
	})
	// A failure here is the next read's to report, if it persists; the
	// window then averages the samples that did arrive.
	ok := made && (ret == nvml.ERROR_NOT_FOUND || r.Result(call.ProcessUtilization, ret))
	if ok {
		pc.shares.add(newestByPID(samples), r.GPU.Plan.Now())
	}
	return ok
}

// markMPS asks the device's MPS list (only when a compute process is
// listed) and marks its processes MPS clients, and the server where it is
// the one compute process besides them (the receiver also knows it by its
// executable name, sample.MPSServerName, where a plain process runs beside
// it). It reports false when the list is too long to read: the whole list
// is then dropped, as for the other lists. "Not supported" is cached and
// leaves every process unmarked; a failure is the read's.
func (r *reading) markMPS(c raw.Device, h nvml.Device, byPID map[uint32]*sample.Process) bool {
	compute := 0
	for _, p := range byPID {
		if p.Compute {
			compute++
		}
	}
	if compute == 0 {
		return true
	}
	var infos []nvml.ProcessInfo
	ret, made := r.Call(call.MPSProcesses, func() (ret nvml.Return) { infos, ret = call.MPSClients(c, h); return })
	if made && ret == raw.ErrTooMany {
		r.GPU.TooManyProcesses(call.MPSProcesses)
		return false
	}
	if !made || !r.Result(call.MPSProcesses, ret) {
		return true
	}
	clients := 0
	for _, in := range infos {
		if p, ok := byPID[in.Pid]; ok && p.Compute {
			p.MPS = sample.MPSClient
			clients++
		}
	}
	if clients > 0 && compute == clients+1 {
		for _, p := range byPID {
			if p.Compute && p.MPS == sample.MPSNone {
				p.MPS = sample.MPSServer
			}
		}
	}
	return true
}

func addOpt(a, b sample.Opt[uint64]) sample.Opt[uint64] {
	switch {
	case !b.OK:
		return a
	case !a.OK:
		return b
	default:
		return sample.Some(a.Value + b.Value)
	}
}

// memoryOpt reads a process's memory, absent for NVML_VALUE_NOT_AVAILABLE.
func memoryOpt(v uint64) sample.Opt[uint64] {
	if v == math.MaxUint64 {
		return sample.Opt[uint64]{}
	}
	return sample.Some(v)
}

// due says whether the newest share sample is at least most of interval
// old: a read just before the tick took one already.
func (ps *processShares) due(now time.Time, interval time.Duration) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return now.Sub(ps.last) >= interval*3/4
}
