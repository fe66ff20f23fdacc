//go:build cgo

package call

import (
	"fmt"

	"go.uber.org/zap"
)

// A panic inside a read (go-nvml re-slicing past its buffer, a nil from a
// driver) is recovered where it happens: inside an NVML call it fails that
// call alone, and its readings are left out of the scrape; in our own
// decoding it fails that part of the read (collect/collectors.go). The rest of the
// GPU's sample stands. Each one is counted; the log gets the 1st, 2nd, 4th, 8th... of each GPU, with the
// count so far, so that a recurring panic is seen without flooding.

// CountPanic counts one recovered panic of this device.
func (d *GPU) CountPanic(p any) {
	n := d.record.panics.Add(1)
	if n&(n-1) != 0 {
		return
	}
	d.Logger.Error("Recovered a panic inside an NVML read; the readings of that call (or part of the read) are left out of this scrape, the rest of the GPU's sample stands",
		zap.String("panic", fmt.Sprint(p)), zap.Int64("panics_total", n))
}

// Panics is the number of panics recovered in d's reads.
func (d *GPU) Panics() int64 { return d.record.panics.Load() }
