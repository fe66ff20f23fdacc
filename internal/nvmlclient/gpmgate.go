package nvmlclient

import (
	"sync"
	"time"
)

// gpmGate lets one GPM call sequence (sample, metrics) run at a time across
// the session's GPUs. On an H200 with driver 580, nvmlGpmMetricsGet on one
// GPU while nvmlGpmSampleGet runs on another crashed the process (SIGSEGV
// inside the library, in 1 of 4 40-scrape runs; docs/h200-runs.md). The
// lane (lane.go) already reads one GPU at a time; the gate still holds when
// the lane passes over a stuck GPU.
//
// A sequence takes a few milliseconds. One that holds the gate past
// gpmGateWait is taken to be hung in NVML: a GPU waits at most what is left
// of that allowance, and once it is spent, every GPU leaves its GPM figures
// out of the scrape at once, without waiting, until the hung call returns.
type gpmGate struct {
	mu    sync.Mutex
	held  bool
	since time.Time     // when the holder took the gate
	free  chan struct{} // closed when the holder releases it
}

const gpmGateWait = 100 * time.Millisecond

func newGPMGate() *gpmGate { return &gpmGate{} }

// acquire takes the gate, waiting at most what is left of the holder's
// allowance of wait. A nil gate (devices built without a session, in tests)
// is always free.
func (g *gpmGate) acquire(wait time.Duration) bool {
	if g == nil {
		return true
	}
	for {
		g.mu.Lock()
		if !g.held {
			g.held, g.since, g.free = true, time.Now(), make(chan struct{})
			g.mu.Unlock()
			return true
		}
		left, free := wait-time.Since(g.since), g.free
		g.mu.Unlock()
		if left <= 0 {
			return false // the holder is hung: do not wait on it again
		}
		t := time.NewTimer(left)
		select {
		case <-free:
			t.Stop()
		case <-t.C:
			return false
		}
	}
}

func (g *gpmGate) release() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held {
		g.held = false
		close(g.free)
	}
}
