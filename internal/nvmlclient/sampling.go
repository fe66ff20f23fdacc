//go:build cgo

package nvmlclient

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML keeps a ring buffer of utilization samples per device (one every
// ~1/6 s on an H200). Averaging every sample since the previous scrape gives
// the utilization over the whole interval; a single instant reading would
// alias with any periodic workload.

type samplingKind int

const (
	samplingGPU samplingKind = iota
	samplingMemory
	samplingEncoder
	samplingDecoder
	samplingCount
)

var samplingCalls = [samplingCount]struct {
	call call
	typ  nvml.SamplingType
}{
	samplingGPU:     {callSamplesGPU, nvml.GPU_UTILIZATION_SAMPLES},
	samplingMemory:  {callSamplesMemory, nvml.MEMORY_UTILIZATION_SAMPLES},
	samplingEncoder: {callSamplesEncoder, nvml.ENC_UTILIZATION_SAMPLES},
	samplingDecoder: {callSamplesDecoder, nvml.DEC_UTILIZATION_SAMPLES},
}

// window is the state of one sampling type on one device: the newest sample
// timestamp (NVML's, in microseconds) already averaged.
type window struct {
	lastSeen uint64
	// active says the engine was busy at the previous read: a codec's
	// window is read only while it is (see readCodec).
	active bool
}

// average folds the samples newer than w.lastSeen into their mean and moves
// lastSeen to the newest. Samples may arrive out of order; those at or before
// lastSeen were counted by an earlier window. A span above zero keeps only
// the samples within span of the newest: a window not read for a while
// holds older samples than the interval. ok is false when no new sample
// could be decoded.
func (w *window) average(vt nvml.ValueType, samples []nvml.Sample, span time.Duration) (mean float64, ok bool) {
	newest := w.lastSeen
	for _, smp := range samples {
		newest = max(newest, smp.TimeStamp)
	}
	oldest := w.lastSeen
	if us := uint64(span.Microseconds()); span > 0 && newest > us {
		oldest = max(oldest, newest-us)
	}
	var sum float64
	n := 0
	for _, smp := range samples {
		if smp.TimeStamp <= oldest {
			continue
		}
		v, valid := decodeSampleValue(vt, smp.SampleValue)
		if !valid {
			continue
		}
		sum += v
		n++
	}
	w.lastSeen = newest
	mean = sum / float64(n)
	if n == 0 || math.IsInf(mean, 0) {
		return 0, false
	}
	return mean, true
}

// decodeSampleValue reads NVML's value union, which go-nvml hands over as raw
// little-endian bytes, according to its value type.
func decodeSampleValue(vt nvml.ValueType, raw [8]byte) (float64, bool) {
	switch vt {
	case nvml.VALUE_TYPE_DOUBLE:
		v := math.Float64frombits(binary.LittleEndian.Uint64(raw[:]))
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, false
		}
		return v, true
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.LittleEndian.Uint32(raw[:4])), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.LittleEndian.Uint64(raw[:])), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.LittleEndian.Uint64(raw[:]))), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.LittleEndian.Uint32(raw[:4]))), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.LittleEndian.Uint16(raw[:2])), true
	default:
		return 0, false
	}
}

// prime moves every window to the newest sample NVML holds, so that
// the first scrape averages from the receiver's start, not over whatever the
// ring buffer held before it.
func (u *utilizationCollector) prime(d *Device) {
	r := &reading{d: d}
	for k := range samplingCalls {
		u.windowAverage(r, samplingKind(k), 0)
	}
}

// windowAverage returns the mean of the samples of kind k taken since the
// previous call (within span of the newest, when span is above zero), as a
// fraction. ok is false when there is none (an empty window) or the call
// was not made or failed.
func (u *utilizationCollector) windowAverage(r *reading, k samplingKind, span time.Duration) (frac float64, ok bool) {
	sc := samplingCalls[k]
	w := &u.windows[k]
	var vt nvml.ValueType
	var samples []nvml.Sample
	ret, made := r.call(sc.call, func() (ret nvml.Return) {
		vt, samples, ret = r.d.handle.GetSamples(sc.typ, w.lastSeen)
		return ret
	})
	if !made || ret == nvml.ERROR_NOT_FOUND || !r.result(sc.call, ret) {
		return 0, false // NOT_FOUND: no sample newer than lastSeen
	}
	mean, ok := w.average(vt, samples, span)
	return percentToFraction(mean), ok
}

func percentToFraction(p float64) float64 {
	return math.Min(math.Max(p/100, 0), 1)
}

// read fills the engine and memory-controller utilization, each
// averaged over the window since the previous read:
//   - general: from GPM's graphics utilization on a GPU with GPM (no extra
//     call), else from the GPU sample window;
//   - memory controller: from its sample window; on a GPU with GPM only
//     when asked for (WithMemoryControllerOnGPM): GPM's DRAM bandwidth
//     utilization tells memory activity there, and the window costs 1.4 ms;
//   - encoder, decoder: readCodec.
//
// Where a window is empty or unsupported, the instant reading answers, so
// that a series never goes silent.
func (u *utilizationCollector) read(r *reading, s *Sample) {
	d := r.d
	generalOn := d.plan.figures.Has(FigUtilization)
	memOn := d.plan.figures.Has(FigMemoryController) && (!d.parts.gpm.supported || u.memCtrlOnGPM)
	var gpu, mem Opt[float64]
	switch {
	case !generalOn:
	case d.parts.gpm.readsGeneral:
		if s.GPM != nil {
			gpu = s.GPM.Activity[GPMGraphicsActivity]
		}
	default:
		if v, ok := u.windowAverage(r, samplingGPU, 0); ok {
			gpu = some(v)
		}
	}
	if memOn {
		if v, ok := u.windowAverage(r, samplingMemory, 0); ok {
			mem = some(v)
		}
	}
	// Both windows fall back to the same instant getter (the read table's
	// fallback of each).
	if rates := readTable[callSamplesGPU].fallback; generalOn && !gpu.OK || memOn && !mem.OK {
		var u nvml.Utilization
		if r.do(rates, func() (ret nvml.Return) { u, ret = d.handle.GetUtilizationRates(); return }) {
			if generalOn && !gpu.OK {
				gpu = some(percentToFraction(float64(u.Gpu)))
			}
			if memOn && !mem.OK {
				mem = some(percentToFraction(float64(u.Memory)))
			}
		}
	}
	s.Utilization[EngineGeneral], s.MemoryControllerUtilization = gpu, mem
	s.Utilization[EngineEncoder] = u.readCodec(r, samplingEncoder, s.Time)
	s.Utilization[EngineDecoder] = u.readCodec(r, samplingDecoder, s.Time)
	u.lastRead = s.Time
}

// readCodec reads an encoder or decoder: the instant getter (the window's
// fallback in the read table, <0.05 ms) every time, and the sample window
// (1.4 ms) only while the engine is busy now or was at the previous read.
// A burst that falls wholly between two idle reads is missed; any other is
// averaged over the interval.
func (u *utilizationCollector) readCodec(r *reading, k samplingKind, now time.Time) Opt[float64] {
	w := &u.windows[k]
	instant := readTable[samplingCalls[k].call].fallback
	var v float64
	instOK := r.do(instant, func() (ret nvml.Return) { v, ret = readTable[instant].get(r.d.handle); return })
	if !instOK || v > 0 || w.active {
		// Only the samples of this interval: the window was not read
		// while the engine was idle. By the device clock (WithClock).
		span := time.Duration(0)
		if !u.lastRead.IsZero() {
			span = now.Sub(u.lastRead)
		}
		if mean, ok := u.windowAverage(r, k, span); ok {
			w.active = mean > 0 || v > 0
			return some(mean)
		}
	}
	if !instOK {
		w.active = false
		return Opt[float64]{}
	}
	w.active = v > 0
	return some(percentToFraction(v))
}
