//go:build cgo

package call

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/figure"
)

// testPlain are two plain reads: a getter and a field.
var testPlain = []Spec{
	{Name: "nvmlDeviceGetPowerUsage", Get: Getter(nvml.Device.GetPowerUsage), Per: 1000},
	{Name: "nvmlDeviceGetFieldValues(FI_DEV_MEMORY_TEMP)", Field: nvml.FI_DEV_MEMORY_TEMP},
}

// Every row of the read table is whole: a name, figures unless it serves
// other rows or is plain, a landing for every getter or field (or a row it
// is the fallback of), and no field that nothing reads.
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
			assert.NotZero(t, spec.Figures, spec.Name)
		}
		if (spec.Field != 0 || spec.Get != nil && !fallbackOf[c]) && c != Check {
			assert.NotNil(t, spec.Land, "%s: where does its value land?", spec.Name)
		}
		if spec.Land != nil {
			assert.True(t, spec.Field != 0 || spec.Get != nil, "%s lands a value it never reads", spec.Name)
		}
		if spec.Fallback != None {
			assert.NotZero(t, table[spec.Fallback].Figures&spec.Figures, "%s: its fallback answers another figure", spec.Name)
		}
		if spec.Cumulative {
			assert.True(t, spec.Costly, "%s: a counter read at every scrape", spec.Name)
		}
		if spec.Per != 0 {
			assert.True(t, spec.Field != 0 || spec.Get != nil, "%s: per without a value", spec.Name)
		}
	}
	assert.Equal(t, 2, table.Plain())
	assert.Equal(t, "nvmlDeviceGetPowerUsage", table[FirstPlain].Symbol, "a getter's symbol is checked at Open")
	assert.Empty(t, table[FirstPlain+1].Symbol, "a field is the batch's")
	s := figure.Sample{Values: make([]figure.Opt[float64], 2)}
	table[FirstPlain+1].Land(&s, 41)
	assert.Equal(t, []figure.Opt[float64]{{}, figure.Some(41.0)}, s.Values, "a plain read lands at its place")
}

// A figure asks for exactly the calls that answer it; every plain read is
// asked for.
func TestFiguresSelectCalls(t *testing.T) {
	table := NewTable(testPlain)
	d := NewGPU(nil, nil, table, "GPU-0", Symbols{}, zap.NewNop())
	d.Configure(figure.Of(figure.Memory), nil, nil)
	for c := None + 1; int(c) < len(table); c++ {
		want := c == MemoryInfo || c == MIGMemoryInfo || c >= FirstPlain || c == FieldValues
		assert.Equal(t, want, d.Plan.Wanted[c], table[c].Name)
	}
	d.Configure(figure.All, nil, nil)
	for c := None + 1; int(c) < len(table); c++ {
		assert.Equal(t, c != Check, d.Plan.Wanted[c], table[c].Name)
	}
}
