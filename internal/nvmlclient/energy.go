package nvmlclient

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The energy counter costs 3-7 ms of CPU a call on an H200 (p90 up to
// 21 ms): more than every other figure of a scrape together. So it is read
// on its own cadence (WithEnergyInterval), in the background, and a scrape
// reports the newest reading with the time it was taken: the counter stays
// monotonic and rate() over it stays exact, however stale the reading.
// Only the first read of a device waits for it.

// DefaultEnergyInterval is how often the energy counter is read unless
// configured otherwise.
const DefaultEnergyInterval = 10 * time.Second

type energyState struct {
	interval time.Duration

	busy    atomic.Bool    // a background read is in flight
	pending sync.WaitGroup // the background read, for Close

	mu       sync.Mutex
	joules   float64
	readAt   time.Time // wall time the reading was taken
	have     bool
	started  time.Time // by the device clock: when the last read began
	failures []*CallError
	lost     bool
	lostCall call
}

// readEnergy puts the newest energy reading into s and starts the next read
// when it is due. The first read of the device is taken in line.
func (r *reading) readEnergy(s *Sample) {
	d := r.d
	e := &d.energy
	if !r.available(callEnergy) {
		return
	}
	e.mu.Lock()
	first, due := e.started.IsZero(), d.now().Sub(e.started) >= e.interval
	e.mu.Unlock()
	switch {
	case first && e.busy.CompareAndSwap(false, true):
		d.takeEnergy()
	case due && e.busy.CompareAndSwap(false, true):
		e.pending.Add(1)
		go func() {
			defer e.pending.Done()
			d.takeEnergy()
		}()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// A failure or loss of the background read shows in the next scrape,
	// which then leaves the counter out.
	failed := len(e.failures) > 0
	for _, f := range e.failures {
		r.fail(f.call, f.Ret, f.Detail)
	}
	e.failures = nil
	if e.lost && !r.lost {
		r.lost, r.lostCall = true, e.lostCall
	}
	if e.have && !failed {
		s.EnergyJoules = some(e.joules)
		s.EnergyTime = e.readAt
	}
}

// takeEnergy reads the counter once; busy is held by the caller and
// released here.
func (d *Device) takeEnergy() {
	e := &d.energy
	defer e.busy.Store(false)
	e.mu.Lock()
	e.started = d.now()
	e.mu.Unlock()
	er := &reading{d: d}
	var mj uint64
	ok := er.do(callEnergy, func() (ret nvml.Return) { mj, ret = d.handle.GetTotalEnergyConsumption(); return })
	at := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failures = append(e.failures, er.failed...)
	if er.lost {
		e.lost, e.lostCall = true, er.lostCall
	}
	// Within one NVML session the counter only grows: a lower answer is a
	// glitch, and the older reading stands.
	if v := float64(mj) / 1000; ok && (!e.have || v >= e.joules) {
		e.joules, e.readAt, e.have = v, at, true
	}
}

// waitBackground waits up to timeout for a background energy read, and
// reports whether none is left in flight.
func (d *Device) waitBackground(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { d.energy.pending.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}
