//go:build cgo

package nvmlreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmltest"
)

func xidValue(t *testing.T, ts *testScraper, uuid string, code int64) int64 {
	t.Helper()
	v, _ := pointValue(ts.scrapeOK(t), uuid, "nvidia.gpu.xid.errors", "nvidia.gpu.xid",
		func(v pcommon.Value) bool { return v.Int() == code })
	return v
}

func TestXIDsAreCountedAndLogged(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m)
	logs := new(consumertest.LogsSink)
	ts.events.logsConsumer = logs
	ts.start(t)

	m.XID(4, 79)
	m.XID(4, 79)
	m.XID(4, 48)
	m.XID(1, 13)
	require.Eventually(t, func() bool { return logs.LogRecordCount() == 4 }, 5*time.Second, 10*time.Millisecond)

	assert.Equal(t, int64(2), xidValue(t, ts, nvmltest.UUID(4), 79))
	assert.Equal(t, int64(1), xidValue(t, ts, nvmltest.UUID(4), 48))
	assert.Equal(t, int64(1), xidValue(t, ts, nvmltest.UUID(1), 13))
	assert.Equal(t, int64(0), xidValue(t, ts, nvmltest.UUID(0), 79))

	rl := logs.AllLogs()[0].ResourceLogs().At(0)
	id, _ := rl.Resource().Attributes().Get("hw.id")
	assert.Equal(t, nvmltest.UUID(4), id.Str(), "the record carries its GPU's resource")
	lr := rl.ScopeLogs().At(0).LogRecords().At(0)
	assert.Equal(t, "nvidia.gpu.xid", lr.EventName(), "the event declared in metadata.yaml")
	assert.Equal(t, "https://opentelemetry.io/schemas/1.43.0", rl.SchemaUrl())
	assert.Equal(t, plog.SeverityNumberError, lr.SeverityNumber())
	typ, _ := lr.Attributes().Get("nvidia.gpu.event.type")
	assert.Equal(t, "xid", typ.Str())
	code, _ := lr.Attributes().Get("nvidia.gpu.xid")
	assert.Equal(t, int64(79), code.Int())
	assert.Contains(t, lr.Body().Str(), "Xid 79")
}

func TestEventLoopStopsAtShutdown(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m)
	require.NoError(t, ts.nvmlScraper.start(context.Background(), componenttest.NewNopHost()))
	require.NotNil(t, ts.events.watcher)
	require.NoError(t, ts.nvmlScraper.shutdown(context.Background()))
	assert.Nil(t, ts.events.watcher)
	assert.Equal(t, int32(1), m.EventSetsFreed.Load(), "the event set is freed")
	// goleak (TestMain) fails the package if the loop's goroutine is left.
}

func TestMetricsAndLogsShareOneNVML(t *testing.T) {
	t.Parallel()
	cfg := createDefaultConfig().(*Config)
	set := newTestSettings()
	mr, err := NewFactory().CreateMetrics(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	lr, err := NewFactory().CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	shared.Lock()
	assert.Len(t, shared.m, 1)
	s := shared.m[cfg]
	shared.Unlock()
	assert.True(t, s.hasMetrics)
	assert.NotNil(t, s.events.logsConsumer)

	host := componenttest.NewNopHost()
	require.NoError(t, mr.Start(context.Background(), host))
	require.NoError(t, lr.Start(context.Background(), host))
	assert.Equal(t, 2, s.starts)
	require.NoError(t, lr.Shutdown(context.Background()))
	require.NoError(t, mr.Shutdown(context.Background()))
	shared.Lock()
	assert.Empty(t, shared.m, "forgotten after the last shutdown")
	shared.Unlock()
}

func TestDisabledEventIsCountedButNotLogged(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Events.NvidiaGpuXid.Enabled = false })
	logs := new(consumertest.LogsSink)
	ts.events.logsConsumer = logs
	ts.start(t)

	m.XID(2, 79)
	m.ECC(2, true)
	require.Eventually(t, func() bool { return logs.LogRecordCount() == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return xidValue(t, ts, nvmltest.UUID(2), 79) == 1 }, 5*time.Second, 10*time.Millisecond,
		"the metric still counts the Xid")
	lr := logs.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	assert.Equal(t, "nvidia.gpu.ecc.double_bit", lr.EventName(), "only the enabled event is logged")
	assert.Equal(t, plog.SeverityNumberError, lr.SeverityNumber())
	assert.Equal(t, 1, logs.LogRecordCount())
}
