package record

import (
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// Figures is every figure of the NVML layer that an enabled metric (m) or
// an enabled owner attribute of a GPU's resource (ra) needs.
func Figures(m *metadata.MetricsConfig, ra *metadata.ResourceAttributesConfig) nvmlclient.Figures {
	return neededFigures(m) | ownerFigures(ra)
}

// LeftOut counts the enabled metrics (m) that the failed calls (of
// figures failed, and of the readings at indices reads) left out of a
// GPU's scrape.
func LeftOut(m *metadata.MetricsConfig, readings []Reading, failed nvmlclient.Figures, reads []int) int {
	return leftOutMetrics(m, failed) + leftOutReadings(readings, reads)
}

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

// neededFigures is every figure an enabled metric needs.
func neededFigures(m *metadata.MetricsConfig) nvmlclient.Figures {
	var out nvmlclient.Figures
	for _, mf := range metricFigures {
		if mf.enabled(m) {
			out |= mf.figures
		}
	}
	return out
}

// enabled reports whether the metric is enabled in m.
func (mf *metricFigure) enabled(m *metadata.MetricsConfig) bool {
	return metricEnabled(m, metricFields().byName[mf.name])
}

// leftOutMetrics counts the enabled metrics, not derived, that need one
// of the figures failed calls left out: the metrics a scrape leaves out.
func leftOutMetrics(m *metadata.MetricsConfig, failed nvmlclient.Figures) int {
	n := 0
	for _, mf := range metricFigures {
		if !mf.derived && mf.enabled(m) && mf.figures.Any(failed) {
			n++
		}
	}
	return n
}

// leftOutReadings counts the metrics of the failed readings, each once.
func leftOutReadings(readings []Reading, failed []int) int {
	metrics := map[string]bool{}
	for _, i := range failed {
		metrics[readings[i].metric.field] = true
	}
	return len(metrics)
}

// ownerFigures is what the owner attributes of a GPU's resource need: the
// owner is found through the GPU's processes (holders.Tracker.GPU).
func ownerFigures(ra *metadata.ResourceAttributesConfig) nvmlclient.Figures {
	if ra.ContainerID.Enabled || ra.K8sPodUID.Enabled || ra.K8sPodName.Enabled ||
		ra.K8sNamespaceName.Enabled || ra.K8sContainerName.Enabled || ra.SlurmJobID.Enabled || ra.SlurmJobStep.Enabled ||
		ra.UserName.Enabled {
		return figs(nvmlclient.FigProcesses)
	}
	return 0
}
