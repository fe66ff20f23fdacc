//go:build cgo

package nvmlclient

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

func mpsInfo(pid uint32, bytes uint64) nvml.ProcessInfo {
	return nvml.ProcessInfo{Pid: pid, UsedGpuMemory: bytes, GpuInstanceId: sample.NoInstance, ComputeInstanceId: sample.NoInstance}
}

// As on the H200 (driver 580): the compute list holds the server and the
// clients, the MPS list the clients, and process utilization the server
// alone at 95-100 % SM. The clients are marked, the server too, and no
// client reads a measured 0: its utilization and busy share are absent.
func TestMPSClientsAndServer(t *testing.T) {
	m, c := openWithProcesses(t)
	g := m.GPUs[0]
	g.SetMPS(mpsInfo(10, 66<<20), mpsInfo(11, 1128<<20), mpsInfo(12, 516<<20))
	g.AddProcessSamples(nvml.ProcessUtilizationSample{Pid: 10, TimeStamp: usNow(time.Second), SmUtil: 97})
	s, err := c.Devices()[0].Read()
	require.NoError(t, err)
	procs := procByPID(s)
	require.Len(t, procs, 3)
	server := procs[10]
	assert.Equal(t, sample.MPSServer, server.MPS)
	assert.InDelta(t, 0.97, server.SMUtil.Value, 1e-9, "the server's sample stays the server's")
	assert.Equal(t, some(1.0), server.BusyShare)
	for _, pid := range []uint32{11, 12} {
		p := procs[pid]
		assert.Equal(t, sample.MPSClient, p.MPS, "pid %d", pid)
		assert.False(t, p.SMUtil.OK, "a client's utilization is not observable: absent, not 0")
		assert.False(t, p.MemoryControllerUtil.OK)
		assert.False(t, p.BusyShare.OK, "a client's busy share is not observable: absent, not 0")
		assert.True(t, p.MemoryBytes().OK, "its memory is its own")
	}
	assert.Equal(t, some(uint64(1128<<20)), procs[11].MemoryBytes())
}

// A plain process beside MPS: two processes are not clients, so the list
// alone cannot say which is the server (the receiver knows it by name);
// the plain one keeps its own readings.
func TestMPSBesideAPlainProcess(t *testing.T) {
	m, c := openWithProcesses(t)
	g := m.GPUs[0]
	g.SetMPS(mpsInfo(10, 66<<20), mpsInfo(11, 1<<30))
	g.ComputeProcs = append(g.ComputeProcs, mpsInfo(20, 2<<30))
	g.AddProcessSamples(
		nvml.ProcessUtilizationSample{Pid: 10, TimeStamp: usNow(time.Second), SmUtil: 60},
		nvml.ProcessUtilizationSample{Pid: 20, TimeStamp: usNow(time.Second), SmUtil: 40},
	)
	s, err := c.Devices()[0].Read()
	require.NoError(t, err)
	procs := procByPID(s)
	assert.Equal(t, sample.MPSClient, procs[11].MPS)
	assert.Equal(t, sample.MPSNone, procs[10].MPS, "ambiguous by the lists alone")
	assert.Equal(t, sample.MPSNone, procs[20].MPS)
	assert.InDelta(t, 0.4, procs[20].BusyShare.Value, 1e-9)
	assert.False(t, procs[11].BusyShare.OK)
}

// A driver that does not support the MPS list: asked once, cached, and no
// process is marked; the processes are still listed.
func TestMPSListUnsupportedIsCached(t *testing.T) {
	m, c := openWithProcesses(t)
	g := m.GPUs[0]
	g.SetMPS(mpsInfo(10, 66<<20), mpsInfo(11, 1<<30))
	calls := 0
	g.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		calls++
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	d := c.Devices()[0]
	for range 3 {
		s, err := d.Read()
		require.NoError(t, err)
		require.True(t, s.ProcessesListed)
		require.Len(t, s.Processes, 2)
		for _, p := range s.Processes {
			assert.Equal(t, sample.MPSNone, p.MPS)
		}
	}
	assert.Equal(t, 1, calls, "not supported is cached, as for every call")
}

// A failed MPS list drops the processes for the read, as any failed list:
// a client taken for a plain process would read a measured 0.
func TestMPSListFailureDropsTheList(t *testing.T) {
	m, c := openWithProcesses(t)
	g := m.GPUs[0]
	g.SetMPS(mpsInfo(10, 66<<20), mpsInfo(11, 1<<30))
	g.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_UNKNOWN }
	s, _ := c.Devices()[0].Read()
	assert.False(t, s.ProcessesListed)
	assert.Empty(t, s.Processes)
}

// MIG devices with MPS: each MIG device's own MPS list marks its clients.
func TestMPSOnMIGDevices(t *testing.T) {
	m, c := openWithProcesses(t)
	g := m.GPUs[0]
	migs := g.EnableMIG(nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	require.NoError(t, c.Close(t.Context()))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	on := func(pid uint32, mig *nvmltest.MIGDevice) nvml.ProcessInfo {
		return nvml.ProcessInfo{Pid: pid, UsedGpuMemory: 1 << 20, GpuInstanceId: uint32(mig.GPUInstanceID), ComputeInstanceId: uint32(mig.ComputeInstanceID)}
	}
	g.SetMPS(on(10, migs[0]), on(11, migs[0]), on(12, migs[0]))
	g.ComputeProcs = append(g.ComputeProcs, on(20, migs[1]))
	s, err := c.Devices()[0].Read()
	require.NoError(t, err)
	require.Len(t, s.MIG, 2)
	roles := map[uint32]sample.MPSRole{}
	for _, ms := range s.MIG {
		for _, p := range ms.Processes {
			roles[p.PID] = p.MPS
		}
	}
	assert.Equal(t, map[uint32]sample.MPSRole{10: sample.MPSServer, 11: sample.MPSClient, 12: sample.MPSClient, 20: sample.MPSNone}, roles)
}

func TestMPSCallInTable(t *testing.T) {
	assert.Equal(t, "nvmlDeviceGetMPSComputeRunningProcesses", call.MPSProcesses.String())
}
