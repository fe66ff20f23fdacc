package record

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

var clockEventReasons = [...]struct {
	r    sample.ClockEventReason
	attr metadata.AttributeNvidiaGpuClockEventReason
}{
	{sample.ReasonGPUIdle, metadata.AttributeNvidiaGpuClockEventReasonGpuIdle},
	{sample.ReasonApplicationsClocks, metadata.AttributeNvidiaGpuClockEventReasonApplicationsClocks},
	{sample.ReasonSWPowerCap, metadata.AttributeNvidiaGpuClockEventReasonSwPowerCap},
	{sample.ReasonHWSlowdown, metadata.AttributeNvidiaGpuClockEventReasonHwSlowdown},
	{sample.ReasonSyncBoost, metadata.AttributeNvidiaGpuClockEventReasonSyncBoost},
	{sample.ReasonSWThermalSlowdown, metadata.AttributeNvidiaGpuClockEventReasonSwThermalSlowdown},
	{sample.ReasonHWThermalSlowdown, metadata.AttributeNvidiaGpuClockEventReasonHwThermalSlowdown},
	{sample.ReasonHWPowerBrakeSlowdown, metadata.AttributeNvidiaGpuClockEventReasonHwPowerBrakeSlowdown},
	{sample.ReasonDisplayClocks, metadata.AttributeNvidiaGpuClockEventReasonDisplayClocks},
}

// The hw.status policy, in one place. A GPU is
//   - failed: NVML says it is lost (fallen off the bus);
//   - predicted_failure: a row remap failed, which NVIDIA's guidance
//     answers with replacing the GPU;
//   - degraded: it works but needs care: a pending row remap (it takes a
//     GPU reset), an uncorrected ECC error, a thermal slowdown
//     (slowdownReasons); or its read is stuck in NVML, so that it never
//     silently vanishes;
//   - ok otherwise.
//
// The graver state wins. statusNeeds are the readings it needs.
var statusNeeds = sample.Of(sample.ECCUncorrected, sample.RemappedRows, sample.ClockEvents)

// slowdownReasons are the clock events that make a GPU degraded: the
// thermal slowdowns, the GPU too hot for its clocks. The GPUThermalSlowdown
// alert watches the same reasons (a test holds the two together).
// hw_slowdown is not one: drivers set it beside hw_thermal_slowdown, beside
// hw_power_brake_slowdown (the node's power, not the GPU: an alert of its
// own), and alone during P-state and clock changes.
var slowdownReasons = [...]sample.ClockEventReason{sample.ReasonSWThermalSlowdown, sample.ReasonHWThermalSlowdown}

// gpuCondition is what the scrape knows of a GPU besides its health.
type gpuCondition int

const (
	gpuRead  gpuCondition = iota // its sample was read
	gpuStuck                     // its read is still running in NVML
	gpuLost                      // NVML said it is lost
)

// hwState is the GPU's hw.status state; h is its health when it was read.
func hwState(c gpuCondition, h *sample.Health) metadata.AttributeHwState {
	switch {
	case c == gpuLost:
		return metadata.AttributeHwStateFailed
	case c == gpuStuck:
		return metadata.AttributeHwStateDegraded
	case h.RemapFailed.OK && h.RemapFailed.Value:
		return metadata.AttributeHwStatePredictedFailure
	case h.RemapPending.OK && h.RemapPending.Value ||
		h.ECCUncorrected.OK && h.ECCUncorrected.Value > 0 ||
		slowedDown(h):
		return metadata.AttributeHwStateDegraded
	}
	return metadata.AttributeHwStateOk
}

// slowedDown reports whether one of slowdownReasons is active.
func slowedDown(h *sample.Health) bool {
	for _, r := range slowdownReasons {
		if v := h.ClockEvents[r]; v.OK && v.Value {
			return true
		}
	}
	return false
}

var hwStates = [...]metadata.AttributeHwState{
	metadata.AttributeHwStateOk, metadata.AttributeHwStateDegraded,
	metadata.AttributeHwStatePredictedFailure, metadata.AttributeHwStateFailed,
}

var rowRemapStates = [...]metadata.AttributeNvidiaGpuMemoryRowRemapState{
	metadata.AttributeNvidiaGpuMemoryRowRemapStateNone, metadata.AttributeNvidiaGpuMemoryRowRemapStatePending,
	metadata.AttributeNvidiaGpuMemoryRowRemapStateFailed,
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// recordHealth records a GPU's health signals and its hw.status; its
// health counters are plain readings (plainReadings).
func recordHealth(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, h *sample.Health) {
	if v := h.ECCCorrected; v.OK {
		mb.RecordHwErrorsDataPoint(ts, int64(v.Value), metadata.AttributeErrorTypeCorrected)
	}
	if v := h.ECCUncorrected; v.OK {
		mb.RecordHwErrorsDataPoint(ts, int64(v.Value), metadata.AttributeErrorTypeUncorrected)
	}
	if v := h.RemappedCorrected; v.OK {
		mb.RecordNvidiaGpuMemoryRowRemapRowsDataPoint(ts, v.Value, metadata.AttributeErrorTypeCorrected)
	}
	if v := h.RemappedUncorrected; v.OK {
		mb.RecordNvidiaGpuMemoryRowRemapRowsDataPoint(ts, v.Value, metadata.AttributeErrorTypeUncorrected)
	}
	if h.RemapPending.OK && h.RemapFailed.OK {
		state := metadata.AttributeNvidiaGpuMemoryRowRemapStateNone
		switch {
		case h.RemapFailed.Value:
			state = metadata.AttributeNvidiaGpuMemoryRowRemapStateFailed
		case h.RemapPending.Value:
			state = metadata.AttributeNvidiaGpuMemoryRowRemapStatePending
		}
		for _, s := range rowRemapStates {
			mb.RecordNvidiaGpuMemoryRowRemapStatusDataPoint(ts, boolInt(s == state), s)
		}
	}
	for _, c := range clockEventReasons {
		if v := h.ClockEvents[c.r]; v.OK {
			mb.RecordNvidiaGpuClockEventActiveDataPoint(ts, boolInt(v.Value), c.attr)
		}
	}
	recordStatus(mb, ts, hwState(gpuRead, h))
}

// recordStatus records hw.status: 1 for state, 0 for the other states.
func recordStatus(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, state metadata.AttributeHwState) {
	for _, s := range hwStates {
		mb.RecordHwStatusDataPoint(ts, boolInt(s == state), s)
	}
}
