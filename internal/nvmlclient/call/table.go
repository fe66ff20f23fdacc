//go:build cgo

package call

import (
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// The read table: every NVML read of a GPU, the readings it answers, and
// for the simple ones how its value is put in the Sample. Its first rows,
// fixedReads, have readers of their own; the rows after them are the
// client's plain reads, one NVML value each (WithReads), put in
// Sample.Values in their order. A call is made
// only while a reading it answers is asked for (nvmlclient.WithReadings), so that every
// NVML call of a scrape answers to an enabled metric of the receiver.
// NOT_SUPPORTED, FUNCTION_NOT_FOUND and NO_PERMISSION are cached per call
// and asked again with a backoff (support.go); meanwhile the row's reading
// is absent, or its fallback row answers where it has one. Costs are p50
// CPU per call on an H200 (driver 580, docs/runs/h200-runs.md).

// Spec is one row of the read table.
type Spec struct {
	Name string // as logged and in CallStats
	// Symbol is the C entry point checked at Open: calling one the library
	// lacks kills the process. Empty: every supported driver has it.
	Symbol string
	// Readings are what the call answers; it is made only while one of them
	// is asked for. None: it serves other rows (the GPM sample and the
	// field batch).
	Readings sample.Readings
	// Reader is who reads the row: its collector's own code, the
	// getters' or the field batch's collector (ByGetter, ByField: one
	// value each, Put in the Sample), or a sample window.
	Reader Reader
	// Field is the nvmlFieldValue id of a ByField row, read as one field
	// of the per-GPU GetFieldValues batch (collect/fields.go).
	Field uint32
	// Get is a getter: one NVML call, one value; ByGetter rows, and those
	// whose collector calls it itself.
	Get func(nvml.Device) (float64, nvml.Return)
	// Divisor is how many of the raw units make one of the Sample's (0: 1).
	Divisor float64
	// Put puts the value, in the Sample's unit, where it belongs.
	Put func(*sample.Sample, float64)
	// Fallback answers for the reading when this call gives nothing: not
	// supported, or a sample window with no new sample. None: the
	// reading is absent.
	Fallback ID
	// Costly marks a read too costly for every scrape: it is read on the
	// counters' cadence, off the scrape path, and reported with its
	// reading's time (collect/counters.go).
	Costly bool
	// Cumulative marks a counter: it never goes down but by a reset
	// (keptCounter.keep), and a reset gives it a new start.
	Cumulative bool
	// Links, on a field row, reads the field once per NVLink and folds the
	// links that answer into one value;
	// Decode, where set, turns a raw
	// field value into a number first.
	Links  LinkFold
	Decode func(float64) float64
	// Valid, where set, says which raw values of a plain row are readings.
	Valid func(float64) bool
}

// Reader is who reads a row of the read table.
type Reader int

const (
	ByCollector Reader = iota // its collector's own code (named in the comment above it)
	ByGetter                  // the getters' collector: Get (collect/getters.go)
	ByField                   // one field of the batch (collect/fields.go)
	ByWindow                  // a sample window (collect/sampling.go)
)

// Table is a client's read table: fixedReads, then its plain reads.
type Table []Spec

// NewTable returns the table of plain, rows that each put their value in
// Sample.Values at their place in plain. A getter's symbol is checked at
// Open.
func NewTable(plain []Spec) Table {
	t := make(Table, FirstPlain, int(FirstPlain)+len(plain))
	copy(t, fixedReads[:])
	for i, spec := range plain {
		if spec.Reader == ByGetter && spec.Symbol == "" {
			spec.Symbol, _, _ = strings.Cut(spec.Name, "(")
		}
		spec.Put = putValue(i, spec.Valid)
		t = append(t, spec)
	}
	return t
}

// Plain is the number of plain reads: the length of Sample.Values.
func (t Table) Plain() int { return len(t) - int(FirstPlain) }

// Name is call c as logged and in CallStats.
func (t Table) Name(c ID) string {
	if c <= None || int(c) >= len(t) {
		return "NVML read"
	}
	return t[c].Name
}

// putValue puts plain read i's value in Sample.Values.
func putValue(i int, valid func(float64) bool) func(*sample.Sample, float64) {
	return func(s *sample.Sample, v float64) {
		if valid == nil || valid(v) {
			s.Values[i] = sample.Some(v)
		}
	}
}

// LinkFold is how a per-link field row makes one value of its links.
type LinkFold int

const (
	LinksNone LinkFold = iota // not per link: one field, scope 0
	LinksSum                  // a count over the GPU: the sum of its links'
	LinksMax                  // the worst link's
)

// Value converts a raw reading to the Sample's unit.
func (s *Spec) Value(raw float64) float64 {
	if s.Divisor == 0 {
		return raw
	}
	return raw / s.Divisor
}

// Integer is the value type of a one-value NVML getter.
type Integer interface {
	~uint32 | ~uint64 | ~int | ~int32
}

// Getter wraps a one-value NVML getter for a row.
func Getter[T Integer](get func(nvml.Device) (T, nvml.Return)) func(nvml.Device) (float64, nvml.Return) {
	return func(h nvml.Device) (float64, nvml.Return) {
		v, ret := get(h)
		return float64(v), ret
	}
}

// fixedReads are the reads with readers of their own; NewTable adds the
// plain ones.
var fixedReads = [FirstPlain]Spec{
	// Utilization (collect/sampling.go). On GPUs with GPM the general reading is
	// GPM's graphics utilization over the scrape window (GPMActivityMetrics); the
	// GPU window below serves GPUs without GPM. Encoder and decoder read
	// the instant getter, and their window only while the engine is active.
	// A window costs 1.4 ms, the instant getters <0.05 ms.
	SamplesGPU: {Reader: ByWindow, Name: "nvmlDeviceGetSamples(GPU_UTILIZATION_SAMPLES)", Readings: sample.Of(sample.Utilization),
		Fallback: UtilizationRates},
	SamplesMemory: {Reader: ByWindow, Name: "nvmlDeviceGetSamples(MEMORY_UTILIZATION_SAMPLES)", Readings: sample.Of(sample.MemoryController),
		Fallback: UtilizationRates},
	SamplesEncoder: {Reader: ByWindow, Name: "nvmlDeviceGetSamples(ENC_UTILIZATION_SAMPLES)", Readings: sample.Of(sample.Utilization),
		Fallback: EncoderUtilization},
	SamplesDecoder: {Reader: ByWindow, Name: "nvmlDeviceGetSamples(DEC_UTILIZATION_SAMPLES)", Readings: sample.Of(sample.Utilization),
		Fallback: DecoderUtilization},
	UtilizationRates: {Name: "nvmlDeviceGetUtilizationRates", Readings: sample.Of(sample.Utilization, sample.MemoryController)},
	EncoderUtilization: {Name: "nvmlDeviceGetEncoderUtilization", Readings: sample.Of(sample.Utilization),
		Get: Getter(func(h nvml.Device) (uint32, nvml.Return) { v, _, ret := h.GetEncoderUtilization(); return v, ret })},
	DecoderUtilization: {Name: "nvmlDeviceGetDecoderUtilization", Readings: sample.Of(sample.Utilization),
		Get: Getter(func(h nvml.Device) (uint32, nvml.Return) { v, _, ret := h.GetDecoderUtilization(); return v, ret })},

	// Memory (collect/getters.go, the MIG collector): used, total and reserved in one call.
	MemoryInfo:    {Name: "nvmlDeviceGetMemoryInfo", Readings: sample.Of(sample.Memory)},
	MIGMemoryInfo: {Name: "nvmlDeviceGetMemoryInfo(MIG device)", Readings: sample.Of(sample.Memory)},

	// Processes (collect/processes.go): the lists (0.01 ms), then their utilization
	// (1.4-1.6 ms) only when a list holds a process. All or nothing: a
	// failed call drops the whole list.
	ComputeProcesses: {Name: "nvmlDeviceGetComputeRunningProcesses", Symbol: "nvmlDeviceGetComputeRunningProcesses",
		Readings: sample.Of(sample.Processes)},
	GraphicsProcesses: {Name: "nvmlDeviceGetGraphicsRunningProcesses", Symbol: "nvmlDeviceGetGraphicsRunningProcesses",
		Readings: sample.Of(sample.Processes)},
	ProcessUtilization: {Name: "nvmlDeviceGetProcessUtilization", Symbol: "nvmlDeviceGetProcessUtilization",
		Readings: sample.Of(sample.ProcessUtilization)},
	// A MIG device's own list (collect/mig.go); where it is not supported, the
	// parent's list answers for it.
	MIGProcesses: {Name: "nvmlDeviceGetComputeRunningProcesses(MIG device)", Symbol: "nvmlDeviceGetComputeRunningProcesses",
		Readings: sample.Of(sample.Processes)},
	// The MPS clients among the compute processes (0.01 ms), asked only
	// when the compute list holds a process, of the GPU and of each MIG
	// device that lists its own. Not all or nothing: without it (an old
	// driver, a failure) no process is known to be a client.
	MPSProcesses: {Name: "nvmlDeviceGetMPSComputeRunningProcesses", Symbol: "nvmlDeviceGetMPSComputeRunningProcesses",
		Readings: sample.Of(sample.Processes)},

	// GPM (collect/gpm.go): one sample (0.05 ms) and one metrics call (0.9-1.7 ms)
	// per GPU per scrape, asking only for the asked-for readings
	// (GPMActivityMetrics, GPMTrafficMetrics, gpm.go). All or nothing.
	GPMSampleGet:  {Name: "nvmlGpmSampleGet"},
	GPMMetricsGet: {Name: "nvmlGpmMetricsGet"},

	// Health, <0.05 ms each. ECC and remapped rows cost 0.015 ms as
	// getters or as fields alike: they stay on their getters, read at every
	// scrape.
	ECCCorrected: {Reader: ByGetter, Name: "nvmlDeviceGetTotalEccErrors(CORRECTED)", Symbol: "nvmlDeviceGetTotalEccErrors",
		Readings: sample.Of(sample.ECCCorrected),
		Get: Getter(func(h nvml.Device) (uint64, nvml.Return) {
			return h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
		}),
		Put: func(s *sample.Sample, v float64) { s.Health.ECCCorrected = sample.Some(uint64(v)) }},
	ECCUncorrected: {Reader: ByGetter, Name: "nvmlDeviceGetTotalEccErrors(UNCORRECTED)", Symbol: "nvmlDeviceGetTotalEccErrors",
		Readings: sample.Of(sample.ECCUncorrected),
		Get: Getter(func(h nvml.Device) (uint64, nvml.Return) {
			return h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		}),
		Put: func(s *sample.Sample, v float64) { s.Health.ECCUncorrected = sample.Some(uint64(v)) }},
	// Remapped rows answer four readings in one call (collect/health.go).
	RemappedRows: {Name: "nvmlDeviceGetRemappedRows", Symbol: "nvmlDeviceGetRemappedRows", Readings: sample.Of(sample.RemappedRows)},
	ClockEventReasons: {Reader: ByGetter, Name: "nvmlDeviceGetCurrentClocksEventReasons", Symbol: "nvmlDeviceGetCurrentClocksEventReasons",
		Readings: sample.Of(sample.ClockEvents), Get: Getter(nvml.Device.GetCurrentClocksEventReasons), Put: putClockEvents},
	// The batch: 0.015 ms with the memory temperature alone; the
	// counters' batch 1.25 ms.
	FieldValues: {Name: "nvmlDeviceGetFieldValues", Symbol: "nvmlDeviceGetFieldValues"},
	// Device.Check's one cheap question; no reading: never part of a read.
	Check: {Name: "nvmlDeviceGetTemperature",
		Get: Getter(func(h nvml.Device) (uint32, nvml.Return) { return h.GetTemperature(nvml.TEMPERATURE_GPU) })},
}

// String is a fixed call as logged; Table.Name names every call.
func (c ID) String() string {
	if c <= None || c >= FirstPlain {
		return "NVML read"
	}
	return fixedReads[c].Name
}

// clockEventBits are the reasons' bits of
// nvmlDeviceGetCurrentClocksEventReasons.
var clockEventBits = [sample.ClockEventReasonCount]uint64{
	sample.ReasonGPUIdle:              nvml.ClocksEventReasonGpuIdle,
	sample.ReasonApplicationsClocks:   nvml.ClocksEventReasonApplicationsClocksSetting,
	sample.ReasonSWPowerCap:           nvml.ClocksEventReasonSwPowerCap,
	sample.ReasonHWSlowdown:           nvml.ClocksThrottleReasonHwSlowdown,
	sample.ReasonSyncBoost:            nvml.ClocksEventReasonSyncBoost,
	sample.ReasonSWThermalSlowdown:    nvml.ClocksEventReasonSwThermalSlowdown,
	sample.ReasonHWThermalSlowdown:    nvml.ClocksThrottleReasonHwThermalSlowdown,
	sample.ReasonHWPowerBrakeSlowdown: nvml.ClocksThrottleReasonHwPowerBrakeSlowdown,
	sample.ReasonDisplayClocks:        nvml.ClocksEventReasonDisplayClockSetting,
}

// putClockEvents sets each reason from the bits of
// nvmlDeviceGetCurrentClocksEventReasons.
func putClockEvents(s *sample.Sample, bits float64) {
	v := uint64(bits)
	for reason, bit := range clockEventBits {
		s.Health.ClockEvents[reason] = sample.Some(v&bit != 0)
	}
}
