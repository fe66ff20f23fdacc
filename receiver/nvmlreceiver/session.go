package nvmlreceiver

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
)

// The NVML session: opening NVML (retrying while it is unavailable),
// priming the GPUs, and shutting NVML down within a bound. NVML calls can
// hang for seconds or for ever (a GPU falling off the bus, a wedged
// driver); none of them runs on Start's, a scrape's or Shutdown's goroutine
// beyond a deadline.

// lifecycleBounds are those deadlines.
type lifecycleBounds struct {
	// shutdown bounds Shutdown, whatever NVML does: calls still running
	// then are left behind, and NVML is not shut down under them.
	shutdown time.Duration
	// start bounds how long Start waits for nvmlInit and the inventory;
	// NVML that is not ready by then is reported once it is.
	start time.Duration
	// reset bounds how long a scrape that found every GPU lost waits for
	// the old session's calls before re-initializing NVML.
	reset time.Duration
	// register bounds each GPU's nvmlDeviceRegisterEvents: a GPU whose
	// registration hangs is named in one log line, and the others keep
	// their events.
	register time.Duration
	// eventWait is how long one wait for NVML's events lasts: the watcher
	// sees a stop between waits, so this bounds how long stopping it takes
	// (nvmlclient.WithEventWait).
	eventWait time.Duration
}

var defaultBounds = lifecycleBounds{shutdown: 5 * time.Second, start: 2 * time.Second, reset: time.Second, register: 5 * time.Second,
	eventWait: nvmlclient.DefaultEventWait}

// timing is how a scraper keeps time with NVML: one clock, which also
// times the client's reads (nvmlclient.WithClock), so that a sample's time
// and the account windows it is counted in are read off the same clock,
// and the deadlines of each step.
type timing struct {
	now    func() time.Time
	bounds lifecycleBounds
}

// systemTiming is a collector's: the wall clock and the default bounds.
var systemTiming = timing{now: time.Now, bounds: defaultBounds}

// clientOptions are the client's side of tm: the same clock, and the event
// wait that bounds stopping the watcher.
func (tm timing) clientOptions() []nvmlclient.Option {
	return []nvmlclient.Option{nvmlclient.WithClock(tm.now), nvmlclient.WithEventWait(tm.bounds.eventWait)}
}

type nvmlSession struct {
	cfg    *Config
	logger *zap.Logger
	client *nvmlclient.Client
	now    func() time.Time
	bounds lifecycleBounds
	// onOpen runs once NVML is up, on the opener's goroutine.
	onOpen func()

	mu        sync.Mutex
	host      component.Host
	ready     bool
	closed    bool
	opening   chan struct{} // closed when the running Open ends; nil when none runs
	resetting chan struct{} // closed when the running reset ends; nil when none runs
	fatal     error         // a configuration error found once NVML came up
	backoff   retryBackoff
	// causes logs NVML's unavailability once per cause (key nvmlKey); OK
	// when data flows.
	causes *logonce.Log
	// lost: the last session ended with every GPU lost. The Opens after it
	// neither reset the backoff nor forget the cause logged: only data does
	// (gotData), so that GPUs that stay lost are not re-initialized and
	// logged on every scrape.
	lost bool
	// gaveData: a GPU of the current session gave a sample.
	gaveData bool
	// loggedInv is the inventory last logged, not logged again while the
	// GPUs stay lost.
	loggedInv string
	// gen counts the Opens that succeeded; openedAt is the time of the
	// last, when the session's cumulative counts start.
	gen      uint64
	openedAt time.Time
}

func newSession(cfg *Config, logger *zap.Logger, client *nvmlclient.Client, tm timing) *nvmlSession {
	return &nvmlSession{cfg: cfg, logger: logger, client: client, now: tm.now, bounds: tm.bounds, causes: logonce.New(1)}
}

// nvmlKey is the one key of nvmlSession.causes.
const nvmlKey = "nvml"

// scrapeTimeout is the deadline of one scrape, which also bounds each GPU's
// priming.
func (s *nvmlSession) scrapeTimeout() time.Duration {
	if s.cfg.Timeout > 0 {
		return s.cfg.Timeout
	}
	return s.cfg.CollectionInterval
}

// start opens NVML, waiting at most bounds.start. Only a configuration
// error (a devices entry that matches no GPU) fails it.
func (s *nvmlSession) start(ctx context.Context, host component.Host) error {
	s.mu.Lock()
	s.host, s.closed = host, false
	// A new start: NVML is tried at once, and its state logged again.
	s.backoff.succeeded()
	s.causes.OK(nvmlKey)
	s.lost, s.loggedInv = false, ""
	s.mu.Unlock()
	done := s.open()
	timer := time.NewTimer(s.bounds.start)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		s.logger.Warn("NVML is still initializing; the receiver starts without it and reports the GPUs once it is ready",
			zap.Duration("waited", s.bounds.start))
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var selErr *nvmlclient.SelectorError
	if errors.As(s.fatal, &selErr) {
		return s.fatal
	}
	return nil
}

func (s *nvmlSession) isReady() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready
}

// generation returns the number of the current session and when it was
// opened.
func (s *nvmlSession) generation() (uint64, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen, s.openedAt
}

// open starts an Open in the background unless NVML is up, one is running,
// a retry is not due yet or the configuration is wrong. It returns a
// channel closed when that Open ends, or nil when none runs.
func (s *nvmlSession) open() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready || s.closed || s.fatal != nil {
		return nil
	}
	if s.opening != nil {
		return s.opening
	}
	if s.resetting != nil {
		return s.resetting // the old session first; open again once it is done
	}
	if !s.backoff.due(s.now()) {
		return nil
	}
	done := make(chan struct{})
	s.opening = done
	go s.runOpen(done)
	return done
}

// runOpen initializes NVML and primes each GPU, each under the scrape's
// deadline: a GPU still priming then is skipped by the scrapes (it is busy)
// and reported once it is primed.
func (s *nvmlSession) runOpen(done chan struct{}) {
	defer close(done)
	err := s.client.Open(s.cfg.Devices)
	if err == nil {
		s.prime()
	}

	s.mu.Lock()
	s.opening = nil
	if s.closed {
		s.mu.Unlock()
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), s.bounds.shutdown)
			_ = s.client.Close(ctx)
			cancel()
		}
		return
	}
	var selErr *nvmlclient.SelectorError
	switch {
	case errors.As(err, &selErr):
		// It will not heal by retrying.
		s.fatal = err
		s.mu.Unlock()
		s.logger.Error("Invalid receiver configuration; no GPU metrics until it is fixed", zap.Error(err))
		s.reportStatus(componentstatus.NewPermanentErrorEvent(err))
		return
	case err != nil:
		s.mu.Unlock()
		s.unavailable(err)
		return
	}
	s.ready, s.gaveData = true, false
	s.gen++
	s.openedAt = s.now()
	if !s.lost {
		s.causes.OK(nvmlKey)
		s.backoff.succeeded()
	}
	s.mu.Unlock()
	s.available()
	if s.onOpen != nil {
		s.onOpen()
	}
}

func (s *nvmlSession) prime() {
	devices := s.client.Devices()
	primed := make(chan struct{}, len(devices))
	for _, d := range devices {
		go func() {
			_ = d.Prime()
			primed <- struct{}{}
		}()
	}
	timer := time.NewTimer(s.scrapeTimeout())
	defer timer.Stop()
	for range devices {
		select {
		case <-primed:
		case <-timer.C:
			return // the scrapes log the GPUs still busy
		}
	}
}

// unavailable records a failed Open: one warning per distinct cause, a
// recoverable error status, and the time of the next attempt.
func (s *nvmlSession) unavailable(err error) {
	s.failed(err, s.backoff.failed)
}

// failed logs err once per distinct cause, reports it as a recoverable
// error and schedules the next Open with next.
func (s *nvmlSession) failed(err error, next func(time.Time) time.Duration) {
	s.mu.Lock()
	delay := next(s.now())
	newCause := s.causes.Fail(nvmlKey, err.Error()).Log
	s.mu.Unlock()
	if newCause {
		s.logger.Warn("NVML is unavailable; the receiver keeps running, emits no GPU metrics and retries with backoff",
			zap.Error(err), zap.Duration("next_retry_in", delay), zap.Duration("max_retry_interval", maxRetryDelay))
	}
	s.reportStatus(componentstatus.NewRecoverableErrorEvent(err))
}

func (s *nvmlSession) available() {
	inv := s.client.Inventory()
	key := inventoryKey(inv)
	s.mu.Lock()
	quiet := s.lost && key == s.loggedInv
	s.loggedInv = key
	s.mu.Unlock()
	if quiet {
		// The same GPUs as before they were all lost: logged once, and
		// status OK only once one of them gives data (gotData).
		s.logger.Debug("NVML re-initialized after every GPU was lost", zap.Int("gpus", len(inv.Devices)))
		return
	}
	s.logger.Info("NVML initialized",
		zap.String("driver_version", inv.DriverVersion),
		zap.String("nvml_version", inv.NVMLVersion),
		zap.String("cuda_version", inv.CUDAVersion),
		zap.Int("gpus", len(inv.Devices)))
	for _, d := range inv.Devices {
		s.logger.Info("GPU found", zap.Int("index", d.Index), zap.String("uuid", d.UUID), zap.String("name", d.Name),
			zap.String("pci_bus_id", d.PCIBusID), zap.Int("minor_number", d.MinorNumber),
			zap.String("architecture", d.Architecture), zap.String("compute_capability", d.ComputeCapability))
	}
	s.reportStatus(componentstatus.NewEvent(componentstatus.StatusOK))
}

// inventoryKey identifies what available logs of an inventory.
func inventoryKey(inv nvmlclient.Inventory) string {
	key := inv.DriverVersion + "/" + inv.NVMLVersion + "/" + inv.CUDAVersion
	for _, d := range inv.Devices {
		key += "/" + d.UUID
	}
	return key
}

// gotData records that a GPU of the current session gave a sample: NVML
// works, the backoff is reset and a later cause is logged again.
func (s *nvmlSession) gotData() {
	s.mu.Lock()
	if s.gaveData {
		s.mu.Unlock()
		return
	}
	s.gaveData = true
	recovered := s.lost
	s.lost = false
	s.causes.OK(nvmlKey)
	s.backoff.succeeded()
	s.mu.Unlock()
	if recovered {
		s.logger.Info("GPUs report again after every GPU was lost")
		s.reportStatus(componentstatus.NewEvent(componentstatus.StatusOK))
	}
}

func (s *nvmlSession) reportStatus(ev *componentstatus.Event) {
	s.mu.Lock()
	host := s.host
	s.mu.Unlock()
	if host != nil {
		componentstatus.ReportStatus(host, ev)
	}
}

// reset gives up the session after every GPU was lost: the next Open
// initializes NVML again, after the backoff. GPUs lost after giving data
// (a driver reload, a GPU reset) are tried again soon; GPUs lost before
// giving any data wait the longest delay. Calls still stuck in the old
// session keep it from being shut down until they return.
//
// It returns at once: stop (the event watcher's, or nil), then Close run
// in the background, each for at most bounds.reset, so that a scrape that
// found every GPU lost returns by its deadline. Until they are done, open
// answers with their channel rather than opening NVML again, and shutdown
// waits for them.
func (s *nvmlSession) reset(cause error, stop func(context.Context) error) {
	s.mu.Lock()
	if !s.ready || s.resetting != nil {
		s.mu.Unlock()
		return // closed, or reset already
	}
	s.ready, s.lost = false, true
	gaveData := s.gaveData
	done := make(chan struct{})
	s.resetting = done
	s.mu.Unlock()
	// The next attempt counts from now, not from when the old session is
	// down.
	if gaveData {
		s.unavailable(cause)
	} else {
		s.failed(cause, s.backoff.lostAtOnce)
	}
	go func() {
		defer close(done)
		if stop != nil {
			ctx, cancel := context.WithTimeout(context.Background(), s.bounds.reset)
			_ = stop(ctx) // a stuck watcher keeps the old session from being shut down: Close says so
			cancel()
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.bounds.reset)
		defer cancel()
		if err := s.client.Close(ctx); nvmlclient.IsInFlight(err) {
			s.logger.Warn("Re-initializing NVML without shutting the old session down: calls are still running in it", zap.Error(err))
		}
		s.mu.Lock()
		s.resetting = nil
		s.mu.Unlock()
	}()
}

// shutdown shuts NVML down, never for longer than bounds.shutdown and
// never under a running NVML call: that is skipped, in one log line.
func (s *nvmlSession) shutdown(ctx context.Context) {
	s.mu.Lock()
	s.closed, s.ready = true, false
	resetting := s.resetting
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.bounds.shutdown)
	defer cancel()
	if resetting != nil {
		select { // a reset's Close first, then this one, never two at once
		case <-resetting:
		case <-ctx.Done():
		}
	}
	if err := s.client.Close(ctx); nvmlclient.IsInFlight(err) {
		s.logger.Warn("Not shutting NVML down: calls are still running inside it; the process may exit with them",
			zap.Error(err))
	} else if err != nil {
		s.logger.Warn("nvmlShutdown failed", zap.Error(err))
	}
}
