//go:build cgo

// Package nvmltest builds deterministic NVML machines on go-nvml's mocks
// (mock/dgxh200 and friends) for tests: every getter the receiver calls is
// set, with values derived from the GPU index, and utilization samples come
// from a buffer the test appends to, as NVML's own ring buffer would.
//
// Only tests import this package.
package nvmltest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"go.uber.org/zap/zaptest/observer"
)

// Machine is a mock NVML with its GPUs.
type Machine struct {
	*server.Server
	GPUs []*GPU
	// Events feeds nvmlEventSetWait; EventSetsFreed counts nvmlEventSetFree.
	Events         chan nvml.EventData
	EventSetsFreed atomic.Int32
}

// GPU is one mock device and the values its getters return. Tests change
// the fields, or replace a ...Func on the embedded mock for special cases.
type GPU struct {
	*server.Device

	mu      sync.Mutex
	samples map[nvml.SamplingType][]nvml.Sample

	Serial       string
	Utilization  nvml.Utilization
	EncoderUtil  uint32
	DecoderUtil  uint32
	Memory       nvml.Memory_v2
	TemperatureC uint32
	// MemoryTemperatureC answers FI_DEV_MEMORY_TEMP; 0: the field is
	// NOT_SUPPORTED (a board without a memory sensor).
	MemoryTemperatureC uint32
	PowerMilliW        uint32
	LimitMilliW        uint32
	EnergyMilliJ       uint64
	ClockMHz           map[nvml.ClockType]uint32
	PState             nvml.Pstates
	FanPercent         uint32
	FanSupported       bool
	SamplesBroken      map[nvml.SamplingType]nvml.Return // forced GetSamples return per type

	// GPM values (percent, or MiB/s for traffic) by metric id, and forced
	// per-metric returns.
	GPMValues map[nvml.GpmMetricId]float64
	GPMErrors map[nvml.GpmMetricId]nvml.Return
	GPMOff    bool // GpmQueryDeviceSupport says no (Hopper and newer have GPM)

	// FieldErrors forces a field's own return code; FieldCalls counts
	// GetFieldValues calls. FieldValues answers any other field by id (an
	// unsigned long long), with no code per field; a field in neither, nor
	// among those with a getter above, is NOT_SUPPORTED.
	FieldErrors map[uint32]nvml.Return
	FieldValues map[uint32]uint64
	// NVLinks is how many links answer a per-link field (its ScopeId the
	// link), each with the same value; a scope past them answers
	// INVALID_ARGUMENT.
	NVLinks    uint32
	FieldCalls int

	// Getters answers the getter table (getters.go: every simple device
	// getter of nvml.h that has no field above) by key, the getter's name
	// or name(SELECTOR) (nvmlDeviceGetMaxClockInfo(SM)); a key not in it
	// answers DefaultGetters (getters.json), else NOT_SUPPORTED; NaN makes
	// it NOT_SUPPORTED.
	Getters map[string]float64

	// Health.
	ECCCorrected, ECCUncorrected    uint64
	RemappedCorr, RemappedUnc       int
	RemapPending, RemapFailed       bool
	ClockEventBits                  uint64
	ViolationNanos                  map[nvml.PerfPolicyType]uint64
	PCIeReplays, PCIeGen, PCIeWidth int

	ComputeProcs  []nvml.ProcessInfo
	GraphicsProcs []nvml.ProcessInfo
	// MPSProcs answers nvmlDeviceGetMPSComputeRunningProcesses: the MPS
	// clients among ComputeProcs (SetMPS).
	MPSProcs    []nvml.ProcessInfo
	procSamples []nvml.ProcessUtilizationSample
}

// UUID is the deterministic UUID of GPU i.
func UUID(i int) string { return fmt.Sprintf("GPU-00000000-0000-4000-8000-%012d", i) }

// NewH200 returns an 8-GPU DGX H200 (dgxh200.New) with every getter set.
func NewH200() *Machine { return wrap(dgxh200.New()) }

// NewH200GPUs returns a machine of n H200s (dgxh200.NewWithGPUs): fewer
// GPUs make a golden file a reviewer can read.
func NewH200GPUs(n int) *Machine {
	return wrap(dgxh200.NewWithGPUs(gpus.Multiple(n, gpus.H200_SXM5_141GB)...))
}

// NewH100 returns an 8-GPU DGX H100 (dgxh100.New) with every getter set.
func NewH100() *Machine { return wrap(dgxh100.New()) }

// NewA100 returns an 8-GPU DGX A100 (dgxa100.New) with every getter set.
func NewA100() *Machine { return wrap(dgxa100.New()) }

func wrap(s *server.Server) *Machine {
	m := &Machine{Server: s}
	s.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) { return &GPMSample{}, nvml.SUCCESS }
	s.GpmMetricsGetFunc = gpmMetricsGet
	m.Events = make(chan nvml.EventData, 16)
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			// Like nvmlEventSetWait, a wait cannot be interrupted: the
			// watcher sees a stop between waits (nvmlclient.WithEventWait
			// keeps them short in tests).
			WaitFunc: func(timeoutMs uint32) (nvml.EventData, nvml.Return) {
				timer := time.NewTimer(time.Duration(timeoutMs) * time.Millisecond)
				defer timer.Stop()
				select {
				case e := <-m.Events:
					return e, nvml.SUCCESS
				case <-timer.C:
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() nvml.Return { m.EventSetsFreed.Add(1); return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		g := &GPU{
			Device:             dev,
			samples:            map[nvml.SamplingType][]nvml.Sample{},
			Serial:             fmt.Sprintf("165432100%04d", i),
			Utilization:        nvml.Utilization{Gpu: uint32(10 * i), Memory: uint32(5 * i)},
			EncoderUtil:        0,
			DecoderUtil:        uint32(i),
			Memory:             nvml.Memory_v2{Total: 150_754_820_096, Reserved: 617_086_976, Used: uint64(i+1) * 1 << 30},
			TemperatureC:       uint32(30 + i),
			MemoryTemperatureC: uint32(40 + i),
			PowerMilliW:        uint32(75_000 + 1_000*i),
			LimitMilliW:        700_000,
			EnergyMilliJ:       uint64(1_000_000 * (i + 1)),
			ClockMHz: map[nvml.ClockType]uint32{
				nvml.CLOCK_SM: 1980, nvml.CLOCK_MEM: 3201, nvml.CLOCK_GRAPHICS: 1980, nvml.CLOCK_VIDEO: 1545,
			},
			PState: nvml.PSTATE_0,
			GPMValues: map[nvml.GpmMetricId]float64{
				nvml.GPM_METRIC_SM_UTIL: float64(5 * i), nvml.GPM_METRIC_SM_OCCUPANCY: float64(i),
				nvml.GPM_METRIC_GRAPHICS_UTIL: float64(6 * i), nvml.GPM_METRIC_ANY_TENSOR_UTIL: float64(4 * i),
				nvml.GPM_METRIC_HMMA_TENSOR_UTIL: float64(4 * i), nvml.GPM_METRIC_IMMA_TENSOR_UTIL: 0,
				nvml.GPM_METRIC_DMMA_TENSOR_UTIL: 0, nvml.GPM_METRIC_DFMA_TENSOR_UTIL: 0,
				nvml.GPM_METRIC_FP64_UTIL: 0, nvml.GPM_METRIC_FP32_UTIL: float64(i), nvml.GPM_METRIC_FP16_UTIL: float64(2 * i),
				nvml.GPM_METRIC_INTEGER_UTIL: 1, nvml.GPM_METRIC_DRAM_BW_UTIL: float64(3 * i),
				nvml.GPM_METRIC_PCIE_TX_PER_SEC: 10, nvml.GPM_METRIC_PCIE_RX_PER_SEC: 20,
				nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: 100, nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC: 200,
			},
			GPMErrors:      map[nvml.GpmMetricId]nvml.Return{},
			ECCCorrected:   uint64(i),
			ClockEventBits: nvml.ClocksEventReasonGpuIdle,
			ViolationNanos: map[nvml.PerfPolicyType]uint64{
				nvml.PERF_POLICY_POWER: uint64(i) * 1_500_000_000, nvml.PERF_POLICY_THERMAL: 0,
				nvml.PERF_POLICY_SYNC_BOOST: 0, nvml.PERF_POLICY_BOARD_LIMIT: 0,
				nvml.PERF_POLICY_LOW_UTILIZATION: 60_000_000_000, nvml.PERF_POLICY_RELIABILITY: 0,
			},
			PCIeGen: 5, PCIeWidth: 16,
			Getters: map[string]float64{"nvmlDeviceGetMarginTemperature": float64(40 - i),
				"nvmlDeviceGetPcieThroughput(TX_BYTES)": float64(1000 * i), "nvmlDeviceGetPcieThroughput(RX_BYTES)": float64(2000 * i)},
			SamplesBroken: map[nvml.SamplingType]nvml.Return{},
			FieldErrors:   map[uint32]nvml.Return{},
			NVLinks:       18,
			FieldValues: map[uint32]uint64{nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS: uint64(i),
				nvml.FI_DEV_NVLINK_COUNT_EFFECTIVE_BER: 3<<8 | uint64(12+i)},
		}
		if arch, _ := dev.GetArchitecture(); arch < nvml.DEVICE_ARCH_HOPPER {
			g.GPMOff = true // GPM came with Hopper
		}
		dev.UUID = UUID(i)
		g.setFuncs(i)
		m.GPUs = append(m.GPUs, g)
	}
	return m
}

func (g *GPU) setFuncs(i int) {
	d := g.Device
	d.GetSerialFunc = func() (string, nvml.Return) { return g.Serial, nvml.SUCCESS }
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		p := nvml.PciInfo{Bus: uint32(0x19 + i), PciDeviceId: d.Config.PciDeviceId}
		for j, c := range fmt.Sprintf("00000000:%02X:00.0", 0x19+i) {
			p.BusId[j] = int8(c)
		}
		return p, nvml.SUCCESS
	}
	d.GetSamplesFunc = g.getSamples
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.Utilization, nvml.SUCCESS
	}
	d.GetEncoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return g.EncoderUtil, 167_000, nvml.SUCCESS }
	d.GetDecoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return g.DecoderUtil, 167_000, nvml.SUCCESS }
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return g.Memory, nvml.SUCCESS }
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: g.Memory.Total, Used: g.Memory.Used + g.Memory.Reserved, Free: g.Memory.Free}, nvml.SUCCESS
	}
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return g.TemperatureC, nvml.SUCCESS }
	d.GetFieldValuesFunc = g.getFieldValues
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return g.PowerMilliW, nvml.SUCCESS }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return g.LimitMilliW, nvml.SUCCESS }
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.EnergyMilliJ, nvml.SUCCESS
	}
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		v, ok := g.ClockMHz[c]
		if !ok {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return v, nvml.SUCCESS
	}
	d.GetPerformanceStateFunc = func() (nvml.Pstates, nvml.Return) { return g.PState, nvml.SUCCESS }
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return append([]nvml.ProcessInfo(nil), g.ComputeProcs...), nvml.SUCCESS
	}
	d.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return append([]nvml.ProcessInfo(nil), g.GraphicsProcs...), nvml.SUCCESS
	}
	d.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return append([]nvml.ProcessInfo(nil), g.MPSProcs...), nvml.SUCCESS
	}
	d.GetProcessUtilizationFunc = g.getProcessUtilization
	d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, _ nvml.EccCounterType) (uint64, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if t == nvml.MEMORY_ERROR_TYPE_CORRECTED {
			return g.ECCCorrected, nvml.SUCCESS
		}
		return g.ECCUncorrected, nvml.SUCCESS
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.RemappedCorr, g.RemappedUnc, g.RemapPending, g.RemapFailed, nvml.SUCCESS
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.ClockEventBits, nvml.SUCCESS
	}
	d.GetViolationStatusFunc = func(p nvml.PerfPolicyType) (nvml.ViolationTime, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		v, ok := g.ViolationNanos[p]
		if !ok {
			return nvml.ViolationTime{}, nvml.ERROR_NOT_SUPPORTED
		}
		return nvml.ViolationTime{ReferenceTime: 1, ViolationTime: v}, nvml.SUCCESS
	}
	d.GetPcieReplayCounterFunc = func() (int, nvml.Return) { return g.PCIeReplays, nvml.SUCCESS }
	d.GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return g.PCIeGen, nvml.SUCCESS }
	d.GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return g.PCIeWidth, nvml.SUCCESS }
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError | nvml.EventTypePState, nvml.SUCCESS
	}
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		if g.GPMOff {
			return nvml.GpmSupport{Version: 1}, nvml.SUCCESS
		}
		return nvml.GpmSupport{Version: 1, IsSupportedDevice: 1}, nvml.SUCCESS
	}
	d.GpmSampleGetFunc = func(s nvml.GpmSample) nvml.Return {
		gs := s.(*GPMSample)
		gs.gpu = g
		gs.Taken++
		return nvml.SUCCESS
	}
	g.setGetters(d)
	d.GetFanSpeedFunc = func() (uint32, nvml.Return) {
		if !g.FanSupported {
			return 0, nvml.ERROR_NOT_SUPPORTED // SXM boards have no fans
		}
		return g.FanPercent, nvml.SUCCESS
	}
}

// getFieldValues answers like nvmlDeviceGetFieldValues: each field with
// its own return code, unsigned long long or unsigned int as on an H200.
func (g *GPU) getFieldValues(values []nvml.FieldValue) nvml.Return {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.FieldCalls++
	policies := map[uint32]nvml.PerfPolicyType{
		nvml.FI_DEV_PERF_POLICY_POWER: nvml.PERF_POLICY_POWER, nvml.FI_DEV_PERF_POLICY_THERMAL: nvml.PERF_POLICY_THERMAL,
		nvml.FI_DEV_PERF_POLICY_SYNC_BOOST: nvml.PERF_POLICY_SYNC_BOOST, nvml.FI_DEV_PERF_POLICY_BOARD_LIMIT: nvml.PERF_POLICY_BOARD_LIMIT,
		nvml.FI_DEV_PERF_POLICY_LOW_UTILIZATION: nvml.PERF_POLICY_LOW_UTILIZATION, nvml.FI_DEV_PERF_POLICY_RELIABILITY: nvml.PERF_POLICY_RELIABILITY,
	}
	for i := range values {
		f := &values[i]
		f.NvmlReturn = uint32(nvml.SUCCESS)
		if ret, bad := g.FieldErrors[f.FieldId]; bad {
			f.NvmlReturn = uint32(ret)
			continue
		}
		if f.ScopeId > 0 && f.ScopeId >= g.NVLinks {
			f.NvmlReturn = uint32(nvml.ERROR_INVALID_ARGUMENT) // no such link
			continue
		}
		var v uint64
		typ := nvml.VALUE_TYPE_UNSIGNED_LONG_LONG
		switch id := f.FieldId; {
		case policies[id] != 0 || id == nvml.FI_DEV_PERF_POLICY_POWER:
			ns, ok := g.ViolationNanos[policies[id]]
			if !ok {
				f.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				continue
			}
			v = ns
		case id == nvml.FI_DEV_PCIE_REPLAY_COUNTER:
			v, typ = uint64(g.PCIeReplays), nvml.VALUE_TYPE_UNSIGNED_INT
		case id == nvml.FI_DEV_MEMORY_TEMP && g.MemoryTemperatureC > 0:
			v, typ = uint64(g.MemoryTemperatureC), nvml.VALUE_TYPE_UNSIGNED_INT
		case hasKey(g.FieldValues, id):
			v = g.FieldValues[id]
		default:
			f.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			continue
		}
		f.ValueType = uint32(typ)
		for b := 0; b < 8; b++ {
			f.Value[b] = byte(v >> (8 * b))
		}
	}
	return nvml.SUCCESS
}

// AddSamples appends utilization samples of type t, as NVML's sampler would,
// with values in percent at the given timestamps (microseconds).
func (g *GPU) AddSamples(t nvml.SamplingType, ts []uint64, values []uint32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range ts {
		var raw [8]byte
		v := values[k]
		raw[0], raw[1], raw[2], raw[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		g.samples[t] = append(g.samples[t], nvml.Sample{TimeStamp: ts[k], SampleValue: raw})
	}
}

// getSamples answers like nvmlDeviceGetSamples: the buffered samples newer
// than last, in buffer order, or ERROR_NOT_FOUND when there is none.
func (g *GPU) getSamples(t nvml.SamplingType, last uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ret, ok := g.SamplesBroken[t]; ok {
		return 0, nil, ret
	}
	var out []nvml.Sample
	for _, s := range g.samples[t] {
		if s.TimeStamp > last {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return 0, nil, nvml.ERROR_NOT_FOUND
	}
	return nvml.VALUE_TYPE_UNSIGNED_INT, out, nvml.SUCCESS
}

// SetEnergy sets the energy counter under the GPU's lock.
func (g *GPU) SetEnergy(mj uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.EnergyMilliJ = mj
}

// SetProcesses sets the compute processes (pid → used bytes) of the GPU.
func (g *GPU) SetProcesses(procs ...nvml.ProcessInfo) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ComputeProcs = procs
}

// SetMPS makes the GPU an MPS one, as NVML shows it (an H200, driver
// 580): the server and the clients are all compute processes, the MPS list
// holds the clients alone, and process utilization samples only the
// server (AddProcessSamples with the server's PID), for all of them.
func (g *GPU) SetMPS(server nvml.ProcessInfo, clients ...nvml.ProcessInfo) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ComputeProcs = append([]nvml.ProcessInfo{server}, clients...)
	g.MPSProcs = append([]nvml.ProcessInfo(nil), clients...)
}

// AddProcessSamples appends per-process utilization samples, as NVML's
// process sampler would.
func (g *GPU) AddProcessSamples(samples ...nvml.ProcessUtilizationSample) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.procSamples = append(g.procSamples, samples...)
}

// getProcessUtilization answers like nvmlDeviceGetProcessUtilization through
// go-nvml: samples newer than last, or ERROR_NOT_FOUND when there is none.
func (g *GPU) getProcessUtilization(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []nvml.ProcessUtilizationSample
	for _, s := range g.procSamples {
		if s.TimeStamp > last {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return out, nvml.SUCCESS
}

// GPMSample is a GPM sample handle that remembers the GPU it was taken on.
type GPMSample struct {
	gpu   *GPU
	Taken int
}

func (s *GPMSample) Free() nvml.Return                   { return nvml.SUCCESS }
func (s *GPMSample) Get(nvml.Device) nvml.Return         { return nvml.ERROR_NOT_SUPPORTED }
func (s *GPMSample) MigGet(nvml.Device, int) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }

// gpmMetricsGet answers like nvmlGpmMetricsGet from the GPU of the second
// sample: its GPMValues, or the GPMErrors per metric.
func gpmMetricsGet(mg *nvml.GpmMetricsGetType) nvml.Return {
	s1, ok1 := mg.Sample1.(*GPMSample)
	s2, ok2 := mg.Sample2.(*GPMSample)
	if !ok1 || !ok2 || s1.gpu == nil || s2.gpu == nil || s1.gpu != s2.gpu {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	g := s2.gpu
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range mg.Metrics[:mg.NumMetrics] {
		m := &mg.Metrics[i]
		id := nvml.GpmMetricId(m.MetricId)
		if ret, bad := g.GPMErrors[id]; bad {
			m.NvmlReturn = uint32(ret)
			continue
		}
		v, ok := g.GPMValues[id]
		if !ok {
			m.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			continue
		}
		m.NvmlReturn, m.Value = uint32(nvml.SUCCESS), v
	}
	return nvml.SUCCESS
}

// Set changes the GPU's fields under its lock, for tests that change them
// while the receiver reads.
func (g *GPU) Set(f func(g *GPU)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(g)
}

// XID queues an Xid event for GPU i, as the driver would raise it.
func (m *Machine) XID(i int, code uint64) {
	m.Events <- nvml.EventData{Device: m.GPUs[i].Device, EventType: nvml.EventTypeXidCriticalError, EventData: code,
		GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}
}

// ECC queues an ECC error event for GPU i: double-bit (uncorrectable) or
// single-bit.
func (m *Machine) ECC(i int, doubleBit bool) {
	typ := uint64(nvml.EventTypeSingleBitEccError)
	if doubleBit {
		typ = nvml.EventTypeDoubleBitEccError
	}
	m.Events <- nvml.EventData{Device: m.GPUs[i].Device, EventType: typ, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}
}

// MIGDevice is a mock MIG device of a GPU.
type MIGDevice struct {
	*mock.Device
	UUID              string
	GPUInstanceID     int
	ComputeInstanceID int
	Memory            nvml.Memory_v2
}

// MIGInstance is one GPU instance to create: its profile index, how many
// compute instances (MIG devices) it hosts and, where given, its placement
// (nvmlDeviceCreateGpuInstanceWithPlacement; else the mock's, start 0).
type MIGInstance struct {
	Profile          int
	ComputeInstances int
	Placement        *nvml.GpuInstancePlacement
}

// EnableMIG puts GPU g in MIG mode and creates, through the mock's own MIG
// API, one GPU instance of each profile with one compute instance on it,
// then exposes them as MIG devices the way NVML does.
func (g *GPU) EnableMIG(giProfiles ...int) []*MIGDevice {
	instances := make([]MIGInstance, len(giProfiles))
	for i, p := range giProfiles {
		instances[i] = MIGInstance{Profile: p, ComputeInstances: 1}
	}
	return g.EnableMIGInstances(instances...)
}

// EnableMIGInstances is EnableMIG with several compute instances per GPU
// instance. The MIG devices of one GPU instance answer its memory, as NVML
// does: the first device's Memory, whatever the others' say.
func (g *GPU) EnableMIGInstances(instances ...MIGInstance) []*MIGDevice {
	g.SetMigModeFunc(nvml.DEVICE_MIG_ENABLE)
	var migs []*MIGDevice
	for _, inst := range instances {
		info, ret := g.GetGpuInstanceProfileInfoFunc(inst.Profile)
		if ret != nvml.SUCCESS {
			panic(fmt.Sprintf("GPU instance profile %d: %v", inst.Profile, ret))
		}
		var gi nvml.GpuInstance
		if inst.Placement != nil {
			gi, _ = g.CreateGpuInstanceWithPlacementFunc(&info, inst.Placement)
		} else {
			gi, _ = g.CreateGpuInstanceFunc(&info)
		}
		giInfo, _ := gi.GetInfo()
		ciProfile, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			panic(fmt.Sprintf("compute instance profile: %v", ret))
		}
		var instanceMemory *MIGDevice // the GPU instance's memory lives on its first device
		for range max(inst.ComputeInstances, 1) {
			ci, ret := gi.CreateComputeInstance(&ciProfile)
			if ret != nvml.SUCCESS {
				panic(fmt.Sprintf("compute instance: %v", ret))
			}
			ciInfo, _ := ci.GetInfo()
			m := &MIGDevice{
				UUID:              fmt.Sprintf("MIG-%s-%d-%d", g.UUID[4:], giInfo.Id, ciInfo.Id),
				GPUInstanceID:     int(giInfo.Id),
				ComputeInstanceID: int(ciInfo.Id),
				Memory:            nvml.Memory_v2{Total: info.MemorySizeMB << 20, Used: uint64(giInfo.Id+1) << 28, Reserved: 1 << 26},
			}
			if instanceMemory == nil {
				instanceMemory = m
			}
			migs = append(migs, g.newMIGDevice(m, instanceMemory, info))
		}
	}
	return g.exposeMIG(migs)
}

// newMIGDevice gives m the getters of a MIG device; memory answers mem's.
func (g *GPU) newMIGDevice(m, mem *MIGDevice, info nvml.GpuInstanceProfileInfo) *MIGDevice {
	m.Device = &mock.Device{
		GetUUIDFunc:              func() (string, nvml.Return) { return m.UUID, nvml.SUCCESS },
		GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return m.GPUInstanceID, nvml.SUCCESS },
		GetComputeInstanceIdFunc: func() (int, nvml.Return) { return m.ComputeInstanceID, nvml.SUCCESS },
		GetMemoryInfo_v2Func:     func() (nvml.Memory_v2, nvml.Return) { return mem.Memory, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: mem.Memory.Total, Used: mem.Memory.Used}, nvml.SUCCESS
		},
		GetAttributesFunc: func() (nvml.DeviceAttributes, nvml.Return) {
			return nvml.DeviceAttributes{GpuInstanceSliceCount: info.SliceCount, MemorySizeMB: info.MemorySizeMB}, nvml.SUCCESS
		},
		// A MIG device lists its own processes, without privilege.
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			var out []nvml.ProcessInfo
			for _, p := range g.ComputeProcs {
				if int(p.GpuInstanceId) == m.GPUInstanceID && int(p.ComputeInstanceId) == m.ComputeInstanceID {
					out = append(out, p)
				}
			}
			return out, nvml.SUCCESS
		},
		GetMPSComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			var out []nvml.ProcessInfo
			for _, p := range g.MPSProcs {
				if int(p.GpuInstanceId) == m.GPUInstanceID && int(p.ComputeInstanceId) == m.ComputeInstanceID {
					out = append(out, p)
				}
			}
			return out, nvml.SUCCESS
		},
	}
	return m
}

// exposeMIG answers the MIG devices through the parent's MIG calls.
func (g *GPU) exposeMIG(migs []*MIGDevice) []*MIGDevice {
	g.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	g.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(migs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return migs[i], nvml.SUCCESS
	}
	g.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		g.RLock()
		defer g.RUnlock()
		for gi := range g.GpuInstances {
			if int(gi.Info.Id) == id {
				return gi, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	g.GpmMigSampleGetFunc = func(_ int, s nvml.GpmSample) nvml.Return {
		gs := s.(*GPMSample)
		gs.gpu = g
		gs.Taken++
		return nvml.SUCCESS
	}
	// In MIG mode the whole-GPU utilization is not available.
	g.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
	for _, st := range []nvml.SamplingType{nvml.GPU_UTILIZATION_SAMPLES, nvml.MEMORY_UTILIZATION_SAMPLES} {
		g.SamplesBroken[st] = nvml.ERROR_NOT_SUPPORTED
	}
	return migs
}

// Clock is a settable clock for the receiver's backoff and GPM windows.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// UnsupportedLogs counts the log lines that report call as not supported.
func UnsupportedLogs(logs *observer.ObservedLogs, call string) int {
	n := 0
	for _, e := range logs.FilterMessageSnippet("not supported").All() {
		calls, _ := e.ContextMap()["calls"].([]any)
		for _, c := range calls {
			if s, _ := c.(string); strings.HasPrefix(s, call+":") {
				n++
			}
		}
	}
	return n
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}
