package nvmlclient

import "sync"

// lostLog remembers, across the sessions of one Client, the GPUs logged as
// lost: while every GPU stays lost the receiver re-initializes NVML now and
// then, and each session has new Devices. A GPU is logged lost again only
// after it read again in between.
type lostLog struct {
	mu    sync.Mutex
	uuids map[string]struct{}
}

// first marks uuid as logged lost, and reports whether it was not already.
// A nil lostLog (devices built without a client, in tests) always says yes.
func (l *lostLog) first(uuid string) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, seen := l.uuids[uuid]; seen {
		return false
	}
	if l.uuids == nil {
		l.uuids = map[string]struct{}{}
	}
	l.uuids[uuid] = struct{}{}
	return true
}

// back forgets uuid once the GPU has read again.
func (l *lostLog) back(uuid string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.uuids, uuid)
}
