package record

import (
	"fmt"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
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
func recordPlain(mb *builder, s *sample.Sample, readings []Reading, device bool, start pcommon.Timestamp) {
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
	mb.Reset(startOption(from))
	record()
	mb.Reset(startOption(base))
}

// startOptions holds the builder option of each start in use, made once:
// an account's start lasts as long as the account, and the session's as
// long as the session. An option only sets its time, so receivers share
// them.
var startOptions = struct {
	sync.Mutex
	m map[pcommon.Timestamp]metadata.MetricBuilderOption
}{m: map[pcommon.Timestamp]metadata.MetricBuilderOption{}}

// maxStartOptions bounds startOptions: far above the accounts of a host.
const maxStartOptions = 4096

func startOption(t pcommon.Timestamp) metadata.MetricBuilderOption {
	startOptions.Lock()
	defer startOptions.Unlock()
	o, ok := startOptions.m[t]
	if !ok {
		if len(startOptions.m) >= maxStartOptions {
			clear(startOptions.m)
		}
		o = metadata.WithStartTime(t)
		startOptions.m[t] = o
	}
	return o
}

// metricNeed says which readings of the NVML layer a metric needs: NVML
// is asked for a reading while an enabled metric needs it.
type metricNeed struct {
	name     string // as in metadata.yaml
	readings sample.Readings
	// derived marks a metric computed from other metrics' readings (the
	// GPU-time counters): a failed call does not leave its point out, so
	// it is not counted as left out.
	derived bool
}

func needs(fs ...sample.Reading) sample.Readings { return sample.Of(fs...) }

// metricNeeds maps the metrics recorded by their own code to readings;
// the plain metrics' readings are in plainReadings (readings.go). The
// metrics in neither need no NVML reading (XIDs come from events). The CPU metrics are
// read from /proc and the cgroups, and process.dropped is counted at the
// cap, but only of the processes NVML lists: they need the list.
var metricNeeds = []metricNeed{
	{"container.cpu.time", needs(sample.Processes), false},
	{"hw.errors", needs(sample.ECCCorrected, sample.ECCUncorrected), false},
	{"hw.gpu.io", needs(sample.PCIeTraffic), false},
	{"hw.gpu.memory.limit", needs(sample.Memory), false},
	{"hw.gpu.memory.usage", needs(sample.Memory), false},
	{"hw.gpu.memory.utilization", needs(sample.Memory), false},
	{"hw.gpu.utilization", needs(sample.Utilization), false},
	{"hw.status", statusNeeds, false},
	{"nvidia.gpu.active.time", needs(sample.SMActivity), true},
	{"nvidia.gpu.busy.time", needs(sample.Utilization), true},
	{"nvidia.gpu.clock.event.active", needs(sample.ClockEvents), false},
	{"nvidia.gpu.container.cpu.limit", needs(sample.Processes), false},
	{"nvidia.gpu.free.time", needs(sample.Processes), true},
	{"nvidia.gpu.graphics.activity", needs(sample.GraphicsActivity), false},
	{"nvidia.gpu.held.time", needs(sample.Processes), true},
	{"nvidia.gpu.idle.time", needs(sample.Utilization, sample.SMActivity, sample.Processes), true},
	{"nvidia.gpu.memory.bandwidth.utilization", needs(sample.DRAMBandwidth), false},
	{"nvidia.gpu.memory.controller.utilization", needs(sample.MemoryController), false},
	{"nvidia.gpu.memory.reserved", needs(sample.Memory), false},
	{"nvidia.gpu.memory.row_remap.rows", needs(sample.RemappedRows), false},
	{"nvidia.gpu.memory.row_remap.status", needs(sample.RemappedRows), false},
	{"nvidia.gpu.nvlink.io", needs(sample.NVLinkTraffic), false},
	{"nvidia.gpu.pipe.activity", needs(sample.Pipes), false},
	{"nvidia.gpu.process.busy.time", needs(sample.Utilization, sample.Processes, sample.ProcessUtilization), true},
	{"nvidia.gpu.process.count", needs(sample.Processes), false},
	{"nvidia.gpu.process.dropped", needs(sample.Processes), false},
	{"nvidia.gpu.process.held.time", needs(sample.Processes), true},
	{"nvidia.gpu.process.idle.time", needs(sample.Processes), true},
	{"nvidia.gpu.process.memory.controller.utilization", needs(sample.Processes, sample.ProcessUtilization), false},
	{"nvidia.gpu.process.memory.usage", needs(sample.Processes), false},
	{"nvidia.gpu.process.utilization", needs(sample.Processes, sample.ProcessUtilization), false},
	{"nvidia.gpu.sm.activity", needs(sample.SMActivity), false},
	{"nvidia.gpu.sm.occupancy", needs(sample.SMOccupancy), false},
	{"nvidia.gpu.tensor.activity", needs(sample.TensorActivity), false},
	{"nvidia.gpu.tensor.pipe.activity", needs(sample.TensorPipes), false},
	{"nvidia.gpu.unobserved.time", needs(sample.Processes), true},
	{"process.cpu.time", needs(sample.Processes), false},
}

// Needs is every reading of the NVML layer that an enabled metric of m
// needs, and what the enabled owner attributes of a GPU's resource (ra)
// need: the owner is found through the GPU's processes (holders.Tracker.GPU).
func Needs(m *metadata.MetricsConfig, ra *metadata.ResourceAttributesConfig) sample.Readings {
	var out sample.Readings
	for _, mf := range metricNeeds {
		if mf.enabled(m) {
			out |= mf.readings
		}
	}
	if ra.ContainerID.Enabled || ra.K8sPodUID.Enabled || ra.K8sPodName.Enabled ||
		ra.K8sNamespaceName.Enabled || ra.K8sContainerName.Enabled || ra.SlurmJobID.Enabled || ra.SlurmJobStep.Enabled ||
		ra.UserName.Enabled {
		out |= needs(sample.Processes)
	}
	return out
}

// enabled reports whether the metric is enabled in m.
func (mf *metricNeed) enabled(m *metadata.MetricsConfig) bool {
	return metricEnabled(m, metricFields().byName[mf.name])
}

// LeftOut counts the metrics a GPU's scrape leaves out: the enabled
// metrics of m, not derived, that need one of the readings failed calls
// left out, and the metrics of the failed readings (indices into
// readings), each once.
func LeftOut(m *metadata.MetricsConfig, readings []Reading, failed sample.Readings, reads []int) int {
	metrics := map[string]bool{}
	for _, mf := range metricNeeds {
		if !mf.derived && mf.enabled(m) && mf.readings.Any(failed) {
			metrics[mf.name] = true
		}
	}
	for _, i := range reads {
		metrics[readings[i].metric.field] = true
	}
	return len(metrics)
}
