//go:build cgo

package nvmlclient

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/guard"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/raw"
)

// Device reads one GPU. Reads of one device never overlap: a read that is
// still stuck in NVML makes the next one return ErrBusy instead of piling up
// goroutines (guard/use.go).
type Device struct {
	Info DeviceInfo

	lib     nvml.Interface
	handle  nvml.Device
	raw     raw.Device // the C handle, for the bounded list calls (prime.go)
	symbols symbols
	logger  *zap.Logger

	sess  *session        // what the session's GPUs share: the lane, the GPM gate, the calls in flight
	use   guard.DeviceUse // one use of the handle at a time: a read, priming, a check or a share sample
	state deviceState

	plan readPlan // what is asked of the GPU, and by which clock
	book callBook // what the calls answered: support, failures, logs, timings

	parts collectorSet // the collectors that read the GPU (collectors.go)
}

// deviceState is what NVML has said of the GPU.
type deviceState struct {
	lost   atomic.Bool
	primed atomic.Bool
}

// readPlan is what a read asks for: set at Open.
type readPlan struct {
	// wanted says which calls answer an asked-for figure.
	wanted [allCalls]bool
	// figures are the figures asked for; leftOut counts what failed calls
	// drop (WithLeftOutCount).
	figures Figures
	leftOut func(Figures) int
	now     func() time.Time // times GPM windows, backoffs and the energy cadence
	gpm     gpmPlan          // what the GPU's and its MIG devices' GPM windows ask for
}

// callBook is what the device's calls answered.
type callBook struct {
	// support caches NOT_SUPPORTED answers, with a backoff (support.go).
	support supportCache
	// once remembers what was logged once (logOnce); callLog, what the log
	// said of each failing call (logCalls).
	once    *logonce.Log
	callLog *logonce.Log
	// failing is each call's failure (logCalls, under logMu);
	// failingCount, how many fail now, lets a success skip the lock while
	// none does.
	logMu        sync.Mutex
	failing      [allCalls]callState
	failingCount atomic.Int32
	stats        [allCalls]callStat
	panics       atomic.Int64 // recovered inside reads (panics.go)
}

// collectorSet is the device's collectors: list, as a read runs them, and
// by name those that configure, the share sampler, Inventory or Close
// reach.
type collectorSet struct {
	list     []collector
	activity *activityCollector
	procs    *processCollector
	mig      *migCollector
	counters *counterState
}

// callStat accumulates how long one NVML call takes on one device.
type callStat struct {
	count, totalNanos, maxNanos atomic.Int64
}

func (cs *callStat) observe(d time.Duration) {
	n := d.Nanoseconds()
	cs.count.Add(1)
	cs.totalNanos.Add(n)
	for {
		m := cs.maxNanos.Load()
		if n <= m || cs.maxNanos.CompareAndSwap(m, n) {
			return
		}
	}
}

func newDevice(lib nvml.Interface, h nvml.Device, info DeviceInfo, sym symbols, logger *zap.Logger) *Device {
	d := &Device{
		Info:    info,
		lib:     lib,
		handle:  h,
		symbols: sym,
		logger:  logger.With(zap.String("hw.id", info.UUID), zap.Int("nvidia.gpu.index", info.Index)),
		plan:    readPlan{now: time.Now, figures: AllFigures, leftOut: Figures.Len},
	}
	d.book.once = logonce.New(maxLoggedOnce)
	d.newCollectors()
	d.book.callLog = logonce.New(int(allCalls), logonce.WithHoldOff(flapHoldOff), logonce.WithClock(func() time.Time { return d.plan.now() }))
	for c := range d.plan.wanted {
		d.plan.wanted[c] = true
	}
	d.book.support.once = d.book.once
	for c := range sym.missing {
		// Known absent before the first call: skipped for good, without a
		// log line per device (the library, not the GPU, lacks it).
		d.book.support.markMissing(c)
	}
	return d
}

// configure applies the client's options: a call is wanted only while a
// figure it answers is asked for.
func (d *Device) configure(o options) {
	if o.now != nil {
		d.plan.now = o.now
	}
	d.parts.activity.memCtrlOnGPM = o.memCtrlOnGPM
	d.parts.procs.on = o.processes
	d.parts.mig.processes = o.processes
	d.parts.counters.interval = o.counterInterval
	d.plan.figures = o.figures
	if o.leftOut != nil {
		d.plan.leftOut = o.leftOut
	}
	fields := false
	for c := range readTable {
		spec := &readTable[c]
		d.plan.wanted[c] = d.plan.figures.Any(spec.figures)
		fields = fields || spec.field != 0 && d.plan.wanted[c]
	}
	d.plan.wanted[callFieldValues] = fields
	gpm := false
	for _, g := range gpmActivityMetrics {
		gpm = gpm || d.plan.figures.Any(g.figures)
	}
	for _, g := range gpmTrafficMetrics {
		gpm = gpm || d.plan.figures.Any(g.figures)
	}
	d.plan.wanted[callGPMSampleGet], d.plan.wanted[callGPMMetricsGet] = gpm, gpm
	d.plan.gpm = planGPM(d.plan.figures)
}

// Lost reports whether NVML has said this GPU is lost.
func (d *Device) Lost() bool { return d.state.lost.Load() }

// Read takes one Sample of the device. A call the device does not support
// leaves its figures absent. A call that fails otherwise drops only the
// figures it feeds: the sample comes back with a *ReadError that names the
// calls and counts the metrics left out. Only where figures must agree is a
// group all or nothing: the GPM sample with its metrics, and the process
// list with its utilization.
func (d *Device) Read() (Sample, error) {
	lane, err := d.enter()
	if err != nil {
		return Sample{}, err
	}
	defer d.exit(lane)
	d.prime()

	s := Sample{Time: d.plan.now()} // the device clock: windows and counters agree with GPM's
	r := &reading{d: d, in: d.scrapeInput()}
	for _, c := range d.parts.list {
		if r.lost {
			break
		}
		r.guard(c, &s)
	}
	joinParentProcesses(&s, r.fromParent)
	d.book.support.flushLogs(d.logger)

	if r.lost || d.state.lost.Load() {
		d.markLost(r.lostCall)
		return Sample{}, ErrGPULost
	}
	d.sess.lost.OK(d.Info.UUID)
	d.logCalls(r.failed)
	if len(r.failed) == 0 {
		return s, nil
	}
	return s, &ReadError{Calls: r.failed, Metrics: d.leftOutBy(r.failed)}
}

// Check asks the GPU one cheap question (its temperature) to learn whether
// it still answers, without reading its figures: a receiver with only the
// event watcher must still see every GPU lost, to re-initialize NVML after
// a driver reload. It returns ErrGPULost once NVML says so and ErrBusy while
// a read is stuck in NVML; any other answer, a failure too, is an answer.
func (d *Device) Check() error {
	lane, err := d.enter()
	if err != nil {
		return err
	}
	defer d.exit(lane)
	ret := func() (ret nvml.Return) {
		defer func() {
			if p := recover(); p != nil {
				d.countPanic(p)
				ret = nvml.ERROR_UNKNOWN
			}
		}()
		_, ret = readTable[callOf(FigTemperature)].get(d.handle)
		return ret
	}()
	if classify(ret) == outcomeLost {
		d.markLost(callOf(FigTemperature))
		return ErrGPULost
	}
	d.sess.lost.OK(d.Info.UUID)
	return nil
}

// flapHoldOff is how long after a call's warn line a new failure of that
// call (a new episode, or a new cause) is counted rather than logged: a call
// that flaps every 30 s writes 4 lines in 10 minutes, not 40. The next line
// after the hold-off says how many failures went unlogged.
const flapHoldOff = 5 * time.Minute

// callState is what a device's reads know of one call's failure: the log
// (callLog) keeps what it said of it.
type callState struct {
	failing  bool // failed at its last answer
	answered bool // succeeded since it failed (answeredAgain)
}

// logCalls logs, at warn and without a stack trace, each call that fails
// for the first time or with a new cause, and at info the recovery of each
// call whose failure was logged. A call that keeps failing is logged once,
// however many scrapes it lasts; a call that flaps, once per flapHoldOff.
func (d *Device) logCalls(failed []*CallError) {
	if len(failed) == 0 && d.book.failingCount.Load() == 0 {
		return
	}
	var failedNow [allCalls]bool
	var back []call
	d.book.logMu.Lock()
	for _, f := range failed {
		failedNow[f.call] = true
		d.book.failing[f.call] = callState{failing: true}
	}
	n := int32(0)
	for c := range d.book.failing {
		st := &d.book.failing[c]
		if st.failing && st.answered && !failedNow[c] {
			*st = callState{}
			back = append(back, call(c))
		}
		if st.failing {
			n++
		}
	}
	d.book.failingCount.Store(n)
	d.book.logMu.Unlock()
	for _, f := range failed {
		v := d.book.callLog.Fail(f.call.String(), f.cause())
		if !v.Log {
			continue
		}
		fields := []zap.Field{zap.String("call", f.Call), zap.Error(f)}
		if v.Unlogged > 0 {
			fields = append(fields, zap.Int("unlogged_failures", v.Unlogged))
		}
		d.logger.Warn("NVML call failed; the metrics it feeds are left out until it answers again "+
			"(logged once per call and cause, and once when it recovers; a call that keeps flapping once per "+
			flapHoldOff.String()+", with the failures not logged in between)", fields...)
	}
	for _, c := range back {
		if d.book.callLog.OK(c.String()) {
			d.logger.Info("NVML call recovered; the metrics it feeds are back", zap.String("call", c.String()))
		}
	}
}

// answeredAgain records that c succeeded: if it was failing, the next Read
// logs that it is back.
func (d *Device) answeredAgain(c call) {
	if d.book.failingCount.Load() == 0 {
		return
	}
	d.book.logMu.Lock()
	if st := &d.book.failing[c]; st.failing {
		st.answered = true
	}
	d.book.logMu.Unlock()
}

// markLost records that the GPU fell off the bus, logged once, at warn as
// every other cause: hw.status failed and the GPULost alert say it where it
// is watched, and the collector's logger adds a stack trace to an error.
func (d *Device) markLost(c call) {
	if d.state.lost.CompareAndSwap(false, true) && d.sess.lost.Once(d.Info.UUID) {
		d.logger.Warn("GPU is lost (fallen off the bus); no more metrics from it until NVML is re-initialized",
			zap.String("call", c.String()))
	}
}

// leftOutBy counts what the failed calls leave out: the asked-for figures
// they answer, as WithLeftOutCount counts them; at least 1.
func (d *Device) leftOutBy(failed []*CallError) int {
	var figs Figures
	for _, f := range failed {
		figs |= readTable[f.call].figures
		if f.call == callGPMSampleGet || f.call == callGPMMetricsGet {
			figs |= d.plan.gpm.figures
		}
	}
	return max(d.plan.leftOut(figs&d.plan.figures), 1)
}

// maxLoggedOnce bounds a device's memory of lines logged once: a few per
// call and GPM metric.
const maxLoggedOnce = 256

// logOnce runs log the first time key is seen on this device.
func (d *Device) logOnce(key string, log func(*zap.Logger)) {
	if d.book.once.Once(key) {
		log(d.logger)
	}
}
