package nvmlreceiver

import (
	"sync"
	"time"

	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/record"
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

// clientOptions asks NVML only for the readings an enabled metric needs,
// or the owner attributes of a GPU's resource, and for the plain readings
// of the enabled metrics (record.Needs, record.Readings).
func clientOptions(cfg *Config) []nvmlclient.Option {
	readings := record.Readings(&cfg.Metrics)
	return []nvmlclient.Option{
		nvmlclient.WithProcesses(cfg.Processes.Enabled),
		nvmlclient.WithReadings(record.Needs(&cfg.Metrics, &cfg.ResourceAttributes)),
		nvmlclient.WithReads(record.Reads(readings)...),
		nvmlclient.WithLeftOutCount(func(f sample.Readings, reads []int) int {
			return record.LeftOut(&cfg.Metrics, readings, f, reads)
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
