package nvmlclient

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// Health signals: what operators get paged on. ECC errors and row remapping
// say the memory is wearing out, clock-event reasons say why the GPU runs
// below its clocks now, and the violation counters say for how long it has.

// ClockEventReason names one bit of nvmlDeviceGetCurrentClocksEventReasons.
type ClockEventReason int

const (
	ReasonGPUIdle ClockEventReason = iota
	ReasonApplicationsClocks
	ReasonSWPowerCap
	ReasonHWSlowdown
	ReasonSyncBoost
	ReasonSWThermalSlowdown
	ReasonHWThermalSlowdown
	ReasonHWPowerBrakeSlowdown
	ReasonDisplayClocks
	clockEventReasonCount
)

var clockEventBits = [clockEventReasonCount]uint64{
	ReasonGPUIdle:              nvml.ClocksEventReasonGpuIdle,
	ReasonApplicationsClocks:   nvml.ClocksEventReasonApplicationsClocksSetting,
	ReasonSWPowerCap:           nvml.ClocksEventReasonSwPowerCap,
	ReasonHWSlowdown:           nvml.ClocksThrottleReasonHwSlowdown,
	ReasonSyncBoost:            nvml.ClocksEventReasonSyncBoost,
	ReasonSWThermalSlowdown:    nvml.ClocksEventReasonSwThermalSlowdown,
	ReasonHWThermalSlowdown:    nvml.ClocksThrottleReasonHwThermalSlowdown,
	ReasonHWPowerBrakeSlowdown: nvml.ClocksThrottleReasonHwPowerBrakeSlowdown,
	ReasonDisplayClocks:        nvml.ClocksEventReasonDisplayClockSetting,
}

// ViolationPolicy names one nvmlDeviceGetViolationStatus counter.
type ViolationPolicy int

const (
	ViolationPower ViolationPolicy = iota
	ViolationThermal
	ViolationSyncBoost
	ViolationBoardLimit
	ViolationLowUtilization
	ViolationReliability
	violationPolicyCount
)

// violationCalls are the fields of the six counters, by policy.
var violationCalls = [violationPolicyCount]call{
	ViolationPower:          callViolationPower,
	ViolationThermal:        callViolationThermal,
	ViolationSyncBoost:      callViolationSyncBoost,
	ViolationBoardLimit:     callViolationBoardLimit,
	ViolationLowUtilization: callViolationLowUtilization,
	ViolationReliability:    callViolationReliability,
}

// Health is one reading of a GPU's health signals.
type Health struct {
	// Volatile ECC error counts since the driver loaded.
	ECCCorrected, ECCUncorrected Opt[uint64]
	// Row remapping (Ampere and newer).
	RemappedCorrected, RemappedUncorrected Opt[int64]
	RemapPending, RemapFailed              Opt[bool]
	// Active clock-event reasons; absent when the call is not supported.
	ClockEvents [clockEventReasonCount]Opt[bool]
	// Time spent below the clocks asked for, per policy, in seconds.
	ViolationSeconds [violationPolicyCount]Opt[float64]
	PCIeReplays      Opt[int64]
	PCIeGeneration   Opt[int64]
	PCIeWidth        Opt[int64]
}

// PredictedFailure reports whether NVML says the GPU will fail: a row remap
// failed, which NVIDIA's guidance answers with replacing the GPU.
func (h *Health) PredictedFailure() bool {
	return h.RemapFailed.OK && h.RemapFailed.Value
}

// Degraded reports whether the readings say the GPU works but needs care:
// a pending row remap (it takes a GPU reset), an uncorrected ECC error, or a
// thermal slowdown.
func (h *Health) Degraded() bool {
	return h.RemapPending.OK && h.RemapPending.Value ||
		h.ECCUncorrected.OK && h.ECCUncorrected.Value > 0 ||
		h.ClockEvents[ReasonSWThermalSlowdown].Value ||
		h.ClockEvents[ReasonHWThermalSlowdown].Value
}

// readHealth reads the health getters; the violation counters and PCIe
// replays come from the field batch (fields.go).
func (r *reading) readHealth(s *Sample) {
	h := r.d.handle
	out := &s.Health
	var v uint64
	if r.do(callECCCorrected, func() (ret nvml.Return) {
		v, ret = h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
		return
	}) {
		out.ECCCorrected = some(v)
	}
	if r.do(callECCUncorrected, func() (ret nvml.Return) {
		v, ret = h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		return
	}) {
		out.ECCUncorrected = some(v)
	}
	var corr, unc int
	var pending, failed bool
	if r.do(callRemappedRows, func() (ret nvml.Return) { corr, unc, pending, failed, ret = h.GetRemappedRows(); return }) {
		out.RemappedCorrected, out.RemappedUncorrected = some(int64(corr)), some(int64(unc))
		out.RemapPending, out.RemapFailed = some(pending), some(failed)
	}
	if r.do(callClockEventReasons, func() (ret nvml.Return) { v, ret = h.GetCurrentClocksEventReasons(); return }) {
		for reason, bit := range clockEventBits {
			out.ClockEvents[reason] = some(v&bit != 0)
		}
	}
	var n int
	if r.do(callPCIeGeneration, func() (ret nvml.Return) { n, ret = h.GetCurrPcieLinkGeneration(); return }) {
		out.PCIeGeneration = some(int64(n))
	}
	if r.do(callPCIeWidth, func() (ret nvml.Return) { n, ret = h.GetCurrPcieLinkWidth(); return }) {
		out.PCIeWidth = some(int64(n))
	}
}
