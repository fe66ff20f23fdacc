package nvmlclient

import (
	"sync"
	"time"
)

// lane lets the session's GPUs talk to the driver one at a time, in the
// order they asked. NVML spins the CPU while the driver serializes calls of
// different GPUs: on an H200, nvmlGpmSampleGet costs 0.05 ms alone and
// 1.77 ms beside another GPU's calls, the process list 0.01 ms and 0.46 ms
// (docs/h200-runs.md). So reading the GPUs one after the other costs the
// same wall time and much less CPU.
//
// A holder that keeps the lane past maxHold is taken to be stuck in NVML:
// the next in line goes ahead beside it, so a hung GPU delays the others by
// maxHold once, and never stops them.
type lane struct {
	maxHold time.Duration

	mu     sync.Mutex
	holder *laneTicket // nil while the lane is free
	queue  []*laneTicket
}

type laneTicket struct {
	turn  chan struct{} // closed when the ticket holds the lane
	since time.Time     // when it took the lane
}

// laneMaxHold is well above a normal read of one GPU (3-5 ms on an H200,
// p99 about 20 ms with a slow firmware answer) and well below a scrape.
const laneMaxHold = 50 * time.Millisecond

func newLane(maxHold time.Duration) *lane { return &lane{maxHold: maxHold} }

// enter waits for the lane and returns the function that leaves it. A nil
// lane (devices built without a session, in tests) is always free.
func (l *lane) enter() (leave func()) {
	if l == nil {
		return func() {}
	}
	t := &laneTicket{turn: make(chan struct{})}
	l.mu.Lock()
	l.queue = append(l.queue, t)
	l.advance(time.Now())
	free := l.holder == t
	l.mu.Unlock()
	leave = func() { l.leave(t) }
	if free {
		return leave
	}
	for {
		l.mu.Lock()
		wait := time.Duration(0)
		if l.holder != nil && l.holder != t {
			wait = l.maxHold - time.Since(l.holder.since)
		}
		l.mu.Unlock()
		timer := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-t.turn:
			timer.Stop()
			return leave
		case <-timer.C:
			l.mu.Lock()
			l.advance(time.Now())
			l.mu.Unlock()
		}
	}
}

// advance hands the lane to the next in line when it is free, or when its
// holder has kept it past maxHold. Called under mu.
func (l *lane) advance(now time.Time) {
	if l.holder != nil && now.Sub(l.holder.since) < l.maxHold {
		return
	}
	l.holder = nil
	if len(l.queue) == 0 {
		return
	}
	next := l.queue[0]
	l.queue[0] = nil
	l.queue = l.queue[1:]
	next.since = now
	l.holder = next
	close(next.turn)
}

// leave gives the lane up. A holder that was passed over as stuck leaves a
// lane it no longer holds: nothing to do.
func (l *lane) leave(t *laneTicket) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holder != t {
		return
	}
	l.holder = nil
	l.advance(time.Now())
}
