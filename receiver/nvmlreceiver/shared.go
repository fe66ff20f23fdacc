package nvmlreceiver

import (
	"reflect"
	"sync"

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
	return []nvmlclient.Option{
		nvmlclient.WithProcesses(cfg.Processes.Enabled),
		nvmlclient.WithMetrics(func(name string) bool { return on[name] }),
		nvmlclient.WithCounterInterval(cfg.CounterInterval),
		nvmlclient.WithMemoryControllerOnGPM(cfg.MemoryControllerOnGPM),
	}
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
