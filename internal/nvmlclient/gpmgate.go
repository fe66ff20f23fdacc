package nvmlclient

import "time"

// gpmGate lets one GPM call sequence (sample, metrics) run at a time across
// the session's GPUs. On an H200 with driver 580, nvmlGpmMetricsGet on one
// GPU while nvmlGpmSampleGet runs on another crashed the process (SIGSEGV
// inside the library, in 1 of 4 40-scrape runs; docs/h200-runs.md). The
// driver serializes these calls anyway, so the gate costs no time. A GPU
// that cannot get the gate within gpmGateWait (another GPU's GPM call is
// hung) leaves its GPM figures out of that scrape and keeps the rest.
type gpmGate chan struct{}

const gpmGateWait = time.Second

func newGPMGate() gpmGate { return make(gpmGate, 1) }

// acquire takes the gate, waiting at most wait. A nil gate (devices built
// without a session, in tests) is always free.
func (g gpmGate) acquire(wait time.Duration) bool {
	if g == nil {
		return true
	}
	select {
	case g <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case g <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

func (g gpmGate) release() {
	if g != nil {
		<-g
	}
}
