//go:build cgo

package nvmlclient

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// The GPUs of a session are read one after the other: a read never runs
// beside another GPU's, however the reads are scheduled.
func TestReadsOfGPUsNeverOverlap(t *testing.T) {
	m := nvmltest.NewH200GPUs(4)
	var calls overlapCounter
	for _, g := range m.GPUs {
		power := g.GetPowerUsageFunc
		g.GetPowerUsageFunc = func() (uint32, nvml.Return) { calls.call(); return power() }
	}
	c, clock, _ := openGPM(t, m)
	readEveryGPUAtOnce(t, c, clock, 5, func(_ sample.Sample, err error) { assert.NoError(t, err) })
	assert.Zero(t, calls.overlaps.Load(), "two GPUs were read at once")
}

// overlapCounter counts the calls that ran beside another one.
type overlapCounter struct{ inside, overlaps atomic.Int32 }

func (o *overlapCounter) call() {
	if o.inside.Add(1) > 1 {
		o.overlaps.Add(1)
	}
	time.Sleep(200 * time.Microsecond) // a firmware call's length
	o.inside.Add(-1)
}

// readEveryGPUAtOnce reads every device of c on a goroutine of its own, a
// second of the clock apart, rounds times, and checks each read.
func readEveryGPUAtOnce(t *testing.T, c *Client, clock *nvmltest.Clock, rounds int, check func(sample.Sample, error)) {
	t.Helper()
	for range rounds {
		clock.Advance(time.Second)
		var wg sync.WaitGroup
		for _, d := range c.Devices() {
			wg.Go(func() { check(d.Read()) })
		}
		wg.Wait()
	}
}
