//go:build cgo

package collect

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
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
	id  call.ID
	typ nvml.SamplingType
}{
	samplingGPU:     {call.SamplesGPU, nvml.GPU_UTILIZATION_SAMPLES},
	samplingMemory:  {call.SamplesMemory, nvml.MEMORY_UTILIZATION_SAMPLES},
	samplingEncoder: {call.SamplesEncoder, nvml.ENC_UTILIZATION_SAMPLES},
	samplingDecoder: {call.SamplesDecoder, nvml.DEC_UTILIZATION_SAMPLES},
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

func percentToFraction(p float64) float64 {
	return math.Min(math.Max(p/100, 0), 1)
}
