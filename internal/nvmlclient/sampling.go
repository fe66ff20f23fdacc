package nvmlclient

import (
	"encoding/binary"
	"math"

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
}

// average folds the samples newer than w.lastSeen into their mean and moves
// lastSeen to the newest. Samples may arrive out of order; those at or before
// lastSeen were counted by an earlier window. ok is false when no new sample
// could be decoded.
func (w *window) average(vt nvml.ValueType, samples []nvml.Sample) (mean float64, ok bool) {
	var sum float64
	n := 0
	newest := w.lastSeen
	for _, smp := range samples {
		if smp.TimeStamp <= w.lastSeen {
			continue
		}
		v, valid := decodeSampleValue(vt, smp.SampleValue)
		if !valid {
			continue
		}
		sum += v
		n++
		newest = max(newest, smp.TimeStamp)
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

// primeWindows moves every window to the newest sample NVML holds, so that
// the first scrape averages from the receiver's start, not over whatever the
// ring buffer held before it.
func (d *Device) primeWindows() {
	r := newReading(d)
	defer r.recoverPanic()
	for k, sc := range samplingCalls {
		if r.skip(sc.call) {
			continue
		}
		vt, samples, ret := d.handle.GetSamples(sc.typ, 0)
		if ret == nvml.ERROR_NOT_FOUND {
			r.timed(sc.call)
			continue
		}
		if r.ok(sc.call, ret) {
			d.windows[k].average(vt, samples)
		}
	}
	// An error while priming only costs the first window its start; the
	// next read reports it if it persists.
}

// windowAverage returns the mean of the samples of kind k taken since the
// previous call, as a fraction. ok is false when there is none (an empty
// window) or the call failed.
func (r *reading) windowAverage(k samplingKind) (frac float64, ok bool) {
	sc := samplingCalls[k]
	if r.skip(sc.call) {
		return 0, false
	}
	w := &r.d.windows[k]
	vt, samples, ret := r.d.handle.GetSamples(sc.typ, w.lastSeen)
	if ret == nvml.ERROR_NOT_FOUND {
		r.timed(sc.call)
		return 0, false // no sample newer than lastSeen
	}
	if !r.ok(sc.call, ret) {
		return 0, false
	}
	mean, ok := w.average(vt, samples)
	return percentToFraction(mean), ok
}

func percentToFraction(p float64) float64 {
	return math.Min(math.Max(p/100, 0), 1)
}

// readUtilization fills the engine and memory utilization from the sample
// windows. Where a window is empty or samples are not supported, it falls
// back to NVML's instant readings, so that a series never goes silent.
func (r *reading) readUtilization(s *Sample) {
	h := r.d.handle
	gpu, gpuOK := r.windowAverage(samplingGPU)
	mem, memOK := r.windowAverage(samplingMemory)
	if (!gpuOK || !memOK) && !r.skip(callUtilizationRates) {
		if u, ret := h.GetUtilizationRates(); r.ok(callUtilizationRates, ret) {
			if !gpuOK {
				gpu, gpuOK = percentToFraction(float64(u.Gpu)), true
			}
			if !memOK {
				mem, memOK = percentToFraction(float64(u.Memory)), true
			}
		}
	}
	if gpuOK {
		s.Utilization[EngineGeneral] = some(gpu)
	}
	if memOK {
		s.MemoryControllerUtilization = some(mem)
	}

	enc, encOK := r.windowAverage(samplingEncoder)
	if !encOK && !r.skip(callEncoderUtilization) {
		if v, _, ret := h.GetEncoderUtilization(); r.ok(callEncoderUtilization, ret) {
			enc, encOK = percentToFraction(float64(v)), true
		}
	}
	if encOK {
		s.Utilization[EngineEncoder] = some(enc)
	}

	dec, decOK := r.windowAverage(samplingDecoder)
	if !decOK && !r.skip(callDecoderUtilization) {
		if v, _, ret := h.GetDecoderUtilization(); r.ok(callDecoderUtilization, ret) {
			dec, decOK = percentToFraction(float64(v)), true
		}
	}
	if decOK {
		s.Utilization[EngineDecoder] = some(dec)
	}
}
