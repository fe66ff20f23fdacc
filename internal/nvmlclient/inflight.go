package nvmlclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// inflight counts the NVML calls running on one session (from nvmlInit to
// nvmlShutdown): reads, priming, event registration and waits. nvmlShutdown
// under a running call can crash the process, so Close waits for them, and
// gives up rather than shut NVML down under a stuck one. Once Close has
// begun, no call may begin: a read or priming that was scheduled before
// Close but starts after it would call NVML after nvmlShutdown, or prime a
// GPU while Close frees its GPM samples.
type inflight struct {
	mu     sync.Mutex
	n      int
	idle   chan struct{} // closed when n drops to 0
	closed bool          // Close has begun: begin refuses
}

func newInflight() *inflight {
	ch := make(chan struct{})
	close(ch)
	return &inflight{idle: ch}
}

// begin counts a call about to run, and reports false (counting nothing)
// once Close has begun.
func (f *inflight) begin() bool {
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

// close makes every later begin refuse.
func (f *inflight) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}

func (f *inflight) end() {
	f.mu.Lock()
	f.n--
	if f.n == 0 {
		close(f.idle)
	}
	f.mu.Unlock()
}

// count is the number of calls running now.
func (f *inflight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// wait waits until no call runs, or until ctx is done: false then.
func (f *inflight) wait(ctx context.Context) bool {
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
