//go:build cgo

package nvmlclient

import "time"

// waitBackground waits up to timeout for a background counter read, and
// reports whether none is left in flight.
func (d *Device) waitBackground(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { d.counters.pending.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}
