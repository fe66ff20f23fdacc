// Package record turns one GPU's sample, with who holds it and its
// GPU-time accounts, into data points through the generated builder: the
// plain readings, health and hw.status, GPM, memory, the processes' points,
// the MIG devices, and the resources they go on.
package record // import "github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/record"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/accounting"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/holders"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// Each enum of a sample and its attribute value, in the order recorded.
// Every such table in the receiver is an array of pairs.

var engineTasks = [...]struct {
	e    sample.Engine
	attr metadata.AttributeHwGpuTask
}{
	{sample.EngineGeneral, metadata.AttributeHwGpuTaskGeneral},
	{sample.EngineEncoder, metadata.AttributeHwGpuTaskEncoder},
	{sample.EngineDecoder, metadata.AttributeHwGpuTaskDecoder},
}

// processTasks are the engines of nvidia.gpu.process.utilization, in the
// hw.gpu.task vocabulary of hw.gpu.utilization: the SM field is general.
var processTasks = []struct {
	attr metadata.AttributeHwGpuTask
	get  func(p *sample.Process) sample.Opt[float64]
}{
	{metadata.AttributeHwGpuTaskGeneral, func(p *sample.Process) sample.Opt[float64] { return p.SMUtil }},
	{metadata.AttributeHwGpuTaskEncoder, func(p *sample.Process) sample.Opt[float64] { return p.EncoderUtil }},
	{metadata.AttributeHwGpuTaskDecoder, func(p *sample.Process) sample.Opt[float64] { return p.DecoderUtil }},
}

// GPU is everything recorded for one GPU in one scrape.
type GPU struct {
	Info     nvmlclient.DeviceInfo
	Sample   *sample.Sample
	Holders  holders.GPU
	Accounts accounting.Accounts
	XIDs     map[int64]int64
	// Readings are the enabled plain metrics' (Sample.Values); Start is
	// the builder's, the session's (startingAt).
	Readings []Reading
	Start    pcommon.Timestamp
}

// Record turns the GPU's sample into data points: the device's on its
// device resource, its use's on its holder resource (see emitDevice), then
// each MIG device and each process on resources of their own.
func (g *GPU) Record(mb *metadata.MetricsBuilder) {
	ts := pcommon.NewTimestampFromTime(g.Sample.Time)
	if g.Sample.ProcessesListed {
		mb.RecordNvidiaGpuProcessDroppedDataPoint(ts, g.Holders.Dropped)
	}
	recordXIDs(mb, ts, g.XIDs)
	recordDeviceSample(mb, g.Sample, g.Readings, g.Start)
	resource := func(o attribution.Owner) *metadata.ResourceBuilder { return gpuResource(mb, g.Info, o) }
	emitDevice(mb, resource, g.Holders.Owner)
	recordHolderSample(mb, g.Sample, g.Accounts.Device, g.Readings, g.Start)
	emitUse(mb, ts, &g.Holders.Device, &g.Accounts, resource, g.Sample.ProcessesListed, g.Start)
	for i := range g.Holders.MIGs {
		g.recordMIG(mb, ts, i)
	}
}

// Unobserved records a GPU that could not be read (stuck, lost, or a read
// that failed outright): hw.status and its XID counts for a stuck or lost
// GPU, on its device resource as when it is read, then the accounts whose
// time was added as unobserved (accounting.Accountant.Unobserved). The
// GPU's GPU-time counters go on its holder resource with the last owner
// the GPU had, and each MIG device's on its own, so that they neither
// vanish nor start an owner-less copy.
func Unobserved(mb *metadata.MetricsBuilder, ts, start pcommon.Timestamp, info nvmlclient.DeviceInfo, reason accounting.Reason,
	xids map[int64]int64, accts []*accounting.Device) {
	var gpu *accounting.Device
	var o attribution.Owner
	if len(accts) > 0 && accts[0].MIG.UUID == "" { // the GPU's, first
		gpu, o, accts = accts[0], accts[0].Owner, accts[1:]
	}
	switch reason {
	case accounting.Lost:
		recordStatus(mb, ts, hwState(gpuLost, nil)) // the only thing left to say of a lost GPU
		recordXIDs(mb, ts, xids)                    // its last words: usually Xid 79
	case accounting.Stuck:
		recordStatus(mb, ts, hwState(gpuStuck, nil)) // so that it never silently vanishes
		recordXIDs(mb, ts, xids)
	}
	emitDevice(mb, func(o attribution.Owner) *metadata.ResourceBuilder { return gpuResource(mb, info, o) }, o)
	recordDeviceAccount(mb, ts, gpu, start)
	mb.EmitForResource(metadata.WithResource(gpuResource(mb, info, o).Emit()))
	for _, acct := range accts {
		recordDeviceAccount(mb, ts, acct, start)
		mb.EmitForResource(metadata.WithResource(migResource(mb, info, acct.MIG, acct.Owner).Emit()))
	}
}

// recordXIDs records the XIDs counted per code (the event watcher's).
func recordXIDs(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, counts map[int64]int64) {
	for code, n := range counts {
		mb.RecordNvidiaGpuXidErrorsDataPoint(ts, n, code)
	}
}

// recordHolders records nvidia.gpu.allocation for each container the
// kubelet allocated the device to (a device-plugin allocation, or a DRA
// claim, one claim shared by several pods listing each), on a resource of
// the device and that holder: 1 / the number of holders, the holder's even
// share of the device's held time. The held time itself is counted once,
// on the device (docs/design/waste.md says how to split it).
func recordHolders(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, holders []attribution.Owner, newResource func(attribution.Owner) *metadata.ResourceBuilder) {
	if len(holders) == 0 {
		return
	}
	share := 1 / float64(len(holders))
	for _, h := range holders {
		mb.RecordNvidiaGpuAllocationDataPoint(ts, share)
		mb.EmitForResource(metadata.WithResource(newResource(h).Emit()))
	}
}

// emitDevice emits the points recorded so far, the device's, on its device
// resource: newResource's without an owner. A device without an owner has
// one resource for both kinds, so nothing is emitted yet.
//
// The device resource never carries owner attributes, so that the series
// of the device's life (its counters, hw.status) keep one identity through
// owner changes and through the scrapes where it is stuck or lost. The
// holder resource adds the current owner to the series of the device's use.
func emitDevice(mb *metadata.MetricsBuilder, newResource func(attribution.Owner) *metadata.ResourceBuilder, holder attribution.Owner) {
	if !holder.IsZero() {
		mb.EmitForResource(metadata.WithResource(newResource(attribution.Owner{}).Emit()))
	}
}

// recordProcesses puts each process of d on a resource of its own, started
// by newResource with the process's owner. An accounted process's counters
// (accts') start with its account, and its CPU time with the process.
func recordProcesses(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, d *holders.Device, accts *accounting.Accounts,
	newResource func(attribution.Owner) *metadata.ResourceBuilder, start pcommon.Timestamp) {
	for i := range d.Processes {
		p, account := &d.Processes[i], accts.Processes[i]
		if m := p.MemoryBytes(); m.OK {
			mb.RecordNvidiaGpuProcessMemoryUsageDataPoint(ts, int64(m.Value))
		}
		for _, t := range processTasks {
			if v := t.get(&p.Process); v.OK {
				mb.RecordNvidiaGpuProcessUtilizationDataPoint(ts, v.Value, t.attr)
			}
		}
		if v := p.MemoryControllerUtil; v.OK {
			mb.RecordNvidiaGpuProcessMemoryControllerUtilizationDataPoint(ts, v.Value)
		}
		if p.InfoOK && p.Info.CPUOK {
			from := start
			if account != nil && !p.Info.Started.IsZero() {
				from = pcommon.NewTimestampFromTime(p.Info.Started)
			}
			startingAt(mb, from, start, func() {
				mb.RecordProcessCPUTimeDataPoint(ts, p.Info.UserCPU.Seconds(), metadata.AttributeCPUModeUser)
				mb.RecordProcessCPUTimeDataPoint(ts, p.Info.SystemCPU.Seconds(), metadata.AttributeCPUModeSystem)
			})
		}
		rb := newResource(p.Owner)
		rb.SetProcessPid(int64(p.PID))
		if role := holders.Role(p.MPS); role != "" {
			rb.SetNvidiaGpuProcessMps(role)
		}
		if p.InfoOK {
			rb.SetProcessExecutableName(p.Info.ExecutableName)
			if p.Info.Owner != "" {
				rb.SetProcessOwner(p.Info.Owner)
			}
			if p.Info.CreationTime != "" {
				rb.SetProcessCreationTime(p.Info.CreationTime)
			}
			if p.Info.CommandLine != "" {
				rb.SetProcessCommandLine(p.Info.CommandLine)
			}
		}
		recordProcessAccount(mb, ts, account, start)
		mb.EmitForResource(metadata.WithResource(rb.Emit()))
	}
}

// recordMIG records the GPU's i-th MIG device on its own device and
// holder resources, then its processes.
func (g *GPU) recordMIG(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, i int) {
	s, h, accts, listed := &g.Sample.MIG[i], &g.Holders.MIGs[i], &g.Accounts.MIGs[i], g.Sample.ProcessesListed
	resource := func(o attribution.Owner) *metadata.ResourceBuilder { return migResource(mb, g.Info, s.Info, o) }
	if s.GPM != nil {
		recordGPMTraffic(mb, ts, s.GPM)
	}
	emitDevice(mb, resource, h.Owner)
	recordMemory(mb, ts, s.MemoryUsedBytes, s.MemoryTotalBytes, s.MemoryReservedBytes)
	if s.GPM != nil {
		recordGPM(mb, ts, s.GPM)
	}
	if listed {
		mb.RecordNvidiaGpuProcessCountDataPoint(ts, int64(len(s.Processes)))
	}
	recordDeviceAccount(mb, ts, accts.Device, g.Start)
	emitUse(mb, ts, h, accts, resource, listed, g.Start)
}

// emitUse emits the points recorded since emitDevice, of the device's use,
// on its holder resource: resource's with the device's owner, marked as
// MPS-shared while an MPS process is on it (never its own device
// resource). Then come its holders' allocations and, when listed, its
// processes, on resources of the same kind.
func emitUse(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, h *holders.Device, accts *accounting.Accounts,
	resource func(attribution.Owner) *metadata.ResourceBuilder, listed bool, start pcommon.Timestamp) {
	mps := holders.Shared(h.Processes)
	newResource := func(o attribution.Owner) *metadata.ResourceBuilder {
		rb := resource(o)
		if mps {
			rb.SetNvidiaGpuSharing("mps")
		}
		return rb
	}
	mb.EmitForResource(metadata.WithResource(newResource(h.Owner).Emit()))
	recordHolders(mb, ts, h.Holders, newResource)
	if listed {
		recordProcesses(mb, ts, h, accts, newResource, start)
	}
}

// migResource starts a MIG device's resource: its GPU's attributes, its
// own and the owner's.
func migResource(mb *metadata.MetricsBuilder, parent nvmlclient.DeviceInfo, info sample.MIGInfo, o attribution.Owner) *metadata.ResourceBuilder {
	rb := gpuResource(mb, parent, o)
	rb.SetHwID(info.UUID)
	rb.SetHwParent(info.ParentUUID)
	rb.SetNvidiaGpuMigGpuInstanceID(int64(info.GPUInstanceID))
	rb.SetNvidiaGpuMigComputeInstanceID(int64(info.ComputeInstanceID))
	if info.Profile != "" {
		rb.SetNvidiaGpuMigProfile(info.Profile)
	}
	return rb
}

// recordDeviceSample records what a GPU's sample says of the device
// itself: its counters, its health and hw.status.
func recordDeviceSample(mb *metadata.MetricsBuilder, s *sample.Sample, readings []Reading, start pcommon.Timestamp) {
	ts := pcommon.NewTimestampFromTime(s.Time)
	recordPlain(mb, s, readings, true, start)
	if s.GPM != nil {
		recordGPMTraffic(mb, ts, s.GPM)
	}
	recordHealth(mb, ts, &s.Health)
}

// recordHolderSample records what a GPU's sample says of its use: the
// gauges of its engines, memory, power, heat and clocks, and its GPU-time
// counters.
func recordHolderSample(mb *metadata.MetricsBuilder, s *sample.Sample, acct *accounting.Device, readings []Reading, start pcommon.Timestamp) {
	ts := pcommon.NewTimestampFromTime(s.Time)

	for _, et := range engineTasks {
		if u := s.Utilization[et.e]; u.OK {
			mb.RecordHwGpuUtilizationDataPoint(ts, u.Value, et.attr)
		}
	}
	if v := s.MemoryControllerUtilization; v.OK {
		mb.RecordNvidiaGpuMemoryControllerUtilizationDataPoint(ts, v.Value)
	}
	recordMemory(mb, ts, s.MemoryUsedBytes, s.MemoryTotalBytes, s.MemoryReservedBytes)
	recordPlain(mb, s, readings, false, start)

	if s.ProcessesListed {
		mb.RecordNvidiaGpuProcessCountDataPoint(ts, int64(len(s.Processes)))
	}
	if s.GPM != nil {
		recordGPM(mb, ts, s.GPM)
	}
	recordDeviceAccount(mb, ts, acct, start)
}

// recordMemory records a GPU's or MIG device's memory, and the fraction of
// it in use.
func recordMemory(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, used, total, reserved sample.Opt[uint64]) {
	if used.OK {
		mb.RecordHwGpuMemoryUsageDataPoint(ts, int64(used.Value))
	}
	if total.OK {
		mb.RecordHwGpuMemoryLimitDataPoint(ts, int64(total.Value))
	}
	if used.OK && total.OK && total.Value > 0 {
		mb.RecordHwGpuMemoryUtilizationDataPoint(ts, float64(used.Value)/float64(total.Value))
	}
	if reserved.OK {
		mb.RecordNvidiaGpuMemoryReservedDataPoint(ts, int64(reserved.Value))
	}
}

// gpuResource starts a resource with the GPU's attributes and the owner's:
// with no owner, the GPU's device resource.
func gpuResource(mb *metadata.MetricsBuilder, info nvmlclient.DeviceInfo, o attribution.Owner) *metadata.ResourceBuilder {
	rb := mb.NewResourceBuilder()
	SetGPU(rb, info)
	holders.SetOwner(rb, o)
	return rb
}

// SetGPU sets the GPU's identity on rb.
func SetGPU(rb *metadata.ResourceBuilder, info nvmlclient.DeviceInfo) {
	rb.SetHwID(info.UUID)
	rb.SetHwType("gpu")
	rb.SetHwVendor("NVIDIA")
	rb.SetHwModel(info.Name)
	if info.Serial != "" {
		rb.SetHwSerialNumber(info.Serial)
	}
	rb.SetHwDriverVersion(info.DriverVersion)
	rb.SetNvidiaGpuIndex(int64(info.Index))
	rb.SetNvidiaGpuPciBusID(info.PCIBusID)
}

// gpmGauges record each GPM activity; static, so that a scrape builds no
// closures.
var gpmGauges = [...]struct {
	a      sample.GPMActivity
	record func(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, v float64)
}{
	{sample.GPMSMActivity, (*metadata.MetricsBuilder).RecordNvidiaGpuSmActivityDataPoint},
	{sample.GPMSMOccupancy, (*metadata.MetricsBuilder).RecordNvidiaGpuSmOccupancyDataPoint},
	{sample.GPMGraphicsActivity, (*metadata.MetricsBuilder).RecordNvidiaGpuGraphicsActivityDataPoint},
	{sample.GPMTensorActivity, (*metadata.MetricsBuilder).RecordNvidiaGpuTensorActivityDataPoint},
	{sample.GPMDRAMBandwidth, (*metadata.MetricsBuilder).RecordNvidiaGpuMemoryBandwidthUtilizationDataPoint},
}

var gpmTensorPipes = [...]struct {
	a    sample.GPMActivity
	attr metadata.AttributeNvidiaGpuTensorPipe
}{
	{sample.GPMTensorHMMA, metadata.AttributeNvidiaGpuTensorPipeHmma},
	{sample.GPMTensorIMMA, metadata.AttributeNvidiaGpuTensorPipeImma},
	{sample.GPMTensorDMMA, metadata.AttributeNvidiaGpuTensorPipeDmma},
	{sample.GPMTensorDFMA, metadata.AttributeNvidiaGpuTensorPipeDfma},
}

var gpmPipes = [...]struct {
	a    sample.GPMActivity
	attr metadata.AttributeNvidiaGpuPipe
}{
	{sample.GPMFP64, metadata.AttributeNvidiaGpuPipeFp64},
	{sample.GPMFP32, metadata.AttributeNvidiaGpuPipeFp32},
	{sample.GPMFP16, metadata.AttributeNvidiaGpuPipeFp16},
	{sample.GPMInteger, metadata.AttributeNvidiaGpuPipeInteger},
}

var gpmTraffic = [...]struct {
	t      sample.GPMTraffic
	nvlink bool
	dir    metadata.AttributeNetworkIoDirection
}{
	{sample.GPMPCIeTX, false, metadata.AttributeNetworkIoDirectionTransmit},
	{sample.GPMPCIeRX, false, metadata.AttributeNetworkIoDirectionReceive},
	{sample.GPMNVLinkTX, true, metadata.AttributeNetworkIoDirectionTransmit},
	{sample.GPMNVLinkRX, true, metadata.AttributeNetworkIoDirectionReceive},
}

// recordGPM records what GPM measured over the window, but the traffic.
func recordGPM(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, g *sample.GPMReading) {
	for _, gg := range gpmGauges {
		if v := g.Activity[gg.a]; v.OK {
			gg.record(mb, ts, v.Value)
		}
	}
	for _, p := range gpmTensorPipes {
		if v := g.Activity[p.a]; v.OK {
			mb.RecordNvidiaGpuTensorPipeActivityDataPoint(ts, v.Value, p.attr)
		}
	}
	for _, p := range gpmPipes {
		if v := g.Activity[p.a]; v.OK {
			mb.RecordNvidiaGpuPipeActivityDataPoint(ts, v.Value, p.attr)
		}
	}
}

// recordGPMTraffic records the device's PCIe and NVLink traffic, counted
// since the session opened.
func recordGPMTraffic(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, g *sample.GPMReading) {
	for _, c := range gpmTraffic {
		v := g.TrafficBytes[c.t]
		switch {
		case !v.OK:
		case c.nvlink:
			mb.RecordNvidiaGpuNvlinkIoDataPoint(ts, v.Value, c.dir)
		default:
			mb.RecordHwGpuIoDataPoint(ts, v.Value, c.dir)
		}
	}
}

// unobservedReasons are the reasons and their attribute values, in the
// order recorded.
var unobservedReasons = [...]struct {
	reason accounting.Reason
	attr   metadata.AttributeNvidiaGpuUnobservedReason
}{
	{accounting.ReadFailed, metadata.AttributeNvidiaGpuUnobservedReasonReadFailed},
	{accounting.Stuck, metadata.AttributeNvidiaGpuUnobservedReasonStuck},
	{accounting.Lost, metadata.AttributeNvidiaGpuUnobservedReasonLost},
	{accounting.Gap, metadata.AttributeNvidiaGpuUnobservedReasonGap},
	{accounting.Restart, metadata.AttributeNvidiaGpuUnobservedReasonRestart},
}

// recordDeviceAccount records a device's counters, from their account's
// start; base is the builder's.
func recordDeviceAccount(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, acct *accounting.Device, base pcommon.Timestamp) {
	if acct == nil {
		return
	}
	startingAt(mb, acct.Start, base, func() {
		if acct.Holding {
			mb.RecordNvidiaGpuHeldTimeDataPoint(ts, acct.Held)
			mb.RecordNvidiaGpuFreeTimeDataPoint(ts, acct.Free)
			for _, r := range unobservedReasons {
				mb.RecordNvidiaGpuUnobservedTimeDataPoint(ts, acct.Unobserved[r.reason], r.attr)
			}
		}
		if acct.BusyOK {
			mb.RecordNvidiaGpuBusyTimeDataPoint(ts, acct.Busy)
		}
		if acct.ActiveOK {
			mb.RecordNvidiaGpuActiveTimeDataPoint(ts, acct.Active)
		}
		if acct.IdleOK {
			mb.RecordNvidiaGpuIdleTimeDataPoint(ts, acct.Idle)
		}
	})
}

// recordProcessAccount records a process's counters, from their
// account's start; base is the builder's.
func recordProcessAccount(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, pa *accounting.Process, base pcommon.Timestamp) {
	if pa == nil {
		return
	}
	startingAt(mb, pa.Start, base, func() {
		mb.RecordNvidiaGpuProcessHeldTimeDataPoint(ts, pa.Held)
		if pa.BusyOK {
			mb.RecordNvidiaGpuProcessBusyTimeDataPoint(ts, pa.Busy)
		}
		if pa.IdleOK {
			mb.RecordNvidiaGpuProcessIdleTimeDataPoint(ts, pa.Idle)
		}
	})
}
