//go:build cgo

package call

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/figure"
)

// Every row of the read table is whole: a name, figures unless it serves
// other rows, a landing for every plain getter or field (or a row it is the
// fallback of), and no field that nothing reads.
func TestReadTableRowsAreWhole(t *testing.T) {
	fallbackOf := map[ID]bool{}
	for _, spec := range Table {
		if spec.Fallback != None {
			fallbackOf[spec.Fallback] = true
		}
	}
	for c := None + 1; c < All; c++ {
		spec := Table[c]
		assert.NotEmpty(t, spec.Name, "row %d", c)
		if c != GPMSampleGet && c != GPMMetricsGet && c != FieldValues {
			assert.NotZero(t, spec.Figures, spec.Name)
		}
		if spec.Field != 0 || spec.Get != nil && !fallbackOf[c] {
			assert.NotNil(t, spec.Land, "%s: where does its value land?", spec.Name)
		}
		if spec.Land != nil {
			assert.True(t, spec.Field != 0 || spec.Get != nil, "%s lands a value it never reads", spec.Name)
		}
		if spec.Fallback != None {
			assert.NotZero(t, Table[spec.Fallback].Figures&spec.Figures, "%s: its fallback answers another figure", spec.Name)
		}
		if spec.Cumulative {
			assert.True(t, spec.Costly, "%s: a counter read at every scrape", spec.Name)
		}
		if c >= fixedCount {
			assert.Equal(t, c, Of(spec.Fig), "%s: its figure's call", spec.Name)
			assert.Equal(t, figure.Of(spec.Fig), spec.Figures, spec.Name)
		}
		if spec.Per != 0 {
			assert.True(t, spec.Field != 0 || spec.Get != nil, "%s: per without a value", spec.Name)
		}
	}
}

// A figure asks for exactly the calls that answer it.
func TestFiguresSelectCalls(t *testing.T) {
	d := NewGPU(nil, nil, "GPU-0", Symbols{}, zap.NewNop())
	d.Configure(figure.Of(figure.Power, figure.Temperature, figure.MemoryTemperature), nil, nil)
	for c := None + 1; c < All; c++ {
		want := c == Of(figure.Power) || c == Of(figure.Temperature) || c == Of(figure.MemoryTemperature) || c == FieldValues
		assert.Equal(t, want, d.Plan.Wanted[c], Table[c].Name)
	}
	d.Configure(figure.All, nil, nil)
	for c := None + 1; c < All; c++ {
		assert.True(t, d.Plan.Wanted[c], Table[c].Name)
	}
}
