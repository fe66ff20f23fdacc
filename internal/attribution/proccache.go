package attribution

import (
	"sync"
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/internal/procinfo"
)

// procCache keeps what is read of a GPU process once in its life rather
// than at every scrape (issue 34: a scrape cost 0.245 ms of CPU per extra
// process on an H200): its executable, its user (status and passwd), its
// command line and its cgroup's owner and paths. Its /proc/<pid>/stat is
// still read once per scrape, for its CPU time, and tells whether the entry
// is still this process's:
//
//   - an entry is its process's PID, start time and comm: a reused PID
//     starts later, and an exec (same PID and start) sets a new comm, so
//     either reads the process afresh;
//   - an entry older than procRecheck is read afresh too: a process moved
//     to another cgroup after it started (pam_slurm_adopt, a manual move
//     into a container's cgroup), or that changed its uid, shows its new
//     owner within procRecheck, at a tenth of the cost of a read every
//     second;
//   - an entry that no scrape has asked for since the last Refresh is
//     dropped at the next: the cache holds the processes of the last scrape
//     and no more. maxProcCache bounds it between Refreshes.
//
// A read that failed is not kept: the next scrape reads again, and logs as
// before. Within one scrape the stat of a process on several GPUs is read
// once.
//
// mu is held by refresh, and by the caller of the other methods.
type procCache struct {
	mu      sync.Mutex
	entries map[int]*procEntry
	gen     uint64 // bumped by each Refresh; 0: never, and no caching
	now     func() time.Time
}

// procRecheck is how long a process's details and owner are kept before
// they are read again.
const procRecheck = 10 * time.Second

// maxProcCache bounds the entries kept between two Refreshes (NVML lists at
// most a few thousand processes per GPU).
const maxProcCache = 1 << 16

type procEntry struct {
	stat    procinfo.Stat // this scrape's (statGen), or the one read with the details
	statGen uint64
	statErr error

	// The details and owner, valid when cached: read at readAt for the
	// process of start and comm.
	cached bool
	start  uint64
	comm   string
	readAt time.Time
	info   procinfo.Info
	infoOK bool
	owner  Owner
	cgroup Cgroup
	seen   uint64 // the generation that last asked for it
}

func newProcCache() *procCache {
	return &procCache{entries: map[int]*procEntry{}, now: time.Now}
}

// refresh starts a scrape: the entries the last one did not ask for are
// dropped.
func (c *procCache) refresh() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for pid, e := range c.entries {
		if e.seen < c.gen {
			delete(c.entries, pid)
		}
	}
	c.gen++
}

// entry returns pid's entry, made when missing, with this scrape's stat
// read (once per scrape) by read.
func (c *procCache) entry(pid int, read func(int) (procinfo.Stat, error)) *procEntry {
	e, ok := c.entries[pid]
	if !ok {
		if len(c.entries) >= maxProcCache {
			clear(c.entries)
		}
		e = &procEntry{}
		c.entries[pid] = e
	}
	e.seen = c.gen
	if e.statGen != c.gen {
		e.stat, e.statErr = read(pid)
		e.statGen = c.gen
	}
	return e
}

// fresh reports whether e's details and owner are still its process's.
func (c *procCache) fresh(e *procEntry) bool {
	return e.cached && e.statErr == nil && e.start == e.stat.Start && e.comm == e.stat.Comm &&
		c.now().Sub(e.readAt) < procRecheck
}

// store keeps what was read of e's process with this scrape's stat.
func (c *procCache) store(e *procEntry, p Process) {
	e.cached, e.start, e.comm, e.readAt = true, e.stat.Start, e.stat.Comm, c.now()
	e.info, e.infoOK, e.owner, e.cgroup = p.Info, p.InfoOK, p.Owner, p.Cgroup
}

// forget drops what e holds: its next use reads afresh.
func (e *procEntry) forget() { e.cached = false }
