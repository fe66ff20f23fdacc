package record

import (
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// Reading is one point of a plain metric: the NVML reading
// (nvmlclient.Read) and the metric it records (readings.go).
type Reading struct {
	metric recorder
	read   nvmlclient.Read
	// device marks a point of the device's life, recorded on its device
	// resource; the others are of its use, on its holder resource
	// (emitDevice).
	device bool
}

func use(m recorder, r nvmlclient.Read) Reading { return Reading{metric: m, read: r} }
func device(m recorder, r nvmlclient.Read) Reading {
	return Reading{metric: m, read: r, device: true}
}

// recorder records one point of a metric, through the builder's Record
// method, whose name names the metric's field of metadata.MetricsConfig.
type recorder struct {
	field  string // HwPower, of RecordHwPowerDataPoint
	record func(mb *builder, ts pcommon.Timestamp, v float64)
}

type builder = metadata.MetricsBuilder

// f64 and i64 make the recorder of a metric without attributes; f64a and
// i64a of one with one attribute. An integer metric's value is rounded.
func f64(rec func(*builder, pcommon.Timestamp, float64)) recorder {
	return recorder{field: configField(rec), record: rec}
}

func i64(rec func(*builder, pcommon.Timestamp, int64)) recorder {
	return recorder{field: configField(rec), record: func(mb *builder, ts pcommon.Timestamp, v float64) { rec(mb, ts, int64(math.Round(v))) }}
}

func f64a[A any](rec func(*builder, pcommon.Timestamp, float64, A), a A) recorder {
	return recorder{field: configField(rec), record: func(mb *builder, ts pcommon.Timestamp, v float64) { rec(mb, ts, v, a) }}
}

func i64a[A any](rec func(*builder, pcommon.Timestamp, int64, A), a A) recorder {
	return recorder{field: configField(rec), record: func(mb *builder, ts pcommon.Timestamp, v float64) {
		rec(mb, ts, int64(math.Round(v)), a)
	}}
}

// configField is the metadata.MetricsConfig field of a Record method:
// RecordHwPowerDataPoint's is HwPower.
func configField(method any) string {
	name := runtime.FuncForPC(reflect.ValueOf(method).Pointer()).Name()
	const prefix, suffix = ".(*MetricsBuilder).Record", "DataPoint"
	i := strings.LastIndex(name, prefix)
	if i < 0 || !strings.HasSuffix(name, suffix) {
		panic(fmt.Sprintf("record: %s is not a metadata.MetricsBuilder Record method", name))
	}
	return name[i+len(prefix) : len(name)-len(suffix)]
}

// metricFields maps each metric's name (metadata.yaml's) to its field of
// metadata.MetricsConfig, and back.
var metricFields = sync.OnceValue(func() (m struct{ byName, byField map[string]string }) {
	m.byName, m.byField = map[string]string{}, map[string]string{}
	t := reflect.TypeFor[metadata.MetricsConfig]()
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("mapstructure")
		m.byName[name], m.byField[f.Name] = f.Name, name
	}
	return m
})

// metricEnabled reports whether the metric of field is enabled in m.
func metricEnabled(m *metadata.MetricsConfig, field string) bool {
	return reflect.ValueOf(m).Elem().FieldByName(field).FieldByName("Enabled").Bool()
}

// Readings are the plainReadings of the enabled metrics: what the client
// reads, each value at its place in Sample.Values.
func Readings(m *metadata.MetricsConfig) []Reading {
	var out []Reading
	for _, p := range plainReadings {
		if metricEnabled(m, p.metric.field) {
			out = append(out, p)
		}
	}
	return out
}

// Reads are the readings' NVML reads, in their order.
func Reads(readings []Reading) []nvmlclient.Read {
	out := make([]nvmlclient.Read, len(readings))
	for i, p := range readings {
		out[i] = p.read
	}
	return out
}

// recordPlain records the plain readings of s of the device (or of its
// use): each value at the scrape's time, or a costly one at the counters'
// reading's, and a counter reset within the session from its new start
// (nvmlclient keptCounter).
func recordPlain(mb *builder, s *nvmlclient.Sample, readings []Reading, device bool, start pcommon.Timestamp) {
	ts, countersTS := pcommon.NewTimestampFromTime(s.Time), pcommon.NewTimestampFromTime(s.CountersTime)
	for i, p := range readings {
		if p.device != device || i >= len(s.Values) || !s.Values[i].OK {
			continue
		}
		at := ts
		if p.read.IsCostly() {
			at = countersTS
		}
		if i < len(s.CountersSince) && !s.CountersSince[i].IsZero() {
			startingAt(mb, pcommon.NewTimestampFromTime(s.CountersSince[i]), start, func() { p.metric.record(mb, at, s.Values[i].Value) })
			continue
		}
		p.metric.record(mb, at, s.Values[i].Value)
	}
}

// startingAt records with the builder's start set to from, for the points
// of a count that began then (an account, a process, a counter reset
// within the session), and sets it back to base, the session's: the
// builder stamps each point it records with its start.
func startingAt(mb *builder, from, base pcommon.Timestamp, record func()) {
	if from == 0 || from == base {
		record()
		return
	}
	mb.Reset(metadata.WithStartTime(from))
	record()
	mb.Reset(metadata.WithStartTime(base))
}
