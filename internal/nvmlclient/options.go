package nvmlclient

import (
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// options configure a Client: client.go's, or nocgo.go's without cgo.
type options struct {
	processes       bool
	now             func() time.Time
	readings        sample.Readings
	reads           []Read
	leftOut         func(wanted sample.Readings, reads []int) int
	counterInterval time.Duration
	memCtrlOnGPM    bool
	eventWait       time.Duration
	shareInterval   time.Duration
}

// DefaultEventWait is how long one wait for NVML's events lasts.
const DefaultEventWait = 500 * time.Millisecond

// defaultReads are the reads of a Client without WithReads: none but in
// this package's tests.
var defaultReads []Read

func defaultOptions() options {
	return options{now: time.Now, readings: sample.All, reads: defaultReads, counterInterval: DefaultCounterInterval, eventWait: DefaultEventWait}
}

// Option configures a Client.
type Option func(*options)

// WithCounterInterval sets how often the costly counters (energy,
// violation time, PCIe replays) are read, in the background (collect/counters.go);
// 0 reads them at every Read, still off its path.
func WithCounterInterval(d time.Duration) Option { return func(o *options) { o.counterInterval = d } }

// WithMemoryControllerOnGPM reads the memory controller's busy window (one
// more GetSamples call, 1.4 ms) also on GPUs with GPM, where GPM's DRAM
// bandwidth utilization otherwise tells memory activity.
func WithMemoryControllerOnGPM(on bool) Option { return func(o *options) { o.memCtrlOnGPM = on } }

// WithProcesses makes every Read also list the GPU's processes, with their
// memory and windowed utilization.
func WithProcesses(on bool) Option { return func(o *options) { o.processes = on } }

// WithShareInterval samples the processes' shares of each GPU's busy time
// every d between reads (shares.go), for Process.BusyShare; 0 samples them
// at the reads only.
func WithShareInterval(d time.Duration) Option { return func(o *options) { o.shareInterval = d } }

// WithEventWait sets how long one wait for NVML's events lasts (at least
// 1 ms): the watcher sees a stop between waits, so this bounds how long
// stopping it takes. The receiver passes its lifecycle bound.
func WithEventWait(d time.Duration) Option {
	return func(o *options) { o.eventWait = max(d, time.Millisecond) }
}

// WithClock sets the clock that times the device's reads: Sample.Time,
// GPM windows, the utilization windows' spans, backoffs and the counters'
// cadence. The receiver passes its own, so that its accounts' windows and
// the samples are read off one clock.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// DefaultCounterInterval is how often the costly counters are read unless
// configured otherwise.
const DefaultCounterInterval = 10 * time.Second

// WithReadings makes every Read ask NVML only for the readings in want.
// Without it, every reading is read.
func WithReadings(want sample.Readings) Option { return func(o *options) { o.readings = want } }

// WithLeftOutCount sets how a ReadError counts what its failed calls left
// out (ReadError.Metrics): the readings, and the plain reads by their place
// in WithReads. The receiver counts its enabled metrics that need one of
// them. Without it, each reading and read counts as one.
func WithLeftOutCount(count func(wanted sample.Readings, reads []int) int) Option {
	return func(o *options) { o.leftOut = count }
}

// WithReads makes every Read also read reads, each value landing in
// Sample.Values at its place in reads.
func WithReads(reads ...Read) Option { return func(o *options) { o.reads = reads } }
