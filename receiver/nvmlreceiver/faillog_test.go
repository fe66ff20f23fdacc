//go:build cgo

package nvmlreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	otelattr "go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap/zapcore"

	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadatatest"
	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// withTelemetry points the scraper's own telemetry at tt.
func withTelemetry(t *testing.T, ts *testScraper) *componenttest.Telemetry {
	t.Helper()
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	tb, err := metadata.NewTelemetryBuilder(tt.NewTelemetrySettings())
	require.NoError(t, err)
	ts.telemetry = tb
	return tt
}

func scrapeAttrs(ts *testScraper) otelattr.Set {
	return otelattr.NewSet(
		otelattr.String("receiver", ts.set.ID.String()),
		otelattr.String("scraper", "nvml"),
	)
}

func callAttrs(ts *testScraper, uuid, call string) otelattr.Set {
	return otelattr.NewSet(
		otelattr.String("receiver", ts.set.ID.String()),
		otelattr.String("call", call),
		otelattr.String("hw.id", uuid),
	)
}

// A call that keeps failing makes no scrape error (scraperhelper would log
// each at error level with a stack trace): the client logs it once at
// warn, and the points it leaves out are counted exactly.
func TestFailingCallLogsOnceAndCounts(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m)
	tt := withTelemetry(t, ts)
	ts.start(t)
	m.GPUs[3].GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	const scrapes = 20
	for range scrapes {
		md := ts.scrapeOK(t)
		assert.Len(t, resourceIDs(md), 8)
		assert.NotContains(t, gpuMetricNames(md, nvmltest.UUID(3)), "hw.power")
		assert.Contains(t, gpuMetricNames(md, nvmltest.UUID(3)), "hw.temperature")
	}
	assert.Equal(t, 1, ts.logs.FilterMessageSnippet("NVML call failed").Len())
	assert.Equal(t, 1, ts.logs.FilterLevelExact(zapcore.WarnLevel).Len(), "one warn line in all")
	assert.Zero(t, ts.logs.FilterLevelExact(zapcore.ErrorLevel).Len())
	metadatatest.AssertEqualReceiverNvmlErroredMetricPoints(t, tt, []metricdata.DataPoint[int64]{
		{Attributes: scrapeAttrs(ts), Value: scrapes}, // hw.power, once per scrape
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualReceiverNvmlFailedCalls(t, tt, []metricdata.DataPoint[int64]{
		{Attributes: callAttrs(ts, nvmltest.UUID(3), "nvmlDeviceGetPowerUsage"), Value: scrapes},
	}, metricdatatest.IgnoreTimestamp())
}

// A flapping call: one warn per failure episode and one info line per
// recovery, but a failure within the client's hold-off (5 min) of the last
// warn is counted into the next warn line instead; the count of the points
// left out stays exact.
func TestFlappingCallLogsPerEpisode(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m)
	tt := withTelemetry(t, ts)
	ts.start(t)
	failing := false
	m.GPUs[5].GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if failing {
			return 0, nvml.ERROR_UNKNOWN
		}
		return 150_000, nvml.SUCCESS
	}
	failed := 0
	for episode := range 3 {
		if episode == 2 {
			ts.clock.Advance(5 * time.Minute) // the client's flap hold-off
		}
		failing = true
		for range 4 + episode {
			md := ts.scrapeOK(t)
			assert.NotContains(t, gpuMetricNames(md, nvmltest.UUID(5)), "hw.power")
			failed++
		}
		failing = false
		for range 3 {
			assert.Contains(t, gpuMetricNames(ts.scrapeOK(t), nvmltest.UUID(5)), "hw.power")
		}
	}
	warns := ts.logs.FilterMessageSnippet("NVML call failed").All()
	require.Len(t, warns, 2, "the first episode, and the first after the hold-off")
	assert.Equal(t, int64(1), warns[1].ContextMap()["unlogged_failures"], "the second episode, held off")
	assert.Equal(t, 2, ts.logs.FilterMessageSnippet("NVML call recovered").Len(), "one per logged episode")
	assert.Equal(t, 2, ts.logs.FilterLevelExact(zapcore.WarnLevel).Len())
	assert.Zero(t, ts.logs.FilterLevelExact(zapcore.ErrorLevel).Len())
	metadatatest.AssertEqualReceiverNvmlErroredMetricPoints(t, tt, []metricdata.DataPoint[int64]{
		{Attributes: scrapeAttrs(ts), Value: int64(failed)},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualReceiverNvmlFailedCalls(t, tt, []metricdata.DataPoint[int64]{
		{Attributes: callAttrs(ts, nvmltest.UUID(5), "nvmlDeviceGetPowerUsage"), Value: int64(failed)},
	}, metricdatatest.IgnoreTimestamp())
}

// Issue 23, part 4: a lost GPU is one warn line, without a stack trace
// (the collector's logger adds one at error level), however many scrapes
// find it lost.
func TestLostGPULogsOneWarnLine(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m)
	ts.start(t)
	m.GPUs[3].GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	for range 5 {
		ts.clock.Advance(10 * time.Second)
		v, _ := statusValue(ts.scrapeOK(t), nvmltest.UUID(3), "failed")
		require.Equal(t, int64(1), v)
	}
	lost := ts.logs.FilterMessageSnippet("GPU is lost").All()
	require.Len(t, lost, 1, "once per GPU and cause")
	assert.Equal(t, zapcore.WarnLevel, lost[0].Level)
	assert.Equal(t, nvmltest.UUID(3), lost[0].ContextMap()["hw.id"])
	assert.Zero(t, ts.logs.FilterLevelExact(zapcore.ErrorLevel).Len())
}
