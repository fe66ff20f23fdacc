//go:build cgo

package nvmlclient

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// The plain reads of this package's tests: the receiver's, by their place
// in Sample.Values. A Client of these tests reads them all unless a test
// passes WithReads.
const (
	FigTemperature = iota
	FigMarginTemperature
	FigMemoryTemperature
	FigPower
	FigPowerLimit
	FigClockSM
	FigClockMemory
	FigClockGraphics
	FigClockVideo
	FigPerformanceState
	FigFanSpeed
	FigEnergy
	FigViolationPower
	FigViolationThermal
	FigViolationSyncBoost
	FigViolationBoardLimit
	FigViolationLowUtilization
	FigViolationReliability
	FigPCIeReplays
	FigNVLinkCRCFlit
	FigNVLinkCRCData
	FigNVLinkReplay
	FigNVLinkRecovery
	FigNVLinkSymbolErrors
	FigNVLinkEffectiveBER
	FigPCIeThroughputTX
	FigPCIeThroughputRX
	FigPCIeGeneration
	FigPCIeWidth
)

func clock(typ nvml.ClockType, name string) Read {
	return GetterOf(nvml.Device.GetClockInfo, typ, name).Divisor(1e-6)
}

func violation(name string, id uint32) Read { return Field(name, id).Divisor(1e9).Counter() }

var testReads = []Read{
	FigTemperature: GetterOf(nvml.Device.GetTemperature, nvml.TEMPERATURE_GPU, "GPU").Named("nvmlDeviceGetTemperature"),
	FigMarginTemperature: Getter(func(h nvml.Device) (int32, nvml.Return) {
		m, ret := h.GetMarginTemperature()
		return m.MarginTemperature, ret
	}).Named("nvmlDeviceGetMarginTemperature").Costly(),
	FigMemoryTemperature: Field("FI_DEV_MEMORY_TEMP", nvml.FI_DEV_MEMORY_TEMP),
	FigPower:             Getter(nvml.Device.GetPowerUsage).Divisor(1000),
	FigPowerLimit:        Getter(nvml.Device.GetEnforcedPowerLimit).Divisor(1000),
	FigClockSM:           clock(nvml.CLOCK_SM, "SM"),
	FigClockMemory:       clock(nvml.CLOCK_MEM, "MEM"),
	FigClockGraphics:     clock(nvml.CLOCK_GRAPHICS, "GRAPHICS"),
	FigClockVideo:        clock(nvml.CLOCK_VIDEO, "VIDEO"),
	FigPerformanceState: Getter(nvml.Device.GetPerformanceState).
		Valid(func(v float64) bool { return nvml.Pstates(v) != nvml.PSTATE_UNKNOWN }),
	FigFanSpeed:                Getter(nvml.Device.GetFanSpeed).Divisor(100),
	FigEnergy:                  Getter(nvml.Device.GetTotalEnergyConsumption).Divisor(1000).Counter(),
	FigViolationPower:          violation("PERF_POLICY_POWER", nvml.FI_DEV_PERF_POLICY_POWER),
	FigViolationThermal:        violation("PERF_POLICY_THERMAL", nvml.FI_DEV_PERF_POLICY_THERMAL),
	FigViolationSyncBoost:      violation("PERF_POLICY_SYNC_BOOST", nvml.FI_DEV_PERF_POLICY_SYNC_BOOST),
	FigViolationBoardLimit:     violation("PERF_POLICY_BOARD_LIMIT", nvml.FI_DEV_PERF_POLICY_BOARD_LIMIT),
	FigViolationLowUtilization: violation("PERF_POLICY_LOW_UTILIZATION", nvml.FI_DEV_PERF_POLICY_LOW_UTILIZATION),
	FigViolationReliability:    violation("PERF_POLICY_RELIABILITY", nvml.FI_DEV_PERF_POLICY_RELIABILITY),
	FigPCIeReplays:             Field("PCIE_REPLAY_COUNTER", nvml.FI_DEV_PCIE_REPLAY_COUNTER).Counter(),
	FigNVLinkCRCFlit:           Field("NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL).Counter(),
	FigNVLinkCRCData:           Field("NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", nvml.FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL).Counter(),
	FigNVLinkReplay:            Field("NVLINK_REPLAY_ERROR_COUNT_TOTAL", nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL).Counter(),
	FigNVLinkRecovery:          Field("NVLINK_RECOVERY_ERROR_COUNT_TOTAL", nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL).Counter(),
	FigNVLinkSymbolErrors:      Field("NVLINK_COUNT_SYMBOL_ERRORS", nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS).SumLinks().Counter(),
	FigNVLinkEffectiveBER:      Field("NVLINK_COUNT_EFFECTIVE_BER", nvml.FI_DEV_NVLINK_COUNT_EFFECTIVE_BER).MaxLinks().Decode(DecodeBER).Costly(),
	FigPCIeThroughputTX:        GetterOf(nvml.Device.GetPcieThroughput, nvml.PCIE_UTIL_TX_BYTES, "TX_BYTES").Divisor(1.0 / 1024).Costly(),
	FigPCIeThroughputRX:        GetterOf(nvml.Device.GetPcieThroughput, nvml.PCIE_UTIL_RX_BYTES, "RX_BYTES").Divisor(1.0 / 1024).Costly(),
	FigPCIeGeneration:          Getter(nvml.Device.GetCurrPcieLinkGeneration),
	FigPCIeWidth:               Getter(nvml.Device.GetCurrPcieLinkWidth),
}

func init() { defaultReads = testReads }

// waitBackground waits up to timeout for the session's calls in flight to
// end (a background counter read among them), and reports whether none is
// left.
func (d *Device) waitBackground(timeout time.Duration) bool {
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if d.gpu.Session.Calls.Count() == 0 {
			return true
		}
	}
	return false
}

// panicCount is the number of panics recovered in d's reads.
func (d *Device) panicCount() int64 { return d.gpu.Panics() }

func some[T any](v T) sample.Opt[T] { return sample.Some(v) }
