//go:build cgo

package call

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/guard"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/raw"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// GPU is one GPU as its calls see it, the handle the collectors read
// through: its NVML handles, the session it shares, what a read asks of it
// (Plan) and what its calls answered (the record: support cache, failures,
// logs, timings). nvmlclient's Device holds one, beside its use and its
// collectors.
type GPU struct {
	Lib     nvml.Interface
	Handle  nvml.Device
	Raw     raw.Device // the C handle, for the bounded list calls (listcalls.go); set with the baselines
	Symbols Symbols
	UUID    string
	Logger  *zap.Logger
	Session *Session // set at Open, once the session is made
	Table   Table    // the client's: read-only
	Plan    Plan
	record  record
}

// Session is what the GPUs of one NVML session share.
type Session struct {
	Calls *guard.Inflight // the session's NVML calls in flight
	Lane  *guard.Guard    // one GPU's reads at a time across the session
	GPM   *guard.Guard    // one GPM call sequence at a time across the session's GPUs
	Raw   *raw.Lib        // the bounded list calls; nil on go-nvml's mocks
	Lost  *logonce.Log    // the GPUs logged lost, across the client's sessions
}

// Plan is what a read asks for: set at Open (Configure), and HasGPM when
// the device takes its baselines.
type Plan struct {
	// Wanted says which calls answer an asked-for reading, or are plain
	// reads: each plain read is asked for.
	Wanted []bool
	// Readings are the readings asked for; LeftOut counts what failed calls
	// drop: readings, and plain reads by their place in Sample.Values
	// (nvmlclient.WithLeftOutCount).
	Readings sample.Readings
	LeftOut  func(wanted sample.Readings, plain []int) int
	Now      func() time.Time // times GPM windows, backoffs and the energy cadence
	GPM      GPMPlan          // what the GPU's and its MIG devices' GPM windows ask for
}

// record is what the device's calls answered.
type record struct {
	// support caches NOT_SUPPORTED answers, with a backoff (support.go).
	support supportCache
	// once remembers what was logged once (LogOnce); callLog, what the log
	// said of each failing call (LogCalls).
	once    *logonce.Log
	callLog *logonce.Log
	// failing is each call's failure (LogCalls, under logMu);
	// failingCount, how many fail now, lets a success skip the lock while
	// none does.
	logMu        sync.Mutex
	failing      []callState
	failingCount atomic.Int32
	stats        []callStat
	panics       atomic.Int64 // recovered inside reads (panics.go)
}

// maxLoggedOnce bounds a device's memory of lines logged once: a few per
// call and GPM metric.
const maxLoggedOnce = 256

// NewGPU returns the GPU of handle h reading table t, every call wanted
// and every reading asked for until Configure, on the system clock.
func NewGPU(lib nvml.Interface, h nvml.Device, t Table, uuid string, sym Symbols, logger *zap.Logger) *GPU {
	d := &GPU{Lib: lib, Handle: h, Table: t, Symbols: sym, UUID: uuid, Logger: logger,
		Plan: Plan{Now: time.Now, Readings: sample.All, LeftOut: countLeftOut, Wanted: make([]bool, len(t))}}
	d.record.once = logonce.New(maxLoggedOnce)
	d.record.callLog = logonce.New(len(t), logonce.WithHoldOff(FlapHoldOff), logonce.WithClock(func() time.Time { return d.Plan.Now() }))
	d.record.failing, d.record.stats = make([]callState, len(t)), make([]callStat, len(t))
	for c := range d.Plan.Wanted {
		d.Plan.Wanted[c] = true
	}
	d.record.support.once, d.record.support.table = d.record.once, t
	d.record.support.state = make([]supportState, len(t))
	for c := range sym.missing {
		// Known absent before the first call: skipped for good, without a
		// log line per device (the library, not the GPU, lacks it).
		d.record.support.markMissing(c)
	}
	return d
}

// Configure asks for wanted: a call is wanted only while a reading it
// answers is asked for. leftOut, where set, counts what failed calls
// leave out; now, where set, is the clock of the reads.
func (d *GPU) Configure(wanted sample.Readings, leftOut func(sample.Readings, []int) int, now func() time.Time) {
	if now != nil {
		d.Plan.Now = now
	}
	if leftOut != nil {
		d.Plan.LeftOut = leftOut
	}
	d.Plan.Readings = wanted
	fields := false
	for c := range d.Table {
		spec := &d.Table[c]
		d.Plan.Wanted[c] = wanted.Any(spec.Readings) || ID(c) >= FirstPlain
		fields = fields || spec.Reader == ByField && d.Plan.Wanted[c]
	}
	d.Plan.Wanted[FieldValues] = fields
	d.Plan.GPM = planGPM(wanted)
	gpm := d.Plan.GPM.Readings != 0
	d.Plan.Wanted[GPMSampleGet], d.Plan.Wanted[GPMMetricsGet] = gpm, gpm
}

// LogOnce runs log the first time key is seen on this device.
func (d *GPU) LogOnce(key string, log func(*zap.Logger)) {
	if d.record.once.Once(key) {
		log(d.Logger)
	}
}

// FlushSupportLogs logs the calls found unsupported, and those back, since
// the last flush (support.go).
func (d *GPU) FlushSupportLogs() { d.record.support.flushLogs(d.Logger) }

// LeftOutBy counts what the failed calls leave out: the asked-for readings
// and the plain reads they answer, as nvmlclient.WithLeftOutCount counts
// them; at least 1.
func (d *GPU) LeftOutBy(failed []*Error) int {
	var wanted sample.Readings
	var plain []int
	for _, f := range failed {
		wanted |= d.Table[f.id].Readings
		switch {
		case f.id == GPMSampleGet || f.id == GPMMetricsGet:
			wanted |= d.Plan.GPM.Readings
		case f.id >= FirstPlain:
			plain = append(plain, int(f.id-FirstPlain))
		}
	}
	return max(d.Plan.LeftOut(wanted&d.Plan.Readings, plain), 1)
}

// countLeftOut counts each reading and plain read as one.
func countLeftOut(wanted sample.Readings, plain []int) int { return wanted.Len() + len(plain) }
