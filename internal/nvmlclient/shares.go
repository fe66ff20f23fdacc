//go:build cgo

package nvmlclient

import (
	"sync"
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
)

// shareSampler samples the processes' shares of each GPU's busy time every
// interval between reads (WithShareInterval), so that a process's busy
// time is true over a scrape interval longer than NVML's smoothing. Each
// sample is one nvmlDeviceGetProcessUtilization per GPU (about 1.9 ms of
// CPU on an H200), made through the lane like any read; a scrape that
// arrives during one waits for it (guard/use.go).
type shareSampler struct {
	stop chan struct{}
	done sync.WaitGroup
}

// startShareSampler starts sampling devices every interval; nil when
// there is nothing to sample.
func startShareSampler(devices []*Device, interval time.Duration) *shareSampler {
	if interval <= 0 || len(devices) == 0 || !devices[0].collectors.Processes() {
		return nil
	}
	ss := &shareSampler{stop: make(chan struct{})}
	ss.done.Add(1)
	go func() {
		defer ss.done.Done()
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ss.stop:
				return
			case <-ticker.C:
			}
			for _, d := range devices {
				select {
				case <-ss.stop:
					return
				default:
				}
				// Only GPUs with processes: the share of an empty GPU
				// is nobody's, and the call would cost for nothing.
				if d.collectors.SharesDue(d.gpu.Plan.Now(), interval) {
					d.SampleShares()
				}
			}
		}
	}()
	return ss
}

// close stops the sampler; a sample in flight is waited for by the
// session's in-flight count, not here, so that a hung call never blocks
// Close.
func (ss *shareSampler) close() {
	if ss != nil {
		close(ss.stop)
	}
}

// SampleShares takes one sample of the processes' shares of the GPU's busy
// time between reads (WithShareInterval). It is skipped while a read or
// its baselines run (that read samples them itself), before them, and on a
// lost GPU: it reports whether a sample was taken.
func (d *Device) SampleShares() bool {
	sess := d.gpu.Session
	if !d.collectors.Processes() || !d.state.baselines.Load() || d.state.lost.Load() || !sess.Calls.Begin() {
		return false
	}
	defer sess.Calls.End()
	// The lane first, then the device: the device is held for the call
	// alone, and a scrape that finds it held waits for that call only
	// (guard/use.go), never for the lane's line.
	defer sess.Lane.Enter().Leave()
	if d.use.TakeForShare() == nil {
		return false
	}
	defer d.use.Release()
	r := &call.Reading{GPU: d.gpu}
	ok := d.collectors.SampleShares(r)
	if r.Lost {
		d.markLost(r.LostCall)
	}
	return ok
}
