//go:build cgo

package collect

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// activityCollector reads what the GPU's engines did over the scrape
// window: GPM's activity and traffic (gpm.go) and the engines' and memory
// controller's utilization (sampling.go). One collector, not two, because
// on a GPU with GPM the general utilization is GPM's graphics activity:
// the utilization needs this read's GPM answer, and no other collector's
// state.
type activityCollector struct {
	gpm     gpmState
	windows [samplingCount]window
	// lastRead is the device clock's time of the previous read, for the
	// codec windows.
	lastRead time.Time
	// gpmGeneral says GPM's graphics activity stands for the general
	// utilization: set with the baselines where GPM is asked for the general
	// utilization, and cleared for good when that metric does not answer.
	gpmGeneral   bool
	memCtrlOnGPM bool // read the memory controller window on GPUs with GPM too (configure)
}

// baseline moves every utilization window to the newest sample NVML holds,
// so that the first scrape averages from the receiver's start, not over
// whatever the ring buffer held before it; then, on a GPU with GPM, takes
// the first GPM sample, so that the first read already has a window.
func (a *activityCollector) baseline(d *call.GPU) {
	r := &reading{Reading: call.Reading{GPU: d}}
	for k := range samplingCalls {
		a.windowAverage(r, samplingKind(k), 0)
	}
	if !d.Plan.GPM.HasGPM {
		return
	}
	a.gpmGeneral = d.Plan.Readings.Has(sample.Utilization)
	a.gpm.pending = true
	a.gpm.startGated(d, d.Handle.GpmSampleGet, "")
}

// read takes the GPM window, then the utilization:
//   - general: from GPM's graphics utilization on a GPU with GPM (no extra
//     call) and not in MIG mode (r.in.migMode: NVML has no whole-GPU
//     utilization there), else from the GPU sample window;
//   - memory controller: from its sample window; on a GPU with GPM only
//     when asked for (WithMemoryControllerOnGPM): GPM's DRAM bandwidth
//     utilization tells memory activity there, and the window costs 1.4 ms;
//   - encoder, decoder: readCodec.
//
// Where a window is empty or unsupported, the instant reading answers, so
// that a series never goes silent.
func (a *activityCollector) read(r *reading, s *sample.Sample) {
	d := r.GPU
	switch {
	case a.gpm.pending:
		a.gpm.startGated(d, d.Handle.GpmSampleGet, "") // the start takes the window's first sample
	case a.gpm.supported:
		s.GPM = r.gpmWindow(&a.gpm, d.Plan.GPM.Requests, d.Handle.GpmSampleGet)
		if s.GPM != nil && !s.GPM.Activity[sample.GPMGraphicsActivity].OK {
			a.gpmGeneral = false // the GPU's sample window answers instead
		}
	}

	generalOn := d.Plan.Readings.Has(sample.Utilization)
	memOn := d.Plan.Readings.Has(sample.MemoryController) && (!d.Plan.GPM.HasGPM || a.memCtrlOnGPM)
	var gpu, mem sample.Opt[float64]
	switch {
	case !generalOn:
	case a.gpmGeneral && !r.in.migMode:
		if s.GPM != nil {
			gpu = s.GPM.Activity[sample.GPMGraphicsActivity]
		}
	default:
		if v, ok := a.windowAverage(r, samplingGPU, 0); ok {
			gpu = sample.Some(v)
		}
	}
	if memOn {
		if v, ok := a.windowAverage(r, samplingMemory, 0); ok {
			mem = sample.Some(v)
		}
	}
	// Both windows fall back to the same instant getter (the read table's
	// fallback of each).
	if rates := r.GPU.Table[call.SamplesGPU].Fallback; generalOn && !gpu.OK || memOn && !mem.OK {
		var u nvml.Utilization
		if r.Do(rates, func() (ret nvml.Return) { u, ret = d.Handle.GetUtilizationRates(); return }) {
			if generalOn && !gpu.OK {
				gpu = sample.Some(percentToFraction(float64(u.Gpu)))
			}
			if memOn && !mem.OK {
				mem = sample.Some(percentToFraction(float64(u.Memory)))
			}
		}
	}
	s.Utilization[sample.EngineGeneral], s.MemoryControllerUtilization = gpu, mem
	s.Utilization[sample.EngineEncoder] = a.readCodec(r, samplingEncoder, s.Time)
	s.Utilization[sample.EngineDecoder] = a.readCodec(r, samplingDecoder, s.Time)
	a.lastRead = s.Time
}

// windowAverage returns the mean of the samples of kind k taken since the
// previous call (within span of the newest, when span is above zero), as a
// fraction. ok is false when there is none (an empty window) or the call
// was not made or failed.
func (a *activityCollector) windowAverage(r *reading, k samplingKind, span time.Duration) (frac float64, ok bool) {
	sc := samplingCalls[k]
	w := &a.windows[k]
	var vt nvml.ValueType
	var samples []nvml.Sample
	ret, made := r.Call(sc.id, func() (ret nvml.Return) {
		vt, samples, ret = r.GPU.Handle.GetSamples(sc.typ, w.lastSeen)
		return ret
	})
	if !made || ret == nvml.ERROR_NOT_FOUND || !r.Result(sc.id, ret) {
		return 0, false // NOT_FOUND: no sample newer than lastSeen
	}
	mean, ok := w.average(vt, samples, span)
	return percentToFraction(mean), ok
}

// readCodec reads an encoder or decoder: the instant getter (the window's
// fallback in the read table, <0.05 ms) every time, and the sample window
// (1.4 ms) only while the engine is busy now or was at the previous read.
// A burst that falls wholly between two idle reads is missed; any other is
// averaged over the interval.
func (a *activityCollector) readCodec(r *reading, k samplingKind, now time.Time) sample.Opt[float64] {
	w := &a.windows[k]
	instant := r.GPU.Table[samplingCalls[k].id].Fallback
	var v float64
	instOK := r.Do(instant, func() (ret nvml.Return) { v, ret = r.GPU.Table[instant].Get(r.GPU.Handle); return })
	if !instOK || v > 0 || w.active {
		// Only the samples of this interval: the window was not read
		// while the engine was idle. By the device clock.
		span := time.Duration(0)
		if !a.lastRead.IsZero() {
			span = now.Sub(a.lastRead)
		}
		if mean, ok := a.windowAverage(r, k, span); ok {
			w.active = mean > 0 || v > 0
			return sample.Some(mean)
		}
	}
	if !instOK {
		w.active = false
		return sample.Opt[float64]{}
	}
	w.active = v > 0
	return sample.Some(percentToFraction(v))
}
