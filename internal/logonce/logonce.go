// Package logonce is the one memory of what the collector's log has said:
// a failure is logged once per key and cause, its recovery once, a key that
// flaps at most once per hold-off, and the memory is bounded, so that a
// churning key space (PIDs, pods, containers) cannot grow it.
package logonce

import (
	"container/list"
	"sync"
	"time"
)

// WhenFull says what a Log that remembers its maximum of keys does with a
// new one.
type WhenFull int

const (
	// EvictOldest forgets the key noted least recently, and remembers the
	// new one: the memory stays bounded, and a forgotten key that comes
	// back is logged again.
	EvictOldest WhenFull = iota
	// KeepOldest remembers no new key: its Verdict says Full (log it at
	// debug level, or not at all). The lines stay bounded too, for a key
	// space that should be small (causes) but may not be.
	KeepOldest
)

// Log remembers, per key, the failure last logged, and whether its
// recovery is to be logged. It is safe for concurrent use. The zero Log is
// not usable: use New.
type Log struct {
	mu      sync.Mutex
	max     int
	full    WhenFull
	holdOff time.Duration
	now     func() time.Time
	keys    map[string]*list.Element // of *entry
	order   *list.List               // least recently noted at the front
}

// entry is what the log said of one key.
type entry struct {
	key      string
	failing  bool      // failed at its last note
	cause    string    // the cause of that failure
	logged   bool      // this failure episode was logged: its recovery is too
	lastLine time.Time // the key's last failure line
	unlogged int       // failures (episodes or causes) held off since lastLine
}

// Option configures a Log.
type Option func(*Log)

// WithHoldOff makes a key's new failure (a new episode, or a new cause)
// within d of its last failure line counted rather than logged: a call that
// flaps every 30 s writes 4 lines in 10 minutes, not 40. The next line says
// how many went unlogged (Verdict.Unlogged). Zero, the default, holds
// nothing off.
func WithHoldOff(d time.Duration) Option { return func(l *Log) { l.holdOff = d } }

// WithClock sets the clock of the hold-off (time.Now by default).
func WithClock(now func() time.Time) Option { return func(l *Log) { l.now = now } }

// WithWhenFull sets what a full Log does with a new key (EvictOldest by
// default).
func WithWhenFull(w WhenFull) Option { return func(l *Log) { l.full = w } }

// New returns a Log that remembers at most n keys (at least 1).
func New(n int, opts ...Option) *Log {
	l := &Log{max: max(n, 1), now: time.Now, keys: map[string]*list.Element{}, order: list.New()}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Verdict says what to log of a failure.
type Verdict struct {
	// Log: write the failure line now (at warn).
	Log bool
	// Unlogged counts the key's failures held off since its last line
	// (with Log only; worth a field when not zero).
	Unlogged int
	// Full: the key is new, and a KeepOldest Log is full, so it is not
	// remembered. Log it at debug level, or not at all.
	Full bool
}

// Fail notes that key fails with cause. It is to be logged the first time,
// and when the cause changes or it fails again after OK, except within the
// hold-off of its last line. A key that keeps failing the same way is
// logged once, however often it is noted.
func (l *Log) Fail(key, cause string) Verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entry(key)
	if e == nil {
		return Verdict{Full: true}
	}
	if e.failing && e.cause == cause {
		return Verdict{}
	}
	newEpisode := !e.failing
	e.failing, e.cause = true, cause
	now := l.now()
	if l.holdOff > 0 && !e.lastLine.IsZero() && now.Sub(e.lastLine) < l.holdOff {
		e.unlogged++
		if newEpisode {
			e.logged = false // its recovery is not logged either
		}
		return Verdict{}
	}
	v := Verdict{Log: true, Unlogged: e.unlogged}
	e.lastLine, e.unlogged, e.logged = now, 0, true
	return v
}

// Once reports whether key is new: the first Once (or Fail) of a key is
// logged, the others not, until OK. It is Fail with no cause.
func (l *Log) Once(key string) bool { return l.Fail(key, "").Log }

// OK notes that key answers again. It reports whether its failure was
// logged, and so its recovery is to be (at info). A key not failing, or
// not remembered, is left as it is.
func (l *Log) OK(key string) (recovered bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.keys[key]
	if !ok {
		return false
	}
	e := el.Value.(*entry)
	if !e.failing {
		return false
	}
	l.order.MoveToBack(el)
	recovered = e.logged
	e.failing, e.cause, e.logged = false, "", false
	return recovered
}

// entry returns key's entry, made and remembered if new, noted as the most
// recent; nil when a KeepOldest Log is full. l.mu is held.
func (l *Log) entry(key string) *entry {
	if el, ok := l.keys[key]; ok {
		l.order.MoveToBack(el)
		return el.Value.(*entry)
	}
	if len(l.keys) >= l.max {
		if l.full == KeepOldest {
			return nil
		}
		oldest := l.order.Front()
		l.order.Remove(oldest)
		delete(l.keys, oldest.Value.(*entry).key)
	}
	e := &entry{key: key}
	l.keys[key] = l.order.PushBack(e)
	return e
}
