package nvmlreceiver

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

var engineTasks = map[nvmlclient.Engine]metadata.AttributeHwGpuTask{
	nvmlclient.EngineGeneral: metadata.AttributeHwGpuTaskGeneral,
	nvmlclient.EngineEncoder: metadata.AttributeHwGpuTaskEncoder,
	nvmlclient.EngineDecoder: metadata.AttributeHwGpuTaskDecoder,
}

var clockTypes = map[nvmlclient.Clock]metadata.AttributeNvidiaGpuClockType{
	nvmlclient.ClockSM:       metadata.AttributeNvidiaGpuClockTypeSm,
	nvmlclient.ClockMemory:   metadata.AttributeNvidiaGpuClockTypeMemory,
	nvmlclient.ClockGraphics: metadata.AttributeNvidiaGpuClockTypeGraphics,
	nvmlclient.ClockVideo:    metadata.AttributeNvidiaGpuClockTypeVideo,
}

// recordSample turns one GPU's sample into data points on its own resource.
func recordSample(mb *metadata.MetricsBuilder, info nvmlclient.DeviceInfo, s *nvmlclient.Sample) {
	ts := pcommon.NewTimestampFromTime(s.Time)

	for engine, u := range s.Utilization {
		if u.OK {
			mb.RecordHwGpuUtilizationDataPoint(ts, u.Value, engineTasks[nvmlclient.Engine(engine)])
		}
	}
	if v := s.MemoryUtilization; v.OK {
		mb.RecordHwGpuMemoryUtilizationDataPoint(ts, v.Value)
	}
	if v := s.MemoryUsedBytes; v.OK {
		mb.RecordHwGpuMemoryUsageDataPoint(ts, int64(v.Value))
	}
	if v := s.MemoryTotalBytes; v.OK {
		mb.RecordHwGpuMemoryLimitDataPoint(ts, int64(v.Value))
	}
	if v := s.MemoryReservedBytes; v.OK {
		mb.RecordNvidiaGpuMemoryReservedDataPoint(ts, int64(v.Value))
	}
	if v := s.TemperatureCelsius; v.OK {
		mb.RecordHwTemperatureDataPoint(ts, v.Value)
	}
	if v := s.PowerWatts; v.OK {
		mb.RecordHwPowerDataPoint(ts, v.Value)
	}
	if v := s.PowerLimitWatts; v.OK {
		mb.RecordNvidiaGpuPowerLimitDataPoint(ts, v.Value)
	}
	if v := s.EnergyJoules; v.OK {
		mb.RecordHwEnergyDataPoint(ts, v.Value)
	}
	for clk, v := range s.ClockHz {
		if v.OK {
			mb.RecordNvidiaGpuClockFrequencyDataPoint(ts, v.Value, clockTypes[nvmlclient.Clock(clk)])
		}
	}
	if v := s.PerformanceState; v.OK {
		mb.RecordNvidiaGpuPerformanceStateDataPoint(ts, v.Value)
	}
	if v := s.FanSpeed; v.OK {
		mb.RecordNvidiaGpuFanSpeedDataPoint(ts, v.Value)
	}

	rb := mb.NewResourceBuilder()
	rb.SetHwID(info.UUID)
	rb.SetHwType("gpu")
	rb.SetHwVendor("NVIDIA")
	rb.SetHwModel(info.Name)
	if info.Serial != "" {
		rb.SetHwSerialNumber(info.Serial)
	}
	rb.SetHwDriverVersion(info.DriverVersion)
	rb.SetNvidiaGpuIndex(int64(info.Index))
	rb.SetNvidiaGpuPciBusID(info.PCIBusID)
	mb.EmitForResource(metadata.WithResource(rb.Emit()))
}
