package guard

import (
	"sync"
	"time"
)

// Guard is a mutex that passes over a hung holder: callers take it one at
// a time, in the order they asked, and a holder that keeps it past maxHold
// is taken to be stuck in NVML. What the next in line does then is the
// guard's kind:
//
//   - the lane (passOver) lets the session's GPUs talk to the driver one at
//     a time. NVML spins the CPU while the driver serializes calls of
//     different GPUs: on an H200, nvmlGpmSampleGet costs 0.05 ms alone and
//     1.77 ms beside another GPU's calls, the process list 0.01 ms and
//     0.46 ms (docs/runs/h200-runs.md), so reading the GPUs one after the other
//     costs the same wall time and much less CPU. Past maxHold the next in
//     line goes ahead beside the stuck holder: a hung GPU delays the others
//     by maxHold once, and never stops them.
//   - the GPM gate lets one GPM call sequence (sample, metrics) run at a
//     time across the session's GPUs. On an H200 with driver 580,
//     nvmlGpmMetricsGet on one GPU while nvmlGpmSampleGet ran on another
//     crashed the process (SIGSEGV inside the library, in 1 of 4 40-scrape
//     runs; docs/runs/h200-runs.md). The lane already reads one GPU at a time;
//     the gate still holds when the lane passes over a stuck GPU. Past
//     maxHold nobody goes ahead: every GPU gives up its GPM readings for the
//     scrape at once, without waiting, until the hung call returns.
type Guard struct {
	maxHold  time.Duration
	passOver bool

	mu     sync.Mutex
	holder *Ticket // nil while the guard is free
	queue  []*Ticket
}

// Ticket is a place in the guard's line, and its hold once its turn comes.
type Ticket struct {
	g     *Guard
	turn  chan struct{} // closed when the ticket holds the guard; nil for one that never waited
	since time.Time     // when it took the guard; zero while it waits
}

const (
	// LaneMaxHold is well above a normal read of one GPU (3-5 ms on an
	// H200, p99 about 20 ms with a slow firmware answer) and well below a
	// scrape.
	LaneMaxHold = 50 * time.Millisecond
	// GPMGateWait is well above a GPM call sequence (a few milliseconds).
	GPMGateWait = 100 * time.Millisecond
)

// NewLane is the guard of the session's reads, one GPU at a time.
func NewLane() *Guard { return &Guard{maxHold: LaneMaxHold, passOver: true} }

// NewGPMGate is the guard of the session's GPM call sequences.
func NewGPMGate() *Guard { return &Guard{maxHold: GPMGateWait} }

// Enter waits for the guard and returns the ticket that holds it (Leave
// gives it up). It is nil when the guard does not pass over and its holder
// is past maxHold: the caller goes without.
func (g *Guard) Enter() *Ticket {
	t := &Ticket{g: g}
	g.mu.Lock()
	if g.holder == nil && len(g.queue) == 0 {
		// Free: no line to wait in, no channel to wake it.
		t.since, g.holder = time.Now(), t
		g.mu.Unlock()
		return t
	}
	t.turn = make(chan struct{})
	g.queue = append(g.queue, t)
	g.advance(time.Now())
	// t has had its turn once advance stamped it, even if it was passed
	// over since, before it ran.
	for t.since.IsZero() {
		wait := g.maxHold - time.Since(g.holder.since)
		if wait <= 0 && !g.passOver {
			g.drop(t)
			g.mu.Unlock()
			return nil
		}
		g.mu.Unlock()
		timer := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-t.turn:
		case <-timer.C:
		}
		timer.Stop()
		g.mu.Lock()
		g.advance(time.Now())
	}
	g.mu.Unlock()
	return t
}

// advance hands the guard to the next in line when it is free, or, for a
// guard that passes over, when its holder has kept it past maxHold. Called
// under mu.
func (g *Guard) advance(now time.Time) {
	if g.holder != nil && (!g.passOver || now.Sub(g.holder.since) < g.maxHold) {
		return
	}
	g.holder = nil
	if len(g.queue) == 0 {
		return
	}
	next := g.queue[0]
	g.queue[0] = nil
	g.queue = g.queue[1:]
	next.since = now
	g.holder = next
	close(next.turn)
}

// drop takes t, which gives up, out of the line. Called under mu.
func (g *Guard) drop(t *Ticket) {
	for i, q := range g.queue {
		if q == t {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			return
		}
	}
}

// Leave gives the guard up. A holder that was passed over as stuck leaves
// a guard it no longer holds: nothing to do.
func (t *Ticket) Leave() {
	g := t.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.holder != t {
		return
	}
	g.holder = nil
	g.advance(time.Now())
}
