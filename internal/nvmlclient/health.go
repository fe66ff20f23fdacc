//go:build cgo

package nvmlclient

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// Health signals: what operators get paged on. ECC errors and row remapping
// say the memory is wearing out, clock-event reasons say why the GPU runs
// below its clocks now, and the violation counters say for how long it has.

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

// healthCollector reads the remapped rows; the other health figures are
// plain rows of the read table.
type healthCollector struct{}

func (*healthCollector) prime(*Device) {}

// landClockEvents sets each reason from the bits of
// nvmlDeviceGetCurrentClocksEventReasons.
func landClockEvents(s *Sample, bits float64) {
	v := uint64(bits)
	for reason, bit := range clockEventBits {
		s.Health.ClockEvents[reason] = some(v&bit != 0)
	}
}

// read reads the remapped rows, four figures of one call; the other
// health figures are plain rows of the read table.
func (*healthCollector) read(r *reading, s *Sample) {
	out := &s.Health
	var corr, unc int
	var pending, failed bool
	if r.do(callRemappedRows, func() (ret nvml.Return) { corr, unc, pending, failed, ret = r.d.handle.GetRemappedRows(); return }) {
		out.RemappedCorrected, out.RemappedUncorrected = some(int64(corr)), some(int64(unc))
		out.RemapPending, out.RemapFailed = some(pending), some(failed)
	}
}
