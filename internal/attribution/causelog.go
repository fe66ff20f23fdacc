package attribution

import "sync"

// CauseLog remembers the causes of failures already logged, at most max of
// them: what fails the same way for every process or container is logged
// once, not once each, and what is remembered stays bounded.
type CauseLog struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

// NewCauseLog returns a CauseLog that remembers at most max causes.
func NewCauseLog(max int) *CauseLog { return &CauseLog{max: max, seen: map[string]bool{}} }

// Note records cause. first: it was not logged before and is to be logged
// now (at warning level). full: it is new, but max causes are remembered
// already, so it is not recorded (log it at debug level, or not at all).
func (l *CauseLog) Note(cause string) (first, full bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.seen[cause]:
		return false, false
	case len(l.seen) >= l.max:
		return false, true
	}
	l.seen[cause] = true
	return true, false
}

// Len is the number of causes remembered.
func (l *CauseLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}
