//go:build cgo

package nvmlclient

import (
	"fmt"

	"go.uber.org/zap"
)

// A panic inside a read (go-nvml re-slicing past its buffer, a nil from a
// driver) is recovered and drops that GPU's sample for the scrape. Each one
// is counted; the log gets the 1st, 2nd, 4th, 8th... of each GPU, with the
// count so far, so that a recurring panic is seen without flooding.

// countPanic counts one recovered panic of this device.
func (d *Device) countPanic(p any) {
	n := d.panics.Add(1)
	if n&(n-1) != 0 {
		return
	}
	d.logger.Error("Recovered a panic inside an NVML read; this GPU's sample is dropped for the scrape",
		zap.String("panic", fmt.Sprint(p)), zap.Int64("panics_total", n))
}

// Panics is the number of panics recovered in this device's reads.
func (d *Device) Panics() int64 { return d.panics.Load() }
