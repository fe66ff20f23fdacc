//go:build cgo

package nvmlclient

import (
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/figure"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

//go:generate go run ./internal/figuregen plain.go figure/figures_gen.go figures_gen.go

// The plain read table: one row per plain figure, one NVML value each, a
// getter or one field of the per-GPU nvmlDeviceGetFieldValues batch. Its
// value, divided by per, lands in Sample.Values at the row's figure, whose
// constant figuregen writes from the row (figures_gen.go). The receiver
// maps it to a metric and its attributes; the mock machines and the
// simulated library answer a field from their data with no code, and a
// getter through one line of their getter tables. Costs are p50 CPU per
// call on an H200 (driver 580, docs/runs/h200-runs.md).
var plainReads = [...]callSpec{
	// Thermals and power, <0.05 ms each. Power and its limit stay on their
	// getters: the field ids split average and instant power by
	// architecture, while the getter is what nvidia-smi's power.draw
	// reports on every GPU.
	{fig: figure.Temperature, name: "nvmlDeviceGetTemperature",
		get: getter(func(h nvml.Device) (uint32, nvml.Return) { return h.GetTemperature(nvml.TEMPERATURE_GPU) })},
	// The headroom below the slowdown temperature, in °C. Costly: 0.85 ms
	// a call on the H200 (p50, driver 580), a sixth of a whole scrape; it
	// moves with the temperature, slowly, so the counters' cadence does.
	{fig: figure.MarginTemperature, name: "nvmlDeviceGetMarginTemperature", symbol: "nvmlDeviceGetMarginTemperature", costly: true,
		get: getter(func(h nvml.Device) (int, nvml.Return) {
			m, ret := h.GetMarginTemperature()
			return int(m.MarginTemperature), ret
		})},
	// The HBM's; absent on boards without a memory sensor.
	{fig: figure.MemoryTemperature, name: "nvmlDeviceGetFieldValues(FI_DEV_MEMORY_TEMP)", field: nvml.FI_DEV_MEMORY_TEMP},
	{fig: figure.Power, name: "nvmlDeviceGetPowerUsage", get: getter(nvml.Device.GetPowerUsage), per: 1000},
	{fig: figure.PowerLimit, name: "nvmlDeviceGetEnforcedPowerLimit", get: getter(nvml.Device.GetEnforcedPowerLimit), per: 1000},
	// Clocks, in Hz from MHz, <0.05 ms each.
	{fig: figure.ClockSM, name: "nvmlDeviceGetClockInfo(SM)", get: clockGetter(nvml.CLOCK_SM), per: 1e-6},
	{fig: figure.ClockMemory, name: "nvmlDeviceGetClockInfo(MEM)", get: clockGetter(nvml.CLOCK_MEM), per: 1e-6},
	{fig: figure.ClockGraphics, name: "nvmlDeviceGetClockInfo(GRAPHICS)", get: clockGetter(nvml.CLOCK_GRAPHICS), per: 1e-6},
	{fig: figure.ClockVideo, name: "nvmlDeviceGetClockInfo(VIDEO)", get: clockGetter(nvml.CLOCK_VIDEO), per: 1e-6},
	{fig: figure.PerformanceState, name: "nvmlDeviceGetPerformanceState",
		get:   getter(func(h nvml.Device) (uint32, nvml.Return) { p, ret := h.GetPerformanceState(); return uint32(p), ret }),
		valid: func(v float64) bool { return nvml.Pstates(v) != nvml.PSTATE_UNKNOWN }},
	// A fraction 0..1.
	{fig: figure.FanSpeed, name: "nvmlDeviceGetFanSpeed", get: getter(nvml.Device.GetFanSpeed), per: 100},

	// Energy in joules costs 3.3-7 ms a call: it is read on the counters'
	// cadence.
	{fig: figure.Energy, name: "nvmlDeviceGetTotalEnergyConsumption", costly: true, cumulative: true,
		get: getter(nvml.Device.GetTotalEnergyConsumption), per: 1000},
	// The six violation counters cost 0.8-1.3 ms each as getters and
	// 1.0 ms as one field batch; PCIe replays 0.43 ms as getter or field
	// alike, +0.24 ms in the batch: together one field batch of 1.25 ms on
	// the counters' cadence (counters.go). In seconds, from nanoseconds
	// like GetViolationStatus (checked on an H200).
	{fig: figure.ViolationPower, name: "nvmlDeviceGetFieldValues(PERF_POLICY_POWER)",
		field: nvml.FI_DEV_PERF_POLICY_POWER, per: 1e9, costly: true, cumulative: true},
	{fig: figure.ViolationThermal, name: "nvmlDeviceGetFieldValues(PERF_POLICY_THERMAL)",
		field: nvml.FI_DEV_PERF_POLICY_THERMAL, per: 1e9, costly: true, cumulative: true},
	{fig: figure.ViolationSyncBoost, name: "nvmlDeviceGetFieldValues(PERF_POLICY_SYNC_BOOST)",
		field: nvml.FI_DEV_PERF_POLICY_SYNC_BOOST, per: 1e9, costly: true, cumulative: true},
	{fig: figure.ViolationBoardLimit, name: "nvmlDeviceGetFieldValues(PERF_POLICY_BOARD_LIMIT)",
		field: nvml.FI_DEV_PERF_POLICY_BOARD_LIMIT, per: 1e9, costly: true, cumulative: true},
	{fig: figure.ViolationLowUtilization, name: "nvmlDeviceGetFieldValues(PERF_POLICY_LOW_UTILIZATION)",
		field: nvml.FI_DEV_PERF_POLICY_LOW_UTILIZATION, per: 1e9, costly: true, cumulative: true},
	{fig: figure.ViolationReliability, name: "nvmlDeviceGetFieldValues(PERF_POLICY_RELIABILITY)",
		field: nvml.FI_DEV_PERF_POLICY_RELIABILITY, per: 1e9, costly: true, cumulative: true},
	{fig: figure.PCIeReplays, name: "nvmlDeviceGetFieldValues(PCIE_REPLAY_COUNTER)",
		field: nvml.FI_DEV_PCIE_REPLAY_COUNTER, costly: true, cumulative: true},
	// NVLink errors, summed over the links by NVML: cumulative counters, in
	// the counters' batch. NOT_SUPPORTED on a GPU without NVLink, where
	// they are absent.
	{fig: figure.NVLinkCRCFlit, name: "nvmlDeviceGetFieldValues(NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL)",
		field: nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, costly: true, cumulative: true},
	{fig: figure.NVLinkCRCData, name: "nvmlDeviceGetFieldValues(NVLINK_CRC_DATA_ERROR_COUNT_TOTAL)",
		field: nvml.FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, costly: true, cumulative: true},
	{fig: figure.NVLinkReplay, name: "nvmlDeviceGetFieldValues(NVLINK_REPLAY_ERROR_COUNT_TOTAL)",
		field: nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, costly: true, cumulative: true},
	{fig: figure.NVLinkRecovery, name: "nvmlDeviceGetFieldValues(NVLINK_RECOVERY_ERROR_COUNT_TOTAL)",
		field: nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, costly: true, cumulative: true},
	// Symbol errors, per link (NVLink5), summed over the links that answer.
	{fig: figure.NVLinkSymbolErrors, name: "nvmlDeviceGetFieldValues(NVLINK_COUNT_SYMBOL_ERRORS)",
		field: nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, links: linksSum, costly: true, cumulative: true},
	// The effective bit error rate per link (NVLink5), the worst link's.
	{fig: figure.NVLinkEffectiveBER, name: "nvmlDeviceGetFieldValues(NVLINK_COUNT_EFFECTIVE_BER)",
		field: nvml.FI_DEV_NVLINK_COUNT_EFFECTIVE_BER, links: linksMax, decode: decodeBER, costly: true},
	// PCIe traffic over NVML's 20 ms window, in bytes/s from KiB/s: ~20 ms a
	// call, so read on the counters' cadence.
	{fig: figure.PCIeThroughputTX, name: "nvmlDeviceGetPcieThroughput(TX_BYTES)", per: 1.0 / 1024, costly: true,
		get: getter(func(h nvml.Device) (uint32, nvml.Return) { return h.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES) })},
	{fig: figure.PCIeThroughputRX, name: "nvmlDeviceGetPcieThroughput(RX_BYTES)", per: 1.0 / 1024, costly: true,
		get: getter(func(h nvml.Device) (uint32, nvml.Return) { return h.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES) })},
	// The PCIe link, <0.05 ms each.
	{fig: figure.PCIeGeneration, name: "nvmlDeviceGetCurrPcieLinkGeneration", symbol: "nvmlDeviceGetCurrPcieLinkGeneration",
		get: getter(nvml.Device.GetCurrPcieLinkGeneration)},
	{fig: figure.PCIeWidth, name: "nvmlDeviceGetCurrPcieLinkWidth", symbol: "nvmlDeviceGetCurrPcieLinkWidth",
		get: getter(nvml.Device.GetCurrPcieLinkWidth)},
}

// allCalls counts the calls: the fixed ones, then one per plain figure.
const allCalls = callCount + call(len(plainReads))

// callOf is the call of plain figure f.
func callOf(f Figure) call { return callCount + call(f-firstPlainFigure) }

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
func plainLand(f Figure, valid func(float64) bool) func(*Sample, float64) {
	return func(s *Sample, v float64) {
		if valid == nil || valid(v) {
			s.Values[f] = some(v)
		}
	}
}

// readTable is every row: the fixed reads, then the plain ones, each with
// its figure and landing.
var readTable = func() (t [allCalls]callSpec) {
	copy(t[:], fixedReads[:])
	for i, spec := range plainReads {
		if spec.fig != firstPlainFigure+Figure(i) {
			panic("figures_gen.go is stale: run go generate ./internal/nvmlclient")
		}
		spec.figures = FiguresOf(spec.fig)
		spec.land = plainLand(spec.fig, spec.valid)
		t[callCount+call(i)] = spec
	}
	return t
}()
