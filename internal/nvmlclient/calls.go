//go:build cgo

package nvmlclient

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// The read table: every NVML read of a GPU, the figures it answers, and
// for the simple ones how its value lands in the Sample. A call is made
// only while a figure it answers is asked for (WithFigures), so that every
// NVML call of a scrape answers to an enabled metric of the receiver.
// NOT_SUPPORTED, FUNCTION_NOT_FOUND and NO_PERMISSION are cached per call
// and asked again with a backoff (support.go); meanwhile the row's figure
// is absent, or its fallback row answers where it has one. Costs are p50
// CPU per call on an H200 (driver 580, docs/h200-runs.md).
//
// Adding a plain figure (a getter, or one field of the batch) is one row
// here with get or field and land, its metric in the receiver's
// metadata.yaml, its entry in the receiver's figure table (metricFigures)
// and its record line. The mock (test/nvmltest) answers a
// field from its FieldValues map and the fake library from its scenario's
// "fields" key, with no code.

// call names one NVML read: a getter, one field of the per-GPU
// nvmlDeviceGetFieldValues batch, or a sample window.
type call int

const (
	// callNone stands for a read that failed outside any NVML call, and is
	// the fallback of a row that has none.
	callNone call = iota
	callSamplesGPU
	callSamplesMemory
	callSamplesEncoder
	callSamplesDecoder
	callUtilizationRates
	callEncoderUtilization
	callDecoderUtilization
	callMemoryInfo
	callMIGMemoryInfo
	callTemperature
	callMemoryTemperature
	callPowerUsage
	callPowerLimit
	callEnergy
	callClockSM
	callClockMemory
	callClockGraphics
	callClockVideo
	callPerformanceState
	callFanSpeed
	callComputeProcesses
	callGraphicsProcesses
	callProcessUtilization
	callMIGProcesses
	callGPMSampleGet
	callGPMMetricsGet
	callECCCorrected
	callECCUncorrected
	callRemappedRows
	callClockEventReasons
	callViolationPower
	callViolationThermal
	callViolationSyncBoost
	callViolationBoardLimit
	callViolationLowUtilization
	callViolationReliability
	callPCIeReplays
	callPCIeGeneration
	callPCIeWidth
	callNVLinkCRCFlit
	callNVLinkCRCData
	callNVLinkReplay
	callNVLinkRecovery
	callFieldValues // the batch itself: its time and its own failure
	callCount
)

// callSpec is one row of the read table.
type callSpec struct {
	name string // as logged and in CallStats
	// symbol is the C entry point checked at Open: calling one the library
	// lacks kills the process. Empty: every supported driver has it.
	symbol string
	// figures are what the call answers; it is made only while one of them
	// is asked for. None: it serves other rows (the GPM sample and the
	// field batch).
	figures Figures
	// field is the nvmlFieldValue id of a row read as one field of the
	// per-GPU GetFieldValues batch (fields.go); 0: not a field.
	field uint32
	// get is a plain getter: one NVML call, one value. Rows without it
	// and without field are read by their own reader (named in the
	// comment above them).
	get func(nvml.Device) (float64, nvml.Return)
	// per is how many of the raw units make one of the Sample's (0: 1).
	per float64
	// land puts the value, in the Sample's unit, where it belongs.
	land func(*Sample, float64)
	// fallback answers for the figure when this call gives nothing: not
	// supported, or a sample window with no new sample. callNone: the
	// figure is absent.
	fallback call
	// counter marks a cumulative counter read on the counters' cadence,
	// off the scrape path, and reported with its reading's time
	// (counters.go).
	counter bool
}

// value converts a raw reading to the Sample's unit.
func (s *callSpec) value(raw float64) float64 {
	if s.per == 0 {
		return raw
	}
	return raw / s.per
}

// getter wraps a one-value NVML getter for a row.
func getter[T uint32 | uint64 | int](get func(nvml.Device) (T, nvml.Return)) func(nvml.Device) (float64, nvml.Return) {
	return func(h nvml.Device) (float64, nvml.Return) {
		v, ret := get(h)
		return float64(v), ret
	}
}

func clockGetter(typ nvml.ClockType) func(nvml.Device) (float64, nvml.Return) {
	return getter(func(h nvml.Device) (uint32, nvml.Return) { return h.GetClockInfo(typ) })
}

func landClock(clk Clock) func(*Sample, float64) {
	return func(s *Sample, mhz float64) { s.ClockHz[clk] = some(int64(mhz) * 1_000_000) }
}

func landNVLink(e NVLinkError) func(*Sample, float64) {
	return func(s *Sample, v float64) { s.Health.NVLinkErrors[e] = some(int64(v)) }
}

func landViolation(p ViolationPolicy) func(*Sample, float64) {
	return func(s *Sample, v float64) { s.Health.ViolationSeconds[p] = some(v) }
}

var readTable = [callCount]callSpec{
	// Utilization (sampling.go). On GPUs with GPM the general figure is
	// GPM's graphics utilization over the scrape window (gpmMetrics); the
	// GPU window below serves GPUs without GPM. Encoder and decoder read
	// the instant getter, and their window only while the engine is active.
	// A window costs 1.4 ms, the instant getters <0.05 ms.
	callSamplesGPU: {name: "nvmlDeviceGetSamples(GPU_UTILIZATION_SAMPLES)", figures: FiguresOf(FigUtilization),
		fallback: callUtilizationRates},
	callSamplesMemory: {name: "nvmlDeviceGetSamples(MEMORY_UTILIZATION_SAMPLES)", figures: FiguresOf(FigMemoryController),
		fallback: callUtilizationRates},
	callSamplesEncoder: {name: "nvmlDeviceGetSamples(ENC_UTILIZATION_SAMPLES)", figures: FiguresOf(FigUtilization),
		fallback: callEncoderUtilization},
	callSamplesDecoder: {name: "nvmlDeviceGetSamples(DEC_UTILIZATION_SAMPLES)", figures: FiguresOf(FigUtilization),
		fallback: callDecoderUtilization},
	callUtilizationRates: {name: "nvmlDeviceGetUtilizationRates", figures: FiguresOf(FigUtilization, FigMemoryController)},
	callEncoderUtilization: {name: "nvmlDeviceGetEncoderUtilization", figures: FiguresOf(FigUtilization),
		get: getter(func(h nvml.Device) (uint32, nvml.Return) { v, _, ret := h.GetEncoderUtilization(); return v, ret })},
	callDecoderUtilization: {name: "nvmlDeviceGetDecoderUtilization", figures: FiguresOf(FigUtilization),
		get: getter(func(h nvml.Device) (uint32, nvml.Return) { v, _, ret := h.GetDecoderUtilization(); return v, ret })},

	// Memory (readMemory, readMIG): used, total and reserved in one call.
	callMemoryInfo:    {name: "nvmlDeviceGetMemoryInfo", figures: FiguresOf(FigMemory)},
	callMIGMemoryInfo: {name: "nvmlDeviceGetMemoryInfo(MIG device)", figures: FiguresOf(FigMemory)},

	// Thermals and power, <0.05 ms each. Power and its limit stay on their
	// getters: the field ids split average and instant power by
	// architecture, while the getter is what nvidia-smi's power.draw
	// reports on every GPU.
	callTemperature: {name: "nvmlDeviceGetTemperature", figures: FiguresOf(FigTemperature),
		get:  getter(func(h nvml.Device) (uint32, nvml.Return) { return h.GetTemperature(nvml.TEMPERATURE_GPU) }),
		land: func(s *Sample, v float64) { s.TemperatureCelsius = some(v) }},
	callMemoryTemperature: {name: "nvmlDeviceGetFieldValues(FI_DEV_MEMORY_TEMP)", figures: FiguresOf(FigTemperature),
		field: nvml.FI_DEV_MEMORY_TEMP, land: func(s *Sample, v float64) { s.MemoryTemperatureCelsius = some(v) }},
	callPowerUsage: {name: "nvmlDeviceGetPowerUsage", figures: FiguresOf(FigPower),
		get: getter(nvml.Device.GetPowerUsage), per: 1000, land: func(s *Sample, v float64) { s.PowerWatts = some(v) }},
	callPowerLimit: {name: "nvmlDeviceGetEnforcedPowerLimit", figures: FiguresOf(FigPowerLimit),
		get: getter(nvml.Device.GetEnforcedPowerLimit), per: 1000, land: func(s *Sample, v float64) { s.PowerLimitWatts = some(v) }},
	// Energy costs 3.3-7 ms a call: it is read on the counters' cadence.
	callEnergy: {name: "nvmlDeviceGetTotalEnergyConsumption", figures: FiguresOf(FigEnergy), counter: true,
		get: getter(nvml.Device.GetTotalEnergyConsumption), per: 1000, land: func(s *Sample, v float64) { s.EnergyJoules = some(v) }},

	// Clocks, <0.05 ms each.
	callClockSM: {name: "nvmlDeviceGetClockInfo(SM)", figures: FiguresOf(FigClocks),
		get: clockGetter(nvml.CLOCK_SM), land: landClock(ClockSM)},
	callClockMemory: {name: "nvmlDeviceGetClockInfo(MEM)", figures: FiguresOf(FigClocks),
		get: clockGetter(nvml.CLOCK_MEM), land: landClock(ClockMemory)},
	callClockGraphics: {name: "nvmlDeviceGetClockInfo(GRAPHICS)", figures: FiguresOf(FigClocks),
		get: clockGetter(nvml.CLOCK_GRAPHICS), land: landClock(ClockGraphics)},
	callClockVideo: {name: "nvmlDeviceGetClockInfo(VIDEO)", figures: FiguresOf(FigClocks),
		get: clockGetter(nvml.CLOCK_VIDEO), land: landClock(ClockVideo)},
	callPerformanceState: {name: "nvmlDeviceGetPerformanceState", figures: FiguresOf(FigPerformanceState),
		get: getter(func(h nvml.Device) (uint32, nvml.Return) { p, ret := h.GetPerformanceState(); return uint32(p), ret }),
		land: func(s *Sample, v float64) {
			if nvml.Pstates(v) != nvml.PSTATE_UNKNOWN {
				s.PerformanceState = some(int64(v))
			}
		}},
	callFanSpeed: {name: "nvmlDeviceGetFanSpeed", figures: FiguresOf(FigFanSpeed),
		get: getter(nvml.Device.GetFanSpeed), per: 100, land: func(s *Sample, v float64) { s.FanSpeed = some(v) }},

	// Processes (processes.go): the lists (0.01 ms), then their utilization
	// (1.4-1.6 ms) only when a list holds a process. All or nothing: a
	// failed call drops the whole list.
	callComputeProcesses: {name: "nvmlDeviceGetComputeRunningProcesses", symbol: "nvmlDeviceGetComputeRunningProcesses",
		figures: FiguresOf(FigProcesses)},
	callGraphicsProcesses: {name: "nvmlDeviceGetGraphicsRunningProcesses", symbol: "nvmlDeviceGetGraphicsRunningProcesses",
		figures: FiguresOf(FigProcesses)},
	callProcessUtilization: {name: "nvmlDeviceGetProcessUtilization", symbol: "nvmlDeviceGetProcessUtilization",
		figures: FiguresOf(FigProcessUtilization)},
	// A MIG device's own list (mig.go); where it is not supported, the
	// parent's list answers for it.
	callMIGProcesses: {name: "nvmlDeviceGetComputeRunningProcesses(MIG device)", symbol: "nvmlDeviceGetComputeRunningProcesses",
		figures: FiguresOf(FigProcesses)},

	// GPM (gpm.go): one sample (0.05 ms) and one metrics call (0.9-1.7 ms)
	// per GPU per scrape, asking only for the asked-for figures
	// (gpmMetrics). All or nothing.
	callGPMSampleGet:  {name: "nvmlGpmSampleGet"},
	callGPMMetricsGet: {name: "nvmlGpmMetricsGet"},

	// Health, <0.05 ms each. ECC and remapped rows cost 0.015 ms as
	// getters or as fields alike: they stay on their getters, read at every
	// scrape.
	callECCCorrected: {name: "nvmlDeviceGetTotalEccErrors(CORRECTED)", symbol: "nvmlDeviceGetTotalEccErrors",
		figures: FiguresOf(FigECCCorrected),
		get: getter(func(h nvml.Device) (uint64, nvml.Return) {
			return h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
		}),
		land: func(s *Sample, v float64) { s.Health.ECCCorrected = some(uint64(v)) }},
	callECCUncorrected: {name: "nvmlDeviceGetTotalEccErrors(UNCORRECTED)", symbol: "nvmlDeviceGetTotalEccErrors",
		figures: FiguresOf(FigECCUncorrected),
		get: getter(func(h nvml.Device) (uint64, nvml.Return) {
			return h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		}),
		land: func(s *Sample, v float64) { s.Health.ECCUncorrected = some(uint64(v)) }},
	// Remapped rows answer four figures in one call (health.go).
	callRemappedRows: {name: "nvmlDeviceGetRemappedRows", symbol: "nvmlDeviceGetRemappedRows", figures: FiguresOf(FigRemappedRows)},
	callClockEventReasons: {name: "nvmlDeviceGetCurrentClocksEventReasons", symbol: "nvmlDeviceGetCurrentClocksEventReasons",
		figures: FiguresOf(FigClockEvents), get: getter(nvml.Device.GetCurrentClocksEventReasons), land: landClockEvents},
	// The six violation counters cost 0.8-1.3 ms each as getters and
	// 1.0 ms as one field batch; PCIe replays 0.43 ms as getter or field
	// alike, +0.24 ms in the batch: together one field batch of 1.25 ms on
	// the counters' cadence (counters.go). In nanoseconds, like
	// GetViolationStatus (checked on an H200).
	callViolationPower: {name: "nvmlDeviceGetFieldValues(PERF_POLICY_POWER)", figures: FiguresOf(FigViolationTime),
		field: nvml.FI_DEV_PERF_POLICY_POWER, per: 1e9, counter: true, land: landViolation(ViolationPower)},
	callViolationThermal: {name: "nvmlDeviceGetFieldValues(PERF_POLICY_THERMAL)", figures: FiguresOf(FigViolationTime),
		field: nvml.FI_DEV_PERF_POLICY_THERMAL, per: 1e9, counter: true, land: landViolation(ViolationThermal)},
	callViolationSyncBoost: {name: "nvmlDeviceGetFieldValues(PERF_POLICY_SYNC_BOOST)", figures: FiguresOf(FigViolationTime),
		field: nvml.FI_DEV_PERF_POLICY_SYNC_BOOST, per: 1e9, counter: true, land: landViolation(ViolationSyncBoost)},
	callViolationBoardLimit: {name: "nvmlDeviceGetFieldValues(PERF_POLICY_BOARD_LIMIT)", figures: FiguresOf(FigViolationTime),
		field: nvml.FI_DEV_PERF_POLICY_BOARD_LIMIT, per: 1e9, counter: true, land: landViolation(ViolationBoardLimit)},
	callViolationLowUtilization: {name: "nvmlDeviceGetFieldValues(PERF_POLICY_LOW_UTILIZATION)", figures: FiguresOf(FigViolationTime),
		field: nvml.FI_DEV_PERF_POLICY_LOW_UTILIZATION, per: 1e9, counter: true, land: landViolation(ViolationLowUtilization)},
	callViolationReliability: {name: "nvmlDeviceGetFieldValues(PERF_POLICY_RELIABILITY)", figures: FiguresOf(FigViolationTime),
		field: nvml.FI_DEV_PERF_POLICY_RELIABILITY, per: 1e9, counter: true, land: landViolation(ViolationReliability)},
	callPCIeReplays: {name: "nvmlDeviceGetFieldValues(PCIE_REPLAY_COUNTER)", figures: FiguresOf(FigPCIeReplays),
		field: nvml.FI_DEV_PCIE_REPLAY_COUNTER, counter: true, land: func(s *Sample, v float64) { s.Health.PCIeReplays = some(int64(v)) }},
	callPCIeGeneration: {name: "nvmlDeviceGetCurrPcieLinkGeneration", symbol: "nvmlDeviceGetCurrPcieLinkGeneration",
		figures: FiguresOf(FigPCIeGeneration), get: getter(nvml.Device.GetCurrPcieLinkGeneration),
		land: func(s *Sample, v float64) { s.Health.PCIeGeneration = some(int64(v)) }},
	callPCIeWidth: {name: "nvmlDeviceGetCurrPcieLinkWidth", symbol: "nvmlDeviceGetCurrPcieLinkWidth",
		figures: FiguresOf(FigPCIeWidth), get: getter(nvml.Device.GetCurrPcieLinkWidth),
		land: func(s *Sample, v float64) { s.Health.PCIeWidth = some(int64(v)) }},

	// NVLink errors, summed over the links by NVML: cumulative counters, in
	// the counters' batch. NOT_SUPPORTED on a GPU without NVLink, where
	// they are absent.
	callNVLinkCRCFlit: {name: "nvmlDeviceGetFieldValues(NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL)", figures: FiguresOf(FigNVLinkErrors),
		field: nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, counter: true, land: landNVLink(NVLinkCRCFlit)},
	callNVLinkCRCData: {name: "nvmlDeviceGetFieldValues(NVLINK_CRC_DATA_ERROR_COUNT_TOTAL)", figures: FiguresOf(FigNVLinkErrors),
		field: nvml.FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, counter: true, land: landNVLink(NVLinkCRCData)},
	callNVLinkReplay: {name: "nvmlDeviceGetFieldValues(NVLINK_REPLAY_ERROR_COUNT_TOTAL)", figures: FiguresOf(FigNVLinkErrors),
		field: nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, counter: true, land: landNVLink(NVLinkReplay)},
	callNVLinkRecovery: {name: "nvmlDeviceGetFieldValues(NVLINK_RECOVERY_ERROR_COUNT_TOTAL)", figures: FiguresOf(FigNVLinkErrors),
		field: nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, counter: true, land: landNVLink(NVLinkRecovery)},

	// The batch: 0.015 ms with the memory temperature alone; the
	// counters' batch 1.25 ms.
	callFieldValues: {name: "nvmlDeviceGetFieldValues", symbol: "nvmlDeviceGetFieldValues"},
}

// gpmMetric is one GPM metric and the figures it answers. Only the metrics
// whose figures are asked for are asked of nvmlGpmMetricsGet.
type gpmMetric struct {
	id      nvml.GpmMetricId
	figures Figures
}

var gpmActivityMetrics = [gpmActivityCount]gpmMetric{
	GPMSMActivity:  {nvml.GPM_METRIC_SM_UTIL, FiguresOf(FigSMActivity)},
	GPMSMOccupancy: {nvml.GPM_METRIC_SM_OCCUPANCY, FiguresOf(FigSMOccupancy)},
	// Graphics utilization is also the general utilization of a GPU with
	// GPM: the fraction of the window some engine was busy, exact over the
	// window (48.0-49.1 against 47.4-49.0 from GetSamples on a 50 %-duty
	// H200), with no 14 s ring-buffer limit.
	GPMGraphicsActivity: {nvml.GPM_METRIC_GRAPHICS_UTIL, FiguresOf(FigGraphicsActivity, FigUtilization)},
	GPMTensorActivity:   {nvml.GPM_METRIC_ANY_TENSOR_UTIL, FiguresOf(FigTensorActivity)},
	GPMTensorHMMA:       {nvml.GPM_METRIC_HMMA_TENSOR_UTIL, FiguresOf(FigTensorPipes)},
	GPMTensorIMMA:       {nvml.GPM_METRIC_IMMA_TENSOR_UTIL, FiguresOf(FigTensorPipes)},
	GPMTensorDMMA:       {nvml.GPM_METRIC_DMMA_TENSOR_UTIL, FiguresOf(FigTensorPipes)},
	GPMTensorDFMA:       {nvml.GPM_METRIC_DFMA_TENSOR_UTIL, FiguresOf(FigTensorPipes)},
	GPMFP64:             {nvml.GPM_METRIC_FP64_UTIL, FiguresOf(FigPipes)},
	GPMFP32:             {nvml.GPM_METRIC_FP32_UTIL, FiguresOf(FigPipes)},
	GPMFP16:             {nvml.GPM_METRIC_FP16_UTIL, FiguresOf(FigPipes)},
	GPMInteger:          {nvml.GPM_METRIC_INTEGER_UTIL, FiguresOf(FigPipes)},
	GPMDRAMBandwidth:    {nvml.GPM_METRIC_DRAM_BW_UTIL, FiguresOf(FigDRAMBandwidth)},
}

// The traffic metrics are rates in MiB/s over the window.
var gpmTrafficMetrics = [gpmTrafficCount]gpmMetric{
	GPMPCIeTX:   {nvml.GPM_METRIC_PCIE_TX_PER_SEC, FiguresOf(FigPCIeTraffic)},
	GPMPCIeRX:   {nvml.GPM_METRIC_PCIE_RX_PER_SEC, FiguresOf(FigPCIeTraffic)},
	GPMNVLinkTX: {nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, FiguresOf(FigNVLinkTraffic)},
	GPMNVLinkRX: {nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, FiguresOf(FigNVLinkTraffic)},
}

func (c call) String() string {
	if c <= callNone || c >= callCount {
		return "NVML read"
	}
	return readTable[c].name
}
