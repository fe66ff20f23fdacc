//go:build cgo

package nvmlclient

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

func TestLaneOneAtATimeInOrder(t *testing.T) {
	l := &guard{maxHold: time.Minute, passOver: true}
	leaveFirst := l.enter().leave
	var inside, overlaps atomic.Int32
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			leave := l.enter().leave
			if inside.Add(1) > 1 {
				overlaps.Add(1)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			leave()
		})
		// Queue them in a known order behind the first holder.
		require.Eventually(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.queue) == i+1 },
			time.Second, time.Millisecond)
	}
	leaveFirst()
	wg.Wait()
	assert.Zero(t, overlaps.Load(), "two holders at once")
	assert.Equal(t, []int{0, 1, 2, 3, 4}, order, "first come, first served")
}

// A holder stuck in NVML delays the next in line by maxHold once; the
// others then go one at a time again, and the stuck one's late leave takes
// nothing from them.
func TestLanePassesOverAStuckHolder(t *testing.T) {
	l := &guard{maxHold: 20 * time.Millisecond, passOver: true}
	leaveStuck := l.enter().leave
	start := time.Now()
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			ticket := l.enter()
			require.NotNil(t, ticket, "a lane never refuses")
			leave := ticket.leave
			if inside.Add(1) > 1 {
				overlaps.Add(1)
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			leave()
		})
	}
	wg.Wait()
	waited := time.Since(start)
	assert.GreaterOrEqual(t, waited, 20*time.Millisecond, "the stuck holder kept the lane for maxHold")
	assert.Less(t, waited, time.Second, "and no longer")
	assert.Zero(t, overlaps.Load(), "those behind it still went one at a time")
	leaveStuck() // returns at last: the lane is not its to give
	l.enter().leave()
}

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
	readEveryGPUAtOnce(t, c, clock, 5, func(_ Sample, err error) { assert.NoError(t, err) })
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
func readEveryGPUAtOnce(t *testing.T, c *Client, clock *nvmltest.Clock, rounds int, check func(Sample, error)) {
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
