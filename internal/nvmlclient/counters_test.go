//go:build cgo

package nvmlclient

import (
	"context"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// nvlinkCounter reads GPU 0's NVLink replay counter on the counters'
// cadence: each call sets the counter to v, lets the background read take
// it, and returns the next scrape's sample.
func nvlinkCounter(t *testing.T) func(v uint64) sample.Sample {
	t.Helper()
	m := nvmltest.NewH200()
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(m, zap.NewNop(), WithClock(clock.Now), WithCounterInterval(time.Second))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	g, d := m.GPUs[0], c.Devices()[0]
	first := true
	return func(v uint64) sample.Sample {
		t.Helper()
		g.Set(func(g *nvmltest.GPU) {
			g.FieldValues = map[uint32]uint64{nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: v}
		})
		if !first {
			clock.Advance(time.Second)
			_, err := d.Read() // due: the background read starts
			require.NoError(t, err)
			require.True(t, d.waitBackground(time.Second))
		}
		first = false
		s, err := d.Read()
		require.NoError(t, err)
		return s
	}
}

// Issue 23, part 5: a counter that reads lower once, then back at or
// above its old value, had a bad read: it is left out for that one
// reading (in doubt, as a failed read is), never reported lower, and
// keeps its start.
func TestCounterBadReadIsLeftOut(t *testing.T) {
	read := nvlinkCounter(t)
	assert.Equal(t, some[float64](40), read(40).Values[FigNVLinkReplay])
	s := read(0)
	assert.False(t, s.Values[FigNVLinkReplay].OK, "a lower reading is in doubt: left out")
	s = read(41)
	assert.Equal(t, some[float64](41), s.Values[FigNVLinkReplay])
	assert.Nil(t, s.CountersSince, "no reset: it counts since the session")
}

// Issue 23, part 5: a counter that reads lower and then counts on from
// there (a GPU reset, the driver resetting its counters) was reset: it is
// reported from its new count, with a new start, the time of its last
// reading before the drop, so that the whole new count lies after it.
// Before, the kept maximum froze it at its old maximum until it passed it.
func TestCounterResetStartsAgain(t *testing.T) {
	read := nvlinkCounter(t)
	read(40)
	before := read(40).CountersTime
	assert.False(t, read(2).Values[FigNVLinkReplay].OK, "in doubt")
	s := read(3)
	assert.Equal(t, some[float64](3), s.Values[FigNVLinkReplay], "a reset: it counts on from its new count")
	require.NotNil(t, s.CountersSince)
	assert.Equal(t, before, s.CountersSince[FigNVLinkReplay], "since its last reading before the drop")
	assert.True(t, s.CountersSince[FigEnergy].IsZero(), "only the counter that reset starts again")
	s = read(5)
	assert.Equal(t, some[float64](5), s.Values[FigNVLinkReplay])
	assert.Equal(t, before, s.CountersSince[FigNVLinkReplay], "the start stays")

	// A reset to 0 that stays at 0 (no error since) is a reset too.
	before = s.CountersTime
	read(0)
	s = read(0)
	assert.Equal(t, some[float64](0), s.Values[FigNVLinkReplay])
	assert.Equal(t, before, s.CountersSince[FigNVLinkReplay])
}

// A costly gauge (costly, not cumulative) is read on the counters' cadence
// and reports its newest reading, lower or not, stamped with its time.
func TestCostlyGaugeFollowsItsNewestReading(t *testing.T) {
	m := nvmltest.NewH200()
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(m, zap.NewNop(), WithClock(clock.Now), WithCounterInterval(time.Second))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	g, d := m.GPUs[1], c.Devices()[1]
	s, err := d.Read()
	require.NoError(t, err)
	assert.Equal(t, some(1000.0*1024), s.Values[FigPCIeThroughputTX], "KiB/s to bytes/s")
	g.Set(func(g *nvmltest.GPU) { g.Getters["nvmlDeviceGetPcieThroughput(TX_BYTES)"] = 10 })
	clock.Advance(time.Second)
	_, err = d.Read()
	require.NoError(t, err)
	require.True(t, d.waitBackground(time.Second))
	s, err = d.Read()
	require.NoError(t, err)
	assert.Equal(t, some(10.0*1024), s.Values[FigPCIeThroughputTX], "lower, and no counter's doubt")
	assert.Nil(t, s.CountersSince, "a gauge never starts again")
	assert.Equal(t, clock.Now(), s.CountersTime)
}
