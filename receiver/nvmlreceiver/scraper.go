package nvmlreceiver

import (
	"context"
	"errors"
	"fmt"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	otelattr "go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/accounting"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// nvmlScraper is one configured receiver: an NVML session (session.go),
// the event counter (events.go) and the reporter (reporter.go), driven by
// the scrapes. Each scrape starts every GPU's read at once (the client lets
// them into the driver one at a time, nvmlclient's guard/guard.go) and never waits past its
// deadline, whatever NVML does.
type nvmlScraper struct {
	cfg      *Config
	set      receiver.Settings
	logger   *zap.Logger
	session  *nvmlSession
	events   *eventCounter
	reporter *reporter
	bounds   lifecycleBounds // how long each step waits on NVML

	// telemetry counts the metrics and calls that failed NVML calls left
	// out (readAll says why not through a partial scrape error).
	telemetry *metadata.TelemetryBuilder
	scrapeSet metric.MeasurementOption // receiver and scraper, as scraperhelper's

	// Used from the scrape goroutine only.
	logged  *logonce.Log // "device/cause" keys logged
	stalled bool         // the component status says a read is stuck

	// Shared by the metrics and logs sides of one configured receiver
	// (shared.go): started says which sides are started. The first Start
	// of a side starts the scraper unless the other side did; a side's
	// second Start or Shutdown is a no-op; the scraper stops when no side
	// is started any more.
	mu         sync.Mutex
	started    [2]bool // by side
	hasMetrics bool
	onLastStop func()
}

// maxLoggedKeys bounds what the log of a scraper or an event counter
// remembers (GPUs by cause; GPUs by event kind and code): the least
// recently noted is forgotten first.
const maxLoggedKeys = 1024

// side is the metrics or the logs side of a receiver.
type side int

const (
	metricsSide side = iota
	logsSide
)

// newScraper builds the scraper of cfg on client, which keeps time by tm
// (client built with tm.clientOptions).
func newScraper(cfg *Config, set receiver.Settings, client *nvmlclient.Client, tm timing) *nvmlScraper {
	s := &nvmlScraper{
		cfg:      cfg,
		set:      set,
		logger:   set.Logger,
		reporter: newReporter(cfg),
		bounds:   tm.bounds,
		logged:   logonce.New(maxLoggedKeys),
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		s.logger.Warn("The receiver's own telemetry (otelcol_receiver_nvml_*) cannot be recorded", zap.Error(err))
		nop := set.TelemetrySettings
		nop.MeterProvider = noop.NewMeterProvider()
		tb, _ = metadata.NewTelemetryBuilder(nop)
	}
	s.telemetry = tb
	s.scrapeSet = metric.WithAttributeSet(otelattr.NewSet(
		otelattr.String("receiver", set.ID.String()),
		otelattr.String("scraper", metadata.Type.String()),
	))
	s.session = newSession(cfg, set.Logger, client, tm)
	s.events = newEventCounter(cfg, set, client, tm.bounds)
	s.session.onOpen = func() {
		// The minor numbers match DRA's gpu-<minor> names where the
		// ResourceSlices cannot be read; known from the first scrape on.
		for _, d := range s.session.client.Inventory().Devices {
			s.reporter.owners.SetMinor(d.UUID, d.MinorNumber)
		}
		s.events.start()
	}
	return s
}

// start and shutdown are the metrics side's.
func (s *nvmlScraper) start(ctx context.Context, host component.Host) error {
	_, err := s.startSide(ctx, host, metricsSide)
	return err
}

func (s *nvmlScraper) shutdown(ctx context.Context) error {
	return s.shutdownSide(ctx, metricsSide)
}

// startSide starts one side; it says whether the side was not started
// already.
func (s *nvmlScraper) startSide(ctx context.Context, host component.Host, sd side) (bool, error) {
	s.mu.Lock()
	if s.started[sd] {
		s.mu.Unlock()
		return false, nil
	}
	s.started[sd] = true
	first := !s.started[1-sd]
	s.mu.Unlock()
	if !first {
		return true, nil // the other side of this receiver started it
	}
	s.reporter.start(s.set, s.session.now())
	if err := s.session.start(ctx, host); err != nil {
		return true, err // a devices entry that matches no GPU is a configuration error
	}
	return true, s.reporter.owners.Start(context.Background())
}

// shutdownSide shuts one side down, and the scraper with the last side
// started; it returns within bounds.shutdown whatever NVML does.
func (s *nvmlScraper) shutdownSide(ctx context.Context, sd side) error {
	s.mu.Lock()
	if !s.started[sd] {
		s.mu.Unlock()
		return nil // not started, or shut down already
	}
	s.started[sd] = false
	last := !s.started[1-sd]
	s.mu.Unlock()
	if !last {
		return nil
	}
	if s.onLastStop != nil {
		s.onLastStop()
	}
	ctx, cancel := context.WithTimeout(ctx, s.bounds.shutdown)
	defer cancel()
	_ = s.events.stop(ctx) // a stuck watcher keeps NVML from being shut down: session.shutdown says so
	if owners := s.reporter.owners; owners != nil {
		if err := owners.Shutdown(ctx); err != nil {
			s.logger.Warn("PodResources client did not stop in time", zap.Error(err))
		}
	}
	s.session.shutdown(ctx)
	return nil
}

// deadline is when the scrape must return.
func (s *nvmlScraper) deadline(ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(s.session.scrapeTimeout())
}

func (s *nvmlScraper) scrape(ctx context.Context) (pmetric.Metrics, error) {
	deadline := s.deadline(ctx)
	for !s.session.isReady() {
		// (Re)open in the background; report in this scrape if it is done
		// before the deadline. A reset of the old session (every GPU lost)
		// comes first: once it is done, open again.
		done := s.session.open()
		if done == nil {
			return pmetric.NewMetrics(), nil
		}
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-done:
			timer.Stop()
		case <-timer.C:
			return pmetric.NewMetrics(), nil
		case <-ctx.Done():
			timer.Stop()
			return pmetric.NewMetrics(), nil
		}
	}
	devices := s.session.client.Devices()
	s.reporter.newSession(s.session.generation())
	s.reporter.beginScrape()
	// XIDs counted so far: taken before the reads, so that no count is
	// stamped with a time before its event.
	xids := make(map[string]map[int64]int64, len(devices))
	for _, d := range devices {
		xids[d.Info.UUID] = s.events.counts(d.Info.UUID)
	}
	samples, stuck := s.readAll(ctx, deadline, devices)
	lost := 0
	var stuckIDs []string
	now := pcommon.NewTimestampFromTime(s.session.now()) // the clock of the samples, for the accounts' windows
	for i, d := range devices {
		switch {
		case d.Lost():
			lost++
			s.reporter.unobserved(now, d.Info, accounting.Lost, xids[d.Info.UUID])
		case samples[i] != nil:
			s.session.gotData()
			s.reporter.gpu(d.Info, samples[i], xids[d.Info.UUID])
		case stuck[i]:
			s.reporter.unobserved(now, d.Info, accounting.Stuck, xids[d.Info.UUID])
			stuckIDs = append(stuckIDs, d.Info.UUID)
		default:
			s.reporter.unobserved(now, d.Info, accounting.ReadFailed, nil)
		}
	}
	s.reportStalled(stuckIDs)
	md := s.reporter.emit(now)
	if len(devices) > 0 && lost == len(devices) {
		s.stalled = false
		s.resetLost()
	}
	return md, nil
}

// resetLost starts over once every GPU is gone (driver reload, reset): a
// new Init and inventory once NVML answers again. The event watcher and the
// old session stop in the background: the caller returns now.
func (s *nvmlScraper) resetLost() {
	s.session.reset(errors.New("every GPU is lost"), s.events.stop)
}

// probeLost is what stands for the scrapes in a receiver with no metrics
// side (logsReceiver), on its collection interval: it asks the GPUs in
// turn one cheap question (Device.Check, not a read of every reading) until
// one answers (the first, as a rule), each under the scrape timeout. Once
// every GPU is lost it resets the session as a scrape does, so that the
// events come back after a driver reload; an answer is data, as in a scrape.
func (s *nvmlScraper) probeLost(ctx context.Context) {
	deadline := s.deadline(ctx)
	devices := s.session.client.Devices()
	for _, d := range devices {
		if d.Lost() {
			continue
		}
		done := make(chan error, 1)
		go func() { done <- d.Check() }()
		timer := time.NewTimer(time.Until(deadline))
		var err error
		select {
		case err = <-done:
			timer.Stop()
		case <-timer.C:
			return // still reading: not lost
		case <-ctx.Done():
			timer.Stop()
			return
		}
		if d.Lost() {
			continue
		}
		if err == nil {
			s.session.gotData()
		}
		return // busy, or answered: not every GPU is lost
	}
	if len(devices) > 0 {
		s.resetLost()
	}
}

// reportStalled turns the component status to a recoverable error while a
// GPU's read is stuck in NVML, so that a health check built on component
// status sees it, and back to OK once every read returns.
func (s *nvmlScraper) reportStalled(uuids []string) {
	switch {
	case len(uuids) > 0 && !s.stalled:
		s.stalled = true
		s.session.reportStatus(componentstatus.NewRecoverableErrorEvent(
			fmt.Errorf("a read of GPU(s) %v is stuck in NVML", uuids)))
	case len(uuids) == 0 && s.stalled:
		s.stalled = false
		s.session.reportStatus(componentstatus.NewEvent(componentstatus.StatusOK))
	}
}

// readAll reads every device, each on its own goroutine, and returns the samples that
// arrived before the deadline (nil for the others), and which devices are
// stuck: still reading (or priming) at the deadline, or busy with an
// earlier read. A slow or failing GPU never holds back the others. A GPU
// read in part comes with its sample.
//
// The calls that failed are counted, not returned. scraperhelper (v0.165,
// obs_metrics.go) logs every non-nil error a scrape returns, a
// scrapererror.PartialScrapeError included, with Logger.Error("Error
// scraping metrics"), on every scrape; the collector's logger adds a stack
// trace at error level. Only then does it add PartialScrapeError.Failed to
// otelcol_scraper_errored_metric_points: there is no error it counts
// without logging. So one call that keeps failing gave an error line and a
// stack trace per scrape. The client logs such a call once per GPU, call
// and cause at warn, and once at info when it answers again; a call that
// flaps, once per 5 minutes (nvmlclient call.GPU.LogCalls). The receiver returns nil and counts what the partial error
// counted in otelcol_receiver_nvml_errored_metric_points (same receiver and
// scraper attributes, same figure: the enabled metrics the failed calls
// feed, per GPU and scrape), and each failed call by name and GPU in
// otelcol_receiver_nvml_failed_calls. otelcol_scraper_errored_metric_points
// stays 0 for this receiver.
func (s *nvmlScraper) readAll(ctx context.Context, deadline time.Time, devices []*nvmlclient.Device) ([]*sample.Sample, []bool) {
	type result struct {
		i      int
		sample sample.Sample
		err    error
	}
	results := make(chan result, len(devices))
	for i, d := range devices {
		go func() {
			smp, err := d.Read()
			results <- result{i: i, sample: smp, err: err}
		}()
	}

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()

	samples := make([]*sample.Sample, len(devices))
	stuck := make([]bool, len(devices))
	answered := make([]bool, len(devices))
	failedMetrics := 0
	count := func() {
		if failedMetrics > 0 {
			s.telemetry.ReceiverNvmlErroredMetricPoints.Add(context.WithoutCancel(ctx), int64(failedMetrics), s.scrapeSet)
		}
	}
	for pending := len(devices); pending > 0; pending-- {
		select {
		case r := <-results:
			answered[r.i] = true
			var readErr *nvmlclient.ReadError
			if errors.As(r.err, &readErr) {
				failedMetrics += readErr.Metrics
				s.countCalls(ctx, devices[r.i], readErr)
				r.err = nil
			}
			if r.err == nil {
				samples[r.i] = &r.sample
				s.logged.OK(devices[r.i].Info.UUID + "/slow") // logged again when slow again
				continue
			}
			if errors.Is(r.err, nvmlclient.ErrBusy) {
				stuck[r.i] = true
				s.logOnce(devices[r.i], "slow", "A read of this GPU is still running from an earlier scrape; it is reported degraded until that read returns")
			}
			// Lost GPUs and call errors are logged once by the client.
		case <-timer.C:
			s.logPending(devices, answered, stuck)
			count()
			return samples, stuck
		case <-ctx.Done():
			s.logPending(devices, answered, stuck)
			count()
			return samples, stuck
		}
	}
	count()
	return samples, stuck
}

// countCalls counts each failed call of one GPU's read.
func (s *nvmlScraper) countCalls(ctx context.Context, d *nvmlclient.Device, readErr *nvmlclient.ReadError) {
	for _, c := range readErr.Calls {
		s.telemetry.ReceiverNvmlFailedCalls.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(
			otelattr.String("receiver", s.set.ID.String()),
			otelattr.String("call", c.Call),
			otelattr.String("hw.id", d.Info.UUID),
		))
	}
}

func (s *nvmlScraper) logPending(devices []*nvmlclient.Device, answered, stuck []bool) {
	for i, d := range devices {
		if !answered[i] && !d.Lost() {
			stuck[i] = true
			s.logOnce(d, "slow", "Reading this GPU did not finish before the scrape timeout; it is reported degraded, the other GPUs as usual")
		}
	}
}

func (s *nvmlScraper) logOnce(d *nvmlclient.Device, cause, msg string) {
	if !s.logged.Once(d.Info.UUID + "/" + cause) {
		return
	}
	s.logger.Warn(msg, zap.String("hw.id", d.Info.UUID), zap.Int("nvidia.gpu.index", d.Info.Index))
}
