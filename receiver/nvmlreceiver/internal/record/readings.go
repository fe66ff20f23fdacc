//go:build cgo

package record

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// plainReadings are the points of the plain metrics, in the order
// recorded: each is one NVML reading (a getter, or one field of the GPU's
// field batch, with its scale and cadence) and the metric it records
// (metadata.yaml's, through its Record method, which also says whether
// the metric is enabled). A new plain metric is metadata.yaml and one row
// here, and a value for its getter in the simulated GPU
// (test/nvmltest/getters.json). Costs are p50 CPU per call on an H200
// (driver 580, docs/runs/h200-runs.md): a read of 1 ms or more is Costly,
// read on the counters' cadence, off the scrape path.
var plainReadings = []Reading{
	// Of the GPU's use, on its holder resource.
	// Thermals and power, <0.05 ms each. Power and its limit stay on their
	// getters: the field ids split average and instant power by
	// architecture, while the getter is what nvidia-smi's power.draw
	// reports on every GPU.
	use(f64a((*builder).RecordHwTemperatureDataPoint, metadata.AttributeHwSensorLocationGpu),
		nvmlclient.GetterOf(nvml.Device.GetTemperature, nvml.TEMPERATURE_GPU, "GPU").Named("nvmlDeviceGetTemperature")),
	// The HBM's; absent on boards without a memory sensor.
	use(f64a((*builder).RecordHwTemperatureDataPoint, metadata.AttributeHwSensorLocationMemory),
		nvmlclient.Field("FI_DEV_MEMORY_TEMP", nvml.FI_DEV_MEMORY_TEMP)),
	// The headroom below the slowdown temperature, in °C: 0.85 ms a call,
	// a sixth of a whole scrape, and it moves slowly with the temperature.
	use(f64((*builder).RecordNvidiaGpuTemperatureMarginDataPoint),
		nvmlclient.Getter(func(h nvml.Device) (int32, nvml.Return) {
			m, ret := h.GetMarginTemperature()
			return m.MarginTemperature, ret
		}).Named("nvmlDeviceGetMarginTemperature").Costly()),
	use(f64((*builder).RecordHwPowerDataPoint), nvmlclient.Getter(nvml.Device.GetPowerUsage).Divisor(1000)),
	use(f64((*builder).RecordNvidiaGpuPowerLimitDataPoint), nvmlclient.Getter(nvml.Device.GetEnforcedPowerLimit).Divisor(1000)),
	// Clocks, in Hz from MHz, <0.05 ms each.
	use(clock(metadata.AttributeNvidiaGpuClockTypeSm), clockInfo(nvml.CLOCK_SM, "SM")),
	use(clock(metadata.AttributeNvidiaGpuClockTypeMemory), clockInfo(nvml.CLOCK_MEM, "MEM")),
	use(clock(metadata.AttributeNvidiaGpuClockTypeGraphics), clockInfo(nvml.CLOCK_GRAPHICS, "GRAPHICS")),
	use(clock(metadata.AttributeNvidiaGpuClockTypeVideo), clockInfo(nvml.CLOCK_VIDEO, "VIDEO")),
	use(i64((*builder).RecordNvidiaGpuPerformanceStateDataPoint), nvmlclient.Getter(nvml.Device.GetPerformanceState).
		Valid(func(v float64) bool { return nvml.Pstates(v) != nvml.PSTATE_UNKNOWN })),
	// A fraction 0..1.
	use(f64((*builder).RecordNvidiaGpuFanSpeedDataPoint), nvmlclient.Getter(nvml.Device.GetFanSpeed).Divisor(100)),

	// Of the device's life, on its device resource.
	// Energy in joules costs 3.3-7 ms a call.
	device(f64((*builder).RecordHwEnergyDataPoint), nvmlclient.Getter(nvml.Device.GetTotalEnergyConsumption).Divisor(1000).Counter()),
	// The six violation counters cost 0.8-1.3 ms each as getters and
	// 1.0 ms as one field batch; PCIe replays 0.43 ms as getter or field
	// alike, +0.24 ms in the batch: together one field batch of 1.25 ms on
	// the counters' cadence. In seconds, from nanoseconds like
	// GetViolationStatus (checked on an H200).
	device(clockEvent(metadata.AttributeNvidiaGpuClockEventReasonPower), violation("PERF_POLICY_POWER", nvml.FI_DEV_PERF_POLICY_POWER)),
	device(clockEvent(metadata.AttributeNvidiaGpuClockEventReasonThermal), violation("PERF_POLICY_THERMAL", nvml.FI_DEV_PERF_POLICY_THERMAL)),
	device(clockEvent(metadata.AttributeNvidiaGpuClockEventReasonSyncBoost), violation("PERF_POLICY_SYNC_BOOST", nvml.FI_DEV_PERF_POLICY_SYNC_BOOST)),
	device(clockEvent(metadata.AttributeNvidiaGpuClockEventReasonBoardLimit), violation("PERF_POLICY_BOARD_LIMIT", nvml.FI_DEV_PERF_POLICY_BOARD_LIMIT)),
	device(clockEvent(metadata.AttributeNvidiaGpuClockEventReasonLowUtilization),
		violation("PERF_POLICY_LOW_UTILIZATION", nvml.FI_DEV_PERF_POLICY_LOW_UTILIZATION)),
	device(clockEvent(metadata.AttributeNvidiaGpuClockEventReasonReliability), violation("PERF_POLICY_RELIABILITY", nvml.FI_DEV_PERF_POLICY_RELIABILITY)),
	device(i64((*builder).RecordNvidiaGpuPcieReplaysDataPoint), nvmlclient.Field("PCIE_REPLAY_COUNTER", nvml.FI_DEV_PCIE_REPLAY_COUNTER).Counter()),
	// NVLink errors, summed over the links by NVML, in the counters' batch.
	// NOT_SUPPORTED on a GPU without NVLink, where they are absent.
	device(nvlinkErrors(metadata.AttributeNvidiaGpuNvlinkErrorTypeCrcFlit),
		nvmlclient.Field("NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL).Counter()),
	device(nvlinkErrors(metadata.AttributeNvidiaGpuNvlinkErrorTypeCrcData),
		nvmlclient.Field("NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", nvml.FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL).Counter()),
	device(nvlinkErrors(metadata.AttributeNvidiaGpuNvlinkErrorTypeReplay),
		nvmlclient.Field("NVLINK_REPLAY_ERROR_COUNT_TOTAL", nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL).Counter()),
	device(nvlinkErrors(metadata.AttributeNvidiaGpuNvlinkErrorTypeRecovery),
		nvmlclient.Field("NVLINK_RECOVERY_ERROR_COUNT_TOTAL", nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL).Counter()),
	// Symbol errors, per link (NVLink5), summed over the links that answer.
	device(nvlinkErrors(metadata.AttributeNvidiaGpuNvlinkErrorTypeSymbol),
		nvmlclient.Field("NVLINK_COUNT_SYMBOL_ERRORS", nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS).SumLinks().Counter()),
	// The effective bit error rate per link (NVLink5), the worst link's.
	device(f64((*builder).RecordNvidiaGpuNvlinkBerDataPoint), nvmlclient.Field("NVLINK_COUNT_EFFECTIVE_BER",
		nvml.FI_DEV_NVLINK_COUNT_EFFECTIVE_BER).MaxLinks().Decode(nvmlclient.DecodeBER).Costly()),
	// PCIe traffic over NVML's 20 ms window, in bytes/s from KiB/s: ~20 ms a
	// call.
	device(f64a((*builder).RecordNvidiaGpuPcieThroughputDataPoint, metadata.AttributeNetworkIoDirectionTransmit),
		nvmlclient.GetterOf(nvml.Device.GetPcieThroughput, nvml.PCIE_UTIL_TX_BYTES, "TX_BYTES").Divisor(1.0/1024).Costly()),
	device(f64a((*builder).RecordNvidiaGpuPcieThroughputDataPoint, metadata.AttributeNetworkIoDirectionReceive),
		nvmlclient.GetterOf(nvml.Device.GetPcieThroughput, nvml.PCIE_UTIL_RX_BYTES, "RX_BYTES").Divisor(1.0/1024).Costly()),
	// The PCIe link, <0.05 ms each.
	device(i64((*builder).RecordNvidiaGpuPcieLinkGenerationDataPoint), nvmlclient.Getter(nvml.Device.GetCurrPcieLinkGeneration)),
	device(i64((*builder).RecordNvidiaGpuPcieLinkWidthDataPoint), nvmlclient.Getter(nvml.Device.GetCurrPcieLinkWidth)),
	// What the board can do, which never changes: on the counters' cadence.
	device(i64((*builder).RecordNvidiaGpuPcieLinkMaxGenerationDataPoint), nvmlclient.Getter(nvml.Device.GetMaxPcieLinkGeneration).Costly()),
	device(i64((*builder).RecordNvidiaGpuPcieLinkMaxWidthDataPoint), nvmlclient.Getter(nvml.Device.GetMaxPcieLinkWidth).Costly()),
	device(i64a((*builder).RecordNvidiaGpuClockMaxFrequencyDataPoint, metadata.AttributeNvidiaGpuClockTypeSm),
		nvmlclient.GetterOf(nvml.Device.GetMaxClockInfo, nvml.CLOCK_SM, "SM").Divisor(1e-6).Costly()),
	device(i64a((*builder).RecordNvidiaGpuClockMaxFrequencyDataPoint, metadata.AttributeNvidiaGpuClockTypeMemory),
		nvmlclient.GetterOf(nvml.Device.GetMaxClockInfo, nvml.CLOCK_MEM, "MEM").Divisor(1e-6).Costly()),
}

func clock(a metadata.AttributeNvidiaGpuClockType) recorder {
	return i64a((*builder).RecordNvidiaGpuClockFrequencyDataPoint, a)
}

func clockInfo(typ nvml.ClockType, name string) nvmlclient.Read {
	return nvmlclient.GetterOf(nvml.Device.GetClockInfo, typ, name).Divisor(1e-6)
}

func clockEvent(a metadata.AttributeNvidiaGpuClockEventReason) recorder {
	return f64a((*builder).RecordNvidiaGpuClockEventTimeDataPoint, a)
}

func violation(name string, id uint32) nvmlclient.Read {
	return nvmlclient.Field(name, id).Divisor(1e9).Counter()
}

func nvlinkErrors(a metadata.AttributeNvidiaGpuNvlinkErrorType) recorder {
	return i64a((*builder).RecordNvidiaGpuNvlinkErrorsDataPoint, a)
}
