package nvmlreceiver

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// The GPU-time counters: held, busy, active and idle seconds of each GPU
// and MIG device, and held, busy and idle seconds of each process on it.
// Each scrape adds its window (from the device's previous sample to this
// one) times the window's figure, so that rate() over any range is exact
// whatever the backend's scrape interval. The figures are those the sample
// already holds, each itself true over the window: general utilization
// (busy), GPM's SM activity (active), and the process lists (held).
//
// A counter's start time is when its owner took the device: an account
// belongs to one device and one owner (container and pod), and a new owner
// starts a new account, a new stream. A process's account starts when the
// process is first seen on the device.

// maxWindowIntervals bounds a window, in collection intervals: a longer
// gap (a GPU stuck for scrapes, a clock jump) adds nothing, rather than
// guessing who held the GPU meanwhile.
const maxWindowIntervals = 2.5

// accountant holds the accounts; used from the scrape goroutine only.
type accountant struct {
	idleThreshold float64
	maxWindow     time.Duration
	devices       map[string]*deviceAccount // by device UUID (GPU or MIG)
	processes     map[processKey]*processAccount
	scrape        uint64 // counts scrapes, to drop accounts not seen in one
	// starts holds, within one scrape, the start times of the resources
	// accounted, for stampStarts.
	starts map[resourceKey]starts
	// unlisted holds, within one scrape, the devices whose process list
	// failed: their processes' accounts are kept.
	unlisted map[string]bool
}

// deviceAccount is one device's counters under one owner.
type deviceAccount struct {
	owner  owner
	parent string    // the GPU's UUID (its own for a GPU)
	last   time.Time // the end of the previous window
	start  pcommon.Timestamp
	seen   uint64

	held, busy, active, idle float64
	// Which counters the device has: a figure never read (no GPM, a MIG
	// device's busy) leaves its counter out instead of reporting 0.
	heldOK, busyOK, activeOK, idleOK bool
}

// processKey tells a process apart from a later one with the same PID.
type processKey struct {
	device  string
	pid     uint32
	started time.Time
}

// processAccount is one process's counters on one device.
type processAccount struct {
	start  pcommon.Timestamp
	seen   uint64
	parent string

	held, busy, idle float64
	busyOK, idleOK   bool
}

func newAccountant(cfg *Config) *accountant {
	return &accountant{
		idleThreshold: cfg.Accounting.IdleThreshold,
		maxWindow:     time.Duration(maxWindowIntervals * float64(cfg.CollectionInterval)),
		devices:       map[string]*deviceAccount{},
		processes:     map[processKey]*processAccount{},
		starts:        map[resourceKey]starts{},
		unlisted:      map[string]bool{},
	}
}

// reset drops every account: a new NVML session starts the counts again.
func (a *accountant) reset() {
	clear(a.devices)
	clear(a.processes)
	clear(a.starts)
	clear(a.unlisted)
}

// deviceWindow is what one sample tells of one device's last window.
type deviceWindow struct {
	id, parent string
	at         time.Time
	owner      owner
	// listed says the process lists were read, so that held is known;
	// holders counts the processes with a context on the device (on a GPU
	// in MIG mode, those of its MIG devices); allocated says the kubelet
	// gave the device to a pod.
	listed, allocated bool
	holders           int
	busy, active      nvmlclient.Opt[float64] // fractions of the window
	// processes are those accounted on this device (none on a GPU in MIG
	// mode: they are its MIG devices').
	processes []ownedProcess
}

// add accounts for one device's window and returns its account, with the
// account of each of w.processes (in its order; nil when not listed).
func (a *accountant) add(w deviceWindow) (*deviceAccount, []*processAccount) {
	acct := a.devices[w.id]
	ts := pcommon.NewTimestampFromTime(w.at)
	var dt float64 // seconds to add; 0 when the window is not counted
	switch {
	case acct == nil:
		acct = &deviceAccount{owner: w.owner, last: w.at, start: ts}
	case acct.owner != w.owner:
		// A new owner took the device during this window: a new stream,
		// from the window's start.
		start := acct.last
		acct = &deviceAccount{owner: w.owner, last: start, start: pcommon.NewTimestampFromTime(start)}
		dt = a.window(start, w.at)
	default:
		dt = a.window(acct.last, w.at)
	}
	a.devices[w.id] = acct
	acct.parent, acct.seen = w.parent, a.scrape
	a.starts[resourceKey{id: w.id}] = starts{account: acct.start}
	windowStart := acct.last
	acct.last = w.at

	w.busy, w.active = fraction(w.busy), fraction(w.active)
	activity := w.active
	if !activity.OK {
		activity = w.busy // no GPM: idle falls back to busy
	}
	if w.busy.OK {
		acct.busyOK = true
		acct.busy += w.busy.Value * dt
	}
	if w.active.OK {
		acct.activeOK = true
		acct.active += w.active.Value * dt
	}
	known := w.listed || w.allocated
	held := w.holders > 0 || w.allocated
	idle := known && held && activity.OK && activity.Value < a.idleThreshold
	if known {
		acct.heldOK = true
		if held {
			acct.held += dt
		}
	}
	if known && activity.OK {
		acct.idleOK = true
		if idle {
			acct.idle += dt
		}
	}
	if !w.listed {
		// Not listed this time: the processes' accounts wait for the next
		// listing rather than start over (endScrape keeps them).
		a.unlisted[w.id] = true
		return acct, nil
	}
	return acct, a.addProcesses(w, windowStart, dt, idle)
}

// fraction keeps a figure within 0..1 and drops one that is not a number,
// so that no window takes a counter down or past its wall time.
func fraction(v nvmlclient.Opt[float64]) nvmlclient.Opt[float64] {
	if !v.OK || math.IsNaN(v.Value) {
		return nvmlclient.Opt[float64]{}
	}
	v.Value = math.Min(math.Max(v.Value, 0), 1)
	return v
}

// window is the length in seconds of a window to count: 0 when it is too
// long to vouch for, or runs backwards.
func (a *accountant) window(from, to time.Time) float64 {
	d := to.Sub(from)
	if d <= 0 || a.maxWindow > 0 && d > a.maxWindow {
		return 0
	}
	return d.Seconds()
}

// addProcesses splits the device's window among its processes: each held
// it for the whole window, its part of the busy time is its share of it
// (even parts where NVML saw no process busy), and an idle window is split
// evenly, so that summed over processes the parts give GPU-seconds.
func (a *accountant) addProcesses(w deviceWindow, windowStart time.Time, dt float64, idle bool) []*processAccount {
	out := make([]*processAccount, len(w.processes))
	shared := false
	for _, p := range w.processes {
		shared = shared || p.BusyShare.OK
	}
	n := float64(len(w.processes))
	for i, p := range w.processes {
		key := processKey{device: w.id, pid: p.PID, started: p.info.Started}
		pa := a.processes[key]
		add := dt
		if pa == nil {
			start := windowStart
			if dt == 0 {
				start = w.at
			}
			pa = &processAccount{start: pcommon.NewTimestampFromTime(start)}
			a.processes[key] = pa
		}
		pa.parent, pa.seen = w.parent, a.scrape
		st := starts{account: pa.start}
		if !key.started.IsZero() {
			st.process = pcommon.NewTimestampFromTime(key.started)
		}
		a.starts[resourceKey{id: w.id, pid: int64(p.PID)}] = st
		pa.held += add
		if w.busy.OK {
			share := 1 / n
			if shared {
				share = p.BusyShare.Value // absent: 0
			}
			pa.busyOK = true
			pa.busy += w.busy.Value * add * share
		}
		if w.active.OK || w.busy.OK {
			pa.idleOK = true
			if idle {
				pa.idle += add / n
			}
		}
		out[i] = pa
	}
	return out
}

// endScrape drops the accounts of devices and processes not seen in this
// scrape, unless their GPU was not read (stuck): a lost GPU, a MIG device
// gone, or an exited process ends its streams.
func (a *accountant) endScrape(unread map[string]bool) {
	for id, acct := range a.devices {
		if acct.seen != a.scrape && !unread[acct.parent] {
			delete(a.devices, id)
		}
	}
	for k, pa := range a.processes {
		if pa.seen != a.scrape && !unread[pa.parent] && !a.unlisted[k.device] {
			delete(a.processes, k)
		}
	}
	clear(a.starts)
	clear(a.unlisted)
	a.scrape++
}

// recordDeviceAccount records a device's counters; their start time is
// set by stampStarts.
func recordDeviceAccount(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, acct *deviceAccount) {
	if acct == nil {
		return
	}
	if acct.heldOK {
		mb.RecordNvidiaGpuHeldTimeDataPoint(ts, acct.held)
	}
	if acct.busyOK {
		mb.RecordNvidiaGpuBusyTimeDataPoint(ts, acct.busy)
	}
	if acct.activeOK {
		mb.RecordNvidiaGpuActiveTimeDataPoint(ts, acct.active)
	}
	if acct.idleOK {
		mb.RecordNvidiaGpuIdleTimeDataPoint(ts, acct.idle)
	}
}

// recordProcessAccount records a process's counters.
func recordProcessAccount(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, pa *processAccount) {
	if pa == nil {
		return
	}
	mb.RecordNvidiaGpuProcessHeldTimeDataPoint(ts, pa.held)
	if pa.busyOK {
		mb.RecordNvidiaGpuProcessBusyTimeDataPoint(ts, pa.busy)
	}
	if pa.idleOK {
		mb.RecordNvidiaGpuProcessIdleTimeDataPoint(ts, pa.idle)
	}
}

// accountMetrics are the counters whose start is their account's.
var accountMetrics = map[string]bool{
	"nvidia.gpu.held.time": true, "nvidia.gpu.busy.time": true, "nvidia.gpu.active.time": true, "nvidia.gpu.idle.time": true,
	"nvidia.gpu.process.held.time": true, "nvidia.gpu.process.busy.time": true, "nvidia.gpu.process.idle.time": true,
}

// processCPUMetric starts with its process.
const processCPUMetric = "process.cpu.time"

// resourceKey names the resource a start belongs to: a device (hw.id)
// and, on a process's resource, its PID.
type resourceKey struct {
	id  string
	pid int64
}

// starts are the start times of one resource's counters.
type starts struct {
	account, process pcommon.Timestamp
}

// stampStarts gives the counters of md the start time of their account,
// and process.cpu.time its process's: the builder stamps every sum with
// the receiver's start. It walks this scrape's resources only.
func (a *accountant) stampStarts(md pmetric.Metrics) {
	if len(a.starts) == 0 {
		return
	}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		attrs := rm.Resource().Attributes()
		id, ok := attrs.Get("hw.id")
		if !ok {
			continue
		}
		key := resourceKey{id: id.Str()}
		if pid, ok := attrs.Get("process.pid"); ok {
			key.pid = pid.Int()
		}
		st, ok := a.starts[key]
		if !ok {
			continue
		}
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				var start pcommon.Timestamp
				switch {
				case accountMetrics[m.Name()]:
					start = st.account
				case m.Name() == processCPUMetric && st.process != 0:
					start = st.process
				default:
					continue
				}
				dps := m.Sum().DataPoints()
				for d := 0; d < dps.Len(); d++ {
					dps.At(d).SetStartTimestamp(start)
				}
			}
		}
	}
}
