//go:build cgo

package guard

import (
	"sync"
	"time"
)

// DeviceUse is who uses a device's NVML handle: one use at a time. A read
// or Prime that finds another still running is told so at once (nvmlclient.ErrBusy:
// the earlier one is stuck, or still running from an earlier scrape). A
// share sample is different: it is the receiver's own short call between
// scrapes (one nvmlDeviceGetProcessUtilization, 1.4-1.9 ms on an H200), and
// a scrape that arrives during one waits for it, up to shareMaxHold from
// its start. Only a sample that overruns that bound makes the GPU busy, as
// a stuck read does: a GPU busy with our own sampling is not a stuck GPU.
type DeviceUse struct {
	mu    sync.Mutex
	held  bool
	share *ShareUse // the holder is a share sample; nil otherwise
}

// ShareUse is a share sample's hold of the device.
type ShareUse struct {
	since time.Time
	done  chan struct{} // closed when it gives the device up
}

// shareMaxHold bounds how long a scrape waits for a share sample: the same
// bound as a read's hold of the lane (LaneMaxHold), far above the call.
const shareMaxHold = LaneMaxHold

// Take takes the device for a read or its baselines (Prime). It waits behind a share
// sample within its bound; false when the device stays held.
func (u *DeviceUse) Take() bool {
	for {
		u.mu.Lock()
		if !u.held {
			u.held = true
			u.mu.Unlock()
			return true
		}
		sh := u.share
		u.mu.Unlock()
		if sh == nil {
			return false // a read or the baselines
		}
		wait := shareMaxHold - time.Since(sh.since)
		if wait <= 0 {
			return false // a share sample stuck in NVML
		}
		timer := time.NewTimer(wait)
		select {
		case <-sh.done:
			timer.Stop()
		case <-timer.C:
			return false
		}
	}
}

// TakeForShare takes the device for a share sample, without waiting: nil
// when it is held (a read in flight samples the shares itself).
func (u *DeviceUse) TakeForShare() *ShareUse {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.held {
		return nil
	}
	u.held = true
	u.share = &ShareUse{since: time.Now(), done: make(chan struct{})}
	return u.share
}

// Release gives the device up, and wakes a read waiting behind a share
// sample.
func (u *DeviceUse) Release() {
	u.mu.Lock()
	sh := u.share
	u.held, u.share = false, nil
	u.mu.Unlock()
	if sh != nil {
		close(sh.done)
	}
}
