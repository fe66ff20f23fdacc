//go:build cgo

package nvmlreceiver

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// Issue 9: the receiver never hangs and never goes dark, whatever NVML
// does. Each test names the defect it covers; each hung before the fix.

// shortBounds are the lifecycle bounds of these tests: each waits for
// them to pass.
var shortBounds = lifecycleBounds{shutdown: 200 * time.Millisecond, start: 500 * time.Millisecond,
	reset: 200 * time.Millisecond, register: 250 * time.Millisecond, eventWait: 5 * time.Millisecond}

// within runs f and fails the test when it takes longer than d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// stuckCall makes a mock call block until release (at cleanup at the
// latest), and says whether one is blocked now.
type stuckCall struct {
	ch      chan struct{}
	once    sync.Once
	running atomic.Bool
}

func newStuckCall(t *testing.T) *stuckCall {
	s := &stuckCall{ch: make(chan struct{})}
	t.Cleanup(s.release)
	return s
}

func (s *stuckCall) block() {
	s.running.Store(true)
	defer s.running.Store(false)
	<-s.ch
}

func (s *stuckCall) release() { s.once.Do(func() { close(s.ch) }) }

// countShutdowns counts nvmlShutdown calls, and those made while a hung
// call was still running.
func countShutdowns(m *nvmltest.Machine, hung *atomic.Bool) (total, underCall *atomic.Int32) {
	total, underCall = new(atomic.Int32), new(atomic.Int32)
	m.ShutdownFunc = func() nvml.Return {
		total.Add(1)
		if hung.Load() {
			underCall.Add(1)
		}
		return nvml.SUCCESS
	}
	return total, underCall
}

// Defect 1: SIGTERM and SIGHUP hung for ever while an NVML call was stuck.
func TestShutdownIsBoundedWhileACallHangs(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	stuck := newStuckCall(t)
	m.GPUs[2].GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { stuck.block(); return 1, nvml.SUCCESS }
	total, underCall := countShutdowns(m, &stuck.running)
	ts := newBoundedTestScraper(t, m, shortBounds)
	require.NoError(t, ts.nvmlScraper.start(context.Background(), componenttest.NewNopHost()))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := ts.scrape(ctx)
	require.NoError(t, err)
	require.True(t, stuck.running.Load())

	within(t, shortBounds.shutdown+time.Second, "Shutdown", func() {
		require.NoError(t, ts.shutdown(context.Background()))
	})
	assert.Equal(t, int32(0), total.Load(), "nvmlShutdown is never called under a running call")
	assert.Equal(t, 1, ts.logs.FilterMessageSnippet("Not shutting NVML down").Len(), "skipped, in one log line")

	// A reload: the new receiver reports, beside the old one's stuck call.
	ts2 := newBoundedTestScraper(t, m, shortBounds)
	within(t, shortBounds.start+500*time.Millisecond, "Start after a reload", func() {
		require.NoError(t, ts2.nvmlScraper.start(context.Background(), componenttest.NewNopHost()))
	})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 350*time.Millisecond)
	defer cancel2()
	md, err := ts2.scrape(ctx2)
	require.NoError(t, err)
	assert.Len(t, resourceIDs(md), 8)
	assert.Contains(t, gpuMetricNames(md, nvmltest.UUID(0)), "hw.temperature")

	stuck.release()
	require.Eventually(t, func() bool { return total.Load() == 1 }, 5*time.Second, 10*time.Millisecond,
		"the old session is shut down once its stuck call returns")
	assert.Equal(t, int32(0), underCall.Load())
	within(t, shortBounds.shutdown+time.Second, "the new receiver's Shutdown", func() {
		require.NoError(t, ts2.shutdown(context.Background()))
	})
}

// Defect 1, the event side: a hung nvmlDeviceRegisterEvents kept shutdown
// waiting for the watcher.
func TestShutdownIsBoundedWhileRegistrationHangs(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	stuck := newStuckCall(t)
	m.GPUs[5].RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { stuck.block(); return nvml.SUCCESS }
	total, underCall := countShutdowns(m, &stuck.running)
	ts := newBoundedTestScraper(t, m, shortBounds)
	require.NoError(t, ts.nvmlScraper.start(context.Background(), componenttest.NewNopHost()))
	require.Eventually(t, stuck.running.Load, 5*time.Second, 5*time.Millisecond)
	within(t, shortBounds.shutdown+time.Second, "Shutdown", func() {
		require.NoError(t, ts.shutdown(context.Background()))
	})
	assert.Equal(t, int32(0), total.Load())
	stuck.release()
	require.Eventually(t, func() bool { return total.Load() == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, int32(0), underCall.Load())
}

// Defect 2: one hung call while priming the GPUs blocked Start for all.
func TestStartDoesNotWaitForAHungGPU(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	stuck := newStuckCall(t)
	getSamples := m.GPUs[1].GetSamplesFunc
	m.GPUs[1].GetSamplesFunc = func(st nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
		stuck.block()
		return getSamples(st, last)
	}
	ts := newBoundedTestScraper(t, m, shortBounds, func(c *Config) { c.CollectionInterval, c.Timeout = time.Second, 300*time.Millisecond })
	within(t, shortBounds.start+time.Second, "Start", func() {
		require.NoError(t, ts.nvmlScraper.start(context.Background(), componenttest.NewNopHost()))
	})
	assert.Equal(t, 1, ts.logs.FilterMessage("NVML initialized").Len())
	md, err := ts.scrape(context.Background())
	require.NoError(t, err)
	assert.Contains(t, gpuMetricNames(md, nvmltest.UUID(0)), "hw.temperature", "the healthy GPUs are reported")
	assert.Equal(t, unreadGPUMetrics, gpuMetricNames(md, nvmltest.UUID(1)), "the GPU still priming is degraded")

	stuck.release()
	require.Eventually(t, func() bool {
		md, err := ts.scrape(context.Background())
		return err == nil && len(gpuMetricNames(md, nvmltest.UUID(1))) > 1
	}, 5*time.Second, 10*time.Millisecond, "the GPU is reported once it is ready")
	require.NoError(t, ts.shutdown(context.Background()))
}

// Defect 4: one GPU's hung registration stopped XID counting on every GPU.
func TestHungRegistrationKeepsTheOtherGPUsEvents(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	stuck := newStuckCall(t)
	m.GPUs[3].RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { stuck.block(); return nvml.SUCCESS }
	m.GPUs[6].RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_UNKNOWN }
	ts := newBoundedTestScraper(t, m, shortBounds)
	logs := new(consumertest.LogsSink)
	ts.events.logsConsumer = logs
	ts.start(t)
	// The line comes once the registrations are over (GPU 3's by its
	// timeout): an Xid sent before GPU 4 registered would be lost.
	notWatching := func() []observer.LoggedEntry {
		return ts.logs.FilterMessageSnippet("Not watching XID and ECC events on these GPUs").All()
	}
	require.Eventually(t, func() bool { return len(notWatching()) > 0 }, 5*time.Second, 10*time.Millisecond)

	m.XID(4, 79)
	require.Eventually(t, func() bool { return logs.LogRecordCount() == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, int64(1), xidValue(t, ts, nvmltest.UUID(4), 79))
	failed := notWatching()
	require.Len(t, failed, 1, "one log line")
	gpus := failed[0].ContextMap()["gpus"].([]any)
	require.Len(t, gpus, 2)
	assert.Contains(t, gpus[0], nvmltest.UUID(6))
	assert.Contains(t, gpus[1], nvmltest.UUID(3))
	assert.Contains(t, gpus[1], "did not return")
}

// Defect 8: every GPU lost while the watcher hung in a registration: the
// next Open skipped nvmlInit, and a later Close shut NVML down under the
// registration.
func TestEveryGPULostWhileRegistrationHangs(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	stuck := newStuckCall(t)
	m.GPUs[5].RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { stuck.block(); return nvml.SUCCESS }
	var inits atomic.Int32
	m.InitFunc = func() nvml.Return { inits.Add(1); return nvml.SUCCESS }
	total, underCall := countShutdowns(m, &stuck.running)
	lost := lossSwitch(m)
	ts := newBoundedTestScraper(t, m, shortBounds)
	ts.start(t)
	require.Eventually(t, stuck.running.Load, 5*time.Second, 5*time.Millisecond)

	lost.Store(true)
	md := ts.scrapeOK(t)
	for i := range 8 {
		v, _ := statusValue(md, nvmltest.UUID(i), "failed")
		assert.Equal(t, int64(1), v)
	}
	ts.waitReset(t) // in the background: the scrape does not wait for it
	assert.Equal(t, int32(0), total.Load(), "no nvmlShutdown under the hung registration")
	assert.Equal(t, 1, ts.logs.FilterMessageSnippet("without shutting the old session down").Len())

	lost.Store(false) // the driver came back
	ts.session.now = func() time.Time { return time.Now().Add(time.Hour) }
	md = ts.scrapeOK(t)
	assert.Equal(t, int32(2), inits.Load(), "the next Open initializes NVML again")
	assert.Len(t, resourceIDs(md), 8)
	assert.Contains(t, gpuMetricNames(md, nvmltest.UUID(0)), "hw.temperature")
	assert.Equal(t, int32(0), total.Load())

	stuck.release()
	require.Eventually(t, func() bool { return total.Load() == 1 }, 5*time.Second, 10*time.Millisecond,
		"the old session is shut down once the registration returns")
	assert.Equal(t, int32(0), underCall.Load())
}

// statusHost records the component status events reported to it.
type statusHost struct {
	component.Host
	mu     sync.Mutex
	events []*componentstatus.Event
}

func (h *statusHost) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
}

func (h *statusHost) last() *componentstatus.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) == 0 {
		return nil
	}
	return h.events[len(h.events)-1]
}

// Defect 12 (the receiver's side): a stuck read turns the component status
// to a recoverable error, which the health_check extension serves as
// unhealthy behind its extension.healthcheck.useComponentStatus gate.
func TestStuckReadIsReportedInComponentStatus(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	stuck := newStuckCall(t)
	ts := newBoundedTestScraper(t, m, shortBounds)
	host := &statusHost{Host: componenttest.NewNopHost()}
	require.NoError(t, ts.nvmlScraper.start(context.Background(), host))
	t.Cleanup(func() { require.NoError(t, ts.shutdown(context.Background())) })
	require.Equal(t, componentstatus.StatusOK, host.last().Status())

	m.GPUs[1].GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { stuck.block(); return 1, nvml.SUCCESS }
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := ts.scrape(ctx)
	require.NoError(t, err)
	ev := host.last()
	require.Equal(t, componentstatus.StatusRecoverableError, ev.Status())
	assert.ErrorContains(t, ev.Err(), nvmltest.UUID(1))

	stuck.release()
	require.Eventually(t, func() bool {
		_, err := ts.scrape(context.Background())
		return err == nil && host.last().Status() == componentstatus.StatusOK
	}, 5*time.Second, 10*time.Millisecond)
}

// Review 2, finding 2 (TestReview2ResetLoopLogsEveryScrape): GPUs that
// answer the inventory but are lost at every read made each scrape
// re-initialize NVML (an Open that succeeded reset the backoff and the
// last cause) and log the inventory, every GPU's loss and the
// unavailability again.
func TestLostGPUsAreNotReinitializedEveryScrape(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	var inits atomic.Int32
	m.InitFunc = func() nvml.Return { inits.Add(1); return nvml.SUCCESS }
	ts := newBoundedTestScraper(t, m, shortBounds)
	ts.start(t)
	lost := lossSwitch(m)
	lost.Store(true)
	for range 5 {
		ts.clock.Advance(10 * time.Second) // one collection interval
		_, _ = ts.scrape(context.Background())
	}
	assert.Equal(t, int32(1), inits.Load(), "nvmlInit")
	assert.Equal(t, 1, ts.logs.FilterMessage("NVML initialized").Len(), "NVML initialized")
	assert.Equal(t, 8, ts.logs.FilterMessageSnippet("GPU is lost").Len(), "GPU is lost")
	assert.Equal(t, 1, ts.logs.FilterMessageSnippet("NVML is unavailable").Len(), "NVML is unavailable")

	// Still lost a minute after: one Init, quiet but for the client's
	// own log of each GPU's loss (it is the client's, per session).
	ts.clock.Advance(20 * time.Second)
	_, _ = ts.scrape(context.Background())
	assert.Equal(t, int32(2), inits.Load(), "tried again after the longest delay")
	assert.Equal(t, 1, ts.logs.FilterMessage("NVML initialized").Len(), "the same inventory is not logged again")
	assert.Equal(t, 1, ts.logs.FilterMessageSnippet("NVML is unavailable").Len(), "nor the same cause")

	// Back: reported at the next attempt, and logged.
	lost.Store(false)
	ts.clock.Advance(time.Minute)
	md := ts.scrapeOK(t)
	assert.Equal(t, int32(3), inits.Load())
	assert.Len(t, resourceIDs(md), 8)
	assert.Contains(t, gpuMetricNames(md, nvmltest.UUID(0)), "hw.temperature")
	assert.Equal(t, 1, ts.logs.FilterMessageSnippet("GPUs report again").Len())
}

// Review 2, finding 2: GPUs lost after giving data (a driver reload) are
// tried again soon, and a later loss is logged again.
func TestGPUsLostAfterDataAreRetriedSoon(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	var inits atomic.Int32
	m.InitFunc = func() nvml.Return { inits.Add(1); return nvml.SUCCESS }
	lost := lossSwitch(m)
	ts := newBoundedTestScraper(t, m, shortBounds)
	ts.start(t)
	for range 2 {
		ts.clock.Advance(10 * time.Second)
		lost.Store(false)
		require.Len(t, resourceIDs(ts.scrapeOK(t)), 8)
		lost.Store(true)
		ts.clock.Advance(10 * time.Second)
		ts.scrapeOK(t) // every GPU lost
	}
	assert.Equal(t, int32(2), inits.Load(), "re-initialized 10 s after the loss")
	assert.Equal(t, 2, ts.logs.FilterMessageSnippet("NVML is unavailable").Len(), "each loss after data is logged")
	assert.Equal(t, 16, ts.logs.FilterMessageSnippet("GPU is lost").Len())
}

// ioPoint returns GPU 0's hw.gpu.io transmit point.
func ioPoint(t *testing.T, md pmetric.Metrics) pmetric.NumberDataPoint {
	t.Helper()
	m := gpuMetric(md, nvmltest.UUID(0), "hw.gpu.io")
	require.NotNil(t, m)
	dps := m.Sum().DataPoints()
	for i := 0; i < dps.Len(); i++ {
		if v, _ := dps.At(i).Attributes().Get("network.io.direction"); v.Str() == "transmit" {
			return dps.At(i)
		}
	}
	t.Fatal("no transmit point")
	return pmetric.NewNumberDataPoint()
}

// Review 2, finding 3 (TestReview2CounterRestartKeepsStartTime): after
// every GPU was lost and NVML was initialized again, the cumulative
// counts started again from 0 under the old start time.
func TestCountersAfterReinitCarryANewStartTime(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m)
	ts.start(t)
	lost := lossSwitch(m)
	m.XID(0, 79)
	require.Eventually(t, func() bool { return len(ts.events.counts(nvmltest.UUID(0))) == 1 }, 5*time.Second, time.Millisecond)
	var before pmetric.NumberDataPoint
	for range 4 {
		ts.clock.Advance(10 * time.Second)
		md := ts.scrapeOK(t)
		before = ioPoint(t, md)
		require.NotNil(t, gpuMetric(md, nvmltest.UUID(0), "nvidia.gpu.xid.errors"))
	}
	lost.Store(true)
	ts.clock.Advance(10 * time.Second)
	ts.scrapeOK(t)
	lost.Store(false) // driver reloaded
	var after pmetric.NumberDataPoint
	for range 3 {
		ts.clock.Advance(10 * time.Second)
		if md := ts.scrapeOK(t); gpuMetric(md, nvmltest.UUID(0), "hw.gpu.io") != nil {
			after = ioPoint(t, md)
			assert.Nil(t, gpuMetric(md, nvmltest.UUID(0), "nvidia.gpu.xid.errors"), "no Xid since the new start time")
			break
		}
	}
	require.NotZero(t, after.Timestamp(), "reported again after the re-initialization")
	t.Logf("before: %d start %v; after: %d start %v", before.IntValue(), before.StartTimestamp(), after.IntValue(), after.StartTimestamp())
	require.Less(t, after.IntValue(), before.IntValue(), "the device's total started again")
	assert.Greater(t, after.StartTimestamp(), before.Timestamp(), "a counter that started again carries a new start time")
	assert.LessOrEqual(t, after.StartTimestamp(), after.Timestamp())
}

// Review 2, finding 4 (TestReview2LogsShutdownTwiceStopsMetricsSide): the
// sides shared one count of starts, so a second Shutdown of the logs side
// (which the Collector's contract allows) stopped the metrics side's
// session. Each side's second Start or Shutdown is now a no-op.
func TestSecondShutdownOfOneSideKeepsTheOther(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newBoundedTestScraper(t, m, shortBounds)
	ts.hasMetrics = true
	require.NoError(t, ts.nvmlScraper.start(context.Background(), componenttest.NewNopHost())) // the metrics side
	lr := &logsReceiver{s: ts.nvmlScraper}
	require.NoError(t, lr.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, lr.Shutdown(context.Background()))
	require.NoError(t, lr.Shutdown(context.Background()))
	ts.clock.Advance(time.Minute)
	assert.Len(t, resourceIDs(ts.scrapeOK(t)), 8, "the metrics side still reports")

	// And the other way round: the logs side keeps the event watcher.
	require.NoError(t, lr.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, ts.shutdown(context.Background()))
	require.NoError(t, ts.shutdown(context.Background()))
	ts.events.mu.Lock()
	watching := ts.events.watcher != nil
	ts.events.mu.Unlock()
	assert.True(t, watching, "the logs side still watches events")
	require.NoError(t, lr.Shutdown(context.Background()))
	assert.Nil(t, ts.events.watcher, "stopped with the last side")

	// A side's second Start is a no-op: one Shutdown of each side stops.
	require.NoError(t, ts.nvmlScraper.start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, lr.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, lr.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, lr.Shutdown(context.Background()))
	require.NoError(t, ts.shutdown(context.Background()))
	assert.Nil(t, ts.events.watcher, "stopped with the last side")
}

// xidPoint returns GPU 4's nvidia.gpu.xid.errors point.
func xidPoint(t *testing.T, md pmetric.Metrics) pmetric.NumberDataPoint {
	t.Helper()
	m := gpuMetric(md, nvmltest.UUID(4), "nvidia.gpu.xid.errors")
	require.NotNil(t, m)
	return m.Sum().DataPoints().At(0)
}

// Review 2, finding 5 (TestReview2RestartKeepsCountsWithNewStartTime):
// Start after Shutdown gave the receiver a new start time but kept the
// XID and dropped-process counts from before it.
func TestRestartCountsFromTheNewStartTime(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[3].SetProcesses(proc(4343, 1<<20), proc(4242, 4<<30), proc(5555, 2<<30))
	ts := newBoundedTestScraper(t, m, shortBounds, func(c *Config) { c.Processes.MaxPerGPU = 2 })
	require.NoError(t, ts.nvmlScraper.start(context.Background(), componenttest.NewNopHost()))
	m.XID(4, 79)
	require.Eventually(t, func() bool { return len(ts.events.counts(nvmltest.UUID(4))) == 1 }, 5*time.Second, time.Millisecond)
	md := ts.scrapeOK(t)
	p1 := xidPoint(t, md)
	ts.scrapeOK(t)
	require.NoError(t, ts.shutdown(context.Background()))
	time.Sleep(10 * time.Millisecond)
	ts.clock.Advance(time.Second) // the start time is on the samples' clock
	require.NoError(t, ts.nvmlScraper.start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, ts.shutdown(context.Background())) }()
	m.XID(3, 13) // a watcher at work
	require.Eventually(t, func() bool { return len(ts.events.counts(nvmltest.UUID(3))) == 1 }, 5*time.Second, time.Millisecond)
	md = ts.scrapeOK(t)
	assert.Nil(t, gpuMetric(md, nvmltest.UUID(4), "nvidia.gpu.xid.errors"), "no Xid since the new start time")
	dropped := gpuMetric(md, nvmltest.UUID(3), "nvidia.gpu.process.dropped")
	require.NotNil(t, dropped)
	dp := dropped.Sum().DataPoints().At(0)
	assert.Equal(t, int64(1), dp.IntValue(), "one scrape since the new start time")
	assert.Greater(t, dp.StartTimestamp(), p1.Timestamp(), "the new start time")
}

// lossSwitch makes every GPU of m answer GPU_IS_LOST (to its temperature
// read) while the returned switch is on.
func lossSwitch(m *nvmltest.Machine) *atomic.Bool {
	lost := new(atomic.Bool)
	for _, g := range m.GPUs {
		g.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
			if lost.Load() {
				return 0, nvml.ERROR_GPU_IS_LOST
			}
			return 40, nvml.SUCCESS
		}
	}
	return lost
}

// Issue 17, defect 2: with every GPU lost, the scrape stopped the event
// watcher (up to bounds.reset) and shut the old session down (Close: up to
// bounds.reset, and for as long as nvmlShutdown hangs) on its own
// goroutine, past its deadline. The next scrape must not race that
// teardown either: no nvmlInit before the old session is down.
func TestEveryGPULostScrapeKeepsItsDeadline(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		hang func(*nvmltest.Machine, *stuckCall)
	}{
		{"the watcher is stuck in nvmlEventSetWait", func(m *nvmltest.Machine, stuck *stuckCall) {
			stuckEventSet(m, stuck, new(atomic.Bool))
		}},
		{"nvmlShutdown hangs", func(m *nvmltest.Machine, stuck *stuckCall) {
			m.ShutdownFunc = func() nvml.Return { stuck.block(); return nvml.SUCCESS }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := nvmltest.NewH200()
			stuck := newStuckCall(t)
			tc.hang(m, stuck)
			var inits atomic.Int32
			m.InitFunc = func() nvml.Return { inits.Add(1); return nvml.SUCCESS }
			lost := lossSwitch(m)
			bounds := shortBounds
			// stop and Close: up to 2 x reset on the scrape's goroutine
			// before the fix. The teardown must outlast both scrapes below
			// (up to 450 ms each, more on a loaded CI machine), or it gives
			// up on the stuck call and a second nvmlInit is right.
			bounds.reset = 10 * time.Second
			ts := newBoundedTestScraper(t, m, bounds)
			ts.start(t)
			ts.scrapeOK(t) // data
			ts.events.mu.Lock()
			watching := ts.events.watcher != nil
			ts.events.mu.Unlock()
			require.True(t, watching)

			const timeout = 300 * time.Millisecond
			scrape := func() {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				within(t, timeout+150*time.Millisecond, "a scrape", func() {
					_, err := ts.scrape(ctx)
					assert.NoError(t, err)
				})
			}
			lost.Store(true)
			scrape() // every GPU lost: the teardown starts
			lost.Store(false)
			ts.clock.Advance(time.Hour) // a retry is due
			scrape()                    // the teardown still runs: no Open under it
			assert.Equal(t, int32(1), inits.Load(), "no nvmlInit while the old session is shut down")

			stuck.release()
			ts.waitReset(t)
			assert.Len(t, resourceIDs(ts.scrapeOK(t)), 8, "re-initialized once the old session is down")
			assert.Equal(t, int32(2), inits.Load())
		})
	}
}

// Issue 17, defect 5: a receiver with no metrics side never read its GPUs,
// so it never found them all lost and never reset its session: after a
// driver reload its events stopped until a restart.
func TestLogsOnlyReceiverResetsWhenEveryGPUIsLost(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	var inits atomic.Int32
	m.InitFunc = func() nvml.Return { inits.Add(1); return nvml.SUCCESS }
	lost := lossSwitch(m)
	ts := newBoundedTestScraper(t, m, shortBounds, func(c *Config) {
		c.CollectionInterval = 20 * time.Millisecond
		c.Timeout = time.Second
	})
	logs := new(consumertest.LogsSink)
	ts.events.logsConsumer = logs
	lr := &logsReceiver{s: ts.nvmlScraper} // hasMetrics is false: logs alone
	require.NoError(t, lr.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, lr.Shutdown(context.Background())) })
	time.Sleep(50 * time.Millisecond) // registration done
	m.XID(1, 13)
	require.Eventually(t, func() bool { return logs.LogRecordCount() == 1 }, 5*time.Second, 5*time.Millisecond)

	lost.Store(true) // a driver reload, a GPU reset
	require.Eventually(t, func() bool { return ts.logs.FilterMessageSnippet("NVML is unavailable").Len() == 1 }, 5*time.Second, 5*time.Millisecond,
		"every GPU lost: the session is reset")
	lost.Store(false)
	ts.clock.Advance(time.Minute) // the retry is due
	require.Eventually(t, func() bool { return inits.Load() == 2 }, 5*time.Second, 5*time.Millisecond, "NVML is initialized again")
	require.Eventually(t, func() bool { return ts.logs.FilterMessageSnippet("GPUs report again").Len() == 1 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond) // the new watcher's registration
	m.XID(2, 13)
	require.Eventually(t, func() bool { return logs.LogRecordCount() == 2 }, 5*time.Second, 5*time.Millisecond,
		"the events come back")
}

// The logs-only receiver's check of its GPUs (probeLost) asks a GPU:
// Shutdown does not wait for a read that hangs.
func TestLogsOnlyShutdownDoesNotWaitForAHungProbe(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	stuck := newStuckCall(t)
	ts := newBoundedTestScraper(t, m, shortBounds, func(c *Config) {
		c.CollectionInterval = 20 * time.Millisecond
		c.Timeout = time.Minute
	})
	var hang atomic.Bool
	m.GPUs[0].GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
		if hang.Load() {
			stuck.block()
		}
		return 40, nvml.SUCCESS
	}
	lr := &logsReceiver{s: ts.nvmlScraper}
	require.NoError(t, lr.Start(context.Background(), componenttest.NewNopHost()))
	hang.Store(true)
	require.Eventually(t, stuck.running.Load, 5*time.Second, 5*time.Millisecond, "the check reads GPU 0")
	within(t, shortBounds.shutdown+time.Second, "Shutdown", func() {
		assert.NoError(t, lr.Shutdown(context.Background()))
	})
}
