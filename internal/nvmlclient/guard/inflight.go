package guard

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Inflight counts the NVML calls running on one session (from nvmlInit to
// nvmlShutdown): reads, baselines, event registration and waits. nvmlShutdown
// under a running call can crash the process, so the Client's Close waits
// for them (Wait), and gives up rather than shut NVML down under a stuck
// one. Once Close has begun, no call may begin: a read or Prime that was
// scheduled before Close but starts after it would call NVML after
// nvmlShutdown, or take a GPU's baselines while Close frees its GPM samples.
type Inflight struct {
	mu     sync.Mutex
	n      int
	idle   chan struct{} // closed when n drops to 0
	closed bool          // Close has begun: Begin refuses
}

// NewInflight is an idle count.
func NewInflight() *Inflight {
	ch := make(chan struct{})
	close(ch)
	return &Inflight{idle: ch}
}

// Begin counts a call about to run, and reports false (counting nothing)
// once Close has begun.
func (f *Inflight) Begin() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	if f.n == 0 {
		f.idle = make(chan struct{})
	}
	f.n++
	return true
}

// Close makes every later Begin refuse.
func (f *Inflight) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}

// End counts a call that has returned.
func (f *Inflight) End() {
	f.mu.Lock()
	f.n--
	if f.n == 0 {
		close(f.idle)
	}
	f.mu.Unlock()
}

// Count is the number of calls running now.
func (f *Inflight) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// Wait waits until no call runs, or until ctx is done: false then.
func (f *Inflight) Wait(ctx context.Context) bool {
	f.mu.Lock()
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
		return true
	default:
	}
	select {
	case <-idle:
		return true
	case <-ctx.Done():
		return false
	}
}

// InFlightError says that Close left NVML initialized because calls were
// still running inside it; NVML is shut down once they return.
type InFlightError struct{ Calls int }

func (e *InFlightError) Error() string {
	return fmt.Sprintf("%d NVML call(s) still running; nvmlShutdown is skipped until they return", e.Calls)
}

// IsInFlight reports whether err is an InFlightError.
func IsInFlight(err error) bool {
	var e *InFlightError
	return errors.As(err, &e)
}
