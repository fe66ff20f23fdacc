//go:build cgo

package call

import (
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
)

// A call answered NOT_SUPPORTED (or NO_PERMISSION, FUNCTION_NOT_FOUND) is
// not made again on that GPU for a while: the answer rarely changes, and
// the cache saves real cost. But the answer can be transient (a GPU that
// is still initializing, a permission fixed at run time), so the cache
// expires: the call is asked again after reprobeFirst, then after twice as
// long each time it still answers so, up to reprobeMax. A call found again
// is logged once, as its loss was.
const (
	reprobeFirst = 10 * time.Second
	reprobeMax   = 5 * time.Minute
)

type supportState struct {
	missing     bool // the library lacks the symbol: never asked
	unsupported bool
	retryAt     time.Time
	backoff     time.Duration
}

// supportCache is one device's cache of unsupported calls, safe for the
// read and the background energy read at once.
type supportCache struct {
	once    *logonce.Log // the device's: a call's loss and return are logged once each
	table   Table        // names the calls
	mu      sync.Mutex
	state   []supportState
	newLoss []string // to log: calls newly found unsupported
	newBack []string // to log: calls answering again
}

func (sc *supportCache) markMissing(c ID) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.state[c].missing = true
}

// usable reports whether c may be asked now.
func (sc *supportCache) usable(c ID, now time.Time) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	st := &sc.state[c]
	return !st.missing && (!st.unsupported || !now.Before(st.retryAt))
}

// unsupported records an unsupported answer and when to ask again.
func (sc *supportCache) unsupported(c ID, ret nvml.Return, now time.Time) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	st := &sc.state[c]
	if st.unsupported {
		st.backoff = min(2*st.backoff, reprobeMax)
	} else {
		st.unsupported, st.backoff = true, reprobeFirst
	}
	st.retryAt = now.Add(st.backoff)
	if name := sc.table.Name(c); sc.once.Once(name + "/unsupported") {
		sc.newLoss = append(sc.newLoss, name+": "+ret.Error())
	}
}

// supported records a successful answer: a call that was unsupported is
// back, and asked every time again.
func (sc *supportCache) supported(c ID) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	st := &sc.state[c]
	if !st.unsupported {
		return
	}
	st.unsupported, st.backoff = false, 0
	if name := sc.table.Name(c); sc.once.Once(name + "/back") {
		sc.newBack = append(sc.newBack, name)
	}
}

// flushLogs logs, in one line per device each, the calls found unsupported
// and the calls back since the last flush: one line per GPU rather than one
// per call keeps the collector's log sampler from dropping any at startup.
func (sc *supportCache) flushLogs(logger *zap.Logger) {
	sc.mu.Lock()
	loss, back := sc.newLoss, sc.newBack
	sc.newLoss, sc.newBack = nil, nil
	sc.mu.Unlock()
	if len(loss) > 0 {
		logger.Info("NVML calls not supported on this GPU; their metrics are skipped, and the calls asked again after "+
			reprobeFirst.String()+", backing off to every "+reprobeMax.String(), zap.Strings("calls", loss))
	}
	if len(back) > 0 {
		logger.Info("NVML calls answer again on this GPU; their metrics are back", zap.Strings("calls", back))
	}
}
