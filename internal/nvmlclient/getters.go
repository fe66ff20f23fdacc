//go:build cgo

package nvmlclient

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// getterCollector reads the memory, and every plain getter row of the read
// table that is not costly (the costly ones are the counters', counters.go).
type getterCollector struct{}

func (*getterCollector) prime(*Device) {}

// read reads the memory, then the plain getters.
func (*getterCollector) read(r *reading, s *Sample) {
	r.readMemory(s)
	r.readPlain(s)
}

func (r *reading) readMemory(s *Sample) {
	var used, total, reserved Opt[uint64]
	if r.do(callMemoryInfo, func() (ret nvml.Return) {
		used, total, reserved, ret = memoryOf(r.d.handle, r.d.symbols.memoryInfoV2)
		return ret
	}) {
		s.MemoryUsedBytes, s.MemoryTotalBytes, s.MemoryReservedBytes = used, total, reserved
	}
}

// memoryOf reads a GPU's or MIG device's memory: with v2, used leaves out
// what the driver reserves; v1 has no reserved figure.
func memoryOf(h nvml.Device, v2 bool) (used, total, reserved Opt[uint64], ret nvml.Return) {
	if v2 {
		m, ret := h.GetMemoryInfo_v2()
		return some(m.Used), some(m.Total), some(m.Reserved), ret
	}
	m, ret := h.GetMemoryInfo()
	return some(m.Used), some(m.Total), Opt[uint64]{}, ret
}

// readGetters makes the plain getter rows of the read table that are (or
// are not) costly, and hands each value that answered to got, in the
// Sample's unit.
func (r *reading) readGetters(costly bool, got func(call, float64)) {
	h := r.d.handle
	for c := range readTable {
		spec := &readTable[c]
		if spec.get == nil || spec.land == nil || spec.costly != costly {
			continue
		}
		var v float64
		if r.do(call(c), func() (ret nvml.Return) { v, ret = spec.get(h); return }) {
			got(call(c), spec.value(v))
		}
	}
}

// readPlain reads the plain getters of the scrape into s.
func (r *reading) readPlain(s *Sample) {
	r.readGetters(false, func(c call, v float64) { readTable[c].land(s, v) })
}
