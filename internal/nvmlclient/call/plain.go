//go:build cgo

package call

import (
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/figure"
)

//go:generate go run ../internal/figuregen plain.go ../figure/figures_gen.go ../figures_gen.go

// The plain read table: one row per plain figure, one NVML value each, a
// getter or one field of the per-GPU nvmlDeviceGetFieldValues batch. Its
// value, divided by per, lands in Sample.Values at the row's figure, whose
// constant figuregen writes from the row (figure/figures_gen.go). The receiver
// maps it to a metric and its attributes; the mock machines and the
// simulated library answer a field from their data with no code, and a
// getter through one line of their getter tables. Costs are p50 CPU per
// call on an H200 (driver 580, docs/runs/h200-runs.md).
var plainReads = [...]Spec{
	// Thermals and power, <0.05 ms each. Power and its limit stay on their
	// getters: the field ids split average and instant power by
	// architecture, while the getter is what nvidia-smi's power.draw
	// reports on every GPU.
	{Fig: figure.Temperature, Name: "nvmlDeviceGetTemperature",
		Get: getter(func(h nvml.Device) (uint32, nvml.Return) { return h.GetTemperature(nvml.TEMPERATURE_GPU) })},
	// The headroom below the slowdown temperature, in °C. Costly: 0.85 ms
	// a call on the H200 (p50, driver 580), a sixth of a whole scrape; it
	// moves with the temperature, slowly, so the counters' cadence does.
	{Fig: figure.MarginTemperature, Name: "nvmlDeviceGetMarginTemperature", Symbol: "nvmlDeviceGetMarginTemperature", Costly: true,
		Get: getter(func(h nvml.Device) (int, nvml.Return) {
			m, ret := h.GetMarginTemperature()
			return int(m.MarginTemperature), ret
		})},
	// The HBM's; absent on boards without a memory sensor.
	{Fig: figure.MemoryTemperature, Name: "nvmlDeviceGetFieldValues(FI_DEV_MEMORY_TEMP)", Field: nvml.FI_DEV_MEMORY_TEMP},
	{Fig: figure.Power, Name: "nvmlDeviceGetPowerUsage", Get: getter(nvml.Device.GetPowerUsage), Per: 1000},
	{Fig: figure.PowerLimit, Name: "nvmlDeviceGetEnforcedPowerLimit", Get: getter(nvml.Device.GetEnforcedPowerLimit), Per: 1000},
	// Clocks, in Hz from MHz, <0.05 ms each.
	{Fig: figure.ClockSM, Name: "nvmlDeviceGetClockInfo(SM)", Get: clockGetter(nvml.CLOCK_SM), Per: 1e-6},
	{Fig: figure.ClockMemory, Name: "nvmlDeviceGetClockInfo(MEM)", Get: clockGetter(nvml.CLOCK_MEM), Per: 1e-6},
	{Fig: figure.ClockGraphics, Name: "nvmlDeviceGetClockInfo(GRAPHICS)", Get: clockGetter(nvml.CLOCK_GRAPHICS), Per: 1e-6},
	{Fig: figure.ClockVideo, Name: "nvmlDeviceGetClockInfo(VIDEO)", Get: clockGetter(nvml.CLOCK_VIDEO), Per: 1e-6},
	{Fig: figure.PerformanceState, Name: "nvmlDeviceGetPerformanceState",
		Get:   getter(func(h nvml.Device) (uint32, nvml.Return) { p, ret := h.GetPerformanceState(); return uint32(p), ret }),
		Valid: func(v float64) bool { return nvml.Pstates(v) != nvml.PSTATE_UNKNOWN }},
	// A fraction 0..1.
	{Fig: figure.FanSpeed, Name: "nvmlDeviceGetFanSpeed", Get: getter(nvml.Device.GetFanSpeed), Per: 100},

	// Energy in joules costs 3.3-7 ms a call: it is read on the counters'
	// cadence.
	{Fig: figure.Energy, Name: "nvmlDeviceGetTotalEnergyConsumption", Costly: true, Cumulative: true,
		Get: getter(nvml.Device.GetTotalEnergyConsumption), Per: 1000},
	// The six violation counters cost 0.8-1.3 ms each as getters and
	// 1.0 ms as one field batch; PCIe replays 0.43 ms as getter or field
	// alike, +0.24 ms in the batch: together one field batch of 1.25 ms on
	// the counters' cadence (collect/counters.go). In seconds, from nanoseconds
	// like GetViolationStatus (checked on an H200).
	{Fig: figure.ViolationPower, Name: "nvmlDeviceGetFieldValues(PERF_POLICY_POWER)",
		Field: nvml.FI_DEV_PERF_POLICY_POWER, Per: 1e9, Costly: true, Cumulative: true},
	{Fig: figure.ViolationThermal, Name: "nvmlDeviceGetFieldValues(PERF_POLICY_THERMAL)",
		Field: nvml.FI_DEV_PERF_POLICY_THERMAL, Per: 1e9, Costly: true, Cumulative: true},
	{Fig: figure.ViolationSyncBoost, Name: "nvmlDeviceGetFieldValues(PERF_POLICY_SYNC_BOOST)",
		Field: nvml.FI_DEV_PERF_POLICY_SYNC_BOOST, Per: 1e9, Costly: true, Cumulative: true},
	{Fig: figure.ViolationBoardLimit, Name: "nvmlDeviceGetFieldValues(PERF_POLICY_BOARD_LIMIT)",
		Field: nvml.FI_DEV_PERF_POLICY_BOARD_LIMIT, Per: 1e9, Costly: true, Cumulative: true},
	{Fig: figure.ViolationLowUtilization, Name: "nvmlDeviceGetFieldValues(PERF_POLICY_LOW_UTILIZATION)",
		Field: nvml.FI_DEV_PERF_POLICY_LOW_UTILIZATION, Per: 1e9, Costly: true, Cumulative: true},
	{Fig: figure.ViolationReliability, Name: "nvmlDeviceGetFieldValues(PERF_POLICY_RELIABILITY)",
		Field: nvml.FI_DEV_PERF_POLICY_RELIABILITY, Per: 1e9, Costly: true, Cumulative: true},
	{Fig: figure.PCIeReplays, Name: "nvmlDeviceGetFieldValues(PCIE_REPLAY_COUNTER)",
		Field: nvml.FI_DEV_PCIE_REPLAY_COUNTER, Costly: true, Cumulative: true},
	// NVLink errors, summed over the links by NVML: cumulative counters, in
	// the counters' batch. NOT_SUPPORTED on a GPU without NVLink, where
	// they are absent.
	{Fig: figure.NVLinkCRCFlit, Name: "nvmlDeviceGetFieldValues(NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL)",
		Field: nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, Costly: true, Cumulative: true},
	{Fig: figure.NVLinkCRCData, Name: "nvmlDeviceGetFieldValues(NVLINK_CRC_DATA_ERROR_COUNT_TOTAL)",
		Field: nvml.FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, Costly: true, Cumulative: true},
	{Fig: figure.NVLinkReplay, Name: "nvmlDeviceGetFieldValues(NVLINK_REPLAY_ERROR_COUNT_TOTAL)",
		Field: nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, Costly: true, Cumulative: true},
	{Fig: figure.NVLinkRecovery, Name: "nvmlDeviceGetFieldValues(NVLINK_RECOVERY_ERROR_COUNT_TOTAL)",
		Field: nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, Costly: true, Cumulative: true},
	// Symbol errors, per link (NVLink5), summed over the links that answer.
	{Fig: figure.NVLinkSymbolErrors, Name: "nvmlDeviceGetFieldValues(NVLINK_COUNT_SYMBOL_ERRORS)",
		Field: nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, Links: LinksSum, Costly: true, Cumulative: true},
	// The effective bit error rate per link (NVLink5), the worst link's.
	{Fig: figure.NVLinkEffectiveBER, Name: "nvmlDeviceGetFieldValues(NVLINK_COUNT_EFFECTIVE_BER)",
		Field: nvml.FI_DEV_NVLINK_COUNT_EFFECTIVE_BER, Links: LinksMax, Decode: decodeBER, Costly: true},
	// PCIe traffic over NVML's 20 ms window, in bytes/s from KiB/s: ~20 ms a
	// call, so read on the counters' cadence.
	{Fig: figure.PCIeThroughputTX, Name: "nvmlDeviceGetPcieThroughput(TX_BYTES)", Per: 1.0 / 1024, Costly: true,
		Get: getter(func(h nvml.Device) (uint32, nvml.Return) { return h.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES) })},
	{Fig: figure.PCIeThroughputRX, Name: "nvmlDeviceGetPcieThroughput(RX_BYTES)", Per: 1.0 / 1024, Costly: true,
		Get: getter(func(h nvml.Device) (uint32, nvml.Return) { return h.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES) })},
	// The PCIe link, <0.05 ms each.
	{Fig: figure.PCIeGeneration, Name: "nvmlDeviceGetCurrPcieLinkGeneration", Symbol: "nvmlDeviceGetCurrPcieLinkGeneration",
		Get: getter(nvml.Device.GetCurrPcieLinkGeneration)},
	{Fig: figure.PCIeWidth, Name: "nvmlDeviceGetCurrPcieLinkWidth", Symbol: "nvmlDeviceGetCurrPcieLinkWidth",
		Get: getter(nvml.Device.GetCurrPcieLinkWidth)},
}

// All counts the calls: the fixed ones, then one per plain figure.
const All = fixedCount + ID(len(plainReads))

// Of is the call of plain figure f.
func Of(f figure.Figure) ID { return fixedCount + ID(f-figure.FirstPlain) }

func clockGetter(typ nvml.ClockType) func(nvml.Device) (float64, nvml.Return) {
	return getter(func(h nvml.Device) (uint32, nvml.Return) { return h.GetClockInfo(typ) })
}

// decodeBER reads an NVLink BER field: mantissa × 10^-exponent, packed as
// NVML_NVLINK_ERROR_COUNTER_BER_GET unpacks them.
func decodeBER(raw float64) float64 {
	v := uint64(raw)
	mantissa := v >> nvml.NVLINK_BER_MANTISSA_SHIFT & nvml.NVLINK_BER_MANTISSA_WIDTH
	exponent := v >> nvml.NVLINK_BER_EXP_SHIFT & nvml.NVLINK_BER_EXP_WIDTH
	return float64(mantissa) * math.Pow10(-int(exponent))
}

// plainLand puts a plain figure's value in Sample.Values.
func plainLand(f figure.Figure, valid func(float64) bool) func(*figure.Sample, float64) {
	return func(s *figure.Sample, v float64) {
		if valid == nil || valid(v) {
			s.Values[f] = figure.Some(v)
		}
	}
}

// Table is every row: the fixed reads, then the plain ones, each with
// its figure and landing.
var Table = func() (t [All]Spec) {
	copy(t[:], fixedReads[:])
	for i, spec := range plainReads {
		if spec.Fig != figure.FirstPlain+figure.Figure(i) {
			panic("figures_gen.go is stale: run go generate ./internal/nvmlclient/call")
		}
		spec.Figures = figure.Of(spec.Fig)
		spec.Land = plainLand(spec.Fig, spec.Valid)
		t[fixedCount+ID(i)] = spec
	}
	return t
}()
