//go:build cgo

package nvmlclient

import (
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/figure"
)

// waitBackground waits up to timeout for the session's calls in flight to
// end (a background counter read among them), and reports whether none is
// left.
func (d *Device) waitBackground(timeout time.Duration) bool {
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if d.gpu.Session.Calls.Count() == 0 {
			return true
		}
	}
	return false
}

// panicCount is the number of panics recovered in d's reads.
func (d *Device) panicCount() int64 { return d.gpu.Panics() }

func some[T any](v T) Opt[T] { return figure.Some(v) }
