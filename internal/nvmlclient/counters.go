//go:build cgo

package nvmlclient

import (
	"sync"
	"sync/atomic"
	"time"
)

// The cumulative counters that cost the most to read are read on their own
// cadence (WithCounterInterval), in the background, off the scrape path:
// the rows of the read table marked counter, which are the costly ones
// (their costs are in the read table, calls.go). A scrape reports the newest reading with the time it
// was taken: counters stay monotonic and rate() over them stays exact,
// however old the reading. Only the first read of a device waits for them.

// The getters among the counters are read one by one, the fields in one
// batch.

type counterState struct {
	interval time.Duration

	busy    atomic.Bool    // a background read is in flight
	pending sync.WaitGroup // the background read, for Close
	fields  fieldBatch     // the background read's own batch

	mu sync.Mutex
	// last is the newest value of each counter; fresh says which the
	// newest reading read: only those are reported, stamped with its time
	// (at, by the device clock). A counter it did not read (not supported
	// now, or failed) is left out rather than shown frozen at a newer
	// time, which rate() would take for a stop.
	last     [callCount]Opt[float64]
	fresh    [callCount]bool
	at       time.Time
	started  time.Time // by the device clock: when the last read began
	failures []*CallError
	lost     bool
	lostCall call
}

// readCounters puts the newest counter reading into s and starts the next
// read when it is due. The first read of the device is taken in line.
func (cs *counterState) read(r *reading, s *Sample) {
	d := r.d
	cs.mu.Lock()
	first, due := cs.started.IsZero(), d.now().Sub(cs.started) >= cs.interval
	cs.mu.Unlock()
	switch {
	case first && cs.busy.CompareAndSwap(false, true):
		d.takeCounters()
	case due && cs.busy.CompareAndSwap(false, true):
		// Close waits for it, and never shuts NVML down under it; once
		// Close has begun, no read starts.
		if !d.sess.calls.begin() {
			cs.busy.Store(false)
			break
		}
		cs.pending.Add(1)
		go func() {
			defer cs.pending.Done()
			defer d.sess.calls.end()
			// In line after the GPUs this scrape is reading (the lane).
			defer d.sess.lane.enter().leave()
			d.takeCounters()
		}()
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	// A failure or loss of the background read shows in the next scrape,
	// which leaves out the figures of the calls that failed.
	failed := map[call]bool{}
	for _, f := range cs.failures {
		r.fail(f.call, f.ret, f.Detail)
		failed[f.call] = true
	}
	cs.failures = nil
	if cs.lost && !r.lost {
		r.lost, r.lostCall = true, cs.lostCall
	}
	for k := range readTable {
		spec := &readTable[k]
		if spec.counter && cs.fresh[k] && !failed[call(k)] && (spec.field == 0 || !failed[callFieldValues]) {
			spec.land(s, cs.last[k].Value)
		}
	}
	s.CountersTime = cs.at
}

// takeCounters reads the counters once; busy is held by the caller and
// released here.
func (d *Device) takeCounters() {
	cs := d.counters
	defer cs.busy.Store(false)
	cs.mu.Lock()
	cs.started = d.now()
	cs.mu.Unlock()

	r := &reading{d: d}
	var got [callCount]Opt[float64]
	keep := func(c call, v float64) { got[c] = some(v) }
	r.readGetters(true, keep)
	at := d.now() // the batch below takes well under a millisecond
	if !r.lost {
		r.readFieldBatch(&cs.fields, true, keep)
	}
	d.support.flushLogs(d.logger)

	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.failures = append(cs.failures, r.failed...)
	if r.lost {
		cs.lost, cs.lostCall = true, r.lostCall
	}
	// Within one NVML session a counter only grows: a lower answer is a
	// glitch, and the older reading stands. A counter not read this time
	// keeps its last reading (and the reading time moves on only when one
	// was read).
	var fresh [callCount]bool
	anyFresh := false
	for k := range got {
		fresh[k] = keepMax(&cs.last[k], got[k])
		anyFresh = anyFresh || fresh[k]
	}
	if anyFresh {
		// A reading that read nothing keeps the last one's time and
		// counters: they are reported again as they were.
		cs.at, cs.fresh = at, fresh
	}
}

// keepMax moves *last to v when v was read and did not go down; it reports
// whether v was read.
func keepMax(last *Opt[float64], v Opt[float64]) bool {
	if v.OK && (!last.OK || v.Value >= last.Value) {
		*last = v
	}
	return v.OK
}
