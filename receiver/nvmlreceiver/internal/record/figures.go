package record

import (
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// metricFigure says which figures of the NVML layer a metric needs: NVML
// is asked for a figure while an enabled metric needs it.
type metricFigure struct {
	name    string // as in metadata.yaml
	figures nvmlclient.Figures
	// derived marks a metric computed from other metrics' figures (the
	// GPU-time counters): a failed call does not leave its point out, so
	// it is not counted as left out.
	derived bool
}

func figs(fs ...nvmlclient.Figure) nvmlclient.Figures { return nvmlclient.FiguresOf(fs...) }

// metricFigures maps the metrics recorded by their own code to figures;
// the plain metrics' readings are in plainReadings (readings.go). The
// metrics in neither need no NVML figure (XIDs come from events). The CPU metrics are
// read from /proc and the cgroups, and process.dropped is counted at the
// cap, but only of the processes NVML lists: they need the list.
var metricFigures = []metricFigure{
	{"container.cpu.time", figs(nvmlclient.FigProcesses), false},
	{"hw.errors", figs(nvmlclient.FigECCCorrected, nvmlclient.FigECCUncorrected), false},
	{"hw.gpu.io", figs(nvmlclient.FigPCIeTraffic), false},
	{"hw.gpu.memory.limit", figs(nvmlclient.FigMemory), false},
	{"hw.gpu.memory.usage", figs(nvmlclient.FigMemory), false},
	{"hw.gpu.memory.utilization", figs(nvmlclient.FigMemory), false},
	{"hw.gpu.utilization", figs(nvmlclient.FigUtilization), false},
	{"hw.status", statusFigures, false},
	{"nvidia.gpu.active.time", figs(nvmlclient.FigSMActivity), true},
	{"nvidia.gpu.busy.time", figs(nvmlclient.FigUtilization), true},
	{"nvidia.gpu.clock.event.active", figs(nvmlclient.FigClockEvents), false},
	{"nvidia.gpu.container.cpu.limit", figs(nvmlclient.FigProcesses), false},
	{"nvidia.gpu.free.time", figs(nvmlclient.FigProcesses), true},
	{"nvidia.gpu.graphics.activity", figs(nvmlclient.FigGraphicsActivity), false},
	{"nvidia.gpu.held.time", figs(nvmlclient.FigProcesses), true},
	{"nvidia.gpu.idle.time", figs(nvmlclient.FigUtilization, nvmlclient.FigSMActivity, nvmlclient.FigProcesses), true},
	{"nvidia.gpu.memory.bandwidth.utilization", figs(nvmlclient.FigDRAMBandwidth), false},
	{"nvidia.gpu.memory.controller.utilization", figs(nvmlclient.FigMemoryController), false},
	{"nvidia.gpu.memory.reserved", figs(nvmlclient.FigMemory), false},
	{"nvidia.gpu.memory.row_remap.rows", figs(nvmlclient.FigRemappedRows), false},
	{"nvidia.gpu.memory.row_remap.status", figs(nvmlclient.FigRemappedRows), false},
	{"nvidia.gpu.nvlink.io", figs(nvmlclient.FigNVLinkTraffic), false},
	{"nvidia.gpu.pipe.activity", figs(nvmlclient.FigPipes), false},
	{"nvidia.gpu.process.busy.time", figs(nvmlclient.FigUtilization, nvmlclient.FigProcesses, nvmlclient.FigProcessUtilization), true},
	{"nvidia.gpu.process.count", figs(nvmlclient.FigProcesses), false},
	{"nvidia.gpu.process.dropped", figs(nvmlclient.FigProcesses), false},
	{"nvidia.gpu.process.held.time", figs(nvmlclient.FigProcesses), true},
	{"nvidia.gpu.process.idle.time", figs(nvmlclient.FigProcesses), true},
	{"nvidia.gpu.process.memory.controller.utilization", figs(nvmlclient.FigProcesses, nvmlclient.FigProcessUtilization), false},
	{"nvidia.gpu.process.memory.usage", figs(nvmlclient.FigProcesses), false},
	{"nvidia.gpu.process.utilization", figs(nvmlclient.FigProcesses, nvmlclient.FigProcessUtilization), false},
	{"nvidia.gpu.sm.activity", figs(nvmlclient.FigSMActivity), false},
	{"nvidia.gpu.sm.occupancy", figs(nvmlclient.FigSMOccupancy), false},
	{"nvidia.gpu.tensor.activity", figs(nvmlclient.FigTensorActivity), false},
	{"nvidia.gpu.tensor.pipe.activity", figs(nvmlclient.FigTensorPipes), false},
	{"nvidia.gpu.unobserved.time", figs(nvmlclient.FigProcesses), true},
	{"process.cpu.time", figs(nvmlclient.FigProcesses), false},
}

// Figures is every figure of the NVML layer that an enabled metric of m
// needs, and what the enabled owner attributes of a GPU's resource (ra)
// need: the owner is found through the GPU's processes (holders.Tracker.GPU).
func Figures(m *metadata.MetricsConfig, ra *metadata.ResourceAttributesConfig) nvmlclient.Figures {
	var out nvmlclient.Figures
	for _, mf := range metricFigures {
		if mf.enabled(m) {
			out |= mf.figures
		}
	}
	if ra.ContainerID.Enabled || ra.K8sPodUID.Enabled || ra.K8sPodName.Enabled ||
		ra.K8sNamespaceName.Enabled || ra.K8sContainerName.Enabled || ra.SlurmJobID.Enabled || ra.SlurmJobStep.Enabled ||
		ra.UserName.Enabled {
		out |= figs(nvmlclient.FigProcesses)
	}
	return out
}

// enabled reports whether the metric is enabled in m.
func (mf *metricFigure) enabled(m *metadata.MetricsConfig) bool {
	return metricEnabled(m, metricFields().byName[mf.name])
}

// LeftOut counts the metrics a GPU's scrape leaves out: the enabled
// metrics of m, not derived, that need one of the figures failed calls
// left out, and the metrics of the failed readings (indices into
// readings), each once.
func LeftOut(m *metadata.MetricsConfig, readings []Reading, failed nvmlclient.Figures, reads []int) int {
	metrics := map[string]bool{}
	for _, mf := range metricFigures {
		if !mf.derived && mf.enabled(m) && mf.figures.Any(failed) {
			metrics[mf.name] = true
		}
	}
	for _, i := range reads {
		metrics[readings[i].metric.field] = true
	}
	return len(metrics)
}
