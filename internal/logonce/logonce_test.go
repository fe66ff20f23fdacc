package logonce

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clock is a hand-moved clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time                 { return c.t }
func (c *clock) advance(d time.Duration)        { c.t = c.t.Add(d) }
func newClock() *clock                          { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func (l *Log) size() int                        { l.mu.Lock(); defer l.mu.Unlock(); return len(l.keys) }
func logged(v Verdict) bool                     { return v.Log }
func holdOffLog(c *clock, d time.Duration) *Log { return New(8, WithHoldOff(d), WithClock(c.now)) }

func TestOncePerKeyAndCause(t *testing.T) {
	l := New(8)
	assert.True(t, logged(l.Fail("gpu0/power", "timeout")), "first failure")
	for range 5 {
		assert.Equal(t, Verdict{}, l.Fail("gpu0/power", "timeout"), "the same failure again: not logged")
	}
	assert.True(t, logged(l.Fail("gpu1/power", "timeout")), "another key")
	assert.True(t, logged(l.Fail("gpu0/power", "unknown error")), "a new cause")
	assert.Equal(t, Verdict{}, l.Fail("gpu0/power", "unknown error"))
	assert.True(t, logged(l.Fail("gpu0/power", "timeout")), "back to the first cause: a change too")
}

func TestRecovery(t *testing.T) {
	l := New(8)
	assert.False(t, l.OK("gpu0/power"), "never failed: nothing to say")
	require.True(t, logged(l.Fail("gpu0/power", "timeout")))
	assert.True(t, l.OK("gpu0/power"), "its failure was logged: so is its recovery")
	assert.False(t, l.OK("gpu0/power"), "once")
	assert.True(t, logged(l.Fail("gpu0/power", "timeout")), "failing again after OK is a new episode")
	assert.True(t, l.OK("gpu0/power"))
}

func TestOnce(t *testing.T) {
	l := New(8)
	assert.True(t, l.Once("gpu0/slow"))
	assert.False(t, l.Once("gpu0/slow"))
	assert.True(t, l.Once("gpu1/slow"))
	l.OK("gpu0/slow")
	assert.True(t, l.Once("gpu0/slow"), "logged again after it answered")
}

func TestFlapHeldOff(t *testing.T) {
	c := newClock()
	l := holdOffLog(c, 5*time.Minute)
	require.True(t, logged(l.Fail("k", "timeout")))
	c.advance(10 * time.Second)
	require.True(t, l.OK("k"))
	// It flaps every 30 s for 4 minutes: counted, not logged, and nor are
	// the recoveries of the episodes not logged.
	for range 8 {
		c.advance(15 * time.Second)
		assert.Equal(t, Verdict{}, l.Fail("k", "timeout"))
		c.advance(15 * time.Second)
		assert.False(t, l.OK("k"), "an episode held off has no recovery line")
	}
	c.advance(time.Minute) // past the hold-off
	v := l.Fail("k", "timeout")
	assert.Equal(t, Verdict{Log: true, Unlogged: 8}, v, "logged again, saying how many went unlogged")
	assert.True(t, l.OK("k"))
	c.advance(5 * time.Minute)
	assert.Equal(t, Verdict{Log: true}, l.Fail("k", "timeout"), "the count starts again")
}

func TestCauseChangeHeldOff(t *testing.T) {
	c := newClock()
	l := holdOffLog(c, 5*time.Minute)
	require.True(t, logged(l.Fail("k", "timeout")))
	c.advance(time.Minute)
	assert.Equal(t, Verdict{}, l.Fail("k", "unknown error"), "a new cause within the hold-off is counted")
	assert.True(t, l.OK("k"), "the episode was logged: so is its recovery, whatever its cause became")
	c.advance(5 * time.Minute)
	assert.Equal(t, Verdict{Log: true, Unlogged: 1}, l.Fail("k", "unknown error"))
}

func TestHoldOffIsPerKey(t *testing.T) {
	c := newClock()
	l := holdOffLog(c, 5*time.Minute)
	require.True(t, logged(l.Fail("a", "x")))
	assert.True(t, logged(l.Fail("b", "x")), "another key is not held off")
}

func TestBoundEvictsOldest(t *testing.T) {
	l := New(3)
	for i := range 100 {
		require.True(t, logged(l.Fail(fmt.Sprint("pid", i), "gone")), "a new key is logged")
		assert.LessOrEqual(t, l.size(), 3, "bounded")
	}
	assert.Equal(t, 3, l.size())
	assert.Equal(t, Verdict{}, l.Fail("pid99", "gone"), "the newest are remembered")
	assert.True(t, logged(l.Fail("pid0", "gone")), "the oldest were forgotten")
}

func TestBoundEvictsLeastRecentlyNoted(t *testing.T) {
	l := New(2)
	l.Fail("a", "x")
	l.Fail("b", "x")
	l.Fail("a", "x") // a is noted again: b is now the oldest
	l.Fail("c", "x")
	assert.Equal(t, Verdict{}, l.Fail("a", "x"), "a, noted recently, stays")
	assert.True(t, logged(l.Fail("b", "x")), "b was evicted")
}

func TestBoundKeepOldest(t *testing.T) {
	l := New(2, WithWhenFull(KeepOldest))
	require.True(t, logged(l.Fail("a", "x")))
	require.True(t, logged(l.Fail("b", "x")))
	for i := range 10 {
		assert.Equal(t, Verdict{Full: true}, l.Fail(fmt.Sprint("c", i), "x"), "full: not remembered, not logged at warn")
	}
	assert.Equal(t, 2, l.size())
	assert.Equal(t, Verdict{}, l.Fail("a", "x"), "the first ones stay")
	assert.True(t, l.OK("a"))
	assert.True(t, logged(l.Fail("a", "x")), "a remembered key is not refused")
}

func TestMinimumSize(t *testing.T) {
	l := New(0)
	assert.True(t, l.Once("a"))
	assert.False(t, l.Once("a"))
	assert.Equal(t, 1, l.size())
}

func TestConcurrent(t *testing.T) {
	l := New(16, WithHoldOff(time.Minute))
	var wg sync.WaitGroup
	var mu sync.Mutex
	lines := 0
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				key := fmt.Sprint("k", (g+i)%4)
				if l.Fail(key, "x").Log {
					mu.Lock()
					lines++
					mu.Unlock()
				}
				if i%3 == 0 {
					l.OK(key)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 4, lines, "once per key: every later episode falls in the hold-off")
}
