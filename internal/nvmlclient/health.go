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

var violationCalls = [violationPolicyCount]struct {
	call   call
	policy nvml.PerfPolicyType
}{
	ViolationPower:          {callViolationPower, nvml.PERF_POLICY_POWER},
	ViolationThermal:        {callViolationThermal, nvml.PERF_POLICY_THERMAL},
	ViolationSyncBoost:      {callViolationSyncBoost, nvml.PERF_POLICY_SYNC_BOOST},
	ViolationBoardLimit:     {callViolationBoardLimit, nvml.PERF_POLICY_BOARD_LIMIT},
	ViolationLowUtilization: {callViolationLowUtilization, nvml.PERF_POLICY_LOW_UTILIZATION},
	ViolationReliability:    {callViolationReliability, nvml.PERF_POLICY_RELIABILITY},
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

func (r *reading) readHealth(s *Sample) {
	h := r.d.handle
	out := &s.Health
	if !r.skip(callECCCorrected) {
		if v, ret := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC); r.ok(callECCCorrected, ret) {
			out.ECCCorrected = some(v)
		}
	}
	if !r.skip(callECCUncorrected) {
		if v, ret := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); r.ok(callECCUncorrected, ret) {
			out.ECCUncorrected = some(v)
		}
	}
	if !r.skip(callRemappedRows) {
		if corr, unc, pending, failed, ret := h.GetRemappedRows(); r.ok(callRemappedRows, ret) {
			out.RemappedCorrected, out.RemappedUncorrected = some(int64(corr)), some(int64(unc))
			out.RemapPending, out.RemapFailed = some(pending), some(failed)
		}
	}
	if !r.skip(callClockEventReasons) {
		if bits, ret := h.GetCurrentClocksEventReasons(); r.ok(callClockEventReasons, ret) {
			for reason, bit := range clockEventBits {
				out.ClockEvents[reason] = some(bits&bit != 0)
			}
		}
	}
	for p, vc := range violationCalls {
		if r.skip(vc.call) {
			continue
		}
		if v, ret := h.GetViolationStatus(vc.policy); r.ok(vc.call, ret) {
			out.ViolationSeconds[p] = some(float64(v.ViolationTime) / 1e9)
		}
	}
	if !r.skip(callPCIeReplays) {
		if v, ret := h.GetPcieReplayCounter(); r.ok(callPCIeReplays, ret) {
			out.PCIeReplays = some(int64(v))
		}
	}
	if !r.skip(callPCIeGeneration) {
		if v, ret := h.GetCurrPcieLinkGeneration(); r.ok(callPCIeGeneration, ret) {
			out.PCIeGeneration = some(int64(v))
		}
	}
	if !r.skip(callPCIeWidth) {
		if v, ret := h.GetCurrPcieLinkWidth(); r.ok(callPCIeWidth, ret) {
			out.PCIeWidth = some(int64(v))
		}
	}
}
