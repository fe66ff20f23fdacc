//go:build cgo

package nvmlclient

import (
	"context"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/guard"
	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

func TestMIGInventoryH100(t *testing.T) {
	m := nvmltest.NewH100()
	migs := m.GPUs[0].EnableMIG(nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	c := New(m, zap.NewNop())
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	inv := c.Inventory()
	require.Len(t, inv.MIGDevices, 2)
	assert.Equal(t, sample.MIGInfo{UUID: migs[0].UUID, ParentUUID: nvmltest.UUID(0), GPUInstanceID: uint32(migs[0].GPUInstanceID),
		ComputeInstanceID: uint32(migs[0].ComputeInstanceID), Profile: "1g.10gb", PlacementOK: true}, inv.MIGDevices[0])
	assert.Equal(t, "3g.40gb", inv.MIGDevices[1].Profile)
	assert.Equal(t, nvmltest.UUID(0), inv.MIGDevices[1].ParentUUID)
	assert.Len(t, inv.Devices, 8, "the parents stay")
}

func TestMIGInventoryA100(t *testing.T) {
	m := nvmltest.NewA100()
	m.GPUs[5].EnableMIG(nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_2_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	c := New(m, zap.NewNop())
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	var profiles []string
	for _, mi := range c.Inventory().MIGDevices {
		assert.Equal(t, nvmltest.UUID(5), mi.ParentUUID)
		profiles = append(profiles, mi.Profile)
	}
	assert.Equal(t, []string{"3g.20gb", "2g.10gb", "1g.5gb"}, profiles)
}

func TestMIGRead(t *testing.T) {
	m := nvmltest.NewH200()
	migs := m.GPUs[1].EnableMIG(nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_2_SLICE)
	m.GPUs[1].SetProcesses(
		nvml.ProcessInfo{Pid: 10, UsedGpuMemory: 1 << 30, GpuInstanceId: uint32(migs[0].GPUInstanceID), ComputeInstanceId: uint32(migs[0].ComputeInstanceID)},
		nvml.ProcessInfo{Pid: 20, UsedGpuMemory: 2 << 30, GpuInstanceId: uint32(migs[1].GPUInstanceID), ComputeInstanceId: uint32(migs[1].ComputeInstanceID)},
	)
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(m, zap.NewNop(), WithProcesses(true), WithClock(clock.Now))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	clock.Advance(10 * time.Second)
	s, err := c.Devices()[1].Read()
	require.NoError(t, err)
	require.Len(t, s.MIG, 2)
	assert.False(t, s.Utilization[sample.EngineGeneral].OK, "no whole-GPU utilization in MIG mode")
	assert.True(t, s.MemoryTotalBytes.OK, "the parent keeps what NVML gives in MIG mode")

	mi := s.MIG[1]
	assert.Equal(t, migs[1].UUID, mi.Info.UUID)
	assert.Equal(t, some(migs[1].Memory.Used), mi.MemoryUsedBytes)
	require.Len(t, mi.Processes, 1)
	assert.Equal(t, uint32(20), mi.Processes[0].PID)
	require.NotNil(t, mi.GPM, "GPM per GPU instance")
	assert.True(t, mi.GPM.Activity[sample.GPMSMActivity].OK)
	assert.Equal(t, uint32(10), s.MIG[0].Processes[0].PID)
}

func TestMIGProfileIDIsNotTheIndex(t *testing.T) {
	// On Hopper the 1g profile has id 19 at index 0: the id must be searched.
	m := nvmltest.NewH200()
	g := m.GPUs[0]
	g.EnableMIG(nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_7_SLICE)
	byIndex := g.GetGpuInstanceProfileInfoFunc
	g.GetGpuInstanceProfileInfoFunc = func(i int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
		p, ret := byIndex(i)
		p.Id += 19
		return p, ret
	}
	for gi := range g.GpuInstances {
		gi.Info.ProfileId += 19
	}
	c := New(m, zap.NewNop())
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	var profiles []string
	for _, mi := range c.Inventory().MIGDevices {
		profiles = append(profiles, mi.Profile)
	}
	assert.Equal(t, []string{"1g.18gb", "7g.141gb"}, profiles)
}

func TestMIGProfileWithoutPrivilege(t *testing.T) {
	m := nvmltest.NewH200()
	g := m.GPUs[0]
	g.EnableMIG(nvml.GPU_INSTANCE_PROFILE_2_SLICE)
	g.GetGpuInstanceByIdFunc = func(int) (nvml.GpuInstance, nvml.Return) { return nil, nvml.ERROR_NO_PERMISSION }
	c := New(m, zap.NewNop())
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	assert.Equal(t, "2g.35gb", c.Inventory().MIGDevices[0].Profile, "from the MIG device's own attributes")
	assert.False(t, c.Inventory().MIGDevices[0].PlacementOK, "the GPU instance's placement is unknown")
}

// NVIDIA's DRA driver names a MIG device by its GPU instance's profile id
// and placement start: they are read at inventory, once per MIG device.
func TestMIGPlacement(t *testing.T) {
	m := nvmltest.NewH200()
	g := m.GPUs[2]
	migs := g.EnableMIGInstances(
		nvmltest.MIGInstance{Profile: nvml.GPU_INSTANCE_PROFILE_1_SLICE, ComputeInstances: 1, Placement: &nvml.GpuInstancePlacement{Start: 3, Size: 1}},
		nvmltest.MIGInstance{Profile: nvml.GPU_INSTANCE_PROFILE_3_SLICE, ComputeInstances: 2, Placement: &nvml.GpuInstancePlacement{Start: 4, Size: 4}},
	)
	// On Hopper the GPU instance profile ids are not the indices (1g: 19).
	byIndex := g.GetGpuInstanceProfileInfoFunc
	g.GetGpuInstanceProfileInfoFunc = func(i int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
		p, ret := byIndex(i)
		p.Id += 19
		return p, ret
	}
	for gi := range g.GpuInstances {
		gi.Info.ProfileId += 19
	}
	var instanceReads int
	byID := g.GetGpuInstanceByIdFunc
	g.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) { instanceReads++; return byID(id) }
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(m, zap.NewNop(), WithClock(clock.Now))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())

	type placement struct {
		uuid      string
		profile   string
		id, start uint32
		ok        bool
	}
	var got []placement
	for _, mi := range c.Inventory().MIGDevices {
		got = append(got, placement{mi.UUID, mi.Profile, mi.GIProfileID, mi.PlacementStart, mi.PlacementOK})
	}
	p1 := uint32(nvml.GPU_INSTANCE_PROFILE_1_SLICE) + 19
	p3 := uint32(nvml.GPU_INSTANCE_PROFILE_3_SLICE) + 19
	assert.Equal(t, []placement{
		{migs[0].UUID, "1g.18gb", p1, 3, true},
		{migs[1].UUID, "3g.71gb", p3, 4, true},
		{migs[2].UUID, "3g.71gb", p3, 4, true}, // the GPU instance's second compute instance
	}, got)
	reads := instanceReads
	assert.Equal(t, 3, reads, "one read per MIG device")
	for range 10 { // past a relisting of the layout (migRelist)
		clock.Advance(10 * time.Second)
		_, err := c.Devices()[2].Read()
		require.NoError(t, err)
	}
	assert.Equal(t, reads, instanceReads, "not read again at each scrape, nor at a relisting that finds the same devices")
	s, err := c.Devices()[2].Read()
	require.NoError(t, err)
	require.Len(t, s.MIG, 3)
	assert.Equal(t, uint32(3), s.MIG[0].Info.PlacementStart, "the sample carries it")
}

func TestMIGInstanceMemoryAndGPMReadOnce(t *testing.T) {
	// One 3g GPU instance with two compute instances, and a 1g one: NVML
	// answers the 3g instance's memory on both of its MIG devices.
	m := nvmltest.NewH100()
	migs := m.GPUs[0].EnableMIGInstances(
		nvmltest.MIGInstance{Profile: nvml.GPU_INSTANCE_PROFILE_3_SLICE, ComputeInstances: 2},
		nvmltest.MIGInstance{Profile: nvml.GPU_INSTANCE_PROFILE_1_SLICE, ComputeInstances: 1},
	)
	require.Len(t, migs, 3)
	require.Equal(t, migs[0].GPUInstanceID, migs[1].GPUInstanceID, "two compute instances in one GPU instance")
	require.NotEqual(t, migs[0].ComputeInstanceID, migs[1].ComputeInstanceID)
	memoryReads := 0
	for _, md := range migs[:2] {
		get := md.GetMemoryInfo_v2Func
		md.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { memoryReads++; return get() }
	}
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(m, zap.NewNop(), WithClock(clock.Now))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	clock.Advance(10 * time.Second)
	s, err := c.Devices()[0].Read()
	require.NoError(t, err)
	require.Len(t, s.MIG, 3)

	first, second, other := s.MIG[0], s.MIG[1], s.MIG[2]
	assert.True(t, first.FirstInInstance)
	assert.Equal(t, some(migs[0].Memory.Used), first.MemoryUsedBytes)
	assert.Equal(t, some(migs[0].Memory.Total), first.MemoryTotalBytes)
	assert.NotNil(t, first.GPM, "the GPU instance's GPM on its first MIG device")

	assert.False(t, second.FirstInInstance)
	assert.False(t, second.MemoryUsedBytes.OK, "the instance's memory is not counted a second time")
	assert.False(t, second.MemoryTotalBytes.OK)
	assert.Nil(t, second.GPM, "nor its GPM")
	assert.Equal(t, 1, memoryReads, "one memory read per GPU instance")

	assert.True(t, other.FirstInInstance, "a GPU instance with one compute instance")
	assert.Equal(t, some(migs[2].Memory.Used), other.MemoryUsedBytes)
}

// A panic in the driver's GPM call while priming a MIG GPU is recovered,
// and leaves the session's GPM gate free: the other GPUs keep their GPM and
// never wait on it.
func TestMIGGPMPanicReleasesTheGate(t *testing.T) {
	m := nvmltest.NewH100()
	g := m.GPUs[0]
	g.EnableMIG(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	g.GpmMigSampleGetFunc = func(int, nvml.GpmSample) nvml.Return { panic("nil sample from the driver") }
	c, clock, _ := openGPM(t, m)
	clock.Advance(time.Second)
	start := time.Now()
	s, err := c.Devices()[1].Read()
	assert.NoError(t, err)
	assert.NotNil(t, s.GPM, "GPU 1 keeps its GPM")
	assert.Less(t, time.Since(start), guard.GPMGateWait, "and does not wait on the gate")
}

// A MIG device's own process list that fails once (not a lasting "not
// supported" or "no permission") is asked again at the next read: an
// unprivileged collector, whose parent list is empty, keeps its MIG
// processes.
func TestMIGOwnProcessListRecoversFromATransientFailure(t *testing.T) {
	m := nvmltest.NewH200()
	migs := m.GPUs[1].EnableMIG(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	m.GPUs[1].SetProcesses(nvml.ProcessInfo{Pid: 10, UsedGpuMemory: 1 << 30,
		GpuInstanceId: uint32(migs[0].GPUInstanceID), ComputeInstanceId: uint32(migs[0].ComputeInstanceID)})
	m.GPUs[1].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NO_PERMISSION }
	own, failures := migs[0].GetComputeRunningProcessesFunc, 1
	migs[0].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		if failures > 0 {
			failures--
			return nil, nvml.ERROR_UNKNOWN
		}
		return own()
	}
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(m, zap.NewNop(), WithProcesses(true), WithClock(clock.Now))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	for range 2 {
		clock.Advance(10 * time.Second)
		_, _ = c.Devices()[1].Read()
	}
	clock.Advance(10 * time.Second)
	s, _ := c.Devices()[1].Read()
	require.Len(t, s.MIG, 1)
	require.Len(t, s.MIG[0].Processes, 1)
	assert.Equal(t, uint32(10), s.MIG[0].Processes[0].PID)
}

// Issue 17, defect 4: a MIG device's own process list is a call of the
// read like any other. A panic in it fails that call alone (the MIG read
// goes on, the parent's list answers), it is timed, and a "not supported"
// answer is cached rather than asked at every read.
func TestMIGOwnProcessListGoesThroughTheRead(t *testing.T) {
	m := nvmltest.NewH200()
	migs := m.GPUs[1].EnableMIG(nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	m.GPUs[1].SetProcesses(nvml.ProcessInfo{Pid: 10, UsedGpuMemory: 1 << 30,
		GpuInstanceId: uint32(migs[1].GPUInstanceID), ComputeInstanceId: uint32(migs[1].ComputeInstanceID)})
	panics := 0
	migs[0].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { panics++; panic("driver bug") }
	asked := 0
	migs[1].GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		asked++
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(m, zap.NewNop(), WithProcesses(true), WithClock(clock.Now))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	clock.Advance(time.Second)
	s, err := c.Devices()[1].Read()
	require.ErrorContains(t, err, "panic")
	require.Len(t, s.MIG, 2, "the panic fails one call, not the MIG read")
	assert.True(t, s.MIG[1].MemoryUsedBytes.OK)
	require.Len(t, s.MIG[1].Processes, 1, "the parent's list answers for an unsupported own list")
	assert.Equal(t, uint32(10), s.MIG[1].Processes[0].PID)
	clock.Advance(time.Second)
	_, _ = c.Devices()[1].Read()
	// Cached for the GPU: its MIG devices share the driver's answer.
	assert.Equal(t, 1, asked, "not supported is cached")
	assert.Equal(t, 1, panics)
	timed := false
	for _, st := range c.CallStats() {
		timed = timed || st.Call == call.MIGProcesses.String() && st.Count == 2
	}
	assert.True(t, timed, "the own lists are timed: %v", c.CallStats())
}

// migUUIDs lists the MIG devices of a sample.
func migUUIDs(s sample.Sample) []string {
	var out []string
	for _, m := range s.MIG {
		out = append(out, m.Info.UUID)
	}
	return out
}

// relayout destroys GPU g's MIG device gone (its calls answer NOT_FOUND,
// as NVML's do for a destroyed instance), creates one 1g instance, and
// lists kept and the new one as the GPU's MIG devices; it returns the new
// one.
func relayout(g *nvmltest.GPU, kept, gone *nvmltest.MIGDevice) *nvmltest.MIGDevice {
	gone.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_NOT_FOUND }
	gone.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_FOUND }
	added := g.EnableMIG(nvml.GPU_INSTANCE_PROFILE_1_SLICE)[0]
	layout := []*nvmltest.MIGDevice{kept, added}
	g.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(layout) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return layout[i], nvml.SUCCESS
	}
	return added
}

// Issue 23, part 5: MIG instances created or destroyed without a driver
// reload are found, the layout being read again every migRelist: a new
// MIG device appears with its GPM, a destroyed one is no longer read, and
// the one that stays keeps its GPM window.
func TestMIGLayoutReadAgainOnASchedule(t *testing.T) {
	m := nvmltest.NewH200()
	g := m.GPUs[1]
	migs := g.EnableMIG(nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_2_SLICE)
	c, clock, _ := openGPM(t, m)
	d := c.Devices()[1]
	clock.Advance(10 * time.Second)
	s, err := d.Read()
	require.NoError(t, err)
	assert.Equal(t, []string{migs[0].UUID, migs[1].UUID}, migUUIDs(s))

	added := relayout(g, migs[0], migs[1])
	// The gone device still answers: only the schedule finds the change.
	memory := migs[1].Memory
	migs[1].GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return memory, nvml.SUCCESS }
	clock.Advance(10 * time.Second)
	s, err = d.Read()
	require.NoError(t, err)
	assert.Equal(t, []string{migs[0].UUID, migs[1].UUID}, migUUIDs(s), "before the schedule: the old layout")
	clock.Advance(time.Minute) // migRelist
	s, err = d.Read()
	require.NoError(t, err)
	assert.Equal(t, []string{migs[0].UUID, added.UUID}, migUUIDs(s), "the new layout")
	require.NotNil(t, s.MIG[0].GPM, "the device that stays keeps its GPM window")
	assert.Nil(t, s.MIG[1].GPM, "the new device's GPM starts its window")
	assert.Equal(t, some(added.Memory.Used), s.MIG[1].MemoryUsedBytes)
	var inv []string
	for _, mi := range c.Inventory().MIGDevices {
		inv = append(inv, mi.UUID)
	}
	assert.Equal(t, []string{migs[0].UUID, added.UUID}, inv)
	clock.Advance(10 * time.Second)
	s, err = d.Read()
	require.NoError(t, err)
	assert.NotNil(t, s.MIG[1].GPM, "and has a window at the next read")
}

// A MIG device whose call answers NOT_FOUND (destroyed) leaves the sample
// at once, without a failure, and the layout is read again at the next read,
// before the schedule.
func TestMIGLayoutReadAgainOnAFailure(t *testing.T) {
	m := nvmltest.NewH200()
	g := m.GPUs[1]
	migs := g.EnableMIG(nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_2_SLICE)
	c, clock, _ := openGPM(t, m)
	d := c.Devices()[1]
	clock.Advance(10 * time.Second)
	_, err := d.Read()
	require.NoError(t, err)
	added := relayout(g, migs[0], migs[1])
	clock.Advance(10 * time.Second)
	s, err := d.Read()
	require.NoError(t, err, "a destroyed MIG device is no failure")
	assert.Equal(t, []string{migs[0].UUID}, migUUIDs(s), "the destroyed device is not reported")
	clock.Advance(10 * time.Second)
	s, err = d.Read()
	require.NoError(t, err)
	assert.Equal(t, []string{migs[0].UUID, added.UUID}, migUUIDs(s), "read again at once")
}
