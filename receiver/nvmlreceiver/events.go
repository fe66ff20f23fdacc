package nvmlreceiver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// The event watcher is a background goroutine that waits on NVML's event
// set for XID and ECC events while NVML is open. It counts XIDs for
// nvidia.gpu.xid.errors and, when the receiver is in a logs pipeline, emits
// each event as a log record, so that alerting sees the event itself rather
// than a last value.

type eventWatcher struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startEvents starts the watcher on the open client.
func (s *nvmlScraper) startEvents() {
	if s.watcher != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &eventWatcher{cancel: cancel, done: make(chan struct{})}
	s.watcher = w
	go func() {
		defer close(w.done)
		err := s.client.WatchEvents(ctx, s.onEvent)
		if err != nil && ctx.Err() == nil {
			s.logger.Warn("Not watching XID and ECC events; nvidia.gpu.xid.errors and the event log records are absent",
				zap.Error(err))
		}
	}()
}

// stopEvents stops the watcher, waiting at most until ctx is done.
func (s *nvmlScraper) stopEvents(ctx context.Context) error {
	w := s.watcher
	if w == nil {
		return nil
	}
	s.watcher = nil
	w.cancel()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return errors.New("the NVML event loop did not stop in time")
	}
}

// onEvent runs on the watcher goroutine.
func (s *nvmlScraper) onEvent(ev nvmlclient.Event) {
	if ev.Kind == nvmlclient.EventXID {
		s.xidMu.Lock()
		byCode := s.xids[ev.Device.UUID]
		if byCode == nil {
			byCode = map[int64]int64{}
			s.xids[ev.Device.UUID] = byCode
		}
		byCode[int64(ev.XID)]++
		s.xidMu.Unlock()
	}
	// The collector's own log gets the first event of each GPU, kind and
	// code; the rest (an ECC storm) are counted and sent as log records.
	key := fmt.Sprintf("%s/%s/%d", ev.Device.UUID, ev.Kind, ev.XID)
	s.xidMu.Lock()
	_, seen := s.eventsLogged[key]
	s.eventsLogged[key] = struct{}{}
	s.xidMu.Unlock()
	if !seen {
		s.logger.Warn("GPU event (later ones of this GPU, kind and code are not logged here)",
			zap.String("hw.id", ev.Device.UUID), zap.String("event", ev.Kind.String()), zap.Uint64("xid", ev.XID))
	}
	if s.logsConsumer != nil {
		if logs := s.eventLogs(ev); logs.LogRecordCount() > 0 {
			if err := s.logsConsumer.ConsumeLogs(context.Background(), logs); err != nil {
				s.logger.Debug("Cannot pass a GPU event on", zap.Error(err))
			}
		}
	}
}

// xidCounts copies the XID counts of one GPU.
func (s *nvmlScraper) xidCounts(uuid string) map[int64]int64 {
	s.xidMu.Lock()
	defer s.xidMu.Unlock()
	out := make(map[int64]int64, len(s.xids[uuid]))
	for code, n := range s.xids[uuid] {
		out[code] = n
	}
	return out
}

func recordXIDs(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, counts map[int64]int64) {
	for code, n := range counts {
		mb.RecordNvidiaGpuXidErrorsDataPoint(ts, n, code)
	}
}

// eventLogs builds one log record for ev, on its GPU's resource, through
// the LogsBuilder that metadata.yaml's events generate (event name, time,
// attributes, and the events:: switches of the configuration); severity
// and body are the receiver's. It returns no record for a disabled event.
// It runs on the watcher goroutine only, which owns s.lb.
func (s *nvmlScraper) eventLogs(ev nvmlclient.Event) plog.Logs {
	if s.lb == nil {
		s.lb = metadata.NewLogsBuilder(metadata.LogsBuilderConfig{
			Events: s.cfg.Events, ResourceAttributes: s.cfg.ResourceAttributes,
		}, s.set)
	}
	ts := pcommon.NewTimestampFromTime(ev.Time)
	var opts []metadata.EventAttributeOption
	if ev.GPUInstanceID != nvmlclient.NoInstance {
		opts = append(opts, metadata.WithNvidiaGpuMigGpuInstanceIDEventAttribute(int64(ev.GPUInstanceID)))
	}
	if ev.ComputeInstanceID != nvmlclient.NoInstance {
		opts = append(opts, metadata.WithNvidiaGpuMigComputeInstanceIDEventAttribute(int64(ev.ComputeInstanceID)))
	}
	ctx := context.Background()
	severity, text, body := plog.SeverityNumberError, "ERROR", ""
	switch ev.Kind {
	case nvmlclient.EventXID:
		s.lb.RecordNvidiaGpuXidEvent(ctx, ts, metadata.AttributeNvidiaGpuEventTypeXid, int64(ev.XID), opts...)
		body = fmt.Sprintf("Xid %d on GPU %s", ev.XID, ev.Device.UUID)
	case nvmlclient.EventDoubleBitECC:
		s.lb.RecordNvidiaGpuEccDoubleBitEvent(ctx, ts, metadata.AttributeNvidiaGpuEventTypeEccDoubleBit, opts...)
		body = "Double-bit (uncorrectable) ECC error on GPU " + ev.Device.UUID
	default:
		s.lb.RecordNvidiaGpuEccSingleBitEvent(ctx, ts, metadata.AttributeNvidiaGpuEventTypeEccSingleBit, opts...)
		severity, text = plog.SeverityNumberWarn, "WARN"
		body = "Single-bit (corrected) ECC error on GPU " + ev.Device.UUID
	}
	rb := s.lb.NewResourceBuilder()
	setGPUAttributes(rb, ev.Device, owner{})
	logs := s.lb.Emit(metadata.WithLogsResource(rb.Emit()))
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

// logsReceiver is the receiver's logs side: it shares the metrics side's
// NVML client and event watcher (see shared.go).
type logsReceiver struct {
	s      *nvmlScraper
	ticker chan struct{} // closed to stop the availability loop of a logs-only receiver
	done   chan struct{}
}

func (l *logsReceiver) Start(ctx context.Context, host component.Host) error {
	if err := l.s.start(ctx, host); err != nil {
		return err
	}
	if l.s.hasMetrics {
		return nil // the scrapes open NVML and retry
	}
	// Logs alone: keep trying to open NVML on the collection interval.
	l.ticker, l.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(l.done)
		t := time.NewTicker(l.s.cfg.CollectionInterval)
		defer t.Stop()
		for {
			select {
			case <-l.ticker:
				return
			case <-t.C:
				l.s.ensureOpen()
			}
		}
	}()
	return nil
}

func (l *logsReceiver) Shutdown(ctx context.Context) error {
	if l.ticker != nil {
		close(l.ticker)
		<-l.done
		l.ticker = nil
	}
	return l.s.shutdown(ctx)
}
