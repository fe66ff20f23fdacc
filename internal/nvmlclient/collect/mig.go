//go:build cgo

package collect

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/raw"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"go.uber.org/zap"
)

// A GPU in MIG mode is cut into GPU instances (memory and SM slices), each
// hosting one or more compute instances; every compute instance is a MIG
// device. Each MIG device is reported as its own resource, with the parent
// GPU's UUID beside its own; processes land on the MIG device whose
// instance ids they carry.
//
// Memory and GPM belong to the GPU instance: every MIG device of one GPU
// instance answers the same readings. They are read once per GPU instance,
// on the MIG device of its lowest compute instance id (the instance's
// "first" device), and left absent on the others, so that a sum over MIG
// devices counts each GPU instance's memory once.

// migCollector reads the MIG devices of a GPU in MIG mode.
type migCollector struct {
	processes bool // WithProcesses
	devices   []*migDevice
	// mu guards devices against Inventory: the reads that change
	// devices run under the device's use.
	mu sync.Mutex
	// listedAt is when the layout was last read, by the device clock;
	// stale says a MIG device answered as destroyed since.
	listedAt time.Time
	stale    bool
	// retired holds the GPM samples of MIG devices gone while the
	// GPM gate was held: freed at Close.
	retired []*migDevice
}

// migDevice is one MIG device of a Device, touched only under its device's use (guard/use.go).
type migDevice struct {
	info   sample.MIGInfo
	handle nvml.Device
	raw    raw.Device // the C handle, for the bounded list calls
	gpm    gpmState   // per GPU instance, on the first MIG device of it only
	// first marks the GPU instance's lowest compute instance: the MIG
	// device that reads the instance's memory and GPM.
	first bool
}

// migRelist is how often a GPU's MIG layout is read again: GPU and
// compute instances are created and destroyed without a driver reload
// (nvidia-smi mig -cgi, -dgi), and a MIG device that answers as destroyed
// has the layout read again at the next read. A listing is a few calls of
// <0.05 ms per MIG slot, a GPU not in MIG mode one call.
const migRelist = time.Minute

// baseline lists the MIG devices of a GPU in MIG mode, and starts the GPM
// of their GPU instances where the GPU has GPM (call.GPMPlan). A GPU not in
// MIG mode, or a driver without MIG, has none.
func (mc *migCollector) baseline(d *call.GPU) {
	mc.relist(d)
}

// relist reads the GPU's MIG layout and makes it the collector's: a MIG
// device still there keeps its state (its GPM window), a new one is
// looked up and starts its GPM, the GPM of one gone is freed. A layout
// that cannot be read keeps the last one (none at the baselines: the GPU is
// reported as a whole), until the next listing.
func (mc *migCollector) relist(d *call.GPU) {
	mc.listedAt, mc.stale = d.Plan.Now(), false
	defer func() {
		if p := recover(); p != nil {
			d.LogOnce("mig-panic", func(l *zap.Logger) {
				l.Warn("Cannot list MIG devices; the last layout stands (at start: the GPU is reported as a whole)", zap.Any("panic", p))
			})
		}
	}()
	found, ok := mc.list(d)
	if !ok {
		return
	}
	known := map[string]*migDevice{}
	for _, m := range mc.devices {
		known[m.info.UUID] = m
	}
	changed := len(found) != len(mc.devices)
	for i, f := range found {
		if m, ok := known[f.info.UUID]; ok && m.info.GPUInstanceID == f.info.GPUInstanceID &&
			m.info.ComputeInstanceID == f.info.ComputeInstanceID {
			m.handle = f.handle
			found[i] = m
			delete(known, f.info.UUID)
			continue
		}
		changed = true
		migPlacement(d, f.handle, &f.info)
		if raw, ret := d.Session.Raw.Device(f.info.UUID); ret == nvml.SUCCESS {
			f.raw = raw
		}
	}
	for _, m := range known {
		mc.retire(d, m)
	}
	markFirstInInstance(found)
	if !changed {
		mc.setDevices(found)
		return
	}
	for _, m := range found {
		switch {
		case !m.first:
			mc.retire(d, m) // no longer its instance's first
		case !m.gpm.supported && !m.gpm.pending && d.Plan.GPM.HasGPM:
			m.gpm.pending = true
			m.gpm.startGated(d, migSampleGet(d, m), m.info.UUID)
		}
	}
	mc.setDevices(found)
	d.Logger.Info("GPU is in MIG mode", zap.Int("mig_devices", len(found)))
}

// setDevices makes devices the collector's.
func (mc *migCollector) setDevices(devices []*migDevice) {
	mc.mu.Lock()
	mc.devices = devices
	mc.mu.Unlock()
}

// count is how many MIG devices the GPU has.
func (mc *migCollector) count() int {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return len(mc.devices)
}

// infos lists the MIG devices, for Inventory.
func (mc *migCollector) infos() []sample.MIGInfo {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	out := make([]sample.MIGInfo, 0, len(mc.devices))
	for _, m := range mc.devices {
		out = append(out, m.info)
	}
	return out
}

// retire frees m's GPM samples under the GPM gate, as any GPM call; while
// another GPU holds the gate past its allowance they wait for Close.
func (mc *migCollector) retire(d *call.GPU, m *migDevice) {
	if m.gpm.prev == nil && m.gpm.cur == nil {
		m.gpm.pending = false
		return
	}
	gate := d.Session.GPM.Enter()
	if gate == nil {
		mc.retired = append(mc.retired, m)
		return
	}
	defer gate.Leave()
	m.gpm.free()
}

// list reads the GPU's MIG devices; ok is false when the layout could not
// be read (the count failed, or the driver's call panicked).
func (mc *migCollector) list(d *call.GPU) (found []*migDevice, ok bool) {
	sym := d.Symbols
	if !sym.MIG {
		return nil, true
	}
	if mode, _, ret := d.Handle.GetMigMode(); ret != nvml.SUCCESS || mode != nvml.DEVICE_MIG_ENABLE {
		return nil, true
	}
	n, ret := d.Handle.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		d.LogOnce("mig-count", func(l *zap.Logger) {
			l.Warn("GPU is in MIG mode but its MIG devices cannot be counted", zap.String("nvml.return", ret.Error()))
		})
		return nil, false
	}
	for i := 0; i < n; i++ {
		h, ret := d.Handle.GetMigDeviceHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue // an empty slot
		}
		uuid, ret := h.GetUUID()
		if ret != nvml.SUCCESS {
			continue
		}
		gi, ret1 := h.GetGpuInstanceId()
		ci, ret2 := h.GetComputeInstanceId()
		if ret1 != nvml.SUCCESS || ret2 != nvml.SUCCESS {
			continue
		}
		found = append(found, &migDevice{handle: h, info: sample.MIGInfo{UUID: uuid, ParentUUID: d.UUID,
			GPUInstanceID: uint32(gi), ComputeInstanceID: uint32(ci)}})
	}
	return found, true
}

// migGone says a MIG device's call answered as NVML does for a destroyed
// instance.
func migGone(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT
}

// migSampleGet takes a GPM sample of m's GPU instance.
func migSampleGet(d *call.GPU, m *migDevice) func(nvml.GpmSample) nvml.Return {
	gi := int(m.info.GPUInstanceID)
	return func(smp nvml.GpmSample) nvml.Return { return d.Handle.GpmMigSampleGet(gi, smp) }
}

// markFirstInInstance marks, in each GPU instance, the MIG device with the
// lowest compute instance id.
func markFirstInInstance(migs []*migDevice) {
	first := map[uint32]*migDevice{}
	for _, m := range migs {
		if f, ok := first[m.info.GPUInstanceID]; !ok || m.info.ComputeInstanceID < f.info.ComputeInstanceID {
			first[m.info.GPUInstanceID] = m
		}
	}
	for _, m := range migs {
		m.first = first[m.info.GPUInstanceID] == m
	}
}

// migPlacement reads, once per MIG device, its profile's name as
// nvidia-smi writes it ("<slices>g.<GiB>gb") and its GPU instance's profile
// id and placement start. The GPU instance's info is exact but needs a
// privileged caller; without it the profile is named from the MIG
// device's own attributes, which need none, and the placement is unknown.
func migPlacement(d *call.GPU, mig nvml.Device, info *sample.MIGInfo) {
	if gi, ret := d.Handle.GetGpuInstanceById(int(info.GPUInstanceID)); ret == nvml.SUCCESS {
		if gii, ret := gi.GetInfo(); ret == nvml.SUCCESS {
			info.GIProfileID, info.PlacementStart, info.PlacementOK = gii.ProfileId, gii.Placement.Start, true
			info.Profile = migProfileOfID(d, gii.ProfileId)
		}
	}
	if info.Profile != "" {
		return
	}
	if a, ret := mig.GetAttributes(); ret == nvml.SUCCESS && a.GpuInstanceSliceCount > 0 {
		info.Profile = migProfileName(a.GpuInstanceSliceCount, a.MemorySizeMB)
	}
}

// migProfileOfID names the GPU instance profile of id. Profiles are asked
// for by index, while a GPU instance carries the profile's id (on Hopper,
// 1g is id 19 at index 0), so the indices are searched for the id.
func migProfileOfID(d *call.GPU, id uint32) string {
	for i := 0; i < nvml.GPU_INSTANCE_PROFILE_COUNT; i++ {
		p, ret := d.Handle.GetGpuInstanceProfileInfo(i)
		if ret == nvml.SUCCESS && p.Id == id {
			return migProfileName(p.SliceCount, p.MemorySizeMB)
		}
	}
	return ""
}

// migProfileName rounds the memory up to whole GiB, which matches NVIDIA's
// names (4864 MiB: 1g.5gb; 40192 MiB: 7g.40gb; 144384 MiB: 7g.141gb).
func migProfileName(slices uint32, memoryMiB uint64) string {
	return fmt.Sprintf("%dg.%dgb", slices, uint64(math.Ceil(float64(memoryMiB)/1024)))
}

// read reads every MIG device of the GPU, and hands each the parent's
// processes that run on it.
//
// The layout is read again first when it is due (migRelist) or a MIG
// device answered as destroyed. A MIG device that answers so now is left
// out of the sample, without a failure: no series outlives its device.
func (mc *migCollector) read(r *reading, s *sample.Sample) {
	if mc.stale || r.GPU.Plan.Now().Sub(mc.listedAt) >= migRelist {
		mc.relist(r.GPU)
	}
	for _, m := range mc.devices {
		ms := sample.MIGSample{Info: m.info, FirstInInstance: m.first}
		var used, total, reserved sample.Opt[uint64]
		if m.first {
			ret, made := r.Call(call.MIGMemoryInfo, func() (ret nvml.Return) {
				used, total, reserved, ret = memoryOf(m.handle, r.GPU.Symbols.MemoryInfoV2)
				return ret
			})
			if made && migGone(ret) {
				mc.stale = true
				continue
			}
			if made && r.Result(call.MIGMemoryInfo, ret) {
				ms.MemoryUsedBytes, ms.MemoryTotalBytes, ms.MemoryReservedBytes = used, total, reserved
			}
		}
		switch {
		case m.gpm.pending:
			m.gpm.startGated(r.GPU, migSampleGet(r.GPU, m), m.info.UUID)
		case m.gpm.supported:
			ms.GPM = r.gpmWindow(&m.gpm, r.GPU.Plan.GPM.Requests, migSampleGet(r.GPU, m))
		}
		if mc.processes {
			var own, gone bool
			if ms.Processes, own, gone = r.migProcesses(m); gone {
				mc.stale = true
				continue
			} else if !own {
				r.fromParent = append(r.fromParent, len(s.MIG))
			}
		}
		s.MIG = append(s.MIG, ms)
	}
}

// migProcesses returns the processes on one MIG device from its own list.
// The parent's list carries every process with its instance ids, but only
// for a privileged caller; the MIG device's own list needs no privilege, so
// it is asked first, as any call of the read (timed, a panic its own
// failure, "not supported" or "no permission" cached for the GPU, whose MIG
// devices share the driver's answer, and asked again with a backoff).
// Where it gives nothing (own is false), the parent's list answers, joined
// by Read after every collector (joinParentProcesses). gone says the MIG
// device answered as destroyed.
func (r *reading) migProcesses(m *migDevice) (out []sample.Process, own, gone bool) {
	var infos []nvml.ProcessInfo
	ret, made := r.Call(call.MIGProcesses, func() (ret nvml.Return) {
		infos, ret = call.RunningProcesses(m.raw, m.handle, false)
		return ret
	})
	if made && migGone(ret) {
		return nil, false, true
	}
	// A plain failure is asked again at the next read, and costs nothing
	// meanwhile: the parent's list answers.
	if made && call.Classify(ret) != call.OutcomeFailed && r.Result(call.MIGProcesses, ret) {
		byPID := make(map[uint32]*sample.Process, len(infos))
		for _, in := range infos {
			out = append(out, sample.Process{PID: in.Pid, Compute: true, ComputeMemoryBytes: memoryOpt(in.UsedGpuMemory),
				GPUInstanceID: m.info.GPUInstanceID, ComputeInstanceID: m.info.ComputeInstanceID})
		}
		for i := range out {
			byPID[out[i].PID] = &out[i]
		}
		// MPS runs within a MIG device too: its own MPS list marks them.
		if !r.markMPS(m.raw, m.handle, byPID) {
			return nil, false, false
		}
		return out, true, false
	}
	return nil, false, false
}

// joinParentProcesses gives each MIG device of s listed in fromParent the
// processes of the parent's list that carry its instance ids. Its entries
// lack utilization, which NVML does not give in MIG mode.
func joinParentProcesses(s *sample.Sample, fromParent []int) {
	for _, i := range fromParent {
		ms := &s.MIG[i]
		for _, p := range s.Processes {
			if p.GPUInstanceID == ms.Info.GPUInstanceID && p.ComputeInstanceID == ms.Info.ComputeInstanceID {
				ms.Processes = append(ms.Processes, p)
			}
		}
	}
}
