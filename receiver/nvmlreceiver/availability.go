package nvmlreceiver

import "time"

// NVML is often not ready when the collector starts (the driver container is
// still loading, or the library is not mounted yet). The receiver then starts
// anyway and retries Init on later scrapes, backing off so that a node
// without a GPU costs next to nothing.
const (
	firstRetryDelay = 5 * time.Second
	maxRetryDelay   = time.Minute
)

// retryBackoff decides when the next Init attempt is due.
type retryBackoff struct {
	failures int
	next     time.Time
}

// due reports whether an attempt may be made at now.
func (b *retryBackoff) due(now time.Time) bool { return !now.Before(b.next) }

// failed records a failed attempt at now and returns the delay until the next.
func (b *retryBackoff) failed(now time.Time) time.Duration {
	delay := firstRetryDelay
	for i := 0; i < b.failures && delay < maxRetryDelay; i++ {
		delay *= 2
	}
	delay = min(delay, maxRetryDelay)
	b.failures++
	b.next = now.Add(delay)
	return delay
}

// lostAtOnce records an Init whose GPUs were all lost before any of them
// gave data: they stay lost until someone resets them (nvidia-smi -r, a
// reboot), and each Init re-reads the whole inventory, so the next one
// waits the longest delay.
func (b *retryBackoff) lostAtOnce(now time.Time) time.Duration {
	b.failures++
	b.next = now.Add(maxRetryDelay)
	return maxRetryDelay
}

// succeeded resets the backoff.
func (b *retryBackoff) succeeded() { *b = retryBackoff{} }
