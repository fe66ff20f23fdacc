//go:build cgo

package nvmlclient

import (
	"context"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/collect"
	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// orderMachine is an H200 machine on which every collector has work, and
// those that once shared state meet: GPM with the general utilization, a
// GPU in MIG mode (GPM per GPU instance, no whole-GPU utilization), and a
// MIG device whose own process list does not answer, so that the parent's
// list does.
func orderMachine() *nvmltest.Machine {
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(nvml.ProcessInfo{Pid: 7, UsedGpuMemory: 3 << 30})
	m.GPUs[0].AddProcessSamples(nvml.ProcessUtilizationSample{Pid: 7, TimeStamp: 1, SmUtil: 40, MemUtil: 10})
	migs := m.GPUs[1].EnableMIG(nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_2_SLICE)
	m.GPUs[1].SetProcesses(
		nvml.ProcessInfo{Pid: 10, UsedGpuMemory: 1 << 30, GpuInstanceId: uint32(migs[0].GPUInstanceID), ComputeInstanceId: uint32(migs[0].ComputeInstanceID)},
		nvml.ProcessInfo{Pid: 20, UsedGpuMemory: 2 << 30, GpuInstanceId: uint32(migs[1].GPUInstanceID), ComputeInstanceId: uint32(migs[1].ComputeInstanceID)},
	)
	migs[1].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	m.GPUs[5].GPMOff = true // the general utilization from the sample window
	return m
}

// readInOrder opens orderMachine with each device's collectors put in the
// order perm gives, and reads every GPU a few times.
func readInOrder(t *testing.T, perm func(n int) []int) [][]sample.Sample {
	t.Helper()
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(orderMachine(), zap.NewNop(), WithProcesses(true), WithClock(clock.Now))
	require.NoError(t, c.Open(nil))
	defer c.Close(context.Background())
	for _, d := range c.Devices() {
		list := d.collectors.List
		d.collectors.List = make([]collect.Collector, len(list))
		for i, j := range perm(len(list)) {
			d.collectors.List[i] = list[j]
		}
	}
	c.PrimeAll() // priming runs in the same order
	var reads [][]sample.Sample
	for range 3 {
		clock.Advance(2 * time.Second) // within the counters' interval: no background read
		var round []sample.Sample
		for _, d := range c.Devices() {
			s, err := d.Read()
			require.NoError(t, err)
			round = append(round, s)
		}
		reads = append(reads, round)
	}
	return reads
}

// TestCollectorOrderCarriesNoData: no collector reads another's state or
// what another wrote into the Sample, so the list's order changes nothing.
func TestCollectorOrderCarriesNoData(t *testing.T) {
	identity := func(n int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = i
		}
		return p
	}
	want := readInOrder(t, identity)
	require.Len(t, want[2][1].MIG, 2)
	require.NotNil(t, want[2][0].GPM, "the machine exercises GPM")
	require.True(t, want[2][0].Utilization[sample.EngineGeneral].OK)
	require.Len(t, want[2][1].MIG[1].Processes, 1, "and the parent's list for a MIG device")

	reversed := func(n int) []int { p := identity(n); slices.Reverse(p); return p }
	assert.Equal(t, want, readInOrder(t, reversed), "collectors in reverse")
	for seed := range uint64(3) {
		shuffled := func(n int) []int { return rand.New(rand.NewPCG(seed, 26)).Perm(n) }
		assert.Equal(t, want, readInOrder(t, shuffled), "collectors shuffled (seed %d)", seed)
	}
}
