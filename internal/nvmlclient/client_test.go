//go:build cgo

package nvmlclient

import (
	"context"
	"errors"
	"fmt"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

func openH200(t *testing.T, selectors ...string) (*nvmltest.Machine, *Client, *observer.ObservedLogs) {
	t.Helper()
	m := nvmltest.NewH200()
	core, logs := observer.New(zapcore.DebugLevel)
	c := New(m, zap.New(core))
	require.NoError(t, c.Open(selectors))
	c.PrimeAll()
	t.Cleanup(func() { require.NoError(t, c.Close(context.Background())) })
	return m, c, logs
}

func TestOpenTakesInventory(t *testing.T) {
	_, c, _ := openH200(t)
	inv := c.Inventory()
	assert.Equal(t, "550.54.15", inv.DriverVersion)
	assert.Equal(t, "12.550.54.15", inv.NVMLVersion)
	assert.Equal(t, "12.4", inv.CUDAVersion)
	require.Len(t, inv.Devices, 8)
	d := inv.Devices[3]
	assert.Equal(t, DeviceInfo{
		Index: 3, UUID: nvmltest.UUID(3), Name: "NVIDIA H200 141GB HBM3e", Serial: "1654321000003",
		PCIBusID: "00000000:1C:00.0", MinorNumber: 3, Architecture: "hopper", ComputeCapability: "9.0",
		DriverVersion: "550.54.15",
	}, d)
}

func TestOpenSelectsDevices(t *testing.T) {
	_, c, _ := openH200(t, "2", nvmltest.UUID(5))
	var uuids []string
	for _, d := range c.Devices() {
		uuids = append(uuids, d.Info.UUID)
	}
	assert.Equal(t, []string{nvmltest.UUID(2), nvmltest.UUID(5)}, uuids)
}

func TestOpenUnmatchedSelectorNamesTheEntry(t *testing.T) {
	m := nvmltest.NewH200()
	shutdowns := 0
	m.ShutdownFunc = func() nvml.Return { shutdowns++; return nvml.SUCCESS }
	c := New(m, zap.NewNop())
	err := c.Open([]string{"1", "GPU-deadbeef-0000-0000-0000-000000000000"})
	var selErr *SelectorError
	require.ErrorAs(t, err, &selErr)
	assert.Equal(t, "GPU-deadbeef-0000-0000-0000-000000000000", selErr.Selector)
	assert.Contains(t, err.Error(), `"GPU-deadbeef-0000-0000-0000-000000000000"`)
	assert.Equal(t, 1, shutdowns, "a failed Open after a good Init shuts NVML down")
}

func TestOpenFailedInitCallsNothingElse(t *testing.T) {
	m := nvmltest.NewH200()
	m.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	// After a failed Init any NVML call kills a real process; the mock fails the test.
	m.DeviceGetCountFunc = func() (int, nvml.Return) { t.Fatal("DeviceGetCount after a failed Init"); return 0, 0 }
	m.SystemGetDriverVersionFunc = func() (string, nvml.Return) { t.Fatal("SystemGetDriverVersion after a failed Init"); return "", 0 }
	m.ShutdownFunc = func() nvml.Return { t.Fatal("Shutdown after a failed Init"); return 0 }
	c := New(m, zap.NewNop())
	err := c.Open(nil)
	var unavailable *UnavailableError
	require.ErrorAs(t, err, &unavailable)
	assert.Contains(t, err.Error(), "libnvidia-ml.so.1")
	assert.Contains(t, err.Error(), "library_path")
	assert.True(t, errors.Is(err, nvml.ERROR_LIBRARY_NOT_FOUND))
	require.NoError(t, c.Close(context.Background()))
}

func TestOpenNoGPU(t *testing.T) {
	m := nvmltest.NewH200()
	m.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.SUCCESS }
	c := New(m, zap.NewNop())
	var unavailable *UnavailableError
	require.ErrorAs(t, c.Open(nil), &unavailable)
	assert.Contains(t, unavailable.Error(), "no GPU")
}

func TestReadAllMetrics(t *testing.T) {
	m, c, _ := openH200(t)
	s, err := c.Devices()[1].Read()
	require.NoError(t, err)
	assert.Equal(t, some(0.10), s.Utilization[sample.EngineGeneral], "no GPM window yet at the first read: the instant reading")
	assert.False(t, s.MemoryControllerUtilization.OK, "GPM's DRAM bandwidth stands for the controller window on a GPU with GPM")
	assert.Equal(t, some(0.0), s.Utilization[sample.EngineEncoder], "instant: the encoder is idle")
	assert.Equal(t, some(0.01), s.Utilization[sample.EngineDecoder])
	assert.Equal(t, some(uint64(2<<30)), s.MemoryUsedBytes)
	assert.Equal(t, some(uint64(150_754_820_096)), s.MemoryTotalBytes)
	assert.Equal(t, some(uint64(617_086_976)), s.MemoryReservedBytes)
	assert.Equal(t, some(31.0), s.Values[FigTemperature])
	assert.Equal(t, some(41.0), s.Values[FigMemoryTemperature], "FI_DEV_MEMORY_TEMP")
	assert.Equal(t, some(76.0), s.Values[FigPower])
	assert.Equal(t, some(700.0), s.Values[FigPowerLimit])
	assert.Equal(t, some(2000.0), s.Values[FigEnergy])
	assert.Equal(t, some(float64(1_980_000_000)), s.Values[FigClockSM])
	assert.Equal(t, some(float64(3_201_000_000)), s.Values[FigClockMemory])
	assert.Equal(t, some(float64(0)), s.Values[FigPerformanceState])
	assert.False(t, s.Values[FigFanSpeed].OK, "H200 SXM has no fan")
	assert.Equal(t, some(1.5), s.Values[FigViolationPower], "a field, in ns")
	assert.Equal(t, some(float64(0)), s.Values[FigPCIeReplays])
	assert.Equal(t, 2, m.GPUs[1].FieldCalls, "the first read also takes the counters' batch in line")
	_, err = c.Devices()[1].Read()
	require.NoError(t, err)
	assert.Equal(t, 3, m.GPUs[1].FieldCalls, "one GetFieldValues batch per GPU per read")
}

func TestWindowsWithoutGPM(t *testing.T) {
	m := nvmltest.NewA100()
	c := New(m, zap.NewNop())
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	g := m.GPUs[1]
	g.AddSamples(nvml.GPU_UTILIZATION_SAMPLES, []uint64{100, 200}, []uint32{30, 50})
	g.AddSamples(nvml.MEMORY_UTILIZATION_SAMPLES, []uint64{100, 200}, []uint32{10, 20})
	s, err := c.Devices()[1].Read()
	require.NoError(t, err)
	assert.Nil(t, s.GPM, "an A100 has no GPM")
	assert.InDelta(t, 0.40, s.Utilization[sample.EngineGeneral].Value, 1e-9, "mean of the window")
	assert.InDelta(t, 0.15, s.MemoryControllerUtilization.Value, 1e-9, "the controller window")
}

func TestGeneralUtilizationFromGPM(t *testing.T) {
	m := nvmltest.NewH200()
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(m, zap.NewNop(), WithClock(clock.Now))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	g := m.GPUs[3]
	g.DecoderUtil = 0
	samples := 0
	getSamples := g.GetSamplesFunc
	g.GetSamplesFunc = func(st nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
		samples++
		return getSamples(st, last)
	}
	g.AddSamples(nvml.GPU_UTILIZATION_SAMPLES, []uint64{100, 200}, []uint32{90, 90})
	clock.Advance(time.Second)
	s, err := c.Devices()[3].Read()
	require.NoError(t, err)
	assert.Equal(t, some(0.18), s.Utilization[sample.EngineGeneral], "GPM graphics utilization over the window")
	assert.Equal(t, 0, samples, "no GetSamples on a GPU with GPM while its engines idle")
	assert.False(t, s.MemoryControllerUtilization.OK)

	// Asked for, the controller window is read on a GPU with GPM too.
	c2 := New(m, zap.NewNop(), WithClock(clock.Now), WithMemoryControllerOnGPM(true))
	require.NoError(t, c2.Open(nil))
	c2.PrimeAll()
	g.AddSamples(nvml.MEMORY_UTILIZATION_SAMPLES, []uint64{300}, []uint32{40})
	s, err = c2.Devices()[3].Read()
	require.NoError(t, err)
	assert.Equal(t, some(0.40), s.MemoryControllerUtilization)
}

func TestCodecWindowOnlyWhileActive(t *testing.T) {
	m, c, _ := openH200(t)
	g := m.GPUs[0]
	calls := 0
	getSamples := g.GetSamplesFunc
	g.GetSamplesFunc = func(st nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
		if st == nvml.ENC_UTILIZATION_SAMPLES {
			calls++
		}
		return getSamples(st, last)
	}
	d := c.Devices()[0]
	for range 3 {
		s, err := d.Read()
		require.NoError(t, err)
		assert.Equal(t, some(0.0), s.Utilization[sample.EngineEncoder])
	}
	assert.Equal(t, 0, calls, "an idle encoder costs only the instant getter")

	// Busy now: the window is read, and averaged over this interval only.
	g.Set(func(g *nvmltest.GPU) { g.EncoderUtil = 60 })
	now := uint64(time.Now().UnixMicro())
	g.AddSamples(nvml.ENC_UTILIZATION_SAMPLES, []uint64{now - 60_000_000, now}, []uint32{0, 60})
	s, err := d.Read()
	require.NoError(t, err)
	assert.InDelta(t, 0.60, s.Utilization[sample.EngineEncoder].Value, 1e-9, "the sample of a minute ago is not this interval's")
	assert.Equal(t, 1, calls)

	// Idle again: one more window closes the burst, then none.
	g.Set(func(g *nvmltest.GPU) { g.EncoderUtil = 0 })
	g.AddSamples(nvml.ENC_UTILIZATION_SAMPLES, []uint64{now + 100}, []uint32{0})
	for range 3 {
		_, err = d.Read()
		require.NoError(t, err)
	}
	assert.Equal(t, 2, calls)
}

func TestWindowStartsAtOpen(t *testing.T) {
	m := nvmltest.NewA100()
	g := m.GPUs[0]
	// What the ring buffer held before the receiver started is not counted.
	g.AddSamples(nvml.GPU_UTILIZATION_SAMPLES, []uint64{10, 20}, []uint32{100, 100})
	c := New(m, zap.NewNop())
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	g.AddSamples(nvml.GPU_UTILIZATION_SAMPLES, []uint64{30, 40}, []uint32{0, 20})
	s, err := c.Devices()[0].Read()
	require.NoError(t, err)
	assert.InDelta(t, 0.10, s.Utilization[sample.EngineGeneral].Value, 1e-9)

	// The next window holds only what came after.
	g.AddSamples(nvml.GPU_UTILIZATION_SAMPLES, []uint64{50}, []uint32{80})
	s, err = c.Devices()[0].Read()
	require.NoError(t, err)
	assert.InDelta(t, 0.80, s.Utilization[sample.EngineGeneral].Value, 1e-9)
}

func TestEmptyWindowFallsBackToInstantReading(t *testing.T) {
	m := nvmltest.NewA100()
	c := New(m, zap.NewNop())
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	m.GPUs[4].Utilization = nvml.Utilization{Gpu: 64, Memory: 12}
	s, err := c.Devices()[4].Read()
	require.NoError(t, err)
	assert.Equal(t, some(0.64), s.Utilization[sample.EngineGeneral])
	assert.Equal(t, some(0.12), s.MemoryControllerUtilization)
}

func TestUnsupportedSamplingTypeFallsBackAndIsNotAskedAgain(t *testing.T) {
	m := nvmltest.NewA100()
	g := m.GPUs[2]
	g.SamplesBroken[nvml.GPU_UTILIZATION_SAMPLES] = nvml.ERROR_NOT_SUPPORTED
	calls := 0
	getSamples := g.GetSamplesFunc
	g.GetSamplesFunc = func(st nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
		if st == nvml.GPU_UTILIZATION_SAMPLES {
			calls++
		}
		return getSamples(st, last)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	c := New(m, zap.New(core))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	g.Utilization.Gpu = 70
	for range 5 {
		s, err := c.Devices()[2].Read()
		require.NoError(t, err)
		assert.Equal(t, some(0.70), s.Utilization[sample.EngineGeneral])
	}
	assert.Equal(t, 1, calls, "NOT_SUPPORTED is cached per device")
	assert.Equal(t, 1, nvmltest.UnsupportedLogs(logs, "nvmlDeviceGetSamples(GPU_UTILIZATION_SAMPLES)"))
}

func TestNotSupportedIsLoggedOnce(t *testing.T) {
	m, c, logs := openH200(t)
	m.GPUs[6].GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	for range 20 {
		for i, d := range c.Devices() {
			s, err := d.Read()
			require.NoError(t, err)
			assert.Equal(t, i != 6, s.Values[FigPower].OK)
		}
	}
	assert.Equal(t, 1, nvmltest.UnsupportedLogs(logs, "nvmlDeviceGetPowerUsage"))
	assert.Equal(t, 8, nvmltest.UnsupportedLogs(logs, "nvmlDeviceGetFanSpeed"),
		"once per device without fans")
}

func TestGPULost(t *testing.T) {
	m, c, logs := openH200(t)
	m.GPUs[5].GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	for range 3 {
		for i, d := range c.Devices() {
			_, err := d.Read()
			if i == 5 {
				assert.ErrorIs(t, err, ErrGPULost)
				assert.True(t, d.Lost())
			} else {
				assert.NoError(t, err)
			}
		}
	}
	assert.Equal(t, 1, logs.FilterMessageSnippet("GPU is lost").Len())
}

func TestLostInEnergyGoroutine(t *testing.T) {
	m, c, _ := openH200(t)
	m.GPUs[0].GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	_, err := c.Devices()[0].Read()
	assert.ErrorIs(t, err, ErrGPULost)
}

func TestFailedCallDropsOnlyItsFigures(t *testing.T) {
	m, c, logs := openH200(t)
	m.GPUs[3].GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	for range 4 {
		s, err := c.Devices()[3].Read()
		var readErr *ReadError
		require.ErrorAs(t, err, &readErr)
		assert.Len(t, readErr.Calls, 4, "the four clock calls")
		assert.Equal(t, 4, readErr.Metrics, "four readings, without WithLeftOutCount (the receiver counts one metric)")
		var callErr *CallError
		require.ErrorAs(t, err, &callErr)
		assert.Contains(t, callErr.Error(), nvml.ERROR_UNKNOWN.Error(), "the message names the return code")
		assert.False(t, s.Values[FigClockSM].OK)
		assert.True(t, s.Values[FigPower].OK, "the rest of the GPU is read")
		assert.True(t, s.Utilization[sample.EngineGeneral].OK)
		assert.True(t, s.MemoryUsedBytes.OK)
		assert.False(t, c.Devices()[3].Lost())
	}
	assert.Equal(t, 4, logs.FilterMessageSnippet("NVML call failed").Len(), "once per call and cause")
	// The error is transient: once the call succeeds the reading is back.
	m.GPUs[3].GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 1000, nvml.SUCCESS }
	s, err := c.Devices()[3].Read()
	assert.NoError(t, err)
	assert.True(t, s.Values[FigClockSM].OK)
}

func TestFailedFieldDropsOnlyItsFigure(t *testing.T) {
	m, c, _ := openH200(t)
	m.GPUs[2].Set(func(g *nvmltest.GPU) { g.FieldErrors[nvml.FI_DEV_PCIE_REPLAY_COUNTER] = nvml.ERROR_UNKNOWN })
	s, err := c.Devices()[2].Read()
	var readErr *ReadError
	require.ErrorAs(t, err, &readErr)
	assert.Equal(t, 1, readErr.Metrics)
	assert.False(t, s.Values[FigPCIeReplays].OK)
	assert.True(t, s.Values[FigViolationPower].OK, "the other fields of the batch hold")
	assert.True(t, s.Values[FigMemoryTemperature].OK)
	assert.True(t, s.Utilization[sample.EngineGeneral].OK)
	assert.True(t, s.Values[FigPower].OK)

	// An unsupported field is cached like any call, the batch goes on.
	m.GPUs[2].Set(func(g *nvmltest.GPU) {
		g.FieldErrors[nvml.FI_DEV_PCIE_REPLAY_COUNTER] = nvml.SUCCESS
		delete(g.FieldErrors, nvml.FI_DEV_PCIE_REPLAY_COUNTER)
		g.FieldErrors[nvml.FI_DEV_MEMORY_TEMP] = nvml.ERROR_NOT_SUPPORTED
	})
	s, err = c.Devices()[2].Read()
	require.NoError(t, err)
	assert.False(t, s.Values[FigMemoryTemperature].OK)
	assert.False(t, s.Values[FigPCIeReplays].OK, "a counter: read again on its own cadence")
}

func TestPanicInMockIsAnError(t *testing.T) {
	m, c, _ := openH200(t)
	m.GPUs[7].GetPerformanceStateFunc = nil // a moq mock panics on a nil Func
	s, err := c.Devices()[7].Read()
	assert.ErrorContains(t, err, "panic")
	assert.False(t, s.Values[FigPerformanceState].OK)
	assert.True(t, s.Values[FigPower].OK, "a panic fails its call, not the read")
}

// Issue 9, defect 9: recovered panics are counted, not only dropped: the
// log gets the 1st, 2nd and 4th with the count so far.
func TestRecoveredPanicsAreCounted(t *testing.T) {
	m, c, logs := openH200(t)
	m.GPUs[7].GetPerformanceStateFunc = nil
	for range 5 {
		_, err := c.Devices()[7].Read()
		require.ErrorContains(t, err, "panic")
	}
	assert.Equal(t, int64(5), c.Devices()[7].panicCount())
	var counts []int64
	for _, e := range logs.FilterMessageSnippet("Recovered a panic").All() {
		counts = append(counts, e.ContextMap()["panics_total"].(int64))
	}
	assert.Equal(t, []int64{1, 2, 4}, counts)
}

func TestMemoryInfoV1WithoutV2Symbol(t *testing.T) {
	m := nvmltest.NewH200()
	m.LookupSymbolFunc = func(name string) error {
		if name == "nvmlDeviceGetMemoryInfo_v2" {
			return errors.New("undefined symbol")
		}
		return nil
	}
	m.GPUs[0].GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		t.Fatal("GetMemoryInfo_v2 called although the library lacks it")
		return nvml.Memory_v2{}, 0
	}
	c := New(m, zap.NewNop())
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	s, err := c.Devices()[0].Read()
	require.NoError(t, err)
	assert.True(t, s.MemoryUsedBytes.OK)
	assert.False(t, s.MemoryReservedBytes.OK)
}

func TestBusyDeviceIsNotReadTwice(t *testing.T) {
	m, c, _ := openH200(t)
	release := make(chan struct{})
	entered := make(chan struct{})
	m.GPUs[0].GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
		close(entered)
		<-release
		return 1, nvml.SUCCESS
	}
	d := c.Devices()[0]
	done := make(chan error)
	go func() { _, err := d.Read(); done <- err }()
	<-entered
	_, err := d.Read()
	assert.ErrorIs(t, err, ErrBusy)
	close(release)
	assert.NoError(t, <-done)
}

func TestCallStatsTimeEachCall(t *testing.T) {
	m, c, _ := openH200(t)
	m.GPUs[0].GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) {
		time.Sleep(200 * time.Millisecond) // far above any mock call's time on a loaded machine
		return 1, nvml.SUCCESS
	}
	for _, d := range c.Devices() {
		_, err := d.Read()
		require.NoError(t, err)
	}
	stats := map[string]CallStat{}
	for _, st := range c.CallStats() {
		stats[st.Call] = st
	}
	energy := stats["nvmlDeviceGetTotalEnergyConsumption"]
	assert.Equal(t, int64(8), energy.Count)
	assert.GreaterOrEqual(t, energy.Max, 200*time.Millisecond)
	assert.Less(t, stats["nvmlDeviceGetTemperature"].Max, 200*time.Millisecond, "each call is timed on its own")
	assert.Equal(t, int64(8), stats["nvmlDeviceGetSamples(GPU_UTILIZATION_SAMPLES)"].Count, "priming only: GPM reads the general utilization")
	assert.Equal(t, int64(16), stats["nvmlDeviceGetFieldValues"].Count, "the first read: the counters' batch and the scrape's")
}

// A device taken before Close (the scraper and the priming goroutines hold
// the slice) calls nothing in NVML once Close has begun: no call after
// nvmlShutdown, no GPM sample allocated and never freed.
func TestNoNVMLCallAfterClose(t *testing.T) {
	m := nvmltest.NewH200GPUs(1)
	var shut atomic.Bool
	var after atomic.Int32
	m.ShutdownFunc = func() nvml.Return { shut.Store(true); return nvml.SUCCESS }
	alloc := m.GpmSampleAllocFunc
	m.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		if shut.Load() {
			after.Add(1)
		}
		return alloc()
	}
	c := New(m, zap.NewNop())
	require.NoError(t, c.Open(nil))
	d := c.Devices()[0]
	require.NoError(t, c.Close(context.Background()))
	assert.ErrorIs(t, d.Prime(), ErrNotOpen)
	_, err := d.Read()
	assert.ErrorIs(t, err, ErrNotOpen)
	assert.Zero(t, after.Load(), "NVML called after nvmlShutdown")
}

// Priming that races Close never touches a GPU's GPM state while Close
// frees it (run with -race).
func TestPrimeRacingCloseIsSafe(t *testing.T) {
	for range 50 {
		m := nvmltest.NewH200GPUs(2)
		c := New(m, zap.NewNop())
		require.NoError(t, c.Open(nil))
		var wg sync.WaitGroup
		for _, d := range c.Devices() {
			wg.Go(func() { _ = d.Prime() })
		}
		_ = c.Close(context.Background())
		wg.Wait()
	}
}

// A call that fails the same way is logged once, however its detail varies
// (a panic's message carries lengths and indexes).
func TestAFailingCallIsLoggedOnceWhateverItsDetail(t *testing.T) {
	m, c, logs := openH200(t)
	n := 0
	m.GPUs[7].GetPowerUsageFunc = func() (uint32, nvml.Return) {
		n++
		panic(fmt.Sprintf("slice bounds out of range [:%d] with capacity 5", n+5))
	}
	for range 3 {
		_, err := c.Devices()[7].Read()
		require.ErrorContains(t, err, "panic")
	}
	assert.Equal(t, 1, logs.FilterMessageSnippet("NVML call failed").Len())
}

// A GPU that stays lost across re-initializations (the receiver re-opens
// NVML now and then while every GPU is lost) is logged lost once; once it
// has read again, a new loss is logged again.
func TestAGPUThatStaysLostIsLoggedOnceAcrossSessions(t *testing.T) {
	m, c, logs := openH200(t)
	lost := true
	m.GPUs[3].GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
		if lost {
			return 0, nvml.ERROR_GPU_IS_LOST
		}
		return 40, nvml.SUCCESS
	}
	reopenAndRead := func() {
		require.NoError(t, c.Close(context.Background()))
		require.NoError(t, c.Open(nil))
		_, _ = c.Devices()[3].Read()
	}
	_, err := c.Devices()[3].Read()
	require.ErrorIs(t, err, ErrGPULost)
	reopenAndRead()
	reopenAndRead()
	assert.Equal(t, 1, logs.FilterMessageSnippet("GPU is lost").Len(), "it stayed lost")
	lost = false
	reopenAndRead()
	lost = true
	reopenAndRead()
	assert.Equal(t, 2, logs.FilterMessageSnippet("GPU is lost").Len(), "it read in between")
}
