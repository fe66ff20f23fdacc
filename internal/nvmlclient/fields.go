package nvmlclient

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// The cheap figures that NVML also serves as field values are read in one
// nvmlDeviceGetFieldValues batch per GPU: the six violation counters cost
// 0.45-0.8 ms each as getters and 0.45 ms together as fields. Each field
// carries its own return code, so one unsupported field leaves only its
// figure out, and is cached like any unsupported call.

// fieldBatch is one device's batch, reused from read to read.
type fieldBatch struct {
	values []nvml.FieldValue
	calls  []call
}

// readFields reads the batch of the figures read at every scrape; the
// counters' batch is read on their own cadence (counters.go).
func (r *reading) readFields(s *Sample) { r.readFieldBatch(s, &r.d.fields, false) }

func (r *reading) readFieldBatch(s *Sample, b *fieldBatch, counters bool) {
	b.values, b.calls = b.values[:0], b.calls[:0]
	for c, spec := range readTable {
		if spec.source == sourceField && spec.counter == counters && r.available(call(c)) {
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
			setField(s, c, v/readTable[c].per)
		}
	}
}

// setField puts one field's value, in the Sample's unit, where it belongs.
func setField(s *Sample, c call, v float64) {
	switch c {
	case callMemoryTemperature:
		s.MemoryTemperatureCelsius = some(v)
	case callPCIeReplays:
		s.Health.PCIeReplays = some(int64(v))
	default:
		for p, vc := range violationCalls {
			if vc == c {
				s.Health.ViolationSeconds[p] = some(v)
			}
		}
	}
}
