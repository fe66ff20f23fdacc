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
// CPU per call on an H200 (driver 580, docs/runs/h200-runs.md).
//
// The plain figures, one NVML value each, are rows of plainReads
// (plain.go); the rows here have readers of their own.

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
	// costly marks a read too costly for every scrape: it is read on the
	// counters' cadence, off the scrape path, and reported with its
	// reading's time (counters.go).
	costly bool
	// cumulative marks a counter: it never goes down but by a reset
	// (keptCounter.keep), and a reset gives it a new start.
	cumulative bool
	// links, on a field row, reads the field once per NVLink and folds the
	// links that answer into one value; decode, where set, turns a raw
	// field value into a number first.
	links  linkFold
	decode func(float64) float64
	// fig is a plain row's figure (plain.go), whose value land puts in
	// Sample.Values; valid, where set, says which raw values are readings.
	fig   Figure
	valid func(float64) bool
}

// linkFold is how a per-link field row makes one value of its links.
type linkFold int

const (
	linksNone linkFold = iota // not per link: one field, scope 0
	linksSum                  // a count over the GPU: the sum of its links'
	linksMax                  // the worst link's
)

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

// fixedReads are the reads with readers of their own; readTable adds the
// plain ones (plain.go).
var fixedReads = [callCount]callSpec{
	// Utilization (sampling.go). On GPUs with GPM the general figure is
	// GPM's graphics utilization over the scrape window (gpmActivityMetrics); the
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

	// Memory (readMemory, the MIG collector): used, total and reserved in one call.
	callMemoryInfo:    {name: "nvmlDeviceGetMemoryInfo", figures: FiguresOf(FigMemory)},
	callMIGMemoryInfo: {name: "nvmlDeviceGetMemoryInfo(MIG device)", figures: FiguresOf(FigMemory)},

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
	// (gpmActivityMetrics, gpmTrafficMetrics). All or nothing.
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
	if c <= callNone || c >= allCalls {
		return "NVML read"
	}
	return readTable[c].name
}
