package nvmlreceiver

import (
	"slices"
	"sync"

	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
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
	client := nvmlclient.NewSystem(cfg.LibraryPath, set.Logger, clientOptions(cfg)...)
	s := newScraper(cfg, set, client)
	s.onLastStop = func() {
		shared.Lock()
		defer shared.Unlock()
		delete(shared.m, cfg)
	}
	shared.m[cfg] = s
	return s
}

// clientOptions asks NVML only for what an enabled metric reports: the
// energy counter, GPM and the throttle counters cost milliseconds a GPU.
func clientOptions(cfg *Config) []nvmlclient.Option {
	m := cfg.Metrics
	var skip []nvmlclient.Feature
	if !m.HwEnergy.Enabled {
		skip = append(skip, nvmlclient.FeatureEnergy)
	}
	if !m.NvidiaGpuClockEventTime.Enabled {
		skip = append(skip, nvmlclient.FeatureThrottleTime)
	}
	gpm := []bool{
		m.NvidiaGpuSmActivity.Enabled, m.NvidiaGpuSmOccupancy.Enabled, m.NvidiaGpuGraphicsActivity.Enabled,
		m.NvidiaGpuTensorActivity.Enabled, m.NvidiaGpuTensorPipeActivity.Enabled, m.NvidiaGpuPipeActivity.Enabled,
		m.NvidiaGpuMemoryBandwidthUtilization.Enabled, m.HwGpuIo.Enabled, m.NvidiaGpuNvlinkIo.Enabled,
	}
	if !slices.Contains(gpm, true) {
		skip = append(skip, nvmlclient.FeatureGPM)
	}
	return []nvmlclient.Option{nvmlclient.WithProcesses(cfg.Processes.Enabled), nvmlclient.WithoutFeatures(skip...)}
}
