//go:build cgo

package nvmlreceiver

import (
	"context"
	"flag"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadatatest"
	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

type testScraper struct {
	*nvmlScraper
	machine *nvmltest.Machine
	logs    *observer.ObservedLogs
	clock   *nvmltest.Clock
}

func newTestSettings() receiver.Settings {
	return receivertest.NewNopSettings(metadata.Type)
}

// newTestScraper builds a scraper on machine m with the default metrics
// and resource attributes (everyMetric turns them all on), processes read
// from testdata/proc.
func newTestScraper(t testing.TB, m *nvmltest.Machine, mods ...func(*Config)) *testScraper {
	t.Helper()
	bounds := defaultBounds
	bounds.eventWait = 5 * time.Millisecond // a stop is seen within 5 ms
	return newBoundedTestScraper(t, m, bounds, mods...)
}

// newBoundedTestScraper is newTestScraper with the lifecycle bounds b.
func newBoundedTestScraper(t testing.TB, m *nvmltest.Machine, b lifecycleBounds, mods ...func(*Config)) *testScraper {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	procRoot, err := filepath.Abs(filepath.Join("testdata", "proc"))
	require.NoError(t, err)
	cfg.Processes.ProcRoot = procRoot
	cfg.Processes.CgroupRoot, err = filepath.Abs(filepath.Join("testdata", "cgroup"))
	require.NoError(t, err)
	// No Slurm allocation unless a test writes one: the machine's own
	// /run/gpustat is not read.
	cfg.Slurm.GPUStatDir = filepath.Join(t.TempDir(), "gpustat")
	for _, mod := range mods {
		mod(cfg)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	clock := nvmltest.NewClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	tm := timing{now: clock.Now, bounds: b}
	s := newScraper(cfg, set, nvmlclient.New(m, set.Logger, append(clientOptions(cfg), tm.clientOptions()...)...), tm)
	return &testScraper{nvmlScraper: s, machine: m, logs: logs, clock: clock}
}

// micros is NVML's timestamp of the test clock's now minus ago.
func (ts *testScraper) micros(ago time.Duration) uint64 {
	return uint64(ts.clock.Now().Add(-ago).UnixMicro())
}

func (ts *testScraper) start(t testing.TB) {
	t.Helper()
	require.NoError(t, ts.nvmlScraper.start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ts.shutdown(context.Background())) })
}

func (ts *testScraper) scrapeOK(t testing.TB) pmetric.Metrics {
	t.Helper()
	md, err := ts.scrape(context.Background())
	require.NoError(t, err)
	return md
}

// waitReset waits for the background reset of a session whose GPUs were
// all lost (nvmlSession.reset), if one runs.
func (ts *testScraper) waitReset(t testing.TB) {
	t.Helper()
	ts.session.mu.Lock()
	done := ts.session.resetting
	ts.session.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the reset did not end")
	}
}

func proc(pid uint32, mem uint64) nvml.ProcessInfo {
	return nvml.ProcessInfo{Pid: pid, UsedGpuMemory: mem, GpuInstanceId: sample.NoInstance, ComputeInstanceId: sample.NoInstance}
}

// resourceIDs lists the GPUs' hw.id, in order, once each (a GPU with an
// owner has a device and a holder resource); process and container
// resources are left out.
func resourceIDs(md pmetric.Metrics) []string {
	var ids []string
	seen := map[string]bool{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		attrs := md.ResourceMetrics().At(i).Resource().Attributes()
		if _, isProcess := attrs.Get("process.pid"); isProcess {
			continue
		}
		v, ok := attrs.Get("hw.id")
		if !ok || seen[v.Str()] {
			continue // a container's CPU, or the GPU's second resource
		}
		seen[v.Str()] = true
		ids = append(ids, v.Str())
	}
	return ids
}

// processResources maps pid to the attributes of its resource on GPU uuid.
func processResources(md pmetric.Metrics, uuid string) map[int64]map[string]any {
	out := map[int64]map[string]any{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		attrs := md.ResourceMetrics().At(i).Resource().Attributes()
		pid, isProcess := attrs.Get("process.pid")
		if id, _ := attrs.Get("hw.id"); !isProcess || id.Str() != uuid {
			continue
		}
		out[pid.Int()] = attrs.AsRaw()
	}
	return out
}

func TestScrapeGolden(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200GPUs(4)
	m.GPUs[3].GPMOff = true // no GPM on this board
	for i, g := range m.GPUs {
		g.FanSupported, g.FanPercent = i%2 == 0, uint32(30+i) // fans on half the boards
		g.EncoderUtil = uint32(i)                             // busy encoders: their window is read
	}
	// GPU 0 is shared by two processes, GPU 1 belongs to one, GPU 2 runs a
	// process from another PID namespace; GPU 3 is idle.
	m.GPUs[0].SetProcesses(proc(4242, 8<<30), proc(4343, 1<<30))
	m.GPUs[1].SetProcesses(proc(4242, 2<<30))
	m.GPUs[2].SetProcesses(proc(999, 1<<30))
	ts := newTestScraper(t, m)
	ts.start(t)
	ts.clock.Advance(10 * time.Second)
	m.GPUs[0].AddProcessSamples(
		nvml.ProcessUtilizationSample{Pid: 4242, TimeStamp: ts.micros(2 * time.Second), SmUtil: 70, MemUtil: 20},
		nvml.ProcessUtilizationSample{Pid: 4343, TimeStamp: ts.micros(2 * time.Second), SmUtil: 5, MemUtil: 1},
		nvml.ProcessUtilizationSample{Pid: 4242, TimeStamp: ts.micros(time.Second), SmUtil: 50, MemUtil: 10})
	// Samples taken after start: the window averages all of them.
	for i, g := range m.GPUs {
		g.AddSamples(nvml.GPU_UTILIZATION_SAMPLES, []uint64{300, 100, 200}, []uint32{uint32(10 * i), uint32(10*i + 20), 0})
		g.AddSamples(nvml.MEMORY_UTILIZATION_SAMPLES, []uint64{100, 200}, []uint32{uint32(i), uint32(3 * i)})
		g.AddSamples(nvml.ENC_UTILIZATION_SAMPLES, []uint64{100}, []uint32{uint32(i)})
		g.AddSamples(nvml.DEC_UTILIZATION_SAMPLES, []uint64{100, 200, 300, 400}, []uint32{4, 0, 4, 0})
	}
	actual := ts.scrapeOK(t)

	compareGolden(t, filepath.Join("testdata", "scraper", "h200_expected.yaml"), actual)
}

func TestScrapeEveryGPUIsItsOwnResource(t *testing.T) {
	t.Parallel()
	ts := newTestScraper(t, nvmltest.NewH200())
	ts.start(t)
	md := ts.scrapeOK(t)
	want := make([]string, 8)
	for i := range want {
		want[i] = nvmltest.UUID(i)
	}
	assert.Equal(t, want, resourceIDs(md))
}

func TestLibraryAppearsLater(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	present := false
	inits := 0
	m.InitFunc = func() nvml.Return {
		inits++
		if !present {
			return nvml.ERROR_LIBRARY_NOT_FOUND
		}
		return nvml.SUCCESS
	}
	ts := newTestScraper(t, m)
	ts.start(t) // starts although NVML is missing

	for range 3 {
		md := ts.scrapeOK(t)
		assert.Equal(t, 0, md.ResourceMetrics().Len())
		ts.clock.Advance(time.Second)
	}
	assert.Equal(t, 1, inits, "retries wait for the backoff")
	assert.Equal(t, 1, ts.logs.FilterMessageSnippet("NVML is unavailable").Len(), "one warning per cause")
	assert.Contains(t, ts.logs.FilterMessageSnippet("NVML is unavailable").All()[0].ContextMap()["error"], "library_path")

	ts.clock.Advance(10 * time.Second)
	ts.scrapeOK(t)
	assert.Equal(t, 2, inits)

	present = true
	ts.clock.Advance(time.Minute)
	md := ts.scrapeOK(t)
	assert.Len(t, resourceIDs(md), 8, "metrics flow without a restart")
	assert.Equal(t, 1, ts.logs.FilterMessageSnippet("NVML is unavailable").Len())
	assert.Equal(t, 1, ts.logs.FilterMessage("NVML initialized").Len())
}

func TestBackoffIsCappedAtAMinute(t *testing.T) {
	t.Parallel()
	var b retryBackoff
	now := time.Unix(0, 0)
	var delays []time.Duration
	for range 8 {
		delays = append(delays, b.failed(now))
	}
	assert.Equal(t, []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second,
		time.Minute, time.Minute, time.Minute, time.Minute}, delays)
	assert.False(t, b.due(now.Add(59*time.Second)))
	assert.True(t, b.due(now.Add(time.Minute)))
	b.succeeded()
	assert.True(t, b.due(now))
}

// unreadGPUMetrics are what a GPU lost or stuck since the start reports:
// its status, and its time as unobserved.
var unreadGPUMetrics = []string{"hw.status", "nvidia.gpu.free.time", "nvidia.gpu.held.time", "nvidia.gpu.unobserved.time"}

func TestOneGPULostOthersReported(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m)
	ts.start(t)
	m.GPUs[3].GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	for range 3 {
		md := ts.scrapeOK(t)
		for i := range 8 {
			names := gpuMetricNames(md, nvmltest.UUID(i))
			if i == 3 {
				assert.Equal(t, unreadGPUMetrics, names, "a lost GPU says it failed, and its time goes on, unobserved")
				v, _ := statusValue(md, nvmltest.UUID(3), "failed")
				assert.Equal(t, int64(1), v)
				continue
			}
			assert.Contains(t, names, "hw.temperature", "GPU %d is reported", i)
			v, _ := statusValue(md, nvmltest.UUID(i), "ok")
			assert.Equal(t, int64(1), v)
		}
	}
	assert.Equal(t, 1, ts.logs.FilterMessageSnippet("GPU is lost").Len())
}

func TestEveryGPULostReinitializes(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m)
	ts.start(t)
	lost := lossSwitch(m)
	lost.Store(true)
	md := ts.scrapeOK(t)
	for i := range 8 {
		assert.Equal(t, unreadGPUMetrics, gpuMetricNames(md, nvmltest.UUID(i)))
	}
	lost.Store(false) // the driver came back
	ts.clock.Advance(time.Minute)
	md = ts.scrapeOK(t)
	assert.Len(t, resourceIDs(md), 8)
	assert.Contains(t, gpuMetricNames(md, nvmltest.UUID(0)), "hw.temperature")
}

// gpuMetrics returns the metrics on GPU uuid's own resources, its device's
// and its holder's (processes left out), or an empty slice.
func gpuMetrics(md pmetric.Metrics, uuid string) pmetric.MetricSlice {
	out := pmetric.NewMetricSlice()
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		attrs := rm.Resource().Attributes()
		id, _ := attrs.Get("hw.id")
		if _, isProcess := attrs.Get("process.pid"); !isProcess && id.Str() == uuid {
			ms := rm.ScopeMetrics().At(0).Metrics()
			for j := 0; j < ms.Len(); j++ {
				ms.At(j).CopyTo(out.AppendEmpty())
			}
		}
	}
	return out
}

// gpuMetric returns metric name on GPU uuid's own resource, or nil.
func gpuMetric(md pmetric.Metrics, uuid, name string) *pmetric.Metric {
	ms := gpuMetrics(md, uuid)
	for j := 0; j < ms.Len(); j++ {
		if m := ms.At(j); m.Name() == name {
			return &m
		}
	}
	return nil
}

// gpuMetricNames lists the metrics on GPU uuid's own resource.
func gpuMetricNames(md pmetric.Metrics, uuid string) []string {
	var names []string
	ms := gpuMetrics(md, uuid)
	for j := 0; j < ms.Len(); j++ {
		names = append(names, ms.At(j).Name())
	}
	return names
}

// pointValue returns the int value of metric name on GPU uuid's resource
// whose attribute key equals want.
func pointValue(md pmetric.Metrics, uuid, name, key string, want func(pcommon.Value) bool) (int64, bool) {
	ms := gpuMetrics(md, uuid)
	for j := 0; j < ms.Len(); j++ {
		m := ms.At(j)
		if m.Name() != name {
			continue
		}
		dps := m.Sum().DataPoints()
		for k := 0; k < dps.Len(); k++ {
			if v, _ := dps.At(k).Attributes().Get(key); want(v) {
				return dps.At(k).IntValue(), true
			}
		}
	}
	return 0, false
}

// statusValue returns hw.status{hw.state=state} of GPU uuid.
func statusValue(md pmetric.Metrics, uuid, state string) (int64, bool) {
	return pointValue(md, uuid, "hw.status", "hw.state", func(v pcommon.Value) bool { return v.Str() == state })
}

// compareGolden checks actual against the golden file, rewriting it first
// under -update.
func compareGolden(t *testing.T, file string, actual pmetric.Metrics) {
	t.Helper()
	if *update {
		require.NoError(t, golden.WriteMetrics(t, file, actual))
	}
	expected, err := golden.ReadMetrics(file)
	require.NoError(t, err)
	require.NoError(t, pmetrictest.CompareMetrics(expected, actual,
		pmetrictest.IgnoreTimestamp(), pmetrictest.IgnoreStartTimestamp(),
		pmetrictest.IgnoreMetricDataPointsOrder(), pmetrictest.IgnoreResourceMetricsOrder()))
}

func TestNotSupportedLoggedOnceAcrossScrapes(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m)
	ts.start(t)
	m.GPUs[2].GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	for range 10 {
		md := ts.scrapeOK(t)
		require.Len(t, resourceIDs(md), 8)
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			id, _ := rm.Resource().Attributes().Get("hw.id")
			hasEnergy := false
			ms := rm.ScopeMetrics().At(0).Metrics()
			for j := 0; j < ms.Len(); j++ {
				hasEnergy = hasEnergy || ms.At(j).Name() == "hw.energy"
			}
			assert.Equal(t, id.Str() != nvmltest.UUID(2), hasEnergy, id.Str())
		}
	}
	assert.Equal(t, 1, nvmltest.UnsupportedLogs(ts.logs, "nvmlDeviceGetTotalEnergyConsumption"))
}

func TestFailedCallDropsOnlyItsMetrics(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m)
	tt := withTelemetry(t, ts)
	ts.start(t)
	m.GPUs[6].GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 0, nvml.ERROR_TIMEOUT }
	m.GPUs[2].Set(func(g *nvmltest.GPU) { g.FieldErrors[nvml.FI_DEV_PCIE_REPLAY_COUNTER] = nvml.ERROR_UNKNOWN })
	md := ts.scrapeOK(t) // counted, not returned: faillog_test.go
	metadatatest.AssertEqualReceiverNvmlErroredMetricPoints(t, tt, []metricdata.DataPoint[int64]{
		{Attributes: scrapeAttrs(ts), Value: 2}, // nvidia.gpu.clock.frequency on GPU 6, nvidia.gpu.pcie.replays on GPU 2
	}, metricdatatest.IgnoreTimestamp())
	assert.Len(t, resourceIDs(md), 8, "every GPU is reported")
	names := gpuMetricNames(md, nvmltest.UUID(6))
	assert.NotContains(t, names, "nvidia.gpu.clock.frequency")
	for _, want := range []string{"hw.gpu.utilization", "hw.gpu.memory.usage", "hw.power", "hw.temperature"} {
		assert.Contains(t, names, want)
	}
	names = gpuMetricNames(md, nvmltest.UUID(2))
	assert.NotContains(t, names, "nvidia.gpu.pcie.replays")
	assert.Contains(t, names, "nvidia.gpu.clock.event.time", "the rest of the field batch holds")
}

func TestCountersCarryTheTimeOfTheirReading(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.CounterInterval = time.Hour })
	ts.start(t)
	first := ts.scrapeOK(t)
	ts.clock.Advance(5 * time.Millisecond)
	m.GPUs[0].SetEnergy(9_000_000)
	second := ts.scrapeOK(t)
	e1, e2 := energyPoint(t, first), energyPoint(t, second)
	assert.Equal(t, e1.Timestamp(), e2.Timestamp(), "not read again within the interval: the same reading, the same time")
	assert.Equal(t, e1.DoubleValue(), e2.DoubleValue())
	assert.Less(t, e2.Timestamp(), scrapeTime(t, second), "stamped with its reading, not the scrape")
	for _, name := range []string{"nvidia.gpu.clock.event.time", "nvidia.gpu.pcie.replays"} {
		m := gpuMetric(second, nvmltest.UUID(0), name)
		require.NotNil(t, m, name)
		assert.Equal(t, e2.Timestamp(), m.Sum().DataPoints().At(0).Timestamp(), "%s: read with the energy counter", name)
	}
}

func energyPoint(t *testing.T, md pmetric.Metrics) pmetric.NumberDataPoint {
	t.Helper()
	m := gpuMetric(md, nvmltest.UUID(0), "hw.energy")
	require.NotNil(t, m)
	return m.Sum().DataPoints().At(0)
}

func scrapeTime(t *testing.T, md pmetric.Metrics) pcommon.Timestamp {
	t.Helper()
	m := gpuMetric(md, nvmltest.UUID(0), "hw.power")
	require.NotNil(t, m)
	return m.Gauge().DataPoints().At(0).Timestamp()
}

func TestSlowGPUDoesNotHoldBackTheOthers(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m)
	ts.start(t)
	release := make(chan struct{})
	m.GPUs[1].GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) {
		<-release
		return 5, nvml.SUCCESS
	}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	md, err := ts.scrape(ctx)
	require.NoError(t, err)
	assertStuck := func(md pmetric.Metrics) {
		t.Helper()
		require.Len(t, resourceIDs(md), 8, "a stuck GPU never silently vanishes (issue 9, defect 10)")
		assert.Equal(t, unreadGPUMetrics, gpuMetricNames(md, nvmltest.UUID(1)))
		v, _ := statusValue(md, nvmltest.UUID(1), "degraded")
		assert.Equal(t, int64(1), v, "a GPU whose read is stuck is degraded")
		assert.Contains(t, gpuMetricNames(md, nvmltest.UUID(0)), "hw.temperature")
	}
	assertStuck(md)

	// While the stuck call lasts, the GPU is skipped, not read again.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel2()
	md, err = ts.scrape(ctx2)
	require.NoError(t, err)
	assertStuck(md)
	assert.Equal(t, 1, ts.logs.FilterMessageSnippet("did not finish").FilterField(zap.String("hw.id", nvmltest.UUID(1))).Len(),
		"said once for the stuck GPU")

	close(release)
	require.Eventually(t, func() bool {
		return len(gpuMetricNames(ts.scrapeOK(t), nvmltest.UUID(1))) > 1
	}, 5*time.Second, 10*time.Millisecond)
}

func TestStartFailsOnUnmatchedDevice(t *testing.T) {
	t.Parallel()
	ts := newTestScraper(t, nvmltest.NewH200())
	ts.cfg.Devices = []string{"0", "9"}
	err := ts.nvmlScraper.start(context.Background(), componenttest.NewNopHost())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"9"`)
}

func TestDevicesFilter(t *testing.T) {
	t.Parallel()
	ts := newTestScraper(t, nvmltest.NewH200())
	ts.cfg.Devices = []string{nvmltest.UUID(7), "0"}
	ts.start(t)
	assert.Equal(t, []string{nvmltest.UUID(0), nvmltest.UUID(7)}, resourceIDs(ts.scrapeOK(t)))
}

func TestShutdownShutsNVMLDown(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	shutdowns := 0
	m.ShutdownFunc = func() nvml.Return { shutdowns++; return nvml.SUCCESS }
	ts := newTestScraper(t, m)
	require.NoError(t, ts.nvmlScraper.start(context.Background(), componenttest.NewNopHost()))
	ts.scrapeOK(t)
	require.NoError(t, ts.shutdown(context.Background()))
	assert.Equal(t, 1, shutdowns)
}

func TestDisabledMetricsCostNoNVMLCall(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	for _, g := range m.GPUs {
		g.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) {
			t.Error("energy read although hw.energy is disabled")
			return 0, nvml.SUCCESS
		}
		g.GetFieldValuesFunc = func([]nvml.FieldValue) nvml.Return {
			t.Error("field values read although no metric they feed is enabled")
			return nvml.SUCCESS
		}
		g.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
			t.Error("GPM used although every metric it feeds is disabled")
			return nvml.GpmSupport{}, nvml.SUCCESS
		}
		g.GetSamplesFunc = func(nvml.SamplingType, uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
			t.Error("samples read although no utilization metric is enabled")
			return 0, nil, nvml.SUCCESS
		}
	}
	ts := newTestScraper(t, m, func(cfg *Config) {
		// Every metric off but hw.power: no metric that a field, GPM, a
		// sample window or the energy feeds stays on.
		mc := reflect.ValueOf(&cfg.Metrics).Elem()
		for i := range mc.NumField() {
			mc.Field(i).FieldByName("Enabled").SetBool(false)
		}
		cfg.Metrics.HwPower.Enabled = true
	})
	ts.start(t)
	ts.clock.Advance(10 * time.Second)
	md := ts.scrapeOK(t)
	names := gpuMetricNames(md, nvmltest.UUID(0))
	assert.Contains(t, names, "hw.power")
	assert.NotContains(t, names, "hw.energy")
}
