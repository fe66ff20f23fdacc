package nvmlreceiver

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
)

// logsReceiver is the receiver's logs side: it shares the metrics side's
// NVML client and event watcher (see shared.go).
type logsReceiver struct {
	s    *nvmlScraper
	stop context.CancelFunc // stops the availability loop of a logs-only receiver
	done chan struct{}
}

func (l *logsReceiver) Start(ctx context.Context, host component.Host) error {
	started, err := l.s.startSide(ctx, host, logsSide)
	if err != nil || !started {
		return err // a second Start is a no-op
	}
	l.s.mu.Lock()
	hasMetrics := l.s.hasMetrics
	l.s.mu.Unlock()
	if hasMetrics {
		return nil // the scrapes open NVML and retry
	}
	// Logs alone: keep trying to open NVML on the collection interval and,
	// once it is open, check that the GPUs are still there (probeLost).
	loopCtx, stop := context.WithCancel(context.Background())
	l.stop, l.done = stop, make(chan struct{})
	go func() {
		defer close(l.done)
		t := time.NewTicker(l.s.cfg.CollectionInterval)
		defer t.Stop()
		for {
			select {
			case <-loopCtx.Done():
				return
			case <-t.C:
				if l.s.session.isReady() {
					l.s.probeLost(loopCtx) // Shutdown does not wait for a read
				} else {
					l.s.session.open()
				}
			}
		}
	}()
	return nil
}

func (l *logsReceiver) Shutdown(ctx context.Context) error {
	if l.stop != nil {
		l.stop()
		<-l.done
		l.stop = nil
	}
	return l.s.shutdownSide(ctx, logsSide)
}
