//go:build cgo

package nvmlclient

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// The read table: how each figure of a GPU is read, which metric it feeds,
// and what NVML's "not supported" does to it. A call is made only while one
// of the metrics it feeds is enabled (WithMetrics), so that every NVML call
// of a scrape answers to an enabled metric. Costs are p50 CPU per call on an
// H200 (driver 580, docs/h200-runs.md).
//
// Adding a figure: a call here, a Sample field, one line that reads it (the
// reader named in the row), its metric in metadata.yaml and its record line;
// the fake NVML (test/fakenvml) answers it for the e2e suite.

// call names one NVML read: a getter, one field of the per-GPU
// nvmlDeviceGetFieldValues batch, or a sample window.
type call int

const (
	callSamplesGPU call = iota
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
	callFieldValues // the batch itself: its time and its own failure
	callCount
)

// source says how a figure is read.
type source int

const (
	sourceGetter source = iota // one getter call
	sourceField                // one field of the per-GPU GetFieldValues batch (its own return code)
	sourceWindow               // GetSamples: the mean of the samples since the previous read
	sourceGPM                  // GPM: a metric between two GPM samples (gpmMetrics below)
)

// onUnsupported says what NOT_SUPPORTED, FUNCTION_NOT_FOUND or NO_PERMISSION
// does to a figure. Either way the answer is cached and re-probed with a
// backoff (unsupported.go), so a transient answer heals.
type onUnsupported int

const (
	unsupportedAbsent   onUnsupported = iota // the metric is absent for this GPU
	unsupportedFallback                      // the fallback call of the row answers instead
)

// callSpec is one row of the read table.
type callSpec struct {
	name   string // as logged and in CallStats
	source source
	field  uint32 // sourceField: the nvmlFieldValue id
	// per is how many of the field's raw units make one of the Sample's.
	per float64
	// symbol is the C entry point checked at Open: calling one the library
	// lacks kills the process. Empty: every supported driver has it.
	symbol string
	// metrics are the metrics the figure feeds; the call is made only while
	// one of them is enabled. Empty: it serves the other rows (the GPM
	// sample and batch, listed under gpmMetrics and the fields).
	metrics       []string
	onUnsupported onUnsupported
	fallback      call
	// counter marks a costly cumulative counter: read on its own cadence,
	// off the scrape path, and reported with its reading's time
	// (counters.go).
	counter bool
	// cpu is the measured cost per call on an H200, for the reader.
	cpu string
}

const (
	mUtil          = "hw.gpu.utilization"
	mMemCtrl       = "nvidia.gpu.memory.controller.utilization"
	mMemUtil       = "hw.gpu.memory.utilization" // usage / limit
	mMemUsage      = "hw.gpu.memory.usage"
	mMemLimit      = "hw.gpu.memory.limit"
	mMemReserved   = "nvidia.gpu.memory.reserved"
	mTemperature   = "hw.temperature"
	mPower         = "hw.power"
	mPowerLimit    = "nvidia.gpu.power.limit"
	mEnergy        = "hw.energy"
	mClock         = "nvidia.gpu.clock.frequency"
	mPState        = "nvidia.gpu.performance_state"
	mFan           = "nvidia.gpu.fan.speed"
	mProcCount     = "nvidia.gpu.process.count"
	mProcMemory    = "nvidia.gpu.process.memory.usage"
	mProcUtil      = "nvidia.gpu.process.utilization"
	mProcMemCtrl   = "nvidia.gpu.process.memory.controller.utilization"
	mErrors        = "hw.errors"
	mRowsRemapped  = "nvidia.gpu.memory.row_remap.rows"
	mRemapStatus   = "nvidia.gpu.memory.row_remap.status"
	mStatus        = "hw.status"
	mClockEvent    = "nvidia.gpu.clock.event.active"
	mThrottleTime  = "nvidia.gpu.clock.event.time"
	mPCIeReplays   = "nvidia.gpu.pcie.replays"
	mPCIeGen       = "nvidia.gpu.pcie.link.generation"
	mPCIeWidth     = "nvidia.gpu.pcie.link.width"
	mSMActivity    = "nvidia.gpu.sm.activity"
	mSMOccupancy   = "nvidia.gpu.sm.occupancy"
	mGraphics      = "nvidia.gpu.graphics.activity"
	mTensor        = "nvidia.gpu.tensor.activity"
	mTensorPipe    = "nvidia.gpu.tensor.pipe.activity"
	mPipe          = "nvidia.gpu.pipe.activity"
	mDRAMBandwidth = "nvidia.gpu.memory.bandwidth.utilization"
	mIO            = "hw.gpu.io"
	mNVLinkIO      = "nvidia.gpu.nvlink.io"
)

var processMetrics = []string{mProcCount, mProcMemory, mProcUtil, mProcMemCtrl}

var readTable = [callCount]callSpec{
	// Utilization. On GPUs with GPM the general figure is GPM's graphics
	// utilization over the scrape window (gpmMetrics); the GPU window
	// below serves GPUs without GPM. Encoder and decoder read the instant
	// getter, and their window only while the engine is active.
	callSamplesGPU: {name: "nvmlDeviceGetSamples(GPU_UTILIZATION_SAMPLES)", source: sourceWindow,
		metrics: []string{mUtil}, onUnsupported: unsupportedFallback, fallback: callUtilizationRates, cpu: "1.4 ms"},
	callSamplesMemory: {name: "nvmlDeviceGetSamples(MEMORY_UTILIZATION_SAMPLES)", source: sourceWindow,
		metrics: []string{mMemCtrl}, onUnsupported: unsupportedFallback, fallback: callUtilizationRates, cpu: "1.4 ms"},
	callSamplesEncoder: {name: "nvmlDeviceGetSamples(ENC_UTILIZATION_SAMPLES)", source: sourceWindow,
		metrics: []string{mUtil}, onUnsupported: unsupportedFallback, fallback: callEncoderUtilization, cpu: "1.4 ms"},
	callSamplesDecoder: {name: "nvmlDeviceGetSamples(DEC_UTILIZATION_SAMPLES)", source: sourceWindow,
		metrics: []string{mUtil}, onUnsupported: unsupportedFallback, fallback: callDecoderUtilization, cpu: "1.4 ms"},
	callUtilizationRates:   {name: "nvmlDeviceGetUtilizationRates", metrics: []string{mUtil, mMemCtrl}, cpu: "<0.05 ms"},
	callEncoderUtilization: {name: "nvmlDeviceGetEncoderUtilization", metrics: []string{mUtil}, cpu: "<0.05 ms"},
	callDecoderUtilization: {name: "nvmlDeviceGetDecoderUtilization", metrics: []string{mUtil}, cpu: "<0.05 ms"},

	// Memory.
	callMemoryInfo: {name: "nvmlDeviceGetMemoryInfo", metrics: []string{mMemUsage, mMemLimit, mMemUtil, mMemReserved},
		cpu: "<0.05 ms"},
	callMIGMemoryInfo: {name: "nvmlDeviceGetMemoryInfo(MIG device)", metrics: []string{mMemUsage, mMemLimit, mMemUtil, mMemReserved},
		cpu: "<0.05 ms"},

	// Thermals and power. Power and its limit stay on their getters: the
	// field ids split average and instant power by architecture, while the
	// getter is what nvidia-smi's power.draw reports on every GPU.
	callTemperature: {name: "nvmlDeviceGetTemperature", metrics: []string{mTemperature}, cpu: "<0.05 ms"},
	callMemoryTemperature: {name: "nvmlDeviceGetFieldValues(FI_DEV_MEMORY_TEMP)", source: sourceField, field: nvml.FI_DEV_MEMORY_TEMP,
		per: 1, metrics: []string{mTemperature}, cpu: "in the batch"},
	callPowerUsage: {name: "nvmlDeviceGetPowerUsage", metrics: []string{mPower}, cpu: "<0.05 ms"},
	callPowerLimit: {name: "nvmlDeviceGetEnforcedPowerLimit", metrics: []string{mPowerLimit}, cpu: "<0.05 ms"},
	// Energy costs 3-7 ms a call: it is read on the counters' cadence, off
	// the scrape path (counters.go).
	callEnergy: {name: "nvmlDeviceGetTotalEnergyConsumption", metrics: []string{mEnergy}, counter: true,
		cpu: "3.3-7 ms, counters' cadence"},

	// Clocks.
	callClockSM:          {name: "nvmlDeviceGetClockInfo(SM)", metrics: []string{mClock}, cpu: "<0.05 ms"},
	callClockMemory:      {name: "nvmlDeviceGetClockInfo(MEM)", metrics: []string{mClock}, cpu: "<0.05 ms"},
	callClockGraphics:    {name: "nvmlDeviceGetClockInfo(GRAPHICS)", metrics: []string{mClock}, cpu: "<0.05 ms"},
	callClockVideo:       {name: "nvmlDeviceGetClockInfo(VIDEO)", metrics: []string{mClock}, cpu: "<0.05 ms"},
	callPerformanceState: {name: "nvmlDeviceGetPerformanceState", metrics: []string{mPState}, cpu: "<0.05 ms"},
	callFanSpeed:         {name: "nvmlDeviceGetFanSpeed", metrics: []string{mFan}, cpu: "<0.05 ms"},

	// Processes: the lists, then their utilization only when a list holds
	// a process. All or nothing: a failed call drops the whole list.
	callComputeProcesses: {name: "nvmlDeviceGetComputeRunningProcesses", symbol: "nvmlDeviceGetComputeRunningProcesses",
		metrics: processMetrics, cpu: "0.01 ms"},
	callGraphicsProcesses: {name: "nvmlDeviceGetGraphicsRunningProcesses", symbol: "nvmlDeviceGetGraphicsRunningProcesses",
		metrics: processMetrics, cpu: "0.01 ms"},
	callProcessUtilization: {name: "nvmlDeviceGetProcessUtilization", symbol: "nvmlDeviceGetProcessUtilization",
		metrics: []string{mProcUtil, mProcMemCtrl}, cpu: "1.4-1.6 ms, only with processes"},

	// GPM: one sample and one metrics call per GPU per scrape, asking only
	// for the enabled metrics (gpmMetrics). All or nothing.
	callGPMSampleGet:  {name: "nvmlGpmSampleGet", source: sourceGPM, cpu: "0.05 ms"},
	callGPMMetricsGet: {name: "nvmlGpmMetricsGet", source: sourceGPM, cpu: "0.9-1.7 ms"},

	// Health. ECC and remapped rows stay on their getters (<0.05 ms each;
	// as fields they cost ~0.7 ms more in the batch on an H200).
	callECCCorrected: {name: "nvmlDeviceGetTotalEccErrors(CORRECTED)", symbol: "nvmlDeviceGetTotalEccErrors",
		metrics: []string{mErrors}, cpu: "<0.05 ms"},
	callECCUncorrected: {name: "nvmlDeviceGetTotalEccErrors(UNCORRECTED)", symbol: "nvmlDeviceGetTotalEccErrors",
		metrics: []string{mErrors, mStatus}, cpu: "<0.05 ms"},
	callRemappedRows: {name: "nvmlDeviceGetRemappedRows", symbol: "nvmlDeviceGetRemappedRows",
		metrics: []string{mRowsRemapped, mRemapStatus, mStatus}, cpu: "<0.05 ms"},
	callClockEventReasons: {name: "nvmlDeviceGetCurrentClocksEventReasons", symbol: "nvmlDeviceGetCurrentClocksEventReasons",
		metrics: []string{mClockEvent, mStatus}, cpu: "<0.05 ms"},
	// The six violation counters cost 0.45-0.8 ms each as getters, 1.0 ms
	// together as fields, and PCIe replays 0.43 ms either way: these seven
	// are one batch on the counters' cadence (counters.go). In nanoseconds,
	// like GetViolationStatus (checked on an H200). ECC and remapped rows
	// cost 0.015 ms as getters or as fields alike, and stay on their
	// getters.
	callViolationPower: {name: "nvmlDeviceGetFieldValues(PERF_POLICY_POWER)", source: sourceField,
		field: nvml.FI_DEV_PERF_POLICY_POWER, per: 1e9, metrics: []string{mThrottleTime}, counter: true, cpu: "counters' batch"},
	callViolationThermal: {name: "nvmlDeviceGetFieldValues(PERF_POLICY_THERMAL)", source: sourceField,
		field: nvml.FI_DEV_PERF_POLICY_THERMAL, per: 1e9, metrics: []string{mThrottleTime}, counter: true, cpu: "counters' batch"},
	callViolationSyncBoost: {name: "nvmlDeviceGetFieldValues(PERF_POLICY_SYNC_BOOST)", source: sourceField,
		field: nvml.FI_DEV_PERF_POLICY_SYNC_BOOST, per: 1e9, metrics: []string{mThrottleTime}, counter: true, cpu: "counters' batch"},
	callViolationBoardLimit: {name: "nvmlDeviceGetFieldValues(PERF_POLICY_BOARD_LIMIT)", source: sourceField,
		field: nvml.FI_DEV_PERF_POLICY_BOARD_LIMIT, per: 1e9, metrics: []string{mThrottleTime}, counter: true, cpu: "counters' batch"},
	callViolationLowUtilization: {name: "nvmlDeviceGetFieldValues(PERF_POLICY_LOW_UTILIZATION)", source: sourceField,
		field: nvml.FI_DEV_PERF_POLICY_LOW_UTILIZATION, per: 1e9, metrics: []string{mThrottleTime}, counter: true, cpu: "counters' batch"},
	callViolationReliability: {name: "nvmlDeviceGetFieldValues(PERF_POLICY_RELIABILITY)", source: sourceField,
		field: nvml.FI_DEV_PERF_POLICY_RELIABILITY, per: 1e9, metrics: []string{mThrottleTime}, counter: true, cpu: "counters' batch"},
	callPCIeReplays: {name: "nvmlDeviceGetFieldValues(PCIE_REPLAY_COUNTER)", source: sourceField,
		field: nvml.FI_DEV_PCIE_REPLAY_COUNTER, per: 1, metrics: []string{mPCIeReplays}, counter: true, cpu: "counters' batch"},
	callPCIeGeneration: {name: "nvmlDeviceGetCurrPcieLinkGeneration", symbol: "nvmlDeviceGetCurrPcieLinkGeneration",
		metrics: []string{mPCIeGen}, cpu: "<0.05 ms"},
	callPCIeWidth: {name: "nvmlDeviceGetCurrPcieLinkWidth", symbol: "nvmlDeviceGetCurrPcieLinkWidth",
		metrics: []string{mPCIeWidth}, cpu: "<0.05 ms"},

	callFieldValues: {name: "nvmlDeviceGetFieldValues", symbol: "nvmlDeviceGetFieldValues", cpu: "0.015 ms (memory temperature); 1.25 ms the counters' batch"},
}

// gpmMetric is one GPM metric: which figure of GPMReading it fills, and
// which metrics it feeds. Only the metrics whose figures are enabled are
// asked of nvmlGpmMetricsGet.
type gpmMetric struct {
	id      nvml.GpmMetricId
	metrics []string
}

var gpmActivityMetrics = [gpmActivityCount]gpmMetric{
	GPMSMActivity:  {nvml.GPM_METRIC_SM_UTIL, []string{mSMActivity}},
	GPMSMOccupancy: {nvml.GPM_METRIC_SM_OCCUPANCY, []string{mSMOccupancy}},
	// Graphics utilization is also the general utilization of a GPU with
	// GPM: the fraction of the window some engine was busy, exact over the
	// window (48.0-49.1 against 47.4-49.0 from GetSamples on a 50 %-duty
	// H200), with no 14 s ring-buffer limit.
	GPMGraphicsActivity: {nvml.GPM_METRIC_GRAPHICS_UTIL, []string{mGraphics, mUtil}},
	GPMTensorActivity:   {nvml.GPM_METRIC_ANY_TENSOR_UTIL, []string{mTensor}},
	GPMTensorHMMA:       {nvml.GPM_METRIC_HMMA_TENSOR_UTIL, []string{mTensorPipe}},
	GPMTensorIMMA:       {nvml.GPM_METRIC_IMMA_TENSOR_UTIL, []string{mTensorPipe}},
	GPMTensorDMMA:       {nvml.GPM_METRIC_DMMA_TENSOR_UTIL, []string{mTensorPipe}},
	GPMTensorDFMA:       {nvml.GPM_METRIC_DFMA_TENSOR_UTIL, []string{mTensorPipe}},
	GPMFP64:             {nvml.GPM_METRIC_FP64_UTIL, []string{mPipe}},
	GPMFP32:             {nvml.GPM_METRIC_FP32_UTIL, []string{mPipe}},
	GPMFP16:             {nvml.GPM_METRIC_FP16_UTIL, []string{mPipe}},
	GPMInteger:          {nvml.GPM_METRIC_INTEGER_UTIL, []string{mPipe}},
	GPMDRAMBandwidth:    {nvml.GPM_METRIC_DRAM_BW_UTIL, []string{mDRAMBandwidth}},
}

// The traffic metrics are rates in MiB/s over the window.
var gpmTrafficMetrics = [gpmTrafficCount]gpmMetric{
	GPMPCIeTX:   {nvml.GPM_METRIC_PCIE_TX_PER_SEC, []string{mIO}},
	GPMPCIeRX:   {nvml.GPM_METRIC_PCIE_RX_PER_SEC, []string{mIO}},
	GPMNVLinkTX: {nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, []string{mNVLinkIO}},
	GPMNVLinkRX: {nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, []string{mNVLinkIO}},
}

// callNone stands for a read that failed outside any NVML call.
const callNone call = -1

func (c call) String() string {
	if c < 0 || c >= callCount {
		return "NVML read"
	}
	return readTable[c].name
}

// FedMetrics lists every metric the read table feeds, for the receiver's
// check that each names a metric of metadata.yaml.
func FedMetrics() []string {
	seen := map[string]bool{}
	var out []string
	add := func(ms []string) {
		for _, m := range ms {
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	for _, s := range readTable {
		add(s.metrics)
	}
	for _, g := range gpmActivityMetrics {
		add(g.metrics)
	}
	for _, g := range gpmTrafficMetrics {
		add(g.metrics)
	}
	return out
}
