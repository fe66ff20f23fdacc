//go:build cgo

package nvmlclient

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

const (
	failedSnippet    = "NVML call failed"
	recoveredSnippet = "NVML call recovered"
)

// A call that keeps failing is logged once per GPU, call and cause, at
// warn, and its recovery once at info. A call that flaps is logged so once
// per flapHoldOff: the failures in between are counted into the next warn
// line. Nothing at error level, and no stack trace.
func TestFailingCallLoggedOncePerEpisode(t *testing.T) {
	m := nvmltest.NewH200GPUs(2)
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	core, logs := observer.New(zapcore.DebugLevel)
	c := New(m, zap.New(core), WithClock(clock.Now))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	answer := nvml.ERROR_UNKNOWN
	m.GPUs[0].GetPowerUsageFunc = func() (uint32, nvml.Return) { return 150_000, answer }
	m.GPUs[1].GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	read := func(n int, failing bool) {
		t.Helper()
		for range n {
			clock.Advance(time.Second)
			for i, d := range c.Devices() {
				s, err := d.Read()
				if i == 0 && !failing {
					require.NoError(t, err)
					assert.True(t, s.Values[FigPower].OK)
					continue
				}
				var re *ReadError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, 1, re.Metrics, "hw.power")
				assert.False(t, s.Values[FigPower].OK)
			}
		}
	}
	warns := func(uuid string) *observer.ObservedLogs {
		return logs.FilterMessageSnippet(failedSnippet).FilterField(zap.String("hw.id", uuid))
	}
	recoveries := func() int { return logs.FilterMessageSnippet(recoveredSnippet).Len() }

	read(10, true)
	assert.Equal(t, 1, warns(nvmltest.UUID(0)).Len())
	assert.Equal(t, 1, warns(nvmltest.UUID(1)).Len(), "once per GPU")
	assert.Equal(t, 0, recoveries())

	answer = nvml.SUCCESS
	read(5, false)
	assert.Equal(t, 1, recoveries(), "the recovery logged once")
	assert.Equal(t, 1, logs.FilterMessageSnippet(recoveredSnippet).FilterField(zap.String("hw.id", nvmltest.UUID(0))).
		FilterField(zap.String("call", "nvmlDeviceGetPowerUsage")).Len())

	// Flapping within the hold-off: counted, not logged.
	for range 3 {
		answer = nvml.ERROR_UNKNOWN
		read(3, true)
		answer = nvml.SUCCESS
		read(3, false)
	}
	answer = nvml.ERROR_TIMEOUT // a new cause, within the hold-off too
	read(2, true)
	assert.Equal(t, 1, warns(nvmltest.UUID(0)).Len(), "held off")
	assert.Equal(t, 1, recoveries(), "an episode not logged: nor is its recovery")

	// After the hold-off: the next failure is logged, with the count of
	// those that were not; and its recovery.
	answer = nvml.SUCCESS
	read(1, false)
	clock.Advance(call.FlapHoldOff)
	answer = nvml.ERROR_UNKNOWN
	read(3, true)
	w := warns(nvmltest.UUID(0)).All()
	require.Len(t, w, 2)
	assert.Equal(t, int64(4), w[1].ContextMap()["unlogged_failures"], "3 episodes and 1 new cause")
	answer = nvml.SUCCESS
	read(2, false)
	assert.Equal(t, 2, recoveries())
	assert.Equal(t, 1, warns(nvmltest.UUID(1)).Len(), "the call that never recovers: still one line")

	for _, e := range logs.All() {
		assert.Less(t, e.Level, zapcore.ErrorLevel, e.Message)
		assert.Empty(t, e.Stack, e.Message)
		if e.Level == zapcore.WarnLevel {
			assert.Contains(t, e.Message, failedSnippet)
			assert.Equal(t, "nvmlDeviceGetPowerUsage", e.ContextMap()["call"])
		}
	}
}
