//go:build cgo

package nvmlclient

import (
	"context"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmltest"
)

const (
	failedSnippet    = "NVML call failed"
	recoveredSnippet = "NVML call recovered"
)

// A call that keeps failing is logged once per GPU, call and cause, at
// warn; a flapping call once per failure episode, and once per recovery, at
// info; a new cause within an episode is logged too. Nothing at error
// level, and no stack trace.
func TestFailingCallLoggedOncePerEpisode(t *testing.T) {
	m := nvmltest.NewH200GPUs(2)
	core, logs := observer.New(zapcore.DebugLevel)
	c := New(m, zap.New(core))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	answer := nvml.ERROR_UNKNOWN
	m.GPUs[0].GetPowerUsageFunc = func() (uint32, nvml.Return) { return 150_000, answer }
	m.GPUs[1].GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	read := func(failing bool) {
		t.Helper()
		for i, d := range c.Devices() {
			s, err := d.Read()
			if i == 0 && !failing {
				require.NoError(t, err)
				assert.True(t, s.PowerWatts.OK)
				continue
			}
			var re *ReadError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, 1, re.Metrics, "hw.power")
			assert.False(t, s.PowerWatts.OK)
		}
	}
	warns := func(uuid string) int {
		return logs.FilterMessageSnippet(failedSnippet).FilterField(zap.String("hw.id", uuid)).Len()
	}
	recoveries := func() int { return logs.FilterMessageSnippet(recoveredSnippet).Len() }

	for range 10 {
		read(true)
	}
	assert.Equal(t, 1, warns(nvmltest.UUID(0)))
	assert.Equal(t, 1, warns(nvmltest.UUID(1)), "once per GPU")
	assert.Equal(t, 0, recoveries())

	answer = nvml.SUCCESS
	for range 5 {
		read(false)
	}
	assert.Equal(t, 1, recoveries(), "the recovery logged once")
	assert.Equal(t, 1, logs.FilterMessageSnippet(recoveredSnippet).FilterField(zap.String("hw.id", nvmltest.UUID(0))).
		FilterField(zap.String("call", "nvmlDeviceGetPowerUsage")).Len())

	answer = nvml.ERROR_UNKNOWN
	for range 3 {
		read(true)
	}
	assert.Equal(t, 2, warns(nvmltest.UUID(0)), "a second episode is logged again")
	answer = nvml.ERROR_TIMEOUT
	read(true)
	assert.Equal(t, 3, warns(nvmltest.UUID(0)), "a new cause is logged")
	answer = nvml.SUCCESS
	read(false)
	read(false)
	assert.Equal(t, 2, recoveries())
	assert.Equal(t, 1, warns(nvmltest.UUID(1)), "the call that never recovers: still one line")

	for _, e := range logs.All() {
		assert.Less(t, e.Level, zapcore.ErrorLevel, e.Message)
		assert.Empty(t, e.Stack, e.Message)
		if e.Level == zapcore.WarnLevel {
			assert.Contains(t, e.Message, failedSnippet)
			assert.Equal(t, "nvmlDeviceGetPowerUsage", e.ContextMap()["call"])
		}
	}
}
