package nvmlreceiver

import (
	"sync"
	"time"

	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// One configured nvml receiver may sit in a metrics and a logs pipeline.
// Both sides share one scraper, hence one NVML client and one event
// watcher, keyed by the receiver's config, as the otlp receiver shares its
// servers.
var shared = struct {
	sync.Mutex
	m map[*Config]*nvmlScraper
}{m: map[*Config]*nvmlScraper{}}

func sharedScraper(cfg *Config, set receiver.Settings) *nvmlScraper {
	shared.Lock()
	defer shared.Unlock()
	if s, ok := shared.m[cfg]; ok {
		return s
	}
	client := nvmlclient.NewSystem(cfg.LibraryPath, set.Logger, append(clientOptions(cfg), systemTiming.clientOptions()...)...)
	s := newScraper(cfg, set, client, systemTiming)
	s.onLastStop = func() {
		shared.Lock()
		defer shared.Unlock()
		delete(shared.m, cfg)
	}
	shared.m[cfg] = s
	return s
}

// clientOptions asks NVML only for the figures an enabled metric needs
// (metricFigures), or the owner attributes of a GPU's resource, and for
// the plain readings of the enabled metrics (plainReadings).
func clientOptions(cfg *Config) []nvmlclient.Option {
	readings := enabledReadings(&cfg.Metrics)
	return []nvmlclient.Option{
		nvmlclient.WithProcesses(cfg.Processes.Enabled),
		nvmlclient.WithFigures(neededFigures(&cfg.Metrics) | ownerFigures(&cfg.ResourceAttributes)),
		nvmlclient.WithReads(readsOf(readings)...),
		nvmlclient.WithLeftOutCount(func(f nvmlclient.Figures, reads []int) int {
			return leftOutMetrics(&cfg.Metrics, f) + leftOutReadings(readings, reads)
		}),
		nvmlclient.WithCounterInterval(cfg.CounterInterval),
		nvmlclient.WithMemoryControllerOnGPM(cfg.MemoryControllerOnGPM),
		nvmlclient.WithShareInterval(cfg.shareSampling()),
	}
}

// shareSampling is how often the processes' busy shares are sampled
// between scrapes: only when the interval holds at least two share
// intervals (at 1 s the scrape's own sample suffices and costs nothing
// more), and only for nvidia.gpu.process.busy.time.
func (cfg *Config) shareSampling() time.Duration {
	if !cfg.Processes.Enabled || !cfg.Metrics.NvidiaGpuProcessBusyTime.Enabled ||
		cfg.Accounting.ShareInterval <= 0 || cfg.CollectionInterval < 2*cfg.Accounting.ShareInterval {
		return 0
	}
	return cfg.Accounting.ShareInterval
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
// the plain metrics' readings are in plainReadings (plain_readings.go). The
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
func leftOutReadings(readings []plainReading, failed []int) int {
	metrics := map[string]bool{}
	for _, i := range failed {
		metrics[readings[i].metric.field] = true
	}
	return len(metrics)
}

// ownerFigures is what the owner attributes of a GPU's resource need: the
// owner is found through the GPU's processes (attribute).
func ownerFigures(ra *metadata.ResourceAttributesConfig) nvmlclient.Figures {
	if ra.ContainerID.Enabled || ra.K8sPodUID.Enabled || ra.K8sPodName.Enabled ||
		ra.K8sNamespaceName.Enabled || ra.K8sContainerName.Enabled || ra.SlurmJobID.Enabled || ra.SlurmJobStep.Enabled ||
		ra.UserName.Enabled {
		return figs(nvmlclient.FigProcesses)
	}
	return 0
}
