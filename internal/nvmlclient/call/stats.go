//go:build cgo

package call

import (
	"sync/atomic"
	"time"
)

// callStat accumulates how long one NVML call takes on one device.
type callStat struct {
	count, totalNanos, maxNanos atomic.Int64
}

func (cs *callStat) observe(d time.Duration) {
	n := d.Nanoseconds()
	cs.count.Add(1)
	cs.totalNanos.Add(n)
	for {
		m := cs.maxNanos.Load()
		if n <= m || cs.maxNanos.CompareAndSwap(m, n) {
			return
		}
	}
}

// Stat is how often c was made on d, how long it took in all, and at most.
func (d *GPU) Stat(c ID) (count int64, total, most time.Duration) {
	cs := &d.record.stats[c]
	return cs.count.Load(), time.Duration(cs.totalNanos.Load()), time.Duration(cs.maxNanos.Load())
}
