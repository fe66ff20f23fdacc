package nvmlreceiver

import (
	"fmt"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// plainMetric is a metric whose points are plain figures of the NVML layer
// (nvmlclient's plainReads), one point per figure, each with its
// attributes: the one place where a plain figure becomes a metric.
type plainMetric struct {
	name    string // as in metadata.yaml
	enabled func(*metadata.MetricsConfig) bool
	// device marks a metric of the device's life, recorded on its device
	// resource; the others are of its use, on its holder resource
	// (emitDevice).
	device bool
	points []point
}

// point records one plain figure's value, with its attributes.
type point struct {
	fig    nvmlclient.Figure
	record func(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, v float64)
	// attr is the point's attribute value, if it has one: which counter a
	// point is, to give it its start (counter_starts.go).
	attr string
}

type builder = metadata.MetricsBuilder

// f64 and i64 make the point of a metric without attributes; f64a and i64a
// of one with one attribute. An integer metric's value is rounded.
func f64(f nvmlclient.Figure, rec func(*builder, pcommon.Timestamp, float64)) point {
	return point{fig: f, record: rec}
}

func i64(f nvmlclient.Figure, rec func(*builder, pcommon.Timestamp, int64)) point {
	return point{fig: f, record: func(mb *builder, ts pcommon.Timestamp, v float64) { rec(mb, ts, int64(math.Round(v))) }}
}

func f64a[A fmt.Stringer](f nvmlclient.Figure, rec func(*builder, pcommon.Timestamp, float64, A), a A) point {
	return point{fig: f, attr: a.String(), record: func(mb *builder, ts pcommon.Timestamp, v float64) { rec(mb, ts, v, a) }}
}

func i64a[A fmt.Stringer](f nvmlclient.Figure, rec func(*builder, pcommon.Timestamp, int64, A), a A) point {
	return point{fig: f, attr: a.String(), record: func(mb *builder, ts pcommon.Timestamp, v float64) {
		rec(mb, ts, int64(math.Round(v)), a)
	}}
}

// plainMetrics are the metrics of plain figures, each point in the order
// recorded. Adding a plain figure to a metric is one point here.
var plainMetrics = []plainMetric{
	// Of the GPU's use, on its holder resource.
	{"hw.temperature", func(m *metadata.MetricsConfig) bool { return m.HwTemperature.Enabled }, false, []point{
		f64a(nvmlclient.FigTemperature, (*builder).RecordHwTemperatureDataPoint, metadata.AttributeHwSensorLocationGpu),
		f64a(nvmlclient.FigMemoryTemperature, (*builder).RecordHwTemperatureDataPoint, metadata.AttributeHwSensorLocationMemory),
	}},
	{"nvidia.gpu.temperature.margin", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuTemperatureMargin.Enabled }, false, []point{
		f64(nvmlclient.FigMarginTemperature, (*builder).RecordNvidiaGpuTemperatureMarginDataPoint),
	}},
	{"hw.power", func(m *metadata.MetricsConfig) bool { return m.HwPower.Enabled }, false, []point{
		f64(nvmlclient.FigPower, (*builder).RecordHwPowerDataPoint),
	}},
	{"nvidia.gpu.power.limit", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuPowerLimit.Enabled }, false, []point{
		f64(nvmlclient.FigPowerLimit, (*builder).RecordNvidiaGpuPowerLimitDataPoint),
	}},
	{"nvidia.gpu.clock.frequency", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuClockFrequency.Enabled }, false, []point{
		i64a(nvmlclient.FigClockSM, (*builder).RecordNvidiaGpuClockFrequencyDataPoint, metadata.AttributeNvidiaGpuClockTypeSm),
		i64a(nvmlclient.FigClockMemory, (*builder).RecordNvidiaGpuClockFrequencyDataPoint, metadata.AttributeNvidiaGpuClockTypeMemory),
		i64a(nvmlclient.FigClockGraphics, (*builder).RecordNvidiaGpuClockFrequencyDataPoint, metadata.AttributeNvidiaGpuClockTypeGraphics),
		i64a(nvmlclient.FigClockVideo, (*builder).RecordNvidiaGpuClockFrequencyDataPoint, metadata.AttributeNvidiaGpuClockTypeVideo),
	}},
	{"nvidia.gpu.performance_state", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuPerformanceState.Enabled }, false, []point{
		i64(nvmlclient.FigPerformanceState, (*builder).RecordNvidiaGpuPerformanceStateDataPoint),
	}},
	{"nvidia.gpu.fan.speed", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuFanSpeed.Enabled }, false, []point{
		f64(nvmlclient.FigFanSpeed, (*builder).RecordNvidiaGpuFanSpeedDataPoint),
	}},

	// Of the device's life, on its device resource.
	{"hw.energy", func(m *metadata.MetricsConfig) bool { return m.HwEnergy.Enabled }, true, []point{
		f64(nvmlclient.FigEnergy, (*builder).RecordHwEnergyDataPoint),
	}},
	{"nvidia.gpu.clock.event.time", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuClockEventTime.Enabled }, true, []point{
		f64a(nvmlclient.FigViolationPower, (*builder).RecordNvidiaGpuClockEventTimeDataPoint, metadata.AttributeNvidiaGpuClockEventReasonPower),
		f64a(nvmlclient.FigViolationThermal, (*builder).RecordNvidiaGpuClockEventTimeDataPoint, metadata.AttributeNvidiaGpuClockEventReasonThermal),
		f64a(nvmlclient.FigViolationSyncBoost, (*builder).RecordNvidiaGpuClockEventTimeDataPoint, metadata.AttributeNvidiaGpuClockEventReasonSyncBoost),
		f64a(nvmlclient.FigViolationBoardLimit, (*builder).RecordNvidiaGpuClockEventTimeDataPoint, metadata.AttributeNvidiaGpuClockEventReasonBoardLimit),
		f64a(nvmlclient.FigViolationLowUtilization, (*builder).RecordNvidiaGpuClockEventTimeDataPoint, metadata.AttributeNvidiaGpuClockEventReasonLowUtilization),
		f64a(nvmlclient.FigViolationReliability, (*builder).RecordNvidiaGpuClockEventTimeDataPoint, metadata.AttributeNvidiaGpuClockEventReasonReliability),
	}},
	{"nvidia.gpu.pcie.replays", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuPcieReplays.Enabled }, true, []point{
		i64(nvmlclient.FigPCIeReplays, (*builder).RecordNvidiaGpuPcieReplaysDataPoint),
	}},
	{"nvidia.gpu.nvlink.errors", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuNvlinkErrors.Enabled }, true, []point{
		i64a(nvmlclient.FigNVLinkCRCFlit, (*builder).RecordNvidiaGpuNvlinkErrorsDataPoint, metadata.AttributeNvidiaGpuNvlinkErrorTypeCrcFlit),
		i64a(nvmlclient.FigNVLinkCRCData, (*builder).RecordNvidiaGpuNvlinkErrorsDataPoint, metadata.AttributeNvidiaGpuNvlinkErrorTypeCrcData),
		i64a(nvmlclient.FigNVLinkReplay, (*builder).RecordNvidiaGpuNvlinkErrorsDataPoint, metadata.AttributeNvidiaGpuNvlinkErrorTypeReplay),
		i64a(nvmlclient.FigNVLinkRecovery, (*builder).RecordNvidiaGpuNvlinkErrorsDataPoint, metadata.AttributeNvidiaGpuNvlinkErrorTypeRecovery),
		i64a(nvmlclient.FigNVLinkSymbolErrors, (*builder).RecordNvidiaGpuNvlinkErrorsDataPoint, metadata.AttributeNvidiaGpuNvlinkErrorTypeSymbol),
	}},
	{"nvidia.gpu.nvlink.ber", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuNvlinkBer.Enabled }, true, []point{
		f64(nvmlclient.FigNVLinkEffectiveBER, (*builder).RecordNvidiaGpuNvlinkBerDataPoint),
	}},
	{"nvidia.gpu.pcie.throughput", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuPcieThroughput.Enabled }, true, []point{
		f64a(nvmlclient.FigPCIeThroughputTX, (*builder).RecordNvidiaGpuPcieThroughputDataPoint, metadata.AttributeNetworkIoDirectionTransmit),
		f64a(nvmlclient.FigPCIeThroughputRX, (*builder).RecordNvidiaGpuPcieThroughputDataPoint, metadata.AttributeNetworkIoDirectionReceive),
	}},
	{"nvidia.gpu.pcie.link.generation", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuPcieLinkGeneration.Enabled }, true, []point{
		i64(nvmlclient.FigPCIeGeneration, (*builder).RecordNvidiaGpuPcieLinkGenerationDataPoint),
	}},
	{"nvidia.gpu.pcie.link.width", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuPcieLinkWidth.Enabled }, true, []point{
		i64(nvmlclient.FigPCIeWidth, (*builder).RecordNvidiaGpuPcieLinkWidthDataPoint),
	}},
}

// figures is every figure the metric's points need.
func (pm *plainMetric) figures() nvmlclient.Figures {
	var out nvmlclient.Figures
	for _, p := range pm.points {
		out |= nvmlclient.FiguresOf(p.fig)
	}
	return out
}

// recordPlain records the plain figures of s of the device (or of its
// use): each value at the scrape's time, or at the counters' reading's for
// those read on the counters' cadence.
func recordPlain(mb *builder, s *nvmlclient.Sample, device bool) {
	ts, countersTS := pcommon.NewTimestampFromTime(s.Time), pcommon.NewTimestampFromTime(s.CountersTime)
	for i := range plainMetrics {
		pm := &plainMetrics[i]
		if pm.device != device {
			continue
		}
		for _, p := range pm.points {
			v := s.Values[p.fig]
			if !v.OK {
				continue
			}
			at := ts
			if s.FromCounters.Has(p.fig) {
				at = countersTS
			}
			p.record(mb, at, v.Value)
		}
	}
}
