package nvmlreceiver

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/accounting"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// NewFactory creates the factory of the nvml receiver.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithMetrics(createMetrics, metadata.MetricsStability),
		receiver.WithLogs(createLogs, metadata.LogsStability),
	)
}

func createDefaultConfig() component.Config {
	cc := scraperhelper.NewDefaultControllerConfig()
	cc.CollectionInterval = 10 * time.Second
	return &Config{
		ControllerConfig:     cc,
		MetricsBuilderConfig: metadata.NewDefaultMetricsBuilderConfig(),
		Events:               metadata.DefaultEventsConfig(),
		CounterInterval:      nvmlclient.DefaultCounterInterval,
		Processes: ProcessesConfig{
			Enabled:    true,
			MaxPerGPU:  32,
			ProcRoot:   "/proc",
			CgroupRoot: "/sys/fs/cgroup",
		},
		Accounting: AccountingConfig{
			IdleThreshold: accounting.DefaultIdleThreshold,
			ShareInterval: 2 * time.Second,
		},
		Kubernetes: KubernetesConfig{
			PodResourcesSocket: attribution.DefaultPodResourcesSocket,
			RefreshInterval:    30 * time.Second,
			ResourcePrefixes:   attribution.DefaultResourcePrefixes(),
			DRA: DRAConfig{
				Drivers:        attribution.DefaultDRADrivers(),
				ResourceSlices: ResourceSlicesConfig{Enabled: true},
			},
		},
		Slurm: SlurmConfig{GPUStatDir: DefaultGPUStatDir},
	}
}

func createMetrics(_ context.Context, set receiver.Settings, baseCfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	cfg, ok := baseCfg.(*Config)
	if !ok {
		return nil, errors.New("nvml: unexpected config type")
	}
	s := sharedScraper(cfg, set)
	s.mu.Lock()
	s.hasMetrics = true
	s.mu.Unlock()
	sc, err := scraper.NewMetrics(s.scrape, scraper.WithStart(s.start), scraper.WithShutdown(s.shutdown))
	if err != nil {
		return nil, err
	}
	return scraperhelper.NewMetricsController(&cfg.ControllerConfig, set, next, scraperhelper.AddMetricsScraper(metadata.Type, sc))
}

func createLogs(_ context.Context, set receiver.Settings, baseCfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	cfg, ok := baseCfg.(*Config)
	if !ok {
		return nil, errors.New("nvml: unexpected config type")
	}
	s := sharedScraper(cfg, set)
	s.events.logsConsumer = next
	return &logsReceiver{s: s}, nil
}
