//go:build cgo

package nvmlclient

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// The figures that NVML serves as field values are read in one
// nvmlDeviceGetFieldValues batch per GPU: at every scrape, the rows of the
// read table with a field id that are not costly (the memory
// temperature); on the counters' cadence, the costly rows (counters.go).
// Each field carries its own return code, so one unsupported field leaves
// only its figure out, and is cached like any unsupported call.

// fieldBatch is one batch, reused from read to read.
type fieldBatch struct {
	values []nvml.FieldValue
	calls  []call
}

// read reads the batch of the figures read at every scrape.
func (f *fieldCollector) read(r *reading, s *Sample) {
	r.readFieldBatch(&f.batch, false, func(c call, v float64) { readTable[c].land(s, v) })
}

// readFieldBatch reads, in one call, the field rows that are (or are not)
// costly and are available now, and hands each value that answered to
// got, in the Sample's unit.
func (r *reading) readFieldBatch(b *fieldBatch, costly bool, got func(call, float64)) {
	b.values, b.calls = b.values[:0], b.calls[:0]
	for c := range readTable {
		if spec := &readTable[c]; spec.field != 0 && spec.costly == costly && r.available(call(c)) {
			b.values = append(b.values, nvml.FieldValue{FieldId: spec.field})
			b.calls = append(b.calls, call(c))
		}
	}
	if len(b.values) == 0 {
		return
	}
	ret, made := r.call(callFieldValues, func() nvml.Return { return r.d.handle.GetFieldValues(b.values) })
	if !made {
		return
	}
	if ret != nvml.SUCCESS {
		// The batch as a whole failed or is unsupported: so is every field.
		r.result(callFieldValues, ret)
		for _, c := range b.calls {
			r.result(c, ret)
		}
		return
	}
	r.result(callFieldValues, ret)
	for i, c := range b.calls {
		f := &b.values[i]
		ret := nvml.Return(f.NvmlReturn)
		v, ok := decodeSampleValue(nvml.ValueType(f.ValueType), f.Value)
		if ret == nvml.SUCCESS && !ok {
			// A value type this reader does not know: unsupported, rather
			// than a wrong number.
			ret = nvml.ERROR_NOT_SUPPORTED
		}
		if r.result(c, ret) {
			got(c, readTable[c].value(v))
		}
	}
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
