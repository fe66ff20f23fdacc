package nvmlreceiver

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// Each enum of a sample and its attribute value, in the order recorded.
// Every such table in the receiver is an array of pairs.

var engineTasks = [...]struct {
	e    nvmlclient.Engine
	attr metadata.AttributeHwGpuTask
}{
	{nvmlclient.EngineGeneral, metadata.AttributeHwGpuTaskGeneral},
	{nvmlclient.EngineEncoder, metadata.AttributeHwGpuTaskEncoder},
	{nvmlclient.EngineDecoder, metadata.AttributeHwGpuTaskDecoder},
}

// processTasks are the engines of nvidia.gpu.process.utilization, in the
// hw.gpu.task vocabulary of hw.gpu.utilization: the SM field is general.
var processTasks = []struct {
	attr metadata.AttributeHwGpuTask
	get  func(p nvmlclient.Process) nvmlclient.Opt[float64]
}{
	{metadata.AttributeHwGpuTaskGeneral, func(p nvmlclient.Process) nvmlclient.Opt[float64] { return p.SMUtil }},
	{metadata.AttributeHwGpuTaskEncoder, func(p nvmlclient.Process) nvmlclient.Opt[float64] { return p.EncoderUtil }},
	{metadata.AttributeHwGpuTaskDecoder, func(p nvmlclient.Process) nvmlclient.Opt[float64] { return p.DecoderUtil }},
}

// gpuReport is everything recorded for one GPU in one scrape.
type gpuReport struct {
	info      nvmlclient.DeviceInfo
	sample    *nvmlclient.Sample
	processes []ownedProcess // on the whole GPU; empty in MIG mode
	dropped   int64          // cumulative
	owner     owner          // set only when the GPU has exactly one owner
	holders   []owner        // what the kubelet allocated the GPU to (holders.go)
	xids      map[int64]int64
	migs      []migReport
	account   *deviceAccount
	// readings are the enabled plain metrics' (Sample.Values); start is
	// the builder's, the session's (startingAt).
	readings []plainReading
	start    pcommon.Timestamp
}

// migReport is one MIG device of the GPU.
type migReport struct {
	sample    *nvmlclient.MIGSample
	processes []ownedProcess
	owner     owner
	holders   []owner
	account   *deviceAccount
}

// recordGPU turns one GPU's sample into data points: the device's on its
// device resource, its use's on its holder resource (see emitDevice), then
// each MIG device and each process on resources of their own.
func recordGPU(mb *metadata.MetricsBuilder, r gpuReport) {
	ts := pcommon.NewTimestampFromTime(r.sample.Time)
	if r.sample.ProcessesListed {
		mb.RecordNvidiaGpuProcessDroppedDataPoint(ts, r.dropped)
	}
	recordXIDs(mb, ts, r.xids)
	recordDeviceSample(mb, r.sample, r.readings, r.start)
	mps := mpsShared(r.processes)
	newResource := func(o owner) *metadata.ResourceBuilder { return sharingOf(gpuResource(mb, r.info, o), mps) }
	emitDevice(mb, func(o owner) *metadata.ResourceBuilder { return gpuResource(mb, r.info, o) }, r.owner)
	recordHolderSample(mb, r.sample, r.account, r.readings, r.start)
	mb.EmitForResource(metadata.WithResource(newResource(r.owner).Emit()))
	recordHolders(mb, ts, r.holders, newResource)
	if r.sample.ProcessesListed {
		recordProcesses(mb, ts, r.processes, newResource, r.start)
	}
	for _, m := range r.migs {
		recordMIG(mb, ts, r.info, m, r.sample.ProcessesListed, r.start)
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
func emitDevice(mb *metadata.MetricsBuilder, newResource func(owner) *metadata.ResourceBuilder, holder owner) {
	if !holder.IsZero() {
		mb.EmitForResource(metadata.WithResource(newResource(owner{}).Emit()))
	}
}

// recordProcesses puts each process on a resource of its own, started by
// newResource with the process's owner. An accounted process's counters
// start with its account, and its CPU time with the process.
func recordProcesses(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, procs []ownedProcess, newResource func(owner) *metadata.ResourceBuilder,
	start pcommon.Timestamp) {
	for _, p := range procs {
		if m := p.MemoryBytes(); m.OK {
			mb.RecordNvidiaGpuProcessMemoryUsageDataPoint(ts, int64(m.Value))
		}
		for _, t := range processTasks {
			if v := t.get(p.Process); v.OK {
				mb.RecordNvidiaGpuProcessUtilizationDataPoint(ts, v.Value, t.attr)
			}
		}
		if v := p.MemoryControllerUtil; v.OK {
			mb.RecordNvidiaGpuProcessMemoryControllerUtilizationDataPoint(ts, v.Value)
		}
		if p.infoOK && p.info.CPUOK {
			from := start
			if p.account != nil && !p.info.Started.IsZero() {
				from = pcommon.NewTimestampFromTime(p.info.Started)
			}
			startingAt(mb, from, start, func() {
				mb.RecordProcessCPUTimeDataPoint(ts, p.info.UserCPU.Seconds(), metadata.AttributeCPUModeUser)
				mb.RecordProcessCPUTimeDataPoint(ts, p.info.SystemCPU.Seconds(), metadata.AttributeCPUModeSystem)
			})
		}
		rb := newResource(p.owner)
		rb.SetProcessPid(int64(p.PID))
		if role := mpsRole(p.MPS); role != "" {
			rb.SetNvidiaGpuProcessMps(role)
		}
		if p.infoOK {
			rb.SetProcessExecutableName(p.info.ExecutableName)
			if p.info.Owner != "" {
				rb.SetProcessOwner(p.info.Owner)
			}
			if p.info.CreationTime != "" {
				rb.SetProcessCreationTime(p.info.CreationTime)
			}
			if p.info.CommandLine != "" {
				rb.SetProcessCommandLine(p.info.CommandLine)
			}
		}
		recordProcessAccount(mb, ts, p.account, start)
		mb.EmitForResource(metadata.WithResource(rb.Emit()))
	}
}

// recordMIG records one MIG device on its own device and holder
// resources, then its processes.
func recordMIG(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, parent nvmlclient.DeviceInfo, m migReport, listed bool, start pcommon.Timestamp) {
	s := m.sample
	mps := mpsShared(m.processes)
	newResource := func(o owner) *metadata.ResourceBuilder { return sharingOf(migResource(mb, parent, s.Info, o), mps) }
	if s.GPM != nil {
		recordGPMTraffic(mb, ts, s.GPM)
	}
	emitDevice(mb, func(o owner) *metadata.ResourceBuilder { return migResource(mb, parent, s.Info, o) }, m.owner)
	recordMemory(mb, ts, s.MemoryUsedBytes, s.MemoryTotalBytes, s.MemoryReservedBytes)
	if s.GPM != nil {
		recordGPM(mb, ts, s.GPM)
	}
	if listed {
		mb.RecordNvidiaGpuProcessCountDataPoint(ts, int64(len(s.Processes)))
	}
	recordDeviceAccount(mb, ts, m.account, start)
	mb.EmitForResource(metadata.WithResource(newResource(m.owner).Emit()))
	recordHolders(mb, ts, m.holders, newResource)
	if listed {
		recordProcesses(mb, ts, m.processes, newResource, start)
	}
}

// sharingOf marks the resources of a device's use, not its own device
// resource (emitDevice), as MPS-shared while an MPS process is on it.
func sharingOf(rb *metadata.ResourceBuilder, mps bool) *metadata.ResourceBuilder {
	if mps {
		rb.SetNvidiaGpuSharing("mps")
	}
	return rb
}

// migResource starts a MIG device's resource: its GPU's attributes, its
// own and the owner's.
func migResource(mb *metadata.MetricsBuilder, parent nvmlclient.DeviceInfo, info nvmlclient.MIGInfo, o owner) *metadata.ResourceBuilder {
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
func recordDeviceSample(mb *metadata.MetricsBuilder, s *nvmlclient.Sample, readings []plainReading, start pcommon.Timestamp) {
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
func recordHolderSample(mb *metadata.MetricsBuilder, s *nvmlclient.Sample, acct *deviceAccount, readings []plainReading, start pcommon.Timestamp) {
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
func recordMemory(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, used, total, reserved nvmlclient.Opt[uint64]) {
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
// with owner{}, the GPU's device resource.
func gpuResource(mb *metadata.MetricsBuilder, info nvmlclient.DeviceInfo, o owner) *metadata.ResourceBuilder {
	rb := mb.NewResourceBuilder()
	setGPUAttributes(rb, info, o)
	return rb
}

// setGPUAttributes sets the GPU's identity and its owner's on rb.
func setGPUAttributes(rb *metadata.ResourceBuilder, info nvmlclient.DeviceInfo, o owner) {
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
	setOwnerAttributes(rb, o)
}

// setOwnerAttributes sets what is known of a container and its pod, and of
// a Slurm job, on rb.
func setOwnerAttributes(rb *metadata.ResourceBuilder, o owner) {
	if o.ContainerID != "" {
		rb.SetContainerID(o.ContainerID)
	}
	if o.PodUID != "" {
		rb.SetK8sPodUID(o.PodUID)
	}
	if o.PodName != "" {
		rb.SetK8sPodName(o.PodName)
	}
	if o.Namespace != "" {
		rb.SetK8sNamespaceName(o.Namespace)
	}
	if o.ContainerName != "" {
		rb.SetK8sContainerName(o.ContainerName)
	}
	if o.ClaimName != "" {
		rb.SetK8sResourceclaimName(o.ClaimName)
	}
	if o.SlurmJobID != "" {
		rb.SetSlurmJobID(o.SlurmJobID)
	}
	if o.SlurmStep != "" {
		rb.SetSlurmJobStep(o.SlurmStep)
	}
	if o.UserName != "" {
		rb.SetUserName(o.UserName)
	}
}

// gpmGauges record each GPM activity; static, so that a scrape builds no
// closures.
var gpmGauges = [...]struct {
	a      nvmlclient.GPMActivity
	record func(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, v float64)
}{
	{nvmlclient.GPMSMActivity, (*metadata.MetricsBuilder).RecordNvidiaGpuSmActivityDataPoint},
	{nvmlclient.GPMSMOccupancy, (*metadata.MetricsBuilder).RecordNvidiaGpuSmOccupancyDataPoint},
	{nvmlclient.GPMGraphicsActivity, (*metadata.MetricsBuilder).RecordNvidiaGpuGraphicsActivityDataPoint},
	{nvmlclient.GPMTensorActivity, (*metadata.MetricsBuilder).RecordNvidiaGpuTensorActivityDataPoint},
	{nvmlclient.GPMDRAMBandwidth, (*metadata.MetricsBuilder).RecordNvidiaGpuMemoryBandwidthUtilizationDataPoint},
}

var gpmTensorPipes = [...]struct {
	a    nvmlclient.GPMActivity
	attr metadata.AttributeNvidiaGpuTensorPipe
}{
	{nvmlclient.GPMTensorHMMA, metadata.AttributeNvidiaGpuTensorPipeHmma},
	{nvmlclient.GPMTensorIMMA, metadata.AttributeNvidiaGpuTensorPipeImma},
	{nvmlclient.GPMTensorDMMA, metadata.AttributeNvidiaGpuTensorPipeDmma},
	{nvmlclient.GPMTensorDFMA, metadata.AttributeNvidiaGpuTensorPipeDfma},
}

var gpmPipes = [...]struct {
	a    nvmlclient.GPMActivity
	attr metadata.AttributeNvidiaGpuPipe
}{
	{nvmlclient.GPMFP64, metadata.AttributeNvidiaGpuPipeFp64},
	{nvmlclient.GPMFP32, metadata.AttributeNvidiaGpuPipeFp32},
	{nvmlclient.GPMFP16, metadata.AttributeNvidiaGpuPipeFp16},
	{nvmlclient.GPMInteger, metadata.AttributeNvidiaGpuPipeInteger},
}

var gpmTraffic = [...]struct {
	t      nvmlclient.GPMTraffic
	nvlink bool
	dir    metadata.AttributeNetworkIoDirection
}{
	{nvmlclient.GPMPCIeTX, false, metadata.AttributeNetworkIoDirectionTransmit},
	{nvmlclient.GPMPCIeRX, false, metadata.AttributeNetworkIoDirectionReceive},
	{nvmlclient.GPMNVLinkTX, true, metadata.AttributeNetworkIoDirectionTransmit},
	{nvmlclient.GPMNVLinkRX, true, metadata.AttributeNetworkIoDirectionReceive},
}

// recordGPM records what GPM measured over the window, but the traffic.
func recordGPM(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, g *nvmlclient.GPMReading) {
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
func recordGPMTraffic(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, g *nvmlclient.GPMReading) {
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
