package nvmlreceiver

import (
	"reflect"
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

// clientOptions asks NVML only for what an enabled metric reports (the
// read table in nvmlclient names the metrics each call feeds).
func clientOptions(cfg *Config) []nvmlclient.Option {
	on := enabledMetrics(cfg.Metrics)
	for figure, counters := range derivedMetrics {
		for _, c := range counters {
			on[figure] = on[figure] || on[c]
		}
	}
	return []nvmlclient.Option{
		nvmlclient.WithProcesses(cfg.Processes.Enabled),
		nvmlclient.WithMetrics(func(name string) bool { return on[name] }),
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

// derivedMetrics names, for each figure NVML is asked for, the counters
// derived from it: the figure is read while any of them is enabled.
var derivedMetrics = map[string][]string{
	"hw.gpu.utilization":             {"nvidia.gpu.busy.time", "nvidia.gpu.idle.time", "nvidia.gpu.process.busy.time"},
	"nvidia.gpu.sm.activity":         {"nvidia.gpu.active.time", "nvidia.gpu.idle.time"},
	"nvidia.gpu.process.count":       {"nvidia.gpu.held.time", "nvidia.gpu.idle.time", "nvidia.gpu.process.held.time", "nvidia.gpu.process.idle.time"},
	"nvidia.gpu.process.utilization": {"nvidia.gpu.process.busy.time"},
}

// enabledMetrics maps each metric's name to whether it is enabled, from the
// generated config's mapstructure tags.
func enabledMetrics(m metadata.MetricsConfig) map[string]bool {
	out := map[string]bool{}
	v := reflect.ValueOf(m)
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Tag.Get("mapstructure")
		if f := v.Field(i); f.Kind() == reflect.Struct && name != "" {
			if en := f.FieldByName("Enabled"); en.IsValid() && en.Kind() == reflect.Bool {
				out[name] = en.Bool()
			}
		}
	}
	return out
}
