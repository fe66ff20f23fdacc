//go:build cgo

package nvmlclient

import "time"

// waitBackground waits up to timeout for a background counter read, and
// reports whether none is left in flight.
func (d *Device) waitBackground(timeout time.Duration) bool {
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if !d.parts.counters.busy.Load() {
			return true
		}
	}
	return false
}

// panicCount is the number of panics recovered in d's reads.
func (d *Device) panicCount() int64 { return d.gpu.Panics() }
