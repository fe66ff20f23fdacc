package holders

import (
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// leftOut counts the processes that processes::max_per_gpu leaves out, each
// once however many scrapes it stays left out, so that the count does not
// grow with the scrape rate. A process is its PID and start time: a reused
// PID is another process. Per GPU it remembers the processes counted while
// they are listed there, and forgets them when they are not: its memory is
// bounded by the GPUs' process lists.
type leftOut struct {
	seen map[string]map[uint32]time.Time // per GPU UUID: PID → start time
}

// add returns how many of the processes left out on a GPU (on the GPU
// itself or its MIG devices) were not counted before; listed is every
// process the GPU lists now, started tells when a process started (zero:
// unknown).
func (l *leftOut) add(gpu string, listed, left []sample.Process, started func(pid int) time.Time) int {
	seen := l.seen[gpu]
	if len(seen) == 0 && len(left) == 0 {
		return 0
	}
	if seen == nil {
		seen = map[uint32]time.Time{}
		l.seen[gpu] = seen
	}
	now := make(map[uint32]bool, len(listed))
	for _, p := range listed {
		now[p.PID] = true
	}
	for pid := range seen {
		if !now[pid] {
			delete(seen, pid) // exited, or gone from the GPU
		}
	}
	n := 0
	for _, p := range left {
		at := started(int(p.PID))
		if prev, ok := seen[p.PID]; ok && prev.Equal(at) {
			continue
		}
		seen[p.PID] = at
		n++
	}
	if len(seen) == 0 {
		delete(l.seen, gpu)
	}
	return n
}
