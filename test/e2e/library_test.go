//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// These tests load the fake library into the test process through go-nvml,
// as the receiver does, and check its ABI and semantics call by call. The
// scenario path is process-wide (an environment variable), so they run one
// after another inside TestLibrary; the collectors of the other tests get
// their own scenario in their own environment.

var envMu sync.Mutex

// useScenario points the library at the scenario file path until the test ends.
func useScenario(t *testing.T, path string) {
	t.Helper()
	envMu.Lock()
	old, had := os.LookupEnv(scenarioEnv)
	require.NoError(t, os.Setenv(scenarioEnv, path))
	t.Cleanup(func() {
		if had {
			os.Setenv(scenarioEnv, old)
		} else {
			os.Unsetenv(scenarioEnv)
		}
		envMu.Unlock()
	})
}

func newLib(t testing.TB) nvml.Interface {
	return nvml.New(nvml.WithLibraryPath(testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath)))
}

// openLib initializes the library on s and shuts it down when the test ends.
func openLib(t *testing.T, s Scenario) nvml.Interface {
	t.Helper()
	useScenario(t, s.write(t))
	lib := newLib(t)
	require.Equal(t, nvml.SUCCESS, lib.Init())
	t.Cleanup(func() { assert.Equal(t, nvml.SUCCESS, lib.Shutdown()) })
	return lib
}

func device(t *testing.T, lib nvml.Interface, i int) nvml.Device {
	t.Helper()
	d, ret := lib.DeviceGetHandleByIndex(i)
	require.Equal(t, nvml.SUCCESS, ret, "nvmlDeviceGetHandleByIndex_v2(%d)", i)
	return d
}

func abiScenario() Scenario {
	return Scenario{
		DriverVersion:     "560.35.03",
		NVMLVersion:       "12.560.35.03",
		CUDADriverVersion: 12060,
		Sampling:          &Sampling{Hz: 6, Buffer: 10},
		GPUs: []GPU{{
			Name:     "NVIDIA H200 (SIMULATED)",
			UUID:     "GPU-ab100000-0000-4000-8000-000000000000",
			Serial:   "SIMULATED-ABI-0",
			PCIBusID: "00000000:19:00.0",
			Utilization: &Utilization{
				GPU:    &Duty{Busy: 0.5, PeriodS: 1.0 / 3},
				Memory: &Duty{Busy: 0.25},
			},
			Memory:             &Memory{TotalBytes: 150754820096, ReservedBytes: 617086976, UsedBytes: 2 << 30},
			TemperatureC:       45,
			PowerW:             250,
			PowerLimitW:        700,
			EnergyOffsetJ:      1000,
			ClocksMHz:          &Clocks{SM: 1980, Memory: 3201, Graphics: 1980, Video: 1755},
			PState:             2,
			Processes:          []Process{{PID: 4242, Name: "python3 train.py", UsedMemoryBytes: 1 << 30, SMPercent: 60}, {PID: 4343, Name: "Xorg", Type: "graphics"}},
			GPM:                map[string]Signal{"SM_UTIL": 40, "PCIE_TX_PER_SEC": Steps{Steps: [][2]float64{{0, 100}, {0.1, 300}}}, "3": 25},
			ECCErrors:          map[string]Signal{"corrected": 3, "uncorrected": 0},
			RemappedRows:       map[string]Signal{"correctable": 1, "uncorrectable": 0, "pending": 0, "failure": 0},
			ClocksEventReasons: 4,
			Violation:          map[string]Signal{"power": 0.5},
			PCIe:               map[string]Signal{"link_generation": 5, "link_width": 16, "replays": 2},
		}, {
			Name:       "NVIDIA H100 PCIe",
			UUID:       "GPU-ab100000-0000-4000-8000-000000000001",
			Serial:     "1654321",
			PCIBusID:   "00000001:2a:00.0",
			Memory:     &Memory{TotalBytes: 85520809984},
			FanPercent: 40,
		}},
	}
}

func TestLibrary(t *testing.T) {
	t.Parallel()
	t.Run("ABI", testLibraryABI)
	t.Run("AfterShutdown", testLibraryAfterShutdown)
	t.Run("Samples", testLibrarySamples)
	t.Run("Faults", testLibraryFaults)
	t.Run("Events", testLibraryEvents)
	t.Run("MIG", testLibraryMIG)
	t.Run("InitFailsFirst", testLibraryInitFailsFirst)
	t.Run("MalformedScenarios", testLibraryMalformed)
	t.Run("DemoScenario", testLibraryDemoScenario)
}

func testLibraryABI(t *testing.T) {
	s := abiScenario()
	lib := openLib(t, s)

	v, ret := lib.SystemGetDriverVersion()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, "560.35.03", v)
	v, ret = lib.SystemGetNVMLVersion()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, "12.560.35.03", v)
	cuda, ret := lib.SystemGetCudaDriverVersion()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, 12060, cuda)
	n, ret := lib.DeviceGetCount()
	require.Equal(t, nvml.SUCCESS, ret)
	require.Equal(t, 2, n)
	_, ret = lib.DeviceGetHandleByIndex(2)
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, ret)

	// The newest versioned symbols are there, so go-nvml uses them; a
	// symbol the library lacks is reported missing, not faked.
	ext := lib.Extensions()
	for _, sym := range []string{"nvmlInit_v2", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
		"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetMemoryInfo_v2", "nvmlErrorString", "nvmlShutdown"} {
		assert.NoError(t, ext.LookupSymbol(sym), sym)
	}
	assert.Error(t, ext.LookupSymbol("nvmlDeviceGetGpmSupport_v9"))
	assert.Equal(t, "GPU is lost", lib.ErrorString(nvml.ERROR_GPU_IS_LOST), "nvmlErrorString of the library")

	d0, d1 := device(t, lib, 0), device(t, lib, 1)
	str := func(v string, ret nvml.Return) string { require.Equal(t, nvml.SUCCESS, ret); return v }
	assert.Equal(t, "GPU-ab100000-0000-4000-8000-000000000000", str(d0.GetUUID()))
	assert.Equal(t, "NVIDIA H200 (SIMULATED)", str(d0.GetName()))
	assert.Equal(t, "SIMULATED-ABI-0", str(d0.GetSerial()))
	assert.Equal(t, "NVIDIA H100 PCIe (SIMULATED)", str(d1.GetName()), "a name without SIMULATED gets it")
	assert.Equal(t, "SIMULATED-1654321", str(d1.GetSerial()), "a serial without SIMULATED gets it")
	idx, ret := d1.GetIndex()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, 1, idx)
	minor, ret := d1.GetMinorNumber()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, 1, minor)
	arch, ret := d0.GetArchitecture()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, nvml.DeviceArchitecture(nvml.DEVICE_ARCH_HOPPER), arch)
	major, minorCC, ret := d0.GetCudaComputeCapability()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, [2]int{9, 0}, [2]int{major, minorCC})

	pci, ret := d1.GetPciInfo()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, "00000001:2a:00.0", cString(pci.BusId[:]))
	assert.Equal(t, "0001:2A:00.0", cString(pci.BusIdLegacy[:]))
	assert.Equal(t, [3]uint32{1, 0x2a, 0}, [3]uint32{pci.Domain, pci.Bus, pci.Device})
	assert.Equal(t, uint32(0x233510DE), pci.PciDeviceId)

	// Memory: v2 keeps reserved apart; v1 counts it in used, like the driver.
	m2, ret := d0.GetMemoryInfo_v2()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, nvml.Memory_v2{Version: nvml.STRUCT_VERSION(nvml.Memory_v2{}, 2), Total: 150754820096,
		Reserved: 617086976, Used: 2 << 30, Free: 150754820096 - 617086976 - 2<<30}, m2)
	m1, ret := d0.GetMemoryInfo()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, nvml.Memory{Total: 150754820096, Used: 617086976 + 2<<30, Free: 150754820096 - 617086976 - 2<<30}, m1)
	m2, ret = d1.GetMemoryInfo_v2()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, uint64(0), m2.Used, "no used_bytes: nothing used")

	u32 := func(v uint32, ret nvml.Return) uint32 { require.Equal(t, nvml.SUCCESS, ret); return v }
	assert.Equal(t, uint32(45), u32(d0.GetTemperature(nvml.TEMPERATURE_GPU)))
	_, ret = d0.GetTemperature(nvml.TEMPERATURE_GPU_MAX)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	assert.Equal(t, uint32(250_000), u32(d0.GetPowerUsage()), "milliwatts")
	assert.Equal(t, uint32(700_000), u32(d0.GetEnforcedPowerLimit()))
	assert.Equal(t, uint32(1_980), u32(d0.GetClockInfo(nvml.CLOCK_SM)))
	assert.Equal(t, uint32(3_201), u32(d0.GetClockInfo(nvml.CLOCK_MEM)))
	assert.Equal(t, uint32(1_980), u32(d0.GetClockInfo(nvml.CLOCK_GRAPHICS)))
	assert.Equal(t, uint32(1_755), u32(d0.GetClockInfo(nvml.CLOCK_VIDEO)))
	assert.Equal(t, uint32(40), u32(d1.GetFanSpeed()))
	ps, ret := d0.GetPerformanceState()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, nvml.PSTATE_2, ps)

	// Not in the scenario: not supported.
	_, ret = d0.GetFanSpeed()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	for _, call := range []func() nvml.Return{
		func() nvml.Return { _, r := d1.GetTemperature(nvml.TEMPERATURE_GPU); return r },
		func() nvml.Return { _, r := d1.GetPowerUsage(); return r },
		func() nvml.Return { _, r := d1.GetTotalEnergyConsumption(); return r },
		func() nvml.Return { _, r := d1.GetClockInfo(nvml.CLOCK_SM); return r },
		func() nvml.Return { _, r := d1.GetPerformanceState(); return r },
		func() nvml.Return { _, r := d1.GetUtilizationRates(); return r },
		func() nvml.Return { _, _, r := d1.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, 0); return r },
		func() nvml.Return { _, _, r := d0.GetEncoderUtilization(); return r },
		func() nvml.Return { _, _, r := d0.GetSamples(nvml.TOTAL_POWER_SAMPLES, 0); return r },
		func() nvml.Return { _, r := d1.GetComputeRunningProcesses(); return r },
	} {
		assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, call())
	}

	// Energy: the offset plus the power integrated since the clock started.
	before := time.Now()
	e1, ret := d0.GetTotalEnergyConsumption()
	require.Equal(t, nvml.SUCCESS, ret)
	time.Sleep(200 * time.Millisecond)
	e2, ret := d0.GetTotalEnergyConsumption()
	elapsedMs := float64(time.Since(before).Microseconds()) / 1000
	require.Equal(t, nvml.SUCCESS, ret)
	assert.GreaterOrEqual(t, e1, uint64(1_000_000), "millijoules, from the offset up")
	assert.InDelta(t, 250*elapsedMs, float64(e2-e1), 250*20, "250 W for %.0f ms, in mJ", elapsedMs)

	// Health.
	ecc, ret := d0.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, uint64(3), ecc)
	corr, unc, pending, failed, ret := d0.GetRemappedRows()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, []any{1, 0, false, false}, []any{corr, unc, pending, failed})
	reasons, ret := d0.GetCurrentClocksEventReasons()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, uint64(4), reasons)
	viol, ret := d0.GetViolationStatus(nvml.PERF_POLICY_POWER)
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.InDelta(t, float64(time.Now().UnixMicro()), float64(viol.ReferenceTime), 1e6)
	assert.Greater(t, viol.ViolationTime, uint64(0), "half of the time since t = 0, in ns")
	_, ret = d0.GetViolationStatus(nvml.PERF_POLICY_THERMAL)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	gen, ret := d0.GetCurrPcieLinkGeneration()
	assert.Equal(t, nvml.SUCCESS, ret)
	width, ret := d0.GetCurrPcieLinkWidth()
	assert.Equal(t, nvml.SUCCESS, ret)
	replays, ret := d0.GetPcieReplayCounter()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, []int{5, 16, 2}, []int{gen, width, replays})
	_, ret = d1.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	_, _, _, _, ret = d1.GetRemappedRows()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)

	// Per-process utilization: one sample per running process per tick.
	psamples, ret := d0.GetProcessUtilization(0)
	require.Equal(t, nvml.SUCCESS, ret)
	require.NotEmpty(t, psamples)
	for _, ps := range psamples {
		switch ps.Pid {
		case 4242:
			assert.Equal(t, uint32(60), ps.SmUtil)
		case 4343:
			assert.Equal(t, uint32(0), ps.SmUtil)
		default:
			t.Errorf("process utilization of pid %d, not in the scenario", ps.Pid)
		}
	}
	_, ret = d0.GetProcessUtilization(psamples[len(psamples)-1].TimeStamp + 10e6)
	assert.Equal(t, nvml.ERROR_NOT_FOUND, ret, "nothing newer than lastSeen")

	// GPM: the mean of each metric between two samples.
	sup, ret := d0.GpmQueryDeviceSupport()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, uint32(1), sup.IsSupportedDevice)
	sup, ret = d1.GpmQueryDeviceSupport()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, uint32(0), sup.IsSupportedDevice, "no gpm key: no GPM")
	s1, ret := lib.GpmSampleAlloc()
	require.Equal(t, nvml.SUCCESS, ret)
	s2, ret := lib.GpmSampleAlloc()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, d1.GpmSampleGet(s1))
	require.Equal(t, nvml.SUCCESS, d0.GpmSampleGet(s1))
	time.Sleep(150 * time.Millisecond)
	require.Equal(t, nvml.SUCCESS, d0.GpmSampleGet(s2))
	mg := &nvml.GpmMetricsGetType{Sample1: s1, Sample2: s2, NumMetrics: 4}
	for i, id := range []nvml.GpmMetricId{nvml.GPM_METRIC_SM_UTIL, nvml.GPM_METRIC_SM_OCCUPANCY, nvml.GPM_METRIC_PCIE_TX_PER_SEC, nvml.GPM_METRIC_GRAPHICS_UTIL} {
		mg.Metrics[i].MetricId = uint32(id)
	}
	require.Equal(t, nvml.SUCCESS, lib.GpmMetricsGet(mg))
	assert.Equal(t, uint32(nvml.SUCCESS), mg.Metrics[0].NvmlReturn)
	assert.InDelta(t, 40, mg.Metrics[0].Value, 1e-9)
	assert.InDelta(t, 25, mg.Metrics[1].Value, 1e-9, "a metric named by number")
	assert.InDelta(t, 300, mg.Metrics[2].Value, 1e-6, "MiB/s after the step at t = 0.1")
	assert.Equal(t, uint32(nvml.ERROR_NOT_SUPPORTED), mg.Metrics[3].NvmlReturn, "not in the scenario")
	assert.Equal(t, nvml.SUCCESS, s1.Free())
	assert.Equal(t, nvml.SUCCESS, s2.Free())
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, s2.Free(), "freed twice")
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, lib.GpmMetricsGet(mg), "freed samples")

	procs, ret := d0.GetComputeRunningProcesses()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 1 << 30, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}}, procs)
	procs, ret = d0.GetGraphicsRunningProcesses()
	require.Equal(t, nvml.SUCCESS, ret)
	require.Len(t, procs, 1)
	assert.Equal(t, uint32(4343), procs[0].Pid)
	name, ret := lib.SystemGetProcessName(4242)
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, "python3 train.py", name)
	_, ret = lib.SystemGetProcessName(1)
	assert.Equal(t, nvml.ERROR_NOT_FOUND, ret)

	// Init is ref-counted.
	require.Equal(t, nvml.SUCCESS, lib.Init())
	require.Equal(t, nvml.SUCCESS, lib.Shutdown())
	_, ret = d0.GetUUID()
	assert.Equal(t, nvml.SUCCESS, ret, "still initialized once")
}

// After the last nvmlShutdown every call answers UNINITIALIZED; none crashes.
func testLibraryAfterShutdown(t *testing.T) {
	useScenario(t, abiScenario().write(t))
	lib := newLib(t)
	require.Equal(t, nvml.SUCCESS, lib.Init())
	d := device(t, lib, 0)
	require.Equal(t, nvml.SUCCESS, lib.Shutdown())
	_, ret := d.GetUUID()
	assert.Equal(t, nvml.ERROR_UNINITIALIZED, ret)
	_, ret = d.GetMemoryInfo_v2()
	assert.Equal(t, nvml.ERROR_UNINITIALIZED, ret)
	_, ret = lib.DeviceGetCount()
	assert.Equal(t, nvml.ERROR_UNINITIALIZED, ret)
	assert.Equal(t, nvml.ERROR_UNINITIALIZED, lib.Shutdown())
}

func testLibrarySamples(t *testing.T) {
	s := abiScenario()
	s.GPUs = s.GPUs[:1]
	lib := openLib(t, s)
	d := device(t, lib, 0)
	start := time.Now()

	// Nothing sampled before t = 1/6 s.
	_, _, ret := d.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, 0)
	if time.Since(start) < 100*time.Millisecond {
		assert.Equal(t, nvml.ERROR_NOT_FOUND, ret)
	}

	time.Sleep(1100 * time.Millisecond)
	vt, samples, ret := d.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, 0)
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, nvml.VALUE_TYPE_UNSIGNED_INT, vt)
	require.GreaterOrEqual(t, len(samples), 6, "one every 1/6 s")
	for i, smp := range samples {
		val := uintValue(smp)
		assert.Contains(t, []uint32{0, 100}, val, "a 50 %% duty of 1/3 s is busy one sample, idle the next")
		if i > 0 {
			assert.InDelta(t, 1e6/6, float64(smp.TimeStamp-samples[i-1].TimeStamp), 1, "microseconds apart")
			assert.NotEqual(t, uintValue(samples[i-1]), val)
		}
	}
	newest := samples[len(samples)-1].TimeStamp
	assert.InDelta(t, float64(time.Now().UnixMicro()), float64(newest), 1e6, "CPU timestamps in microseconds")
	assert.InDelta(t, float64(start.UnixMicro()), float64(samples[0].TimeStamp), 0.5e6)

	// Only samples newer than lastSeen; none: NOT_FOUND.
	_, newer, ret := d.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, newest)
	if ret == nvml.SUCCESS {
		for _, smp := range newer {
			assert.Greater(t, smp.TimeStamp, newest)
		}
	} else {
		assert.Equal(t, nvml.ERROR_NOT_FOUND, ret)
	}
	time.Sleep(400 * time.Millisecond)
	_, newer, ret = d.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, newest)
	require.Equal(t, nvml.SUCCESS, ret)
	require.NotEmpty(t, newer)
	for _, smp := range newer {
		assert.Greater(t, smp.TimeStamp, newest)
	}

	// A 25 % level: every sample reads 25.
	_, mem, ret := d.GetSamples(nvml.MEMORY_UTILIZATION_SAMPLES, 0)
	require.Equal(t, nvml.SUCCESS, ret)
	for _, smp := range mem {
		assert.Equal(t, uint32(25), uintValue(smp))
	}
	u, ret := d.GetUtilizationRates()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Contains(t, []uint32{0, 100}, u.Gpu, "the instant reading is the newest sample")
	assert.Equal(t, uint32(25), u.Memory)

	// The ring buffer holds sampling.buffer samples.
	time.Sleep(time.Until(start.Add(2200 * time.Millisecond)))
	_, samples, ret = d.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, 0)
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Len(t, samples, 10)
}

func testLibraryFaults(t *testing.T) {
	s := Scenario{GPUs: []GPU{{
		UUID:         "GPU-fa170000-0000-4000-8000-000000000000",
		TemperatureC: 40,
		LostAt:       ptr(3.0),
	}, {
		UUID:         "GPU-fa170000-0000-4000-8000-000000000001",
		TemperatureC: 41,
		PowerW:       100,
		ClocksMHz:    &Clocks{SM: 1000},
		NotSupported: []string{"nvmlDeviceGetClockInfo", "nvmlDeviceGetPciInfo"},
		Errors:       []Fault{{Call: "nvmlDeviceGetPowerUsage", Return: "UNKNOWN", Until: ptr(3.0)}},
		Hangs:        []Hang{{Call: "nvmlDeviceGetTemperature", From: 0, Seconds: 0.5}},
	}}}
	lib := openLib(t, s)
	t0 := time.Now() // just after the scenario clock's t = 0
	d0, d1 := device(t, lib, 0), device(t, lib, 1)

	began := time.Now()
	v, ret := d1.GetTemperature(nvml.TEMPERATURE_GPU)
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, uint32(41), v)
	assert.GreaterOrEqual(t, time.Since(began), 350*time.Millisecond, "the hang blocks until t = 0.5")
	began = time.Now()
	_, ret = d1.GetTemperature(nvml.TEMPERATURE_GPU)
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Less(t, time.Since(began), 100*time.Millisecond, "after the hang, no wait")
	_, ret = d1.GetUUID()
	assert.Equal(t, nvml.SUCCESS, ret, "a hang holds only its own call")

	_, ret = d1.GetPowerUsage()
	assert.Equal(t, nvml.ERROR_UNKNOWN, ret, "injected until t = 3")
	_, ret = d1.GetClockInfo(nvml.CLOCK_SM)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	_, ret = d1.GetPciInfo()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret, "a call named without its version suffix")
	_, ret = d0.GetTemperature(nvml.TEMPERATURE_GPU)
	assert.Equal(t, nvml.SUCCESS, ret, "not lost yet")

	require.Less(t, time.Since(t0), 2500*time.Millisecond, "the checks before t = 3 took too long")
	time.Sleep(time.Until(t0.Add(3200 * time.Millisecond)))
	_, ret = d0.GetTemperature(nvml.TEMPERATURE_GPU)
	assert.Equal(t, nvml.ERROR_GPU_IS_LOST, ret)
	_, ret = d0.GetUUID()
	assert.Equal(t, nvml.ERROR_GPU_IS_LOST, ret, "every call on a lost GPU")
	_, ret = lib.DeviceGetHandleByIndex(0)
	assert.Equal(t, nvml.ERROR_GPU_IS_LOST, ret)
	_, ret = d1.GetPowerUsage()
	assert.Equal(t, nvml.SUCCESS, ret, "the injected error ended at t = 3; the other GPU goes on")
}

func testLibraryEvents(t *testing.T) {
	s := Scenario{GPUs: []GPU{
		{UUID: "GPU-e7e00000-0000-4000-8000-000000000000", Events: []Event{{At: 0.6, XID: 79}, {At: 0.3, Type: "single_bit_ecc"}}},
		{UUID: "GPU-e7e00000-0000-4000-8000-000000000001"},
	}}
	lib := openLib(t, s)
	d0, d1 := device(t, lib, 0), device(t, lib, 1)
	types, ret := d0.GetSupportedEventTypes()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.NotZero(t, types&nvml.EventTypeXidCriticalError)
	_, ret = d1.GetSupportedEventTypes()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret, "no events key")

	set, ret := lib.EventSetCreate()
	require.Equal(t, nvml.SUCCESS, ret)
	defer set.Free()
	require.Equal(t, nvml.SUCCESS, d0.RegisterEvents(nvml.EventTypeXidCriticalError|nvml.EventTypeSingleBitEccError, set))
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, d1.RegisterEvents(nvml.EventTypeXidCriticalError, set))

	data, ret := set.Wait(3000)
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, uint64(nvml.EventTypeSingleBitEccError), data.EventType, "in time order")
	uuid, _ := data.Device.GetUUID()
	assert.Equal(t, s.GPUs[0].UUID, uuid)
	data, ret = set.Wait(3000)
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, uint64(nvml.EventTypeXidCriticalError), data.EventType)
	assert.Equal(t, uint64(79), data.EventData)
	began := time.Now()
	_, ret = set.Wait(200)
	assert.Equal(t, nvml.ERROR_TIMEOUT, ret, "each event once")
	assert.GreaterOrEqual(t, time.Since(began), 150*time.Millisecond)
	assert.Equal(t, nvml.SUCCESS, set.Free())
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, set.Free())
}

func testLibraryMIG(t *testing.T) {
	s := migScenario()
	s.GPUs = append(s.GPUs, GPU{UUID: "GPU-e2e22222-0000-4000-8000-000000000002", TemperatureC: 30}) // no MIG at all
	s.GPUs[0].LostAt = ptr(2.0)
	lib := openLib(t, s)
	t0 := time.Now()
	d0, dOff, dNone := device(t, lib, 0), device(t, lib, 1), device(t, lib, 2)

	cur, pending, ret := d0.GetMigMode()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, [2]int{nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE}, [2]int{cur, pending})
	cur, _, ret = dOff.GetMigMode()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, nvml.DEVICE_MIG_DISABLE, cur, "MIG capable, MIG off")
	_, _, ret = dNone.GetMigMode()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret, "no mig key: no MIG")
	for d, want := range map[nvml.Device]int{d0: 7, dOff: 0, dNone: 0} {
		n, ret := d.GetMaxMigDeviceCount()
		assert.Equal(t, nvml.SUCCESS, ret)
		assert.Equal(t, want, n, "max MIG devices: 0 without MIG mode")
	}
	_, ret = dOff.GetMigDeviceHandleByIndex(0)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)

	// The MIG devices, in slot order; then empty slots up to the maximum.
	var migs []nvml.Device
	for i, m := range migDevices {
		h, ret := d0.GetMigDeviceHandleByIndex(i)
		require.Equal(t, nvml.SUCCESS, ret, "MIG slot %d", i)
		migs = append(migs, h)
		uuid, ret := h.GetUUID()
		assert.Equal(t, nvml.SUCCESS, ret)
		assert.Equal(t, m.uuid, uuid)
		gi, ret := h.GetGpuInstanceId()
		assert.Equal(t, nvml.SUCCESS, ret)
		ci, ret := h.GetComputeInstanceId()
		assert.Equal(t, nvml.SUCCESS, ret)
		assert.Equal(t, [2]int{m.gi, m.ci}, [2]int{gi, ci})
		mem, ret := h.GetMemoryInfo_v2()
		require.Equal(t, nvml.SUCCESS, ret)
		assert.Equal(t, [3]uint64{m.total, m.reserved, m.used}, [3]uint64{mem.Total, mem.Reserved, mem.Used}, "its GPU instance's memory")
		m1, ret := h.GetMemoryInfo()
		require.Equal(t, nvml.SUCCESS, ret)
		assert.Equal(t, m.used+m.reserved, m1.Used, "v1 counts reserved in used")
		isMig, ret := h.IsMigDeviceHandle()
		assert.Equal(t, nvml.SUCCESS, ret)
		assert.True(t, isMig)
		parent, ret := h.GetDeviceHandleFromMigDeviceHandle()
		assert.Equal(t, nvml.SUCCESS, ret)
		assert.Equal(t, addr(d0), addr(parent))
		byUUID, ret := lib.DeviceGetHandleByUUID(m.uuid)
		assert.Equal(t, nvml.SUCCESS, ret)
		assert.Equal(t, addr(h), addr(byUUID), "a MIG UUID names its MIG device")
		attrs, ret := h.GetAttributes()
		require.Equal(t, nvml.SUCCESS, ret)
		p, _ := profileBy(func(p MIGProfile) bool { return p.ID == m.profileID })
		assert.Equal(t, uint32(p.SliceCount), attrs.GpuInstanceSliceCount)
		assert.Equal(t, m.total>>20, attrs.MemorySizeMB)
		procs, ret := h.GetComputeRunningProcesses()
		require.Equal(t, nvml.SUCCESS, ret)
		var pids []uint32
		for _, pr := range procs {
			pids = append(pids, pr.Pid)
			assert.Equal(t, [2]uint32{uint32(m.gi), uint32(m.ci)}, [2]uint32{pr.GpuInstanceId, pr.ComputeInstanceId})
		}
		assert.Equal(t, m.processPIDs, pids, "a MIG device lists its own processes")
	}
	for i := range migs {
		for j := range i {
			assert.NotEqual(t, addr(migs[j]), addr(migs[i]), "MIG handles are distinct")
		}
		for _, d := range []nvml.Device{d0, dOff, dNone} {
			assert.NotEqual(t, addr(d), addr(migs[i]), "a MIG handle is no GPU handle")
		}
	}
	for i := len(migDevices); i < 7; i++ {
		_, ret := d0.GetMigDeviceHandleByIndex(i)
		assert.Equal(t, nvml.ERROR_NOT_FOUND, ret, "empty slot %d", i)
	}
	_, ret = d0.GetMigDeviceHandleByIndex(7)
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, ret, "beyond the maximum")

	// A whole-GPU call on a MIG handle, a MIG call on a GPU handle.
	_, ret = migs[0].GetTemperature(nvml.TEMPERATURE_GPU)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	_, ret = migs[0].GetMigDeviceHandleByIndex(0)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	_, ret = d0.GetGpuInstanceId()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	_, ret = d0.GetAttributes()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret, "attributes: MIG handles only")
	_, ret = d0.GetDeviceHandleFromMigDeviceHandle()
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, ret)
	isMig, ret := d0.IsMigDeviceHandle()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.False(t, isMig)

	// In MIG mode: no whole-GPU utilization; the parent lists every process
	// with its instance ids.
	_, _, ret = d0.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, 0)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	_, ret = d0.GetUtilizationRates()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	_, ret = d0.GetProcessUtilization(0)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	_, ret = dOff.GetUtilizationRates()
	assert.Equal(t, nvml.SUCCESS, ret, "MIG off: utilization as usual")
	procs, ret := d0.GetComputeRunningProcesses()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Len(t, procs, 4)

	// Profiles: nvmlDeviceGetGpuInstanceProfileInfo takes the
	// NVML_GPU_INSTANCE_PROFILE_* index; a GPU instance carries the profile ID.
	for _, want := range h200Profiles {
		p, ret := d0.GetGpuInstanceProfileInfo(want.Profile)
		require.Equal(t, nvml.SUCCESS, ret, "profile index %d", want.Profile)
		assert.Equal(t, [3]uint64{uint64(want.ID), uint64(want.SliceCount), want.MemoryMiB}, [3]uint64{uint64(p.Id), uint64(p.SliceCount), p.MemorySizeMB})
		v2, ret := d0.GetGpuInstanceProfileInfoByIdV(want.ID).V2()
		require.Equal(t, nvml.SUCCESS, ret, "profile ID %d", want.ID)
		assert.Equal(t, uint32(want.SliceCount), v2.SliceCount)
		if want.Name == "" {
			assert.Equal(t, "MIG "+migProfileName(want), cString(v2.Name[:]))
		}
		v3, ret := d0.GetGpuInstanceProfileInfoV(want.Profile).V3()
		require.Equal(t, nvml.SUCCESS, ret)
		assert.Equal(t, [2]uint64{uint64(want.ID), want.MemoryMiB}, [2]uint64{uint64(v3.Id), v3.MemorySizeMB})
	}
	_, ret = d0.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_8_SLICE)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret, "a profile the GPU lacks")
	_, ret = d0.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_COUNT)
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, ret)
	_, ret = dNone.GetGpuInstanceProfileInfo(0)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	for _, m := range migDevices {
		gi, ret := d0.GetGpuInstanceById(m.gi)
		require.Equal(t, nvml.SUCCESS, ret)
		info, ret := gi.GetInfo()
		require.Equal(t, nvml.SUCCESS, ret)
		assert.Equal(t, [2]uint32{uint32(m.gi), uint32(m.profileID)}, [2]uint32{info.Id, info.ProfileId})
		assert.Equal(t, addr(d0), addr(info.Device))
	}
	_, ret = d0.GetGpuInstanceById(5)
	assert.Equal(t, nvml.ERROR_NOT_FOUND, ret)
	_, ret = dOff.GetGpuInstanceById(2)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)

	// GPM per GPU instance: through the parent and the instance id, or
	// through a MIG device's handle.
	var smp [4]nvml.GpmSample
	for i := range smp {
		smp[i], ret = lib.GpmSampleAlloc()
		require.Equal(t, nvml.SUCCESS, ret)
		defer smp[i].Free()
	}
	require.Equal(t, nvml.SUCCESS, d0.GpmMigSampleGet(2, smp[0]))
	require.Equal(t, nvml.SUCCESS, d0.GpmSampleGet(smp[2]))
	time.Sleep(120 * time.Millisecond)
	require.Equal(t, nvml.SUCCESS, migs[1].GpmSampleGet(smp[1]), "GI 2 through its second MIG device")
	require.Equal(t, nvml.SUCCESS, d0.GpmSampleGet(smp[3]))
	for _, c := range []struct {
		a, b nvml.GpmSample
		want float64
	}{{smp[0], smp[1], 70}, {smp[2], smp[3], 50}} {
		mg := &nvml.GpmMetricsGetType{Sample1: c.a, Sample2: c.b, NumMetrics: 1}
		mg.Metrics[0].MetricId = uint32(nvml.GPM_METRIC_SM_UTIL)
		require.Equal(t, nvml.SUCCESS, lib.GpmMetricsGet(mg))
		assert.InDelta(t, c.want, mg.Metrics[0].Value, 1e-9)
	}
	mg := &nvml.GpmMetricsGetType{Sample1: smp[0], Sample2: smp[3], NumMetrics: 1}
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, lib.GpmMetricsGet(mg), "a GPU instance's and the GPU's samples make no window")
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, d0.GpmMigSampleGet(5, smp[0]), "no such GPU instance")
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, dOff.GpmMigSampleGet(2, smp[0]))

	// Events carry the instance ids.
	set, ret := lib.EventSetCreate()
	require.Equal(t, nvml.SUCCESS, ret)
	defer set.Free()
	require.Equal(t, nvml.SUCCESS, d0.RegisterEvents(nvml.EventTypeXidCriticalError, set))
	data, ret := set.Wait(3000)
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, [3]uint64{43, 9, 0}, [3]uint64{data.EventData, uint64(data.GpuInstanceId), uint64(data.ComputeInstanceId)})
	data, ret = set.Wait(3000)
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, [3]uint64{31, 2, 0xFFFFFFFF}, [3]uint64{data.EventData, uint64(data.GpuInstanceId), uint64(data.ComputeInstanceId)})

	// A lost parent takes its MIG devices along.
	time.Sleep(time.Until(t0.Add(3200 * time.Millisecond)))
	_, ret = migs[0].GetUUID()
	assert.Equal(t, nvml.ERROR_GPU_IS_LOST, ret)
	_, ret = migs[0].GetMemoryInfo_v2()
	assert.Equal(t, nvml.ERROR_GPU_IS_LOST, ret)
}

func testLibraryInitFailsFirst(t *testing.T) {
	s := abiScenario()
	s.Init = &InitFaults{FailFirst: 2, Return: "NO_PERMISSION"}
	useScenario(t, s.write(t))
	lib := newLib(t)
	assert.Equal(t, nvml.ERROR_NO_PERMISSION, lib.Init())
	assert.Equal(t, nvml.ERROR_NO_PERMISSION, lib.Init())
	require.Equal(t, nvml.SUCCESS, lib.Init())
	n, ret := lib.DeviceGetCount()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, 2, n)
	require.Equal(t, nvml.SUCCESS, lib.Shutdown())
	// The same scenario again (a re-init) does not fail again.
	require.Equal(t, nvml.SUCCESS, lib.Init())
	require.Equal(t, nvml.SUCCESS, lib.Shutdown())
}

// malformedScenarios each fail nvmlInit with ERROR_UNKNOWN; the library
// prints why on stderr.
var malformedScenarios = map[string]string{
	"empty":                               ``,
	"not JSON":                            `gpus: []`,
	"truncated":                           `{"gpus": [{"uuid": "GPU-1"`,
	"trailing garbage":                    `{"gpus": []} {"gpus": []}`,
	"array":                               `[]`,
	"gpus not an array":                   `{"gpus": {}}`,
	"no gpus":                             `{"driver_version": "1"}`,
	"gpu not an object":                   `{"gpus": [1]}`,
	"unknown key":                         `{"gpus": [], "gpu": []}`,
	"unknown gpu key":                     `{"gpus": [{"temperature": 40}]}`,
	"getters not an object":               `{"gpus": [{"getters": [1]}]}`,
	"getters unknown key":                 `{"gpus": [{"getters": {"nvmlDeviceGetNoSuchThing": 1}}]}`,
	"getters unknown selector":            `{"gpus": [{"getters": {"nvmlDeviceGetMaxClockInfo(SHADER)": 1}}]}`,
	"getters hand-written getter":         `{"gpus": [{"getters": {"nvmlDeviceGetClockInfo(SM)": 1}}]}`,
	"getters out of the type's range":     `{"gpus": [{"getters": {"nvmlDeviceGetMaxPcieLinkWidth": -1}}]}`,
	"getters string value":                `{"gpus": [{"getters": {"nvmlDeviceGetMaxPcieLinkWidth": "16"}}]}`,
	"duplicate key":                       `{"gpus": [{"power_w": 1, "power_w": 2}]}`,
	"string for number":                   `{"gpus": [{"memory": {"total_bytes": "lots"}}]}`,
	"used above total":                    `{"gpus": [{"memory": {"total_bytes": 10, "reserved_bytes": 5, "used_bytes": 6}}]}`,
	"negative power":                      `{"gpus": [{"power_w": {"mean": 10, "amplitude": 20, "period_s": 1}}]}`,
	"busy above 1":                        `{"gpus": [{"utilization": {"gpu": {"busy": 1.5}}}]}`,
	"duty without busy":                   `{"gpus": [{"utilization": {"gpu": {"period_s": 1}}}]}`,
	"steps out of order":                  `{"gpus": [{"temperature_c": {"steps": [[5, 40], [1, 50]]}}]}`,
	"steps not pairs":                     `{"gpus": [{"temperature_c": {"steps": [[5]]}}]}`,
	"bad pci bus id":                      `{"gpus": [{"pci_bus_id": "nineteen"}]}`,
	"duplicate uuid":                      `{"gpus": [{"uuid": "GPU-a"}, {"uuid": "GPU-A"}]}`,
	"empty uuid":                          `{"gpus": [{"uuid": ""}]}`,
	"long name":                           `{"gpus": [{"name": "` + strings.Repeat("x", 200) + `"}]}`,
	"unknown call":                        `{"gpus": [{"not_supported": ["nvmlDeviceGetEverything"]}]}`,
	"unknown return":                      `{"gpus": [{"errors": [{"call": "nvmlDeviceGetPowerUsage", "return": "OOPS"}]}]}`,
	"success is no error":                 `{"gpus": [{"errors": [{"call": "nvmlDeviceGetPowerUsage", "return": "SUCCESS"}]}]}`,
	"hang without seconds":                `{"gpus": [{"hangs": [{"call": "nvmlDeviceGetPowerUsage"}]}]}`,
	"bad process type":                    `{"gpus": [{"processes": [{"pid": 1, "type": "cuda"}]}]}`,
	"process without pid":                 `{"gpus": [{"processes": [{"name": "x"}]}]}`,
	"fractional pid":                      `{"gpus": [{"processes": [{"pid": 1.5}]}]}`,
	"infinite number":                     `{"gpus": [{"power_w": 1e999}]}`,
	"bad architecture":                    `{"gpus": [{"architecture": "fermi"}]}`,
	"bad init return":                     `{"init": {"fail_first": 1, "return": 0}, "gpus": []}`,
	"zero sampling buffer":                `{"sampling": {"buffer": 0}, "gpus": []}`,
	"deep nesting":                        `{"gpus": [{"comment": ` + nested(2000) + `}]}`,
	"too many gpus":                       `{"gpus": [` + strings.Repeat(`{},`, 64) + `{}]}`,
	"invalid UTF-8 key":                   "{\"gpus\": [], \"\xff\": 1}",
	"mig unknown key":                     `{"gpus": [{"mig": {"mode": 1}}]}`,
	"mig enabled not bool":                `{"gpus": [{"mig": {"enabled": 1}}]}`,
	"mig too many slots":                  `{"gpus": [{"mig": {"max_devices": 17}}]}`,
	"mig profile index":                   `{"gpus": [{"mig": {"profiles": [{"profile": 18, "id": 1, "slice_count": 1, "memory_mib": 1}]}}]}`,
	"mig profile no id":                   `{"gpus": [{"mig": {"profiles": [{"profile": 0, "slice_count": 1, "memory_mib": 1}]}}]}`,
	"mig profile twice":                   `{"gpus": [{"mig": {"profiles": [` + migProfileJSON(0, 19) + `, ` + migProfileJSON(0, 20) + `]}}]}`,
	"mig profile id twice":                `{"gpus": [{"mig": {"profiles": [` + migProfileJSON(0, 19) + `, ` + migProfileJSON(7, 19) + `]}}]}`,
	"mig unknown profile":                 `{"gpus": [{"mig": {"profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 0}]}}]}`,
	"mig gi twice":                        `{"gpus": [{"mig": {"profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19}, {"id": 1, "profile_id": 19}]}}]}`,
	"mig gi memory":                       `{"gpus": [{"mig": {"profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19, "memory": {"total_bytes": 1, "used_bytes": 2}}]}}]}`,
	"mig gi gpm, gpu none":                `{"gpus": [{"mig": {"profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19, "gpm": {"SM_UTIL": 1}}]}}]}`,
	"mig device no gi":                    `{"gpus": [{"mig": {"profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19}], "devices": [{"uuid": "MIG-1", "gpu_instance_id": 2, "compute_instance_id": 0}]}}]}`,
	"mig device twice":                    `{"gpus": [{"mig": {"profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19}], "devices": [{"uuid": "MIG-1", "gpu_instance_id": 1, "compute_instance_id": 0}, {"uuid": "MIG-2", "gpu_instance_id": 1, "compute_instance_id": 0}]}}]}`,
	"mig device no uuid":                  `{"gpus": [{"mig": {"profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19}], "devices": [{"gpu_instance_id": 1, "compute_instance_id": 0}]}}]}`,
	"mig uuid of a gpu":                   `{"gpus": [{"uuid": "GPU-1", "mig": {"profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19}], "devices": [{"uuid": "gpu-1", "gpu_instance_id": 1, "compute_instance_id": 0}]}}]}`,
	"mig device ends before it begins":    `{"gpus": [{"mig": {"profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19}], "devices": [{"uuid": "MIG-1", "gpu_instance_id": 1, "compute_instance_id": 0, "from": 5, "until": 5}]}}]}`,
	"mig devices of one instance at once": `{"gpus": [{"mig": {"profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19}], "devices": [{"uuid": "MIG-1", "gpu_instance_id": 1, "compute_instance_id": 0, "until": 6}, {"uuid": "MIG-2", "gpu_instance_id": 1, "compute_instance_id": 0, "from": 5}]}}]}`,
	"mig more than max at once":           `{"gpus": [{"mig": {"max_devices": 1, "profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19}], "devices": [{"uuid": "MIG-1", "gpu_instance_id": 1, "compute_instance_id": 0, "until": 6}, {"uuid": "MIG-2", "gpu_instance_id": 1, "compute_instance_id": 1, "from": 5}]}}]}`,
	"mig more than max":                   `{"gpus": [{"mig": {"max_devices": 1, "profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19}], "devices": [{"uuid": "MIG-1", "gpu_instance_id": 1, "compute_instance_id": 0}, {"uuid": "MIG-2", "gpu_instance_id": 1, "compute_instance_id": 1}]}}]}`,
	"mig off, instances":                  `{"gpus": [{"mig": {"enabled": false, "profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19}]}}]}`,
	"process gi, no mig":                  `{"gpus": [{"processes": [{"pid": 1, "gpu_instance_id": 1, "compute_instance_id": 0}]}]}`,
	"process gi without ci":               `{"gpus": [{"processes": [{"pid": 1, "gpu_instance_id": 1}]}]}`,
	"process outside mig":                 `{"gpus": [{"processes": [{"pid": 1}], "mig": {"profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19}], "devices": [{"uuid": "MIG-1", "gpu_instance_id": 1, "compute_instance_id": 0}]}}]}`,
	"process on no device":                `{"gpus": [{"processes": [{"pid": 1, "gpu_instance_id": 1, "compute_instance_id": 1}], "mig": {"profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19}], "devices": [{"uuid": "MIG-1", "gpu_instance_id": 1, "compute_instance_id": 0}]}}]}`,
	"event gi, no mig":                    `{"gpus": [{"events": [{"at": 1, "xid": 43, "gpu_instance_id": 1}]}]}`,
	"event ci without gi":                 `{"gpus": [{"events": [{"at": 1, "xid": 43, "compute_instance_id": 1}]}]}`,
	"event on no gi":                      `{"gpus": [{"events": [{"at": 1, "xid": 43, "gpu_instance_id": 3}], "mig": {"profiles": [` + migProfileJSON(0, 19) + `], "gpu_instances": [{"id": 1, "profile_id": 19}]}}]}`,
}

func migProfileJSON(index, id int) string {
	return fmt.Sprintf(`{"profile": %d, "id": %d, "slice_count": 1, "memory_mib": 18432}`, index, id)
}

func nested(n int) string {
	b := make([]byte, 0, 2*n)
	for range n {
		b = append(b, '[')
	}
	for range n {
		b = append(b, ']')
	}
	return string(b)
}

func testLibraryMalformed(t *testing.T) {
	dir := t.TempDir()
	lib := newLib(t)
	for name, content := range malformedScenarios {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, "scenario.json")
			require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
			useScenario(t, p)
			assert.Equal(t, nvml.ERROR_UNKNOWN, lib.Init())
		})
	}
	t.Run("no such file", func(t *testing.T) {
		useScenario(t, filepath.Join(dir, "missing.json"))
		assert.Equal(t, nvml.ERROR_UNKNOWN, lib.Init())
	})
	t.Run("variable unset", func(t *testing.T) {
		useScenario(t, "")
		assert.Equal(t, nvml.ERROR_UNKNOWN, lib.Init())
	})
	// And a good scenario after all of them still loads.
	t.Run("recovers", func(t *testing.T) {
		useScenario(t, abiScenario().write(t))
		require.Equal(t, nvml.SUCCESS, lib.Init())
		n, ret := lib.DeviceGetCount()
		assert.Equal(t, nvml.SUCCESS, ret)
		assert.Equal(t, 2, n)
		assert.Equal(t, nvml.SUCCESS, lib.Shutdown())
	})
}

func testLibraryDemoScenario(t *testing.T) {
	p, err := filepath.Abs(filepath.Join("..", "..", "testdata", "scenarios", "demo.json"))
	require.NoError(t, err)
	useScenario(t, p)
	lib := newLib(t)
	require.Equal(t, nvml.SUCCESS, lib.Init(), "make demo's scenario loads")
	defer lib.Shutdown()
	n, ret := lib.DeviceGetCount()
	require.Equal(t, nvml.SUCCESS, ret)
	require.Positive(t, n)
	for i := range n {
		name, ret := device(t, lib, i).GetName()
		require.Equal(t, nvml.SUCCESS, ret)
		assert.Contains(t, name, "SIMULATED")
	}
}

// exerciseMIG calls every MIG entry point on d and on each of its MIG devices.
func exerciseMIG(lib nvml.Interface, d nvml.Device) {
	d.GetMigMode()
	d.IsMigDeviceHandle()
	d.GetAttributes()
	d.GetGpuInstanceId()
	d.GetComputeInstanceId()
	d.GetDeviceHandleFromMigDeviceHandle()
	for p := range nvml.GPU_INSTANCE_PROFILE_COUNT + 1 {
		d.GetGpuInstanceProfileInfo(p)
		d.GetGpuInstanceProfileInfoV(p).V2()
		d.GetGpuInstanceProfileInfoV(p).V3()
		d.GetGpuInstanceProfileInfoByIdV(p * 3).V2()
	}
	s, ret := lib.GpmSampleAlloc()
	if ret == nvml.SUCCESS {
		defer s.Free()
	}
	for id := range 20 {
		if gi, ret := d.GetGpuInstanceById(id); ret == nvml.SUCCESS {
			gi.GetInfo()
		}
		if s != nil {
			d.GpmMigSampleGet(id, s)
		}
	}
	n, ret := d.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return
	}
	for i := range n + 1 {
		m, ret := d.GetMigDeviceHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		m.GetUUID()
		m.GetName()
		m.GetGpuInstanceId()
		m.GetComputeInstanceId()
		m.GetMemoryInfo()
		m.GetMemoryInfo_v2()
		m.GetAttributes()
		m.IsMigDeviceHandle()
		m.GetDeviceHandleFromMigDeviceHandle()
		m.GetComputeRunningProcesses()
		m.GetGraphicsRunningProcesses()
		m.GetProcessUtilization(0)
		m.GetTemperature(nvml.TEMPERATURE_GPU)
		m.GetMigDeviceHandleByIndex(0)
		if s != nil {
			m.GpmSampleGet(s)
		}
	}
}

// addr is the C handle inside d: equal handles are the same address (testify
// would compare the structs they point to).
func addr(d nvml.Device) string { return fmt.Sprint(d) }

func uintValue(s nvml.Sample) uint32 {
	return uint32(s.SampleValue[0]) | uint32(s.SampleValue[1])<<8 | uint32(s.SampleValue[2])<<16 | uint32(s.SampleValue[3])<<24
}

func cString[T ~int8 | ~uint8](b []T) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// FuzzScenario feeds arbitrary scenario files to the library's C parser and,
// when one loads, calls every entry point on every GPU: nvmlInit answers
// SUCCESS or an error, and nothing ever crashes the process.
//
//	go test -tags e2e -run '^$' -fuzz FuzzScenario -fuzztime 1m ./test/e2e -fakenvml=...
func FuzzScenario(f *testing.F) {
	for _, content := range malformedScenarios {
		f.Add([]byte(content))
	}
	for _, s := range []Scenario{abiScenario(), pipelineScenario(), initScenario(), migScenario()} {
		data, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	demo, err := os.ReadFile(filepath.Join("..", "..", "testdata", "scenarios", "demo.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(demo)
	path := filepath.Join(f.TempDir(), "scenario.json")
	envMu.Lock()
	old, had := os.LookupEnv(scenarioEnv)
	os.Setenv(scenarioEnv, path)
	f.Cleanup(func() {
		if had {
			os.Setenv(scenarioEnv, old)
		} else {
			os.Unsetenv(scenarioEnv)
		}
		envMu.Unlock()
	})
	lib := newLib(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		ret := lib.Init()
		if ret != nvml.SUCCESS {
			return
		}
		defer lib.Shutdown()
		if mayHang(data) {
			return // a hang would stall the fuzzer, not crash it
		}
		exerciseAll(t, lib)
	})
}

// mayHang reports whether data could hold a "hangs" key.
func mayHang(data []byte) bool {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return true // cannot tell
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "hangs" || walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

func exerciseAll(t *testing.T, lib nvml.Interface) {
	lib.SystemGetDriverVersion()
	lib.SystemGetNVMLVersion()
	lib.SystemGetCudaDriverVersion()
	lib.SystemGetProcessName(1)
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		t.Fatalf("nvmlDeviceGetCount after a successful init: %v", ret)
	}
	if _, ret := lib.DeviceGetHandleByIndex(n); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Fatalf("handle %d of %d: %v", n, n, ret)
	}
	for i := range n {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue // lost, or an injected error
		}
		d.GetUUID()
		d.GetName()
		d.GetSerial()
		d.GetIndex()
		d.GetPciInfo()
		d.GetMinorNumber()
		d.GetArchitecture()
		d.GetCudaComputeCapability()
		for st := nvml.SamplingType(0); st <= nvml.SAMPLINGTYPE_COUNT; st++ {
			d.GetSamples(st, 0)
			d.GetSamples(st, ^uint64(0))
		}
		d.GetUtilizationRates()
		d.GetEncoderUtilization()
		d.GetDecoderUtilization()
		d.GetMemoryInfo()
		d.GetMemoryInfo_v2()
		d.GetTemperature(nvml.TEMPERATURE_GPU)
		d.GetTemperature(nvml.TEMPERATURE_COUNT)
		d.GetPowerUsage()
		d.GetEnforcedPowerLimit()
		d.GetTotalEnergyConsumption()
		d.GetFanSpeed()
		for c := nvml.ClockType(0); c <= nvml.CLOCK_COUNT; c++ {
			d.GetClockInfo(c)
		}
		d.GetPerformanceState()
		d.GetComputeRunningProcesses()
		d.GetGraphicsRunningProcesses()
		d.GetProcessUtilization(0)
		d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
		d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_COUNT, nvml.ECC_COUNTER_TYPE_COUNT)
		d.GetRemappedRows()
		d.GetCurrentClocksEventReasons()
		for p := nvml.PerfPolicyType(0); p <= nvml.PERF_POLICY_COUNT; p++ {
			d.GetViolationStatus(p)
		}
		d.GetPcieReplayCounter()
		d.GetCurrPcieLinkGeneration()
		d.GetCurrPcieLinkWidth()
		exerciseMIG(lib, d)
		if types, ret := d.GetSupportedEventTypes(); ret == nvml.SUCCESS {
			if set, ret := lib.EventSetCreate(); ret == nvml.SUCCESS {
				d.RegisterEvents(types, set)
				set.Wait(0)
				set.Free()
			}
		}
		if sup, ret := d.GpmQueryDeviceSupport(); ret == nvml.SUCCESS && sup.IsSupportedDevice == 1 {
			s1, r1 := lib.GpmSampleAlloc()
			s2, r2 := lib.GpmSampleAlloc()
			if r1 == nvml.SUCCESS && r2 == nvml.SUCCESS {
				d.GpmSampleGet(s1)
				d.GpmSampleGet(s2)
				mg := &nvml.GpmMetricsGetType{Sample1: s1, Sample2: s2, NumMetrics: 100}
				for i := range mg.NumMetrics {
					mg.Metrics[i].MetricId = i
				}
				lib.GpmMetricsGet(mg)
				s1.Free()
				s2.Free()
			}
		}
	}
}
