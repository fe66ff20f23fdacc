//go:build cgo

package nvmlclient

import (
	"context"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

func openWithProcesses(t *testing.T) (*nvmltest.Machine, *Client) {
	t.Helper()
	m := nvmltest.NewH200()
	c := New(m, zap.NewNop(), WithProcesses(true))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return m, c
}

func procByPID(s sample.Sample) map[uint32]sample.Process {
	out := map[uint32]sample.Process{}
	for _, p := range s.Processes {
		out[p.PID] = p
	}
	return out
}

// usNow is NVML's timestamp of now minus ago: CPU time in microseconds.
func usNow(ago time.Duration) uint64 { return uint64(time.Now().Add(-ago).UnixMicro()) }

func TestReadProcesses(t *testing.T) {
	m, c := openWithProcesses(t)
	g := m.GPUs[0]
	g.SetProcesses(
		nvml.ProcessInfo{Pid: 100, UsedGpuMemory: 4 << 30, GpuInstanceId: sample.NoInstance, ComputeInstanceId: sample.NoInstance},
		nvml.ProcessInfo{Pid: 200, UsedGpuMemory: math.MaxUint64, GpuInstanceId: sample.NoInstance, ComputeInstanceId: sample.NoInstance},
	)
	g.GraphicsProcs = []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 20}}
	g.AddProcessSamples(
		nvml.ProcessUtilizationSample{Pid: 100, TimeStamp: usNow(2 * time.Second), SmUtil: 30},
		nvml.ProcessUtilizationSample{Pid: 100, TimeStamp: usNow(time.Second), SmUtil: 50, MemUtil: 10},
		nvml.ProcessUtilizationSample{Pid: 200, TimeStamp: usNow(time.Minute), SmUtil: 90}, // gone idle since
	)
	s, err := c.Devices()[0].Read()
	require.NoError(t, err)
	require.True(t, s.ProcessesListed)
	procs := procByPID(s)
	require.Len(t, procs, 2)
	p := procs[100]
	assert.True(t, p.Compute && p.Graphics)
	assert.Equal(t, some(uint64(4<<30+1<<20)), p.MemoryBytes())
	assert.InDelta(t, 0.50, p.SMUtil.Value, 1e-9, "the newest sample, not an average")
	assert.InDelta(t, 0.10, p.MemoryControllerUtil.Value, 1e-9)
	assert.Equal(t, some(1.0), p.BusyShare)
	assert.False(t, procs[200].MemoryBytes().OK, "NVML_VALUE_NOT_AVAILABLE")
	assert.Equal(t, some(0.0), procs[200].SMUtil, "a sample older than the horizon: idle")
	assert.Equal(t, some(0.0), procs[200].BusyShare)

	// The same sample is read again: NVML keeps one per process.
	s, err = c.Devices()[0].Read()
	require.NoError(t, err)
	assert.InDelta(t, 0.50, procByPID(s)[100].SMUtil.Value, 1e-9)
}

func TestBusySharesFromSamplesBetweenReads(t *testing.T) {
	m, c := openWithProcesses(t)
	g := m.GPUs[0]
	g.SetProcesses(nvml.ProcessInfo{Pid: 1, UsedGpuMemory: 1}, nvml.ProcessInfo{Pid: 2, UsedGpuMemory: 1})
	d := c.Devices()[0]
	var current []nvml.ProcessUtilizationSample
	g.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) { return current, nvml.SUCCESS }
	share := func(a, b uint32) {
		current = []nvml.ProcessUtilizationSample{{Pid: 1, TimeStamp: usNow(0), SmUtil: a}, {Pid: 2, TimeStamp: usNow(0), SmUtil: b}}
	}
	share(10, 90)
	require.True(t, d.SampleShares())
	share(30, 70)
	require.True(t, d.SampleShares())
	share(20, 80) // the read's own sample
	s, err := d.Read()
	require.NoError(t, err)
	procs := procByPID(s)
	assert.InDelta(t, 0.2, procs[1].BusyShare.Value, 1e-9)
	assert.InDelta(t, 0.8, procs[2].BusyShare.Value, 1e-9)
	assert.InDelta(t, 0.2, procs[1].SMUtil.Value, 1e-9, "the instant reading is the read's own")
}

func TestSampleSharesSkipsABusyDevice(t *testing.T) {
	m, c := openWithProcesses(t)
	g := m.GPUs[0]
	g.SetProcesses(nvml.ProcessInfo{Pid: 1, UsedGpuMemory: 1})
	d := c.Devices()[0]
	entered, release := make(chan struct{}), make(chan struct{})
	temperature := g.GetTemperatureFunc
	g.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		close(entered)
		<-release
		return temperature(s)
	}
	done := make(chan error)
	go func() { _, err := d.Read(); done <- err }()
	<-entered
	assert.False(t, d.SampleShares(), "a read in flight samples the shares itself")
	g.GetTemperatureFunc = temperature
	close(release)
	require.NoError(t, <-done)
	assert.True(t, d.SampleShares())
}

// Issue 23: a scrape that finds the GPU busy with our own share sample
// waits for that one short call, and reads the GPU: a GPU busy with our
// own sampling is not stuck, and is never reported degraded.
func TestReadWaitsForAShareSampleInFlight(t *testing.T) {
	m, c := openWithProcesses(t)
	g := m.GPUs[0]
	g.SetProcesses(nvml.ProcessInfo{Pid: 1, UsedGpuMemory: 1})
	d := c.Devices()[0]
	entered, release := make(chan struct{}), make(chan struct{})
	var sampling atomic.Bool
	sampling.Store(true)
	g.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		if sampling.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
		return []nvml.ProcessUtilizationSample{{Pid: 1, TimeStamp: usNow(0), SmUtil: 40}}, nvml.SUCCESS
	}
	sampled := make(chan bool)
	go func() { sampled <- d.SampleShares() }()
	<-entered
	// The sample returns a moment after the scrape arrives.
	time.AfterFunc(2*time.Millisecond, func() { close(release) })
	s, err := d.Read()
	require.NoError(t, err, "the scrape waits for the share sample and reads the GPU")
	assert.True(t, s.ProcessesListed)
	assert.True(t, <-sampled)
}

// A share sample that overruns its bound is a stuck call, as a read is:
// the scrape does not wait for it past the bound, and the GPU is reported
// busy (degraded) until it returns.
func TestReadDoesNotWaitForAStuckShareSample(t *testing.T) {
	m, c := openWithProcesses(t)
	g := m.GPUs[0]
	g.SetProcesses(nvml.ProcessInfo{Pid: 1, UsedGpuMemory: 1})
	d := c.Devices()[0]
	entered, release := make(chan struct{}), make(chan struct{})
	var sampling atomic.Bool
	sampling.Store(true)
	g.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		if sampling.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	sampled := make(chan bool)
	go func() { sampled <- d.SampleShares() }()
	<-entered
	_, err := d.Read()
	assert.ErrorIs(t, err, ErrBusy, "stuck past its bound")
	close(release)
	assert.True(t, <-sampled)
	_, err = d.Read()
	assert.NoError(t, err, "free again once it returned")
}

func TestShareSamplerSamplesOnlyHeldGPUs(t *testing.T) {
	m := nvmltest.NewH200()
	calls := make([]atomic.Int64, len(m.GPUs))
	for i, g := range m.GPUs {
		g.SetProcesses()
		g.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			calls[i].Add(1)
			return nil, nvml.ERROR_NOT_FOUND
		}
	}
	m.GPUs[1].SetProcesses(nvml.ProcessInfo{Pid: 5, UsedGpuMemory: 1})
	c := New(m, zap.NewNop(), WithProcesses(true), WithShareInterval(5*time.Millisecond))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	for _, d := range c.Devices() {
		_, _ = d.Read()
	}
	require.Eventually(t, func() bool { return calls[1].Load() >= 4 }, 5*time.Second, time.Millisecond)
	require.NoError(t, c.Close(context.Background()))
	after := calls[1].Load()
	time.Sleep(30 * time.Millisecond)
	assert.Equal(t, after, calls[1].Load(), "no sample after Close")
	assert.Zero(t, calls[0].Load(), "a GPU without processes is not sampled")
}

func TestProcessesOffByDefault(t *testing.T) {
	m, c, _ := openH200(t)
	m.GPUs[0].SetProcesses(nvml.ProcessInfo{Pid: 1, UsedGpuMemory: 1})
	m.GPUs[0].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		t.Fatal("processes listed although not asked for")
		return nil, 0
	}
	s, err := c.Devices()[0].Read()
	require.NoError(t, err)
	assert.False(t, s.ProcessesListed)
}

func TestProcessUtilizationUnsupported(t *testing.T) {
	m, c := openWithProcesses(t)
	m.GPUs[2].SetProcesses(nvml.ProcessInfo{Pid: 1, UsedGpuMemory: 1})
	m.GPUs[2].GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	s, err := c.Devices()[2].Read()
	require.NoError(t, err)
	p := procByPID(s)[1]
	assert.True(t, p.MemoryBytes().OK)
	assert.False(t, p.SMUtil.OK)
}
