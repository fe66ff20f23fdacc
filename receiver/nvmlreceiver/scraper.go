package nvmlreceiver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// nvmlScraper drives one NVML client: it opens NVML (retrying while it is
// unavailable), reads every GPU concurrently each scrape and records the
// samples through the generated metrics builder.
type nvmlScraper struct {
	cfg    *Config
	set    receiver.Settings
	logger *zap.Logger
	client *nvmlclient.Client
	mb     *metadata.MetricsBuilder
	host   component.Host
	now    func() time.Time

	ready     bool
	fatal     error // a configuration error found once NVML came up
	backoff   retryBackoff
	lastCause string

	// inflight counts device reads still running, possibly past a scrape's
	// deadline; shutdown waits for them before closing NVML.
	inflight sync.WaitGroup
	// logged holds the "device/cause" keys already logged; scrapes never
	// overlap, so it needs no lock.
	logged map[string]struct{}

	owners  *attribution.Attributor // made at start
	dropped map[string]int64        // per GPU UUID: processes left out, cumulative
	cpu     *containerCPU           // nil when processes are off

	// Shared by the metrics and logs sides of one configured receiver
	// (shared.go): starts counts their Start calls.
	starts       int
	hasMetrics   bool
	logsConsumer consumer.Logs
	watcher      *eventWatcher
	lb           *metadata.LogsBuilder // the watcher goroutine's, made on the first event
	xidMu        sync.Mutex
	xids         map[string]map[int64]int64 // per GPU UUID, per Xid code
	eventsLogged map[string]struct{}        // guarded by xidMu
	onLastStop   func()
}

func newScraper(cfg *Config, set receiver.Settings, client *nvmlclient.Client) *nvmlScraper {
	return &nvmlScraper{
		cfg:          cfg,
		set:          set,
		logger:       set.Logger,
		client:       client,
		now:          time.Now,
		logged:       map[string]struct{}{},
		dropped:      map[string]int64{},
		xids:         map[string]map[int64]int64{},
		eventsLogged: map[string]struct{}{},
	}
}

func (s *nvmlScraper) start(_ context.Context, host component.Host) error {
	s.starts++
	if s.starts > 1 {
		return nil // the other side of this receiver started it
	}
	s.host = host
	s.mb = metadata.NewMetricsBuilder(s.cfg.MetricsBuilderConfig, s.set)
	s.owners = newAttributor(s.cfg, s.logger)
	if s.cfg.Processes.Enabled {
		s.cpu = &containerCPU{logger: s.logger, warned: map[string]bool{},
			reader: attribution.NewCgroupCPUReader(s.cfg.Processes.ProcRoot, s.cfg.Processes.CgroupRoot)}
	}
	err := s.client.Open(s.cfg.Devices)
	var selErr *nvmlclient.SelectorError
	if errors.As(err, &selErr) {
		return err // a devices entry that matches no GPU is a configuration error
	}
	if perr := s.owners.Start(context.Background()); perr != nil {
		return perr
	}
	if err != nil {
		s.unavailable(err)
		return nil
	}
	s.available()
	return nil
}

func (s *nvmlScraper) shutdown(ctx context.Context) error {
	if s.starts > 1 {
		s.starts--
		return nil
	}
	s.starts = 0
	if s.onLastStop != nil {
		s.onLastStop()
	}
	if err := s.stopEvents(ctx); err != nil {
		s.logger.Warn("Not shutting NVML down", zap.Error(err))
		return nil
	}
	if s.owners != nil {
		if err := s.owners.Shutdown(ctx); err != nil {
			s.logger.Warn("PodResources client did not stop in time", zap.Error(err))
		}
	}
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		// A read is stuck inside NVML; shutting NVML down under it could
		// crash the process, so leave the library to the process's exit.
		s.logger.Warn("An NVML call is still running at shutdown; not shutting NVML down")
		return nil
	}
	return s.client.Close()
}

// unavailable records a failed Open: one warning per distinct cause, a
// recoverable error status, and the time of the next attempt.
func (s *nvmlScraper) unavailable(err error) {
	delay := s.backoff.failed(s.now())
	if cause := err.Error(); cause != s.lastCause {
		s.lastCause = cause
		s.logger.Warn("NVML is unavailable; the receiver keeps running, emits no GPU metrics and retries with backoff",
			zap.Error(err), zap.Duration("next_retry_in", delay), zap.Duration("max_retry_interval", maxRetryDelay))
	}
	s.reportStatus(componentstatus.NewRecoverableErrorEvent(err))
}

func (s *nvmlScraper) available() {
	inv := s.client.Inventory()
	s.ready, s.lastCause = true, ""
	s.backoff.succeeded()
	fields := []zap.Field{
		zap.String("driver_version", inv.DriverVersion),
		zap.String("nvml_version", inv.NVMLVersion),
		zap.String("cuda_version", inv.CUDAVersion),
		zap.Int("gpus", len(inv.Devices)),
	}
	s.logger.Info("NVML initialized", fields...)
	for _, d := range inv.Devices {
		s.logger.Info("GPU found", zap.Int("index", d.Index), zap.String("uuid", d.UUID), zap.String("name", d.Name),
			zap.String("pci_bus_id", d.PCIBusID), zap.Int("minor_number", d.MinorNumber),
			zap.String("architecture", d.Architecture), zap.String("compute_capability", d.ComputeCapability))
	}
	s.reportStatus(componentstatus.NewEvent(componentstatus.StatusOK))
	s.startEvents()
}

func (s *nvmlScraper) reportStatus(ev *componentstatus.Event) {
	if s.host != nil {
		componentstatus.ReportStatus(s.host, ev)
	}
}

// ensureOpen opens NVML when it is not open and a retry is due.
func (s *nvmlScraper) ensureOpen() bool {
	if s.ready {
		return true
	}
	if s.fatal != nil || !s.backoff.due(s.now()) {
		return false
	}
	err := s.client.Open(s.cfg.Devices)
	var selErr *nvmlclient.SelectorError
	if errors.As(err, &selErr) {
		// Found only now that NVML came up: it will not heal by retrying.
		s.fatal = err
		s.logger.Error("Invalid receiver configuration; no GPU metrics until it is fixed", zap.Error(err))
		s.reportStatus(componentstatus.NewPermanentErrorEvent(err))
		_ = s.client.Close()
		return false
	}
	if err != nil {
		s.unavailable(err)
		return false
	}
	s.available()
	return true
}

func (s *nvmlScraper) scrape(ctx context.Context) (pmetric.Metrics, error) {
	if !s.ensureOpen() {
		return pmetric.NewMetrics(), nil
	}
	devices := s.client.Devices()
	// XIDs counted so far: taken before the reads, so that no count is
	// stamped with a time before its event.
	xids := make(map[string]map[int64]int64, len(devices))
	for _, d := range devices {
		xids[d.Info.UUID] = s.xidCounts(d.Info.UUID)
	}
	samples, readErr := s.readAll(ctx, devices)
	lost := 0
	now := pcommon.NewTimestampFromTime(time.Now())
	containers := map[string]gpuContainer{} // those holding a GPU, for their CPU
	for i, d := range devices {
		if d.Lost() {
			lost++
			recordLost(s.mb, now, d.Info, xids[d.Info.UUID])
			continue
		}
		if samples[i] != nil {
			r := s.report(d.Info, samples[i], xids[d.Info.UUID])
			recordGPU(s.mb, r)
			containersOf(r, containers)
		}
	}
	if s.cpu != nil {
		s.cpu.record(s.mb, now, containers)
	}
	if lost == len(devices) {
		// Every GPU is gone (driver reload, reset): start over with a new
		// Init and inventory once NVML answers again.
		s.ready = false
		stopCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := s.stopEvents(stopCtx)
		cancel()
		if err == nil {
			_ = s.client.Close()
		}
		s.unavailable(errors.New("every GPU is lost"))
	}
	return s.mb.Emit(), readErr
}

// report attributes one GPU's sample: its processes' owners and, when they
// all share one, the GPU's own. In MIG mode the processes go to their MIG
// devices instead.
func (s *nvmlScraper) report(info nvmlclient.DeviceInfo, smp *nvmlclient.Sample, xids map[int64]int64) gpuReport {
	r := gpuReport{info: info, sample: smp, xids: xids}
	if !smp.ProcessesListed {
		for i := range smp.MIG {
			r.migs = append(r.migs, migReport{sample: &smp.MIG[i]})
		}
		return r
	}
	limit, dropped := s.cfg.Processes.MaxPerGPU, 0
	if len(smp.MIG) == 0 {
		r.processes, r.owner, dropped = attribute(s.owners, info.UUID, smp.Processes, limit)
	}
	for i := range smp.MIG {
		m := migReport{sample: &smp.MIG[i]}
		var n int
		m.processes, m.owner, n = attribute(s.owners, m.sample.Info.UUID, m.sample.Processes, limit)
		dropped += n
		r.migs = append(r.migs, m)
	}
	s.dropped[info.UUID] += int64(dropped)
	r.dropped = s.dropped[info.UUID]
	return r
}

// readAll reads every device concurrently and returns the samples that
// arrived before the scrape's deadline (nil for the others). A slow or
// failing GPU never holds back the others. A GPU read in part comes with
// its sample; the calls that failed make a partial scrape error that counts
// the metrics left out (otelcol_scraper_errored_metric_points).
func (s *nvmlScraper) readAll(ctx context.Context, devices []*nvmlclient.Device) ([]*nvmlclient.Sample, error) {
	type result struct {
		i      int
		sample nvmlclient.Sample
		err    error
	}
	results := make(chan result, len(devices))
	for i, d := range devices {
		s.inflight.Add(1)
		go func() {
			defer s.inflight.Done()
			smp, err := d.Read()
			results <- result{i: i, sample: smp, err: err}
		}()
	}

	deadline := s.cfg.CollectionInterval
	if dl, ok := ctx.Deadline(); ok {
		deadline = time.Until(dl)
	}
	timer := time.NewTimer(deadline)
	defer timer.Stop()

	samples := make([]*nvmlclient.Sample, len(devices))
	var errs []error
	failedMetrics := 0
	partial := func() error {
		if len(errs) == 0 {
			return nil
		}
		return scrapererror.NewPartialScrapeError(errors.Join(errs...), failedMetrics)
	}
	for pending := len(devices); pending > 0; pending-- {
		select {
		case r := <-results:
			var readErr *nvmlclient.ReadError
			if errors.As(r.err, &readErr) {
				errs = append(errs, fmt.Errorf("GPU %s: %w", devices[r.i].Info.UUID, readErr))
				failedMetrics += readErr.Metrics
				r.err = nil
			}
			if r.err == nil {
				samples[r.i] = &r.sample
				delete(s.logged, devices[r.i].Info.UUID+"/slow")
				continue
			}
			if errors.Is(r.err, nvmlclient.ErrBusy) {
				s.logOnce(devices[r.i], "slow", "A read of this GPU is still running from an earlier scrape; skipping it until that read returns")
			}
			// Lost GPUs and call errors are logged once by the client.
		case <-timer.C:
			s.logPending(devices, samples)
			return samples, partial()
		case <-ctx.Done():
			s.logPending(devices, samples)
			return samples, partial()
		}
	}
	return samples, partial()
}

func (s *nvmlScraper) logPending(devices []*nvmlclient.Device, samples []*nvmlclient.Sample) {
	for i, d := range devices {
		if samples[i] == nil && !d.Lost() {
			s.logOnce(d, "slow", "Reading this GPU did not finish before the scrape timeout; the other GPUs are reported without it")
		}
	}
}

func (s *nvmlScraper) logOnce(d *nvmlclient.Device, cause, msg string) {
	key := d.Info.UUID + "/" + cause
	if _, seen := s.logged[key]; seen {
		return
	}
	s.logged[key] = struct{}{}
	s.logger.Warn(msg, zap.String("hw.id", d.Info.UUID), zap.Int("nvidia.gpu.index", d.Info.Index))
}
