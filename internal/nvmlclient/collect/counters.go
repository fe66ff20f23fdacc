//go:build cgo

package collect

import (
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"sync"
	"sync/atomic"
	"time"
)

// The cumulative counters that cost the most to read are read on their own
// cadence (WithCounterInterval), in the background, off the scrape path:
// the rows of the read table marked costly (the receiver's plain
// readings say why each is). A scrape reports the newest reading with the time it
// was taken: counters (the rows also marked cumulative) stay monotonic and
// rate() over them stays exact, however old the reading. Only the first
// read of a device waits for them.

// The getters among the counters are read one by one, the fields in one
// batch.

type counterState struct {
	interval time.Duration

	busy   atomic.Bool // a read is in flight, in line or in the background
	fields fieldBatch  // the background read's own batch

	mu sync.Mutex
	// last is the newest value of each counter; fresh says which the
	// newest reading read: only those are reported, stamped with its time
	// (at, by the device clock). A counter it did not read (not supported
	// now, or failed) is left out rather than shown frozen at a newer
	// time, which rate() would take for a stop.
	kept  []keptCounter // by call
	fresh []bool
	// got and next are take's own buffers, reused from take to take.
	got      []sample.Opt[float64]
	next     []bool
	at       time.Time
	started  time.Time // by the device clock: when the last read began
	failures []*call.Error
	lost     bool
	lostCall call.ID
}

// read puts the newest counter reading into s and starts the next
// read when it is due. The first read of the device is taken in line.
func (cs *counterState) read(r *reading, s *sample.Sample) {
	d := r.GPU
	cs.mu.Lock()
	first, due := cs.started.IsZero(), d.Plan.Now().Sub(cs.started) >= cs.interval
	cs.mu.Unlock()
	switch {
	case first && cs.busy.CompareAndSwap(false, true):
		cs.take(d)
	case due && cs.busy.CompareAndSwap(false, true):
		// Close waits for it, as for every call in flight (guard/inflight.go),
		// and never shuts NVML down under it; once Close has begun, no
		// read starts.
		if !d.Session.Calls.Begin() {
			cs.busy.Store(false)
			break
		}
		go func() {
			defer d.Session.Calls.End()
			// In line after the GPUs this scrape is reading (the lane).
			defer d.Session.Lane.Enter().Leave()
			cs.take(d)
		}()
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	// A failure or loss of the background read shows in the next scrape,
	// which leaves out the readings of the calls that failed.
	failed := map[call.ID]bool{}
	for _, f := range cs.failures {
		r.Carry(f)
		failed[f.ID()] = true
	}
	cs.failures = nil
	if cs.lost && !r.Lost {
		r.Lost, r.LostCall = true, cs.lostCall
	}
	for k := range cs.fresh {
		spec := &d.Table[k]
		if spec.Costly && cs.fresh[k] && !failed[call.ID(k)] && (spec.Reader != call.ByField || !failed[call.FieldValues]) {
			spec.Put(s, cs.kept[k].last.Value)
			if since := cs.kept[k].since; !since.IsZero() {
				if s.CountersSince == nil {
					s.CountersSince = make([]time.Time, len(s.Values))
				}
				s.CountersSince[k-int(call.FirstPlain)] = since
			}
		}
	}
	s.CountersTime = cs.at
}

// take reads the counters once; busy is held by the caller and released
// here.
func (cs *counterState) take(d *call.GPU) {
	defer cs.busy.Store(false)
	cs.mu.Lock()
	cs.started = d.Plan.Now()
	cs.mu.Unlock()

	r := &reading{Reading: call.Reading{GPU: d}}
	if cs.got == nil { // take's own, reused: one take at a time (busy)
		cs.got, cs.next = make([]sample.Opt[float64], len(d.Table)), make([]bool, len(d.Table))
	}
	got := cs.got
	clear(got)
	keep := func(c call.ID, v float64) { got[c] = sample.Some(v) }
	r.readGetters(true, keep)
	at := d.Plan.Now() // the batch below takes well under a millisecond
	if !r.Lost {
		r.readFieldBatch(&cs.fields, true, keep)
	}
	d.FlushSupportLogs()

	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.failures = append(cs.failures, r.Failed...)
	if r.Lost {
		cs.lost, cs.lostCall = true, r.LostCall
	}
	// A counter only grows, unless it was reset (keptCounter.keep). A
	// counter not read this time, or whose reading is in doubt, keeps its
	// last reading (and the reading time moves on only when one was read).
	if cs.kept == nil {
		cs.kept, cs.fresh = make([]keptCounter, len(d.Table)), make([]bool, len(d.Table))
	}
	fresh := cs.next
	anyFresh := false
	for k := range got {
		if !d.Table[k].Cumulative {
			// A costly gauge: its newest reading, or none.
			fresh[k] = got[k].OK
			if fresh[k] {
				cs.kept[k].last = got[k]
			}
		} else {
			fresh[k] = cs.kept[k].keep(got[k], at)
		}
		anyFresh = anyFresh || fresh[k]
	}
	if anyFresh {
		// A reading that read nothing keeps the last one's time and
		// counters: they are reported again as they were.
		cs.at = at
		copy(cs.fresh, fresh)
	}
}

func (*counterState) baseline(*call.GPU) {}

// keptCounter is one counter's reading as the scrapes report it.
type keptCounter struct {
	last sample.Opt[float64] // the reading reported
	at   time.Time           // when last was read, by the device clock
	// low is a reading below last, in doubt until the next one tells a
	// bad read from a reset.
	low sample.Opt[float64]
	// since is when its count began: zero while it counts since the
	// session opened, else its last reading before it reset.
	since time.Time
}

// keep takes v, read at at, and reports whether it is to be reported: a
// counter goes down only when it was reset, and a bad read must not take it
// down. A reading below the last is in doubt, and left out as a failed read
// is. The next reading decides:
//   - at or above the last: the low one was a bad read (a single wrong
//     answer that the next one does not repeat); the counter goes on;
//   - below the last, and at or above the low one: a reset (a GPU reset,
//     the driver resetting its counters). Two readings in a row that agree
//     on a new count are taken for one, as no bad read we know of repeats
//     and counts on: the counter is reported from its new count, with a
//     new start, its last reading before the drop, so that the whole new
//     count lies after the start and after the old series' last point;
//   - below the low one: the new low reading is in doubt in its turn.
//
// A reset found takes one reading more than a bad read: one interval
// (WithCounterInterval) without the counter. A reset counter that counts
// past its old reading by the next one is taken for a bad read: it goes on
// from there, counting too little rather than raising a false increase.
func (k *keptCounter) keep(v sample.Opt[float64], at time.Time) bool {
	switch {
	case !v.OK:
		return false
	case !k.last.OK || v.Value >= k.last.Value:
	case k.low.OK && v.Value >= k.low.Value:
		k.since = k.at
	default:
		k.low = v
		return false
	}
	k.last, k.at, k.low = v, at, sample.Opt[float64]{}
	return true
}
