package nvmlreceiver

import (
	"context"
	"errors"
	"fmt"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"sync"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/record"
)

// The event watcher is a background goroutine that waits on NVML's event
// set for XID and ECC events while NVML is open. It counts XIDs for
// nvidia.gpu.xid.errors and, when the receiver is in a logs pipeline, emits
// each event as a log record, so that alerting sees the event itself rather
// than a last value.

type eventWatcher struct {
	gen    uint64 // eventCounter.gen while this watcher is the current one
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// eventCounter runs the event watcher while NVML is open, counts XIDs per
// GPU and code, and passes each event on as a log record.
type eventCounter struct {
	cfg          *Config
	set          receiver.Settings
	logger       *zap.Logger
	client       *nvmlclient.Client
	bounds       lifecycleBounds
	logsConsumer consumer.Logs // nil outside a logs pipeline

	mu      sync.Mutex
	watcher *eventWatcher
	// gen changes at each start and stop: an event from a watcher of
	// another generation (one that did not stop in time, whose
	// nvmlEventSetWait returned late) is dropped.
	gen    uint64
	xids   map[string]map[int64]int64 // per GPU UUID, per Xid code
	logged *logonce.Log               // GPU/kind/code already in the collector's log

	// emit is held (a one-slot semaphore, so that stop can wait for it
	// under a deadline) while an event is turned into log records and
	// passed on: it serializes the use of lb, which is not safe for
	// concurrent use, and lets stop make sure that nothing is consumed once
	// it returns.
	emit chan struct{}
	lb   *metadata.LogsBuilder
}

func newEventCounter(cfg *Config, set receiver.Settings, client *nvmlclient.Client, bounds lifecycleBounds) *eventCounter {
	return &eventCounter{cfg: cfg, set: set, logger: set.Logger, client: client, bounds: bounds,
		xids: map[string]map[int64]int64{}, logged: logonce.New(maxLoggedKeys), emit: make(chan struct{}, 1)}
}

// start starts the watcher on the open client.
func (e *eventCounter) start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.watcher != nil {
		return
	}
	e.gen++
	ctx, cancel := context.WithCancel(context.Background())
	w := &eventWatcher{gen: e.gen, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	e.watcher = w
	go func() {
		defer close(w.done)
		err := e.client.WatchEvents(ctx, func(ev nvmlclient.Event) { e.onEvent(w, ev) }, e.bounds.register)
		if err != nil && ctx.Err() == nil {
			e.logger.Warn("Not watching XID and ECC events; nvidia.gpu.xid.errors and the event log records are absent",
				zap.Error(err))
		}
	}()
}

// stop stops the watcher, waiting at most until ctx is done, and clears
// the XID counts: the next session's points start again. Once it
// returns, the watcher's events are neither counted nor passed on, even
// when the watcher itself has not stopped yet (nvmlEventSetWait cannot be
// interrupted): a late one is dropped.
func (e *eventCounter) stop(ctx context.Context) error {
	e.mu.Lock()
	w := e.watcher
	e.watcher = nil
	e.gen++
	clear(e.xids) // counted again, from 0, in the next session
	e.mu.Unlock()
	if w == nil {
		return nil
	}
	w.cancel()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
	}
	// The watcher is still running. Events it sees from now on are dropped
	// (the generation changed); wait for one it may be passing on now.
	select {
	case e.emit <- struct{}{}:
		<-e.emit
		return errors.New("the NVML event loop did not stop in time; its later events are dropped")
	default:
	}
	return errors.New("the NVML event loop did not stop in time, and a GPU event is still being passed on")
}

// onEvent runs on w's goroutine.
func (e *eventCounter) onEvent(w *eventWatcher, ev nvmlclient.Event) {
	// The collector's own log gets the first event of each GPU, kind and
	// code; the rest (an ECC storm) are counted and sent as log records.
	key := fmt.Sprintf("%s/%s/%d", ev.Device.UUID, ev.Kind, ev.XID)
	select {
	case e.emit <- struct{}{}:
	case <-w.ctx.Done():
		return // stopped
	}
	defer func() { <-e.emit }()
	e.mu.Lock()
	if w.gen != e.gen {
		// A watcher that did not stop in time: its event is late.
		e.mu.Unlock()
		return
	}
	if ev.Kind == nvmlclient.EventXID {
		byCode := e.xids[ev.Device.UUID]
		if byCode == nil {
			byCode = map[int64]int64{}
			e.xids[ev.Device.UUID] = byCode
		}
		byCode[int64(ev.XID)]++
	}
	e.mu.Unlock()
	if e.logged.Once(key) {
		e.logger.Warn("GPU event (later ones of this GPU, kind and code are not logged here)",
			zap.String("hw.id", ev.Device.UUID), zap.String("event", ev.Kind.String()), zap.Uint64("xid", ev.XID))
	}
	if e.logsConsumer != nil {
		if logs := e.eventLogs(ev); logs.LogRecordCount() > 0 {
			if err := e.logsConsumer.ConsumeLogs(w.ctx, logs); err != nil {
				e.logger.Debug("Cannot pass a GPU event on", zap.Error(err))
			}
		}
	}
}

// counts copies the XID counts of one GPU.
func (e *eventCounter) counts(uuid string) map[int64]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[int64]int64, len(e.xids[uuid]))
	for code, n := range e.xids[uuid] {
		out[code] = n
	}
	return out
}

// eventLogs builds one log record for ev, on its GPU's resource, through
// the LogsBuilder that metadata.yaml's events generate (event name, time,
// attributes, and the events:: switches of the configuration); severity
// and body are the receiver's. It returns no record for a disabled event.
// It runs with e.emit held, which guards e.lb.
func (e *eventCounter) eventLogs(ev nvmlclient.Event) plog.Logs {
	if e.lb == nil {
		e.lb = metadata.NewLogsBuilder(metadata.LogsBuilderConfig{
			Events: e.cfg.Events, ResourceAttributes: e.cfg.ResourceAttributes,
		}, e.set)
	}
	ts := pcommon.NewTimestampFromTime(ev.Time)
	var opts []metadata.EventAttributeOption
	if ev.GPUInstanceID != sample.NoInstance {
		opts = append(opts, metadata.WithNvidiaGpuMigGpuInstanceIDEventAttribute(int64(ev.GPUInstanceID)))
	}
	if ev.ComputeInstanceID != sample.NoInstance {
		opts = append(opts, metadata.WithNvidiaGpuMigComputeInstanceIDEventAttribute(int64(ev.ComputeInstanceID)))
	}
	ctx := context.Background()
	severity, text, body := plog.SeverityNumberError, "ERROR", ""
	switch ev.Kind {
	case nvmlclient.EventXID:
		e.lb.RecordNvidiaGpuXidEvent(ctx, ts, metadata.AttributeNvidiaGpuEventTypeXid, int64(ev.XID), opts...)
		body = fmt.Sprintf("Xid %d on GPU %s", ev.XID, ev.Device.UUID)
	case nvmlclient.EventDoubleBitECC:
		e.lb.RecordNvidiaGpuEccDoubleBitEvent(ctx, ts, metadata.AttributeNvidiaGpuEventTypeEccDoubleBit, opts...)
		body = "Double-bit (uncorrectable) ECC error on GPU " + ev.Device.UUID
	default:
		e.lb.RecordNvidiaGpuEccSingleBitEvent(ctx, ts, metadata.AttributeNvidiaGpuEventTypeEccSingleBit, opts...)
		severity, text = plog.SeverityNumberWarn, "WARN"
		body = "Single-bit (corrected) ECC error on GPU " + ev.Device.UUID
	}
	rb := e.lb.NewResourceBuilder()
	record.SetGPU(rb, ev.Device)
	logs := e.lb.Emit(metadata.WithLogsResource(rb.Emit()))
	for i := 0; i < logs.ResourceLogs().Len(); i++ {
		sls := logs.ResourceLogs().At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				lr.SetObservedTimestamp(ts)
				lr.SetSeverityNumber(severity)
				lr.SetSeverityText(text)
				lr.Body().SetStr(body)
			}
		}
	}
	return logs
}
