package nvmlreceiver

import (
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
	client := nvmlclient.NewSystem(cfg.LibraryPath, set.Logger, nvmlclient.WithProcesses(cfg.Processes.Enabled))
	s := newScraper(cfg, set, client)
	s.onLastStop = func() {
		shared.Lock()
		defer shared.Unlock()
		delete(shared.m, cfg)
	}
	shared.m[cfg] = s
	return s
}
