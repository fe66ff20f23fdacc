package nvmlclient

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"
)

var clockCalls = [clockCount]struct {
	call call
	typ  nvml.ClockType
}{
	ClockSM:       {callClockSM, nvml.CLOCK_SM},
	ClockMemory:   {callClockMemory, nvml.CLOCK_MEM},
	ClockGraphics: {callClockGraphics, nvml.CLOCK_GRAPHICS},
	ClockVideo:    {callClockVideo, nvml.CLOCK_VIDEO},
}

// Device reads one GPU. Reads of one device never overlap: a read that is
// still stuck in NVML makes the next one return ErrBusy instead of piling up
// goroutines.
type Device struct {
	Info DeviceInfo

	lib     nvml.Interface
	handle  nvml.Device
	symbols symbols
	logger  *zap.Logger

	busy   atomic.Bool
	lost   atomic.Bool
	primed atomic.Bool
	panics atomic.Int64 // recovered inside reads (panics.go)

	opts   options
	calls  *inflight // the session's NVML calls in flight
	rawLib *rawLib   // nil on go-nvml's mocks
	raw    rawDevice // the C handle, for the bounded list calls (prime.go)

	// unsupported caches NOT_SUPPORTED answers. Each call's slot is written
	// only by the goroutine that makes that call, under busy.
	unsupported [callCount]atomic.Bool
	windows     [samplingCount]window
	procWindow  processWindow
	gpm         gpmState
	migs        []*migDevice
	now         func() time.Time // times GPM windows
	// readProcesses is set by the client's options at Open.
	readProcesses bool

	logMu            sync.Mutex
	logged           map[string]struct{}
	newlyUnsupported []string

	stats [callCount]callStat
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
		logged:  map[string]struct{}{},
		now:     time.Now,
	}
	for c := range sym.missing {
		// Known absent before the first call: skipped, without a log line per
		// device (the library, not the GPU, lacks it).
		d.unsupported[c].Store(true)
	}
	return d
}

// Lost reports whether NVML has said this GPU is lost.
func (d *Device) Lost() bool { return d.lost.Load() }

// Read takes one Sample of the device. A call the device does not support
// leaves its field absent. Any other NVML error fails the whole sample, so
// that a half-read GPU never reports inconsistent figures.
func (d *Device) Read() (Sample, error) {
	if d.lost.Load() {
		return Sample{}, ErrGPULost
	}
	if !d.busy.CompareAndSwap(false, true) {
		return Sample{}, ErrBusy
	}
	defer d.busy.Store(false)
	d.calls.begin()
	defer d.calls.end()
	d.prime()

	s := Sample{Time: time.Now()}
	// Energy is the slowest getter (3 ms p50, 15 ms max on an H200): read it
	// beside the others rather than after them.
	energy := newReading(d)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer energy.recoverPanic()
		energy.readEnergy(&s)
	}()

	r := newReading(d)
	func() {
		defer r.recoverPanic()
		r.readUtilization(&s)
		r.readMemory(&s)
		r.readThermalsAndPower(&s)
		r.readMemoryTemperature(&s)
		r.readClocks(&s)
		if d.readProcesses {
			r.readProcesses(&s)
		}
		r.readGPM(&s)
		r.readHealth(&s)
		r.readMIG(&s)
	}()
	<-done
	d.flushUnsupported()

	for _, rr := range []*reading{r, energy} {
		if rr.lost {
			if d.lost.CompareAndSwap(false, true) {
				d.logger.Error("GPU is lost (fallen off the bus); no more metrics from it until NVML is re-initialized",
					zap.String("call", rr.lostCall.String()))
			}
			return Sample{}, ErrGPULost
		}
	}
	for _, rr := range []*reading{r, energy} {
		if rr.err != nil {
			d.logOnce("error:"+rr.err.Error(), func(l *zap.Logger) {
				l.Warn("NVML call failed; dropping this GPU's points for the scrape (logged once per cause)", zap.Error(rr.err))
			})
			return Sample{}, rr.err
		}
	}
	return s, nil
}

// logOnce runs log the first time key is seen on this device.
func (d *Device) logOnce(key string, log func(*zap.Logger)) {
	d.logMu.Lock()
	_, seen := d.logged[key]
	d.logged[key] = struct{}{}
	d.logMu.Unlock()
	if !seen {
		log(d.logger)
	}
}

// reading is the state of one goroutine's part of a Read.
type reading struct {
	d        *Device
	err      error // first unexpected error
	lost     bool
	lostCall call
	mark     time.Time // end of the previous call: calls run back to back
}

func newReading(d *Device) *reading { return &reading{d: d, mark: time.Now()} }

// timed attributes the time since the previous call to c.
func (r *reading) timed(c call) {
	now := time.Now()
	r.d.stats[c].observe(now.Sub(r.mark))
	r.mark = now
}

// ok reports whether ret is a success, and records what a failure means.
// It must follow the NVML call at once, as it also times the call.
func (r *reading) ok(c call, ret nvml.Return) bool {
	r.timed(c)
	switch classify(ret) {
	case outcomeOK:
		return true
	case outcomeUnsupported:
		r.d.markUnsupported(c, ret)
	case outcomeLost:
		if !r.lost {
			r.lost, r.lostCall = true, c
		}
	default:
		if r.err == nil {
			r.err = &CallError{Call: c.String(), Ret: ret}
		}
	}
	return false
}

// skip reports whether c is known to be unsupported, or whether an earlier
// call of this read already failed it.
func (r *reading) skip(c call) bool {
	if r.lost || r.err != nil || r.d.unsupported[c].Load() {
		return true
	}
	r.mark = time.Now()
	return false
}

func (r *reading) recoverPanic() {
	if p := recover(); p != nil {
		r.d.panicked(p)
		if r.err == nil {
			r.err = fmt.Errorf("panic in NVML read: %v", p)
		}
	}
}

func (d *Device) markUnsupported(c call, ret nvml.Return) {
	if d.unsupported[c].Swap(true) {
		return
	}
	d.logMu.Lock()
	d.newlyUnsupported = append(d.newlyUnsupported, c.String()+": "+ret.Error())
	d.logMu.Unlock()
}

// flushUnsupported logs, in one line per device, the calls found
// unsupported since the last flush: one line per GPU rather than one per
// call keeps the collector's log sampler from dropping any at startup.
func (d *Device) flushUnsupported() {
	d.logMu.Lock()
	calls := d.newlyUnsupported
	d.newlyUnsupported = nil
	d.logMu.Unlock()
	if len(calls) > 0 {
		d.logger.Info("NVML calls not supported on this GPU; their metrics are skipped from now on",
			zap.Strings("calls", calls))
	}
}

func (r *reading) readMemory(s *Sample) {
	if r.skip(callMemoryInfo) {
		return
	}
	used, total, reserved, ret := memoryOf(r.d.handle, r.d.symbols.memoryInfoV2)
	if r.ok(callMemoryInfo, ret) {
		s.MemoryUsedBytes, s.MemoryTotalBytes, s.MemoryReservedBytes = used, total, reserved
	}
}

// memoryOf reads a GPU's or MIG device's memory: with v2, used leaves out
// what the driver reserves; v1 has no reserved figure.
func memoryOf(h nvml.Device, v2 bool) (used, total, reserved Opt[uint64], ret nvml.Return) {
	if v2 {
		m, ret := h.GetMemoryInfo_v2()
		return some(m.Used), some(m.Total), some(m.Reserved), ret
	}
	m, ret := h.GetMemoryInfo()
	return some(m.Used), some(m.Total), Opt[uint64]{}, ret
}

func (r *reading) readThermalsAndPower(s *Sample) {
	h := r.d.handle
	if !r.skip(callTemperature) {
		if v, ret := h.GetTemperature(nvml.TEMPERATURE_GPU); r.ok(callTemperature, ret) {
			s.TemperatureCelsius = some(float64(v))
		}
	}
	if !r.skip(callPowerUsage) {
		if v, ret := h.GetPowerUsage(); r.ok(callPowerUsage, ret) {
			s.PowerWatts = some(float64(v) / 1000)
		}
	}
	if !r.skip(callPowerLimit) {
		if v, ret := h.GetEnforcedPowerLimit(); r.ok(callPowerLimit, ret) {
			s.PowerLimitWatts = some(float64(v) / 1000)
		}
	}
	if !r.skip(callFanSpeed) {
		if v, ret := h.GetFanSpeed(); r.ok(callFanSpeed, ret) {
			s.FanSpeed = some(float64(v) / 100)
		}
	}
}

func (r *reading) readEnergy(s *Sample) {
	if r.skip(callEnergy) {
		return
	}
	if v, ret := r.d.handle.GetTotalEnergyConsumption(); r.ok(callEnergy, ret) {
		s.EnergyJoules = some(float64(v) / 1000)
	}
}

func (r *reading) readClocks(s *Sample) {
	h := r.d.handle
	for clk, cc := range clockCalls {
		if r.skip(cc.call) {
			continue
		}
		if mhz, ret := h.GetClockInfo(cc.typ); r.ok(cc.call, ret) {
			s.ClockHz[clk] = some(int64(mhz) * 1_000_000)
		}
	}
	if !r.skip(callPerformanceState) {
		if p, ret := h.GetPerformanceState(); r.ok(callPerformanceState, ret) && p != nvml.PSTATE_UNKNOWN {
			s.PerformanceState = some(int64(p))
		}
	}
}
