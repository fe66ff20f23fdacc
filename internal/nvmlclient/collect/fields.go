//go:build cgo

package collect

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// The readings that NVML serves as field values are read in one
// nvmlDeviceGetFieldValues batch per GPU: at every scrape, the rows of the
// read table with a field id that are not costly (the memory
// temperature); on the counters' cadence, the costly rows (counters.go).
// Each field carries its own return code, so one unsupported field leaves
// only its reading out, and is cached like any unsupported call.

// fieldCollector reads the field rows of the read table read at every
// scrape, in one batch.
type fieldCollector struct{ batch fieldBatch }

func (*fieldCollector) baseline(*call.GPU) {}

// fieldBatch is one batch, reused from read to read.
type fieldBatch struct {
	values []nvml.FieldValue
	calls  []call.ID
	// links is how many NVLinks a per-link row is read over: all that NVML
	// can name until a batch has shown how many answer.
	links uint32
}

// read reads the batch of the readings read at every scrape.
func (f *fieldCollector) read(r *reading, s *sample.Sample) {
	r.readFieldBatch(&f.batch, false, func(c call.ID, v float64) { r.GPU.Table[c].Put(s, v) })
}

// readFieldBatch reads, in one call, the field rows that are (or are not)
// costly and are available now, and hands each value that answered to
// got, in the Sample's unit. A per-link row is one field per link, folded
// into one value (call.LinkFold).
func (r *reading) readFieldBatch(b *fieldBatch, costly bool, got func(call.ID, float64)) {
	b.values, b.calls = b.values[:0], b.calls[:0]
	perLink := false
	for c := range r.GPU.Table {
		spec := &r.GPU.Table[c]
		if spec.Reader != call.ByField || spec.Costly != costly || !r.Available(call.ID(c)) {
			continue
		}
		scopes := uint32(1)
		if spec.Links != call.LinksNone {
			perLink, scopes = true, b.linkCount()
		}
		for scope := range scopes {
			b.values = append(b.values, nvml.FieldValue{FieldId: spec.Field, ScopeId: scope})
			b.calls = append(b.calls, call.ID(c))
		}
	}
	if len(b.values) == 0 {
		return
	}
	ret, made := r.Call(call.FieldValues, func() nvml.Return { return r.GPU.Handle.GetFieldValues(b.values) })
	if !made {
		return
	}
	if ret != nvml.SUCCESS {
		// The batch as a whole failed or is unsupported: so is every field.
		r.Result(call.FieldValues, ret)
		for i, c := range b.calls {
			if i == 0 || b.calls[i-1] != c {
				r.Result(c, ret)
			}
		}
		return
	}
	r.Result(call.FieldValues, ret)
	links := uint32(0)
	for i := 0; i < len(b.calls); {
		c, j := b.calls[i], i
		for j < len(b.calls) && b.calls[j] == c {
			j++
		}
		v, ret, answered := fold(&r.GPU.Table[c], b.values[i:j])
		links = max(links, answered)
		if r.Result(c, ret) {
			got(c, r.GPU.Table[c].Value(v))
		}
		i = j
	}
	if perLink && b.links == 0 && links > 0 {
		b.links = links
	}
}

// linkCount is how many links a per-link row is read over.
func (b *fieldBatch) linkCount() uint32 {
	if b.links == 0 {
		return nvml.NVLINK_MAX_LINKS
	}
	return b.links
}

// fold makes one value of a row's fields: the one field of a plain row, or
// the sum or maximum of a per-link row's links that answered. It returns
// the value, the row's return (the first link's error when none answered)
// and how many links there are up to the last that answered.
func fold(spec *call.Spec, fields []nvml.FieldValue) (v float64, ret nvml.Return, links uint32) {
	ret = nvml.ERROR_NOT_SUPPORTED
	answered := false
	for k := range fields {
		f := &fields[k]
		fret := nvml.Return(f.NvmlReturn)
		x, ok := decodeSampleValue(nvml.ValueType(f.ValueType), f.Value)
		if fret == nvml.SUCCESS && !ok {
			// A value type this reader does not know: unsupported, rather
			// than a wrong number.
			fret = nvml.ERROR_NOT_SUPPORTED
		}
		if fret != nvml.SUCCESS {
			if !answered && k == 0 {
				ret = fret
			}
			continue
		}
		if spec.Decode != nil {
			x = spec.Decode(x)
		}
		switch {
		case !answered:
			v = x
		case spec.Links == call.LinksSum:
			v += x
		case spec.Links == call.LinksMax:
			v = max(v, x)
		}
		answered, ret = true, nvml.SUCCESS
		if spec.Links != call.LinksNone {
			links = f.ScopeId + 1
		}
	}
	return v, ret, links
}
