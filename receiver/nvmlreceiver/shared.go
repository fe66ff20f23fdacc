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
// (metricFigures, plainMetrics), or the owner attributes of a GPU's resource.
func clientOptions(cfg *Config) []nvmlclient.Option {
	return []nvmlclient.Option{
		nvmlclient.WithProcesses(cfg.Processes.Enabled),
		nvmlclient.WithFigures(neededFigures(&cfg.Metrics) | ownerFigures(&cfg.ResourceAttributes)),
		nvmlclient.WithLeftOutCount(func(f nvmlclient.Figures) int { return leftOutMetrics(&cfg.Metrics, f) }),
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
	name    string // as in metadata.yaml, for the log and the tests
	enabled func(*metadata.MetricsConfig) bool
	figures nvmlclient.Figures
	// derived marks a metric computed from other metrics' figures (the
	// GPU-time counters): a failed call does not leave its point out, so
	// it is not counted as left out.
	derived bool
}

func figs(fs ...nvmlclient.Figure) nvmlclient.Figures { return nvmlclient.FiguresOf(fs...) }

// metricFigures maps the metrics recorded by their own code to figures;
// the metrics of plain figures are in plainMetrics (plain_metrics.go). The
// metrics in neither need no NVML figure (XIDs come from events). The CPU metrics are
// read from /proc and the cgroups, and process.dropped is counted at the
// cap, but only of the processes NVML lists: they need the list.
var metricFigures = []metricFigure{
	{"container.cpu.time", func(m *metadata.MetricsConfig) bool { return m.ContainerCPUTime.Enabled }, figs(nvmlclient.FigProcesses), false},
	{"hw.errors", func(m *metadata.MetricsConfig) bool { return m.HwErrors.Enabled },
		figs(nvmlclient.FigECCCorrected, nvmlclient.FigECCUncorrected), false},
	{"hw.gpu.io", func(m *metadata.MetricsConfig) bool { return m.HwGpuIo.Enabled }, figs(nvmlclient.FigPCIeTraffic), false},
	{"hw.gpu.memory.limit", func(m *metadata.MetricsConfig) bool { return m.HwGpuMemoryLimit.Enabled }, figs(nvmlclient.FigMemory), false},
	{"hw.gpu.memory.usage", func(m *metadata.MetricsConfig) bool { return m.HwGpuMemoryUsage.Enabled }, figs(nvmlclient.FigMemory), false},
	{"hw.gpu.memory.utilization", func(m *metadata.MetricsConfig) bool { return m.HwGpuMemoryUtilization.Enabled },
		figs(nvmlclient.FigMemory), false},
	{"hw.gpu.utilization", func(m *metadata.MetricsConfig) bool { return m.HwGpuUtilization.Enabled },
		figs(nvmlclient.FigUtilization), false},
	{"hw.status", func(m *metadata.MetricsConfig) bool { return m.HwStatus.Enabled }, statusFigures, false},
	{"nvidia.gpu.active.time", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuActiveTime.Enabled },
		figs(nvmlclient.FigSMActivity), true},
	{"nvidia.gpu.busy.time", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuBusyTime.Enabled },
		figs(nvmlclient.FigUtilization), true},
	{"nvidia.gpu.clock.event.active", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuClockEventActive.Enabled },
		figs(nvmlclient.FigClockEvents), false},
	{"nvidia.gpu.container.cpu.limit", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuContainerCPULimit.Enabled },
		figs(nvmlclient.FigProcesses), false},
	{"nvidia.gpu.free.time", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuFreeTime.Enabled },
		figs(nvmlclient.FigProcesses), true},
	{"nvidia.gpu.graphics.activity", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuGraphicsActivity.Enabled },
		figs(nvmlclient.FigGraphicsActivity), false},
	{"nvidia.gpu.held.time", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuHeldTime.Enabled },
		figs(nvmlclient.FigProcesses), true},
	{"nvidia.gpu.idle.time", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuIdleTime.Enabled },
		figs(nvmlclient.FigUtilization, nvmlclient.FigSMActivity, nvmlclient.FigProcesses), true},
	{"nvidia.gpu.memory.bandwidth.utilization", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuMemoryBandwidthUtilization.Enabled },
		figs(nvmlclient.FigDRAMBandwidth), false},
	{"nvidia.gpu.memory.controller.utilization", func(m *metadata.MetricsConfig) bool {
		return m.NvidiaGpuMemoryControllerUtilization.Enabled
	}, figs(nvmlclient.FigMemoryController), false},
	{"nvidia.gpu.memory.reserved", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuMemoryReserved.Enabled },
		figs(nvmlclient.FigMemory), false},
	{"nvidia.gpu.memory.row_remap.rows", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuMemoryRowRemapRows.Enabled },
		figs(nvmlclient.FigRemappedRows), false},
	{"nvidia.gpu.memory.row_remap.status", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuMemoryRowRemapStatus.Enabled },
		figs(nvmlclient.FigRemappedRows), false},
	{"nvidia.gpu.nvlink.io", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuNvlinkIo.Enabled },
		figs(nvmlclient.FigNVLinkTraffic), false},
	{"nvidia.gpu.pipe.activity", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuPipeActivity.Enabled },
		figs(nvmlclient.FigPipes), false},
	{"nvidia.gpu.process.busy.time", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuProcessBusyTime.Enabled },
		figs(nvmlclient.FigUtilization, nvmlclient.FigProcesses, nvmlclient.FigProcessUtilization), true},
	{"nvidia.gpu.process.count", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuProcessCount.Enabled },
		figs(nvmlclient.FigProcesses), false},
	{"nvidia.gpu.process.dropped", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuProcessDropped.Enabled },
		figs(nvmlclient.FigProcesses), false},
	{"nvidia.gpu.process.held.time", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuProcessHeldTime.Enabled },
		figs(nvmlclient.FigProcesses), true},
	{"nvidia.gpu.process.idle.time", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuProcessIdleTime.Enabled },
		figs(nvmlclient.FigProcesses), true},
	{"nvidia.gpu.process.memory.controller.utilization", func(m *metadata.MetricsConfig) bool {
		return m.NvidiaGpuProcessMemoryControllerUtilization.Enabled
	}, figs(nvmlclient.FigProcesses, nvmlclient.FigProcessUtilization), false},
	{"nvidia.gpu.process.memory.usage", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuProcessMemoryUsage.Enabled },
		figs(nvmlclient.FigProcesses), false},
	{"nvidia.gpu.process.utilization", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuProcessUtilization.Enabled },
		figs(nvmlclient.FigProcesses, nvmlclient.FigProcessUtilization), false},
	{"nvidia.gpu.sm.activity", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuSmActivity.Enabled },
		figs(nvmlclient.FigSMActivity), false},
	{"nvidia.gpu.sm.occupancy", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuSmOccupancy.Enabled },
		figs(nvmlclient.FigSMOccupancy), false},
	{"nvidia.gpu.tensor.activity", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuTensorActivity.Enabled },
		figs(nvmlclient.FigTensorActivity), false},
	{"nvidia.gpu.tensor.pipe.activity", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuTensorPipeActivity.Enabled },
		figs(nvmlclient.FigTensorPipes), false},
	{"nvidia.gpu.unobserved.time", func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuUnobservedTime.Enabled },
		figs(nvmlclient.FigProcesses), true},
	{"process.cpu.time", func(m *metadata.MetricsConfig) bool { return m.ProcessCPUTime.Enabled }, figs(nvmlclient.FigProcesses), false},
}

// neededFigures is every figure an enabled metric needs.
func neededFigures(m *metadata.MetricsConfig) nvmlclient.Figures {
	var out nvmlclient.Figures
	for _, mf := range metricFigures {
		if mf.enabled(m) {
			out |= mf.figures
		}
	}
	for i := range plainMetrics {
		if pm := &plainMetrics[i]; pm.enabled(m) {
			out |= pm.figures()
		}
	}
	return out
}

// leftOutMetrics counts the enabled metrics, not derived, that need one
// of the figures failed calls left out: the points a scrape leaves out.
func leftOutMetrics(m *metadata.MetricsConfig, failed nvmlclient.Figures) int {
	n := 0
	for _, mf := range metricFigures {
		if !mf.derived && mf.enabled(m) && mf.figures.Any(failed) {
			n++
		}
	}
	for i := range plainMetrics {
		if pm := &plainMetrics[i]; pm.enabled(m) && pm.figures().Any(failed) {
			n++
		}
	}
	return n
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
