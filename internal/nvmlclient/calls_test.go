//go:build cgo

package nvmlclient

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every row of the read table is whole: a name, figures unless it serves
// other rows, a landing for every plain getter or field (or a row it is the
// fallback of), and no field that nothing reads.
func TestReadTableRowsAreWhole(t *testing.T) {
	fallbackOf := map[call]bool{}
	for _, spec := range readTable {
		if spec.fallback != callNone {
			fallbackOf[spec.fallback] = true
		}
	}
	for c := callNone + 1; c < allCalls; c++ {
		spec := readTable[c]
		assert.NotEmpty(t, spec.name, "row %d", c)
		if c != callGPMSampleGet && c != callGPMMetricsGet && c != callFieldValues {
			assert.NotZero(t, spec.figures, spec.name)
		}
		if spec.field != 0 || spec.get != nil && !fallbackOf[c] {
			assert.NotNil(t, spec.land, "%s: where does its value land?", spec.name)
		}
		if spec.land != nil {
			assert.True(t, spec.field != 0 || spec.get != nil, "%s lands a value it never reads", spec.name)
		}
		if spec.fallback != callNone {
			assert.NotZero(t, readTable[spec.fallback].figures&spec.figures, "%s: its fallback answers another figure", spec.name)
		}
		if spec.cumulative {
			assert.True(t, spec.costly, "%s: a counter read at every scrape", spec.name)
		}
		if c >= callCount {
			assert.Equal(t, c, callOf(spec.fig), "%s: its figure's call", spec.name)
			assert.Equal(t, FiguresOf(spec.fig), spec.figures, spec.name)
		}
		if spec.per != 0 {
			assert.True(t, spec.field != 0 || spec.get != nil, "%s: per without a value", spec.name)
		}
	}
}

// A figure asks for exactly the calls that answer it.
func TestFiguresSelectCalls(t *testing.T) {
	d := &Device{}
	d.newCollectors()
	o := defaultOptions()
	o.figures = FiguresOf(FigPower, FigTemperature, FigMemoryTemperature)
	d.configure(o)
	for c := callNone + 1; c < allCalls; c++ {
		want := c == callOf(FigPower) || c == callOf(FigTemperature) || c == callOf(FigMemoryTemperature) || c == callFieldValues
		assert.Equal(t, want, d.plan.wanted[c], readTable[c].name)
	}
	o.figures = AllFigures
	d.configure(o)
	for c := callNone + 1; c < allCalls; c++ {
		assert.True(t, d.plan.wanted[c], readTable[c].name)
	}
}

// Issue 26: a Device keeps its identity, its guard and its collectors; the
// rest lives in its plan, its call book and the collectors themselves.
func TestDeviceHasAtMostTwelveFields(t *testing.T) {
	assert.LessOrEqual(t, reflect.TypeOf(Device{}).NumField(), 12)
}
