//go:build cgo

package nvmlclient

import (
	"context"
	"math"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmltest"
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

func procByPID(s Sample) map[uint32]Process {
	out := map[uint32]Process{}
	for _, p := range s.Processes {
		out[p.PID] = p
	}
	return out
}

func TestProcessWindowFold(t *testing.T) {
	w := processWindow{lastSeen: 100}
	got := w.fold([]nvml.ProcessUtilizationSample{
		{Pid: 7, TimeStamp: 300, SmUtil: 60},
		{Pid: 7, TimeStamp: 90, SmUtil: 100}, // older than the last seen: counted before
		{Pid: 7, TimeStamp: 200, SmUtil: 40}, // out of order
		{Pid: 9, TimeStamp: 250, SmUtil: 10, MemUtil: 4, EncUtil: 2, DecUtil: 1},
	})
	assert.Equal(t, uint64(300), w.lastSeen)
	assert.InDelta(t, 50, got[7].sm, 1e-9)
	assert.Equal(t, utilSum{sm: 10, mem: 4, enc: 2, dec: 1, n: 1}, got[9])
	assert.Empty(t, w.fold(nil), "empty window")
	assert.Equal(t, uint64(300), w.lastSeen)
}

func TestReadProcesses(t *testing.T) {
	m, c := openWithProcesses(t)
	g := m.GPUs[0]
	g.SetProcesses(
		nvml.ProcessInfo{Pid: 100, UsedGpuMemory: 4 << 30, GpuInstanceId: NoInstance, ComputeInstanceId: NoInstance},
		nvml.ProcessInfo{Pid: 200, UsedGpuMemory: math.MaxUint64, GpuInstanceId: NoInstance, ComputeInstanceId: NoInstance},
	)
	g.GraphicsProcs = []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 20}}
	g.AddProcessSamples(
		nvml.ProcessUtilizationSample{Pid: 100, TimeStamp: 10, SmUtil: 30},
		nvml.ProcessUtilizationSample{Pid: 100, TimeStamp: 20, SmUtil: 50, MemUtil: 10},
	)
	s, err := c.Devices()[0].Read()
	require.NoError(t, err)
	require.True(t, s.ProcessesListed)
	procs := procByPID(s)
	require.Len(t, procs, 2)
	p := procs[100]
	assert.True(t, p.Compute && p.Graphics)
	assert.Equal(t, some(uint64(4<<30+1<<20)), p.MemoryBytes())
	assert.InDelta(t, 0.40, p.SMUtil.Value, 1e-9)
	assert.InDelta(t, 0.05, p.MemoryControllerUtil.Value, 1e-9)
	assert.False(t, procs[200].MemoryBytes().OK, "NVML_VALUE_NOT_AVAILABLE")
	assert.Equal(t, some(0.0), procs[200].SMUtil, "listed without a sample: idle")

	// No new sample (NOT_FOUND): every process reads idle, none is lost.
	s, err = c.Devices()[0].Read()
	require.NoError(t, err)
	assert.Equal(t, some(0.0), procByPID(s)[100].SMUtil)

	// Only samples after the previous read count.
	g.AddProcessSamples(nvml.ProcessUtilizationSample{Pid: 100, TimeStamp: 30, SmUtil: 90})
	s, err = c.Devices()[0].Read()
	require.NoError(t, err)
	assert.InDelta(t, 0.90, procByPID(s)[100].SMUtil.Value, 1e-9)
}

func TestProcessWindowStartsAtOpen(t *testing.T) {
	m := nvmltest.NewH200()
	m.GPUs[1].SetProcesses(nvml.ProcessInfo{Pid: 5, UsedGpuMemory: 1})
	m.GPUs[1].AddProcessSamples(nvml.ProcessUtilizationSample{Pid: 5, TimeStamp: 10, SmUtil: 100})
	c := New(m, zap.NewNop(), WithProcesses(true))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	m.GPUs[1].AddProcessSamples(nvml.ProcessUtilizationSample{Pid: 5, TimeStamp: 20, SmUtil: 20})
	s, err := c.Devices()[1].Read()
	require.NoError(t, err)
	assert.InDelta(t, 0.20, procByPID(s)[5].SMUtil.Value, 1e-9, "the buffer before Open is not counted")
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

func FuzzProcessWindowFold(f *testing.F) {
	f.Add(uint64(5), []byte{1, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 50, 0, 0, 0})
	f.Fuzz(func(t *testing.T, lastSeen uint64, data []byte) {
		var samples []nvml.ProcessUtilizationSample
		for len(data) >= 16 {
			samples = append(samples, nvml.ProcessUtilizationSample{
				Pid:       uint32(data[0]),
				TimeStamp: uint64(data[4]) | uint64(data[5])<<8 | uint64(data[6])<<16,
				SmUtil:    uint32(data[12]), MemUtil: uint32(data[13]), EncUtil: uint32(data[14]), DecUtil: uint32(data[15]),
			})
			data = data[16:]
		}
		w := processWindow{lastSeen: lastSeen}
		for pid, u := range w.fold(samples) {
			if u.n == 0 || u.sm < 0 || u.sm > 255 || math.IsNaN(u.sm) {
				t.Fatalf("pid %d: bad mean %+v", pid, u)
			}
		}
		if w.lastSeen < lastSeen {
			t.Fatal("window moved backwards")
		}
	})
}
