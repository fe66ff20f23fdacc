package guard

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLaneOneAtATimeInOrder(t *testing.T) {
	l := &Guard{maxHold: time.Minute, passOver: true}
	leaveFirst := l.Enter().Leave
	var inside, overlaps atomic.Int32
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			leave := l.Enter().Leave
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
	l := &Guard{maxHold: 20 * time.Millisecond, passOver: true}
	leaveStuck := l.Enter().Leave
	start := time.Now()
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			ticket := l.Enter()
			require.NotNil(t, ticket, "a lane never refuses")
			leave := ticket.Leave
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
	l.Enter().Leave()
}

func TestGPMGateGivesUpOnAHungHolder(t *testing.T) {
	const allowance = 20 * time.Millisecond
	g := &Guard{maxHold: allowance}
	enter := func() bool {
		return g.Enter() != nil
	}
	holder := g.Enter()
	require.NotNil(t, holder)
	start := time.Now()
	assert.False(t, enter(), "held: a second GPU gives up after what is left of the holder's allowance")
	assert.GreaterOrEqual(t, time.Since(start), allowance/2)
	start = time.Now()
	assert.False(t, enter(), "the holder is past its allowance: nobody waits on it again")
	assert.Less(t, time.Since(start), allowance)
	holder.Leave()
	holder = g.Enter()
	require.NotNil(t, holder, "released: free again")
	g.maxHold = time.Minute
	go func() { time.Sleep(2 * time.Millisecond); holder.Leave() }()
	next := g.Enter()
	require.NotNil(t, next, "a holder that releases in time hands the gate over")
	next.Leave()
	assert.Empty(t, g.queue, "who gave up left the line")
}
