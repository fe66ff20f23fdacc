//go:build cgo

package call

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// testPlain are two plain reads: a getter and a field.
var testPlain = []Spec{
	{Name: "nvmlDeviceGetPowerUsage", Reader: ByGetter, Get: Getter(nvml.Device.GetPowerUsage), Divisor: 1000},
	{Name: "nvmlDeviceGetFieldValues(FI_DEV_MEMORY_TEMP)", Reader: ByField, Field: nvml.FI_DEV_MEMORY_TEMP},
}

// Every row of the read table is whole: a name, readings unless it serves
// other rows or is plain, a reader kind that agrees with what the row
// holds: a getter's or a field's value is put in the Sample.
func TestReadTableRowsAreWhole(t *testing.T) {
	table := NewTable(testPlain)
	fallbackOf := map[ID]bool{}
	for _, spec := range table {
		if spec.Fallback != None {
			fallbackOf[spec.Fallback] = true
		}
	}
	for c := None + 1; int(c) < len(table); c++ {
		spec := table[c]
		assert.NotEmpty(t, spec.Name, "row %d", c)
		if c != GPMSampleGet && c != GPMMetricsGet && c != FieldValues && c != Check && c < FirstPlain {
			assert.NotZero(t, spec.Readings, spec.Name)
		}
		plain := spec.Reader == ByGetter || spec.Reader == ByField
		assert.Equal(t, plain, spec.Put != nil, "%s: a getter's or field's value is put, and only theirs", spec.Name)
		assert.Equal(t, spec.Reader == ByField, spec.Field != 0, "%s: a field, and only a field, has an id", spec.Name)
		if spec.Reader == ByGetter || spec.Get != nil {
			assert.True(t, spec.Get != nil && (spec.Reader == ByGetter || c == Check || fallbackOf[c]),
				"%s: a getter row's getter, or its collector's (a fallback, Check)", spec.Name)
		}
		if spec.Fallback != None {
			assert.NotZero(t, table[spec.Fallback].Readings&spec.Readings, "%s: its fallback answers another reading", spec.Name)
		}
		if spec.Cumulative {
			assert.True(t, spec.Costly, "%s: a counter read at every scrape", spec.Name)
		}
		if spec.Divisor != 0 {
			assert.True(t, plain, "%s: a divisor without a value", spec.Name)
		}
	}
	assert.Equal(t, 2, table.Plain())
	assert.Equal(t, "nvmlDeviceGetPowerUsage", table[FirstPlain].Symbol, "a getter's symbol is checked at Open")
	assert.Empty(t, table[FirstPlain+1].Symbol, "a field is the batch's")
	s := sample.Sample{Values: make([]sample.Opt[float64], 2)}
	table[FirstPlain+1].Put(&s, 41)
	assert.Equal(t, []sample.Opt[float64]{{}, sample.Some(41.0)}, s.Values, "a plain read is put at its place")
}

// A reading asks for exactly the calls that answer it; every plain read is
// asked for.
func TestFiguresSelectCalls(t *testing.T) {
	table := NewTable(testPlain)
	d := NewGPU(nil, nil, table, "GPU-0", Symbols{}, zap.NewNop())
	d.Configure(sample.Of(sample.Memory), nil, nil)
	for c := None + 1; int(c) < len(table); c++ {
		want := c == MemoryInfo || c == MIGMemoryInfo || c >= FirstPlain || c == FieldValues
		assert.Equal(t, want, d.Plan.Wanted[c], table[c].Name)
	}
	d.Configure(sample.All, nil, nil)
	for c := None + 1; int(c) < len(table); c++ {
		assert.Equal(t, c != Check, d.Plan.Wanted[c], table[c].Name)
	}
}
