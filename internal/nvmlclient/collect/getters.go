//go:build cgo

package collect

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// getterCollector reads the memory, and every ByGetter row of the read
// table that is not costly (the costly ones are the counters', counters.go).
type getterCollector struct{}

func (*getterCollector) baseline(*call.GPU) {}

// read reads the memory, then the plain getters.
func (*getterCollector) read(r *reading, s *sample.Sample) {
	r.readMemory(s)
	r.readPlain(s)
}

func (r *reading) readMemory(s *sample.Sample) {
	var used, total, reserved sample.Opt[uint64]
	if r.Do(call.MemoryInfo, func() (ret nvml.Return) {
		used, total, reserved, ret = memoryOf(r.GPU.Handle, r.GPU.Symbols.MemoryInfoV2)
		return ret
	}) {
		s.MemoryUsedBytes, s.MemoryTotalBytes, s.MemoryReservedBytes = used, total, reserved
	}
}

// memoryOf reads a GPU's or MIG device's memory: with v2, used leaves out
// what the driver reserves; v1 has no reserved reading.
func memoryOf(h nvml.Device, v2 bool) (used, total, reserved sample.Opt[uint64], ret nvml.Return) {
	if v2 {
		m, ret := h.GetMemoryInfo_v2()
		return sample.Some(m.Used), sample.Some(m.Total), sample.Some(m.Reserved), ret
	}
	m, ret := h.GetMemoryInfo()
	return sample.Some(m.Used), sample.Some(m.Total), sample.Opt[uint64]{}, ret
}

// readGetters makes the ByGetter rows of the read table that are (or
// are not) costly, and hands each value that answered to got, in the
// Sample's unit.
func (r *reading) readGetters(costly bool, got func(call.ID, float64)) {
	h := r.GPU.Handle
	for c := range r.GPU.Table {
		spec := &r.GPU.Table[c]
		if spec.Reader != call.ByGetter || spec.Costly != costly {
			continue
		}
		var v float64
		if r.Do(call.ID(c), func() (ret nvml.Return) { v, ret = spec.Get(h); return }) {
			got(call.ID(c), spec.Value(v))
		}
	}
}

// readPlain reads the ByGetter rows of the scrape into s.
func (r *reading) readPlain(s *sample.Sample) {
	r.readGetters(false, func(c call.ID, v float64) { r.GPU.Table[c].Put(s, v) })
}
