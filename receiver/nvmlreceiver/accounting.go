package nvmlreceiver

import (
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// The GPU-time counters: held, free, unobserved, busy, active and idle
// seconds of each GPU and MIG device, and held, busy and idle seconds of
// each process on it.
// Each scrape adds its window (from the device's previous sample to this
// one) times the window's figure, so that rate() over any range is exact
// whatever the backend's scrape interval. The figures are those the sample
// already holds, each itself true over the window: general utilization
// (busy), GPM's SM activity (active), and the process lists (held).
//
// Every second of a device's account lands in one of held, free or
// unobserved (by reason), so that summed over the device's accounts they
// give the wall-clock time since counting started (docs/design/waste.md): a
// window whose holder is not known is unobserved (read_failed), a stuck or
// lost GPU's scrapes add their time as such, a window too long to vouch
// for is a gap, and the time from the start of counting to a device's
// first read is a restart.
//
// A counter's start time is when its owner took the device: an account
// belongs to one device and one owner (container and pod), and a new owner
// starts a new account, a new stream. A device's first account starts
// when counting started (the restart it reports first). A process's
// account starts when the process is first seen on the device.

// maxWindowIntervals bounds a window, in collection intervals: a longer
// one (the collector paused, a clock jump) is a gap, rather than a guess
// at who held the GPU meanwhile.
const maxWindowIntervals = 2.5

// unobservedReason says why a span of a device's time was not observed.
type unobservedReason int

const (
	reasonReadFailed unobservedReason = iota
	reasonStuck
	reasonLost
	reasonGap
	reasonRestart
)

// unobservedReasons are the reasons and their attribute values, in the
// order recorded; an account's unobserved seconds are indexed by reason.
var unobservedReasons = [...]struct {
	reason unobservedReason
	attr   metadata.AttributeNvidiaGpuUnobservedReason
}{
	{reasonReadFailed, metadata.AttributeNvidiaGpuUnobservedReasonReadFailed},
	{reasonStuck, metadata.AttributeNvidiaGpuUnobservedReasonStuck},
	{reasonLost, metadata.AttributeNvidiaGpuUnobservedReasonLost},
	{reasonGap, metadata.AttributeNvidiaGpuUnobservedReasonGap},
	{reasonRestart, metadata.AttributeNvidiaGpuUnobservedReasonRestart},
}

// accountant holds the accounts; used from the scrape goroutine only.
type accountant struct {
	// holding says who holds a device can be known (processes or the
	// kubelet read): without, held, free and unobserved time are not
	// reported, rather than all unobserved.
	holding       bool
	idleThreshold float64
	maxWindow     time.Duration
	devices       map[string]*deviceAccount // by device UUID (GPU or MIG)
	processes     map[processKey]*processAccount
	scrape        uint64 // counts scrapes, to drop accounts not seen in one
	// unlisted holds, within one scrape, the devices whose process list
	// failed: their processes' accounts are kept.
	unlisted map[string]bool
	// since is when counting started: the receiver's start or the opening
	// of a new NVML session. fresh says no scrape has accounted a device
	// since then, so that a device first read later (a GPU stuck from the
	// start aside) is new, not restarted. carried holds the end of each
	// device's time in the previous session, where a new one continues.
	since   time.Time
	fresh   bool
	carried map[string]time.Time
}

// deviceAccount is one device's counters under one owner.
type deviceAccount struct {
	owner  owner
	parent string             // the GPU's UUID (its own for a GPU)
	mig    nvmlclient.MIGInfo // a MIG device's (zero for a GPU)
	last   time.Time          // the end of the time accounted
	start  pcommon.Timestamp
	seen   uint64

	// mps says the device was shared through MPS (nvidia.gpu.sharing): a
	// change is a new stream, as a new owner is.
	mps bool

	held, free, busy, active, idle float64
	unobserved                     [len(unobservedReasons)]float64
	// Which counters the device has: a figure never read (no GPM, a MIG
	// device's busy) leaves its counter out instead of reporting 0.
	holding, busyOK, activeOK, idleOK bool
	activity                          lastActivity
}

// lastActivity is a device's latest GPM SM activity, which a window
// without a GPM reading carries for the idle criterion and active time,
// for up to maxWindow: the criterion stays GPM's on a GPM device rather
// than falling back to general utilization, which reads far higher.
type lastActivity struct {
	gpm   bool // the device gave a GPM reading in this session
	value float64
	at    time.Time
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
		holding:       cfg.Processes.Enabled || cfg.Kubernetes.Enabled,
		idleThreshold: cfg.Accounting.IdleThreshold,
		maxWindow:     time.Duration(maxWindowIntervals * float64(cfg.CollectionInterval)),
		devices:       map[string]*deviceAccount{},
		processes:     map[processKey]*processAccount{},
		unlisted:      map[string]bool{},
		carried:       map[string]time.Time{},
	}
}

// reset drops every account: counting starts again at since, the
// receiver's start or a new NVML session's opening. With carry (a new
// session) each device's next account starts where its last ended, so
// that the time between sessions is reported as a restart; without, the
// receiver knows nothing of the time before since.
func (a *accountant) reset(since time.Time, carry bool) {
	clear(a.carried)
	if carry {
		for id, acct := range a.devices {
			a.carried[id] = acct.last
		}
	}
	clear(a.devices)
	clear(a.processes)
	clear(a.unlisted)
	a.since, a.fresh = since, true
}

// deviceWindow is what one sample tells of one device's last window.
type deviceWindow struct {
	id, parent string
	at         time.Time
	owner      owner
	mig        nvmlclient.MIGInfo // a MIG device's
	// listed says the process lists were read, so that held is known;
	// holders counts the processes with a context on the device (on a GPU
	// in MIG mode, those of its MIG devices); allocated says the kubelet
	// gave the device to a pod.
	listed, allocated bool
	holders           int
	// mps says an MPS server or client is on the device.
	mps          bool
	busy, active nvmlclient.Opt[float64] // fractions of the window
	// processes are those accounted on this device (none on a GPU in MIG
	// mode: they are its MIG devices').
	processes []ownedProcess
}

// add accounts for one device's window and returns its account, with the
// account of each of w.processes (in its order; nil when not listed).
func (a *accountant) add(w deviceWindow) (*deviceAccount, []*processAccount) {
	acct := a.devices[w.id]
	var dt float64 // seconds to add; 0 when the window is not counted
	switch {
	case acct == nil:
		acct = a.open(w.id, w.owner, w.at)
		acct.mps = w.mps
	case acct.owner != w.owner || acct.mps != w.mps:
		// A new owner took the device during this window, or MPS came or
		// went: a new stream, from the window's start.
		start := acct.last
		acct = &deviceAccount{owner: w.owner, mps: w.mps, last: start, start: pcommon.NewTimestampFromTime(start), holding: a.holding, activity: acct.activity}
		dt = a.window(acct, w.at)
	default:
		dt = a.window(acct, w.at)
	}
	a.devices[w.id] = acct
	acct.parent, acct.mig, acct.seen = w.parent, w.mig, a.scrape
	windowStart := acct.last
	acct.last = w.at

	w.busy, w.active = fraction(w.busy), fraction(w.active)
	activity := acct.activity.of(w, a.maxWindow)
	if w.busy.OK {
		acct.busyOK = true
		acct.busy += w.busy.Value * dt
	}
	if acct.activity.gpm && activity.OK {
		acct.activeOK = true
		acct.active += activity.Value * dt
	}
	known := w.listed || w.allocated
	held := w.holders > 0 || w.allocated
	idle := known && held && activity.OK && activity.Value < a.idleThreshold
	switch {
	case !known:
		acct.unobserved[reasonReadFailed] += dt
	case held:
		acct.held += dt
	default:
		acct.free += dt
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
	return acct, a.addProcesses(w, windowStart, dt, activity.OK, idle)
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

// of is the activity of w's window for the idle criterion and active
// time, and notes a GPM reading: the reading; without one, on a GPM
// device, the last reading up to maxWindow old (0: any age), then none;
// on a device that has given no GPM reading, general utilization.
func (l *lastActivity) of(w deviceWindow, maxWindow time.Duration) nvmlclient.Opt[float64] {
	switch {
	case w.active.OK:
		*l = lastActivity{gpm: true, value: w.active.Value, at: w.at}
		return w.active
	case !l.gpm:
		return w.busy
	case maxWindow == 0 || w.at.Sub(l.at) <= maxWindow:
		return nvmlclient.Opt[float64]{Value: l.value, OK: true}
	}
	return nvmlclient.Opt[float64]{}
}

// open starts a device's first account in this scrape's session. A device
// read before (in the previous session), or there since counting started,
// starts where its time was last accounted, or at the start: the span to
// this read is a restart. A device new since (a MIG device created) starts
// now.
func (a *accountant) open(id string, o owner, at time.Time) *deviceAccount {
	from, ok := a.carried[id]
	if !ok && a.fresh && !a.since.IsZero() {
		from, ok = a.since, true
	}
	if !ok || from.After(at) {
		from = at
	}
	delete(a.carried, id)
	acct := &deviceAccount{owner: o, last: at, start: pcommon.NewTimestampFromTime(from), holding: a.holding}
	acct.unobserved[reasonRestart] = at.Sub(from).Seconds()
	return acct
}

// window is the length in seconds of acct's window to at, to count: 0
// when it runs backwards (the clock was set back; its length is unknown)
// or is too long to vouch for, when its length is a gap.
func (a *accountant) window(acct *deviceAccount, at time.Time) float64 {
	d := at.Sub(acct.last)
	switch {
	case d <= 0:
		return 0
	case a.maxWindow > 0 && d > a.maxWindow:
		acct.unobserved[reasonGap] += d.Seconds()
		return 0
	}
	return d.Seconds()
}

// unobserved adds the time since the last account of GPU uuid, and of
// each of its MIG devices, to at as unobserved for reason, and returns
// those accounts: they keep their owner, the last the device had. A GPU
// with no account yet (stuck from the start) gets one, owner unknown, from
// the start of counting. The accounts are kept through the scrape.
func (a *accountant) unobserved(uuid string, at time.Time, reason unobservedReason) []*deviceAccount {
	if _, carried := a.carried[uuid]; a.devices[uuid] == nil && (a.fresh || carried) {
		acct := a.open(uuid, owner{}, at)
		acct.parent = uuid
		a.devices[uuid] = acct
	}
	var out []*deviceAccount
	for _, acct := range a.devices {
		if acct.parent != uuid {
			continue
		}
		if d := at.Sub(acct.last); d > 0 {
			acct.unobserved[reason] += d.Seconds()
			acct.last = at
		}
		acct.seen = a.scrape
		out = append(out, acct)
	}
	// The GPU first, then its MIG devices in UUID order, as in a read.
	slices.SortFunc(out, func(x, y *deviceAccount) int { return strings.Compare(x.mig.UUID, y.mig.UUID) })
	return out
}

// addProcesses splits the device's window among its processes: each held
// it for the whole window, its part of the busy time is its share of it
// (even parts where NVML saw no process busy), and an idle window is split
// evenly, so that summed over processes the parts give GPU-seconds; judged
// says the window's activity is known, idle whether it was idle.
func (a *accountant) addProcesses(w deviceWindow, windowStart time.Time, dt float64, judged, idle bool) []*processAccount {
	out := make([]*processAccount, len(w.processes))
	shared := false
	// Under MPS NVML samples the server, for its clients together: the
	// clients split evenly what the other processes' shares leave (the
	// server's share), and the server holds nothing (mps.go).
	holders, clients, others := 0, 0, 0.0
	for _, p := range w.processes {
		shared = shared || p.BusyShare.OK
		switch {
		case p.MPS == nvmlclient.MPSServer:
			continue
		case p.MPS == nvmlclient.MPSClient:
			clients++
		case p.BusyShare.OK:
			others += p.BusyShare.Value
		}
		holders++
	}
	clientShare := 0.0
	if clients > 0 {
		clientShare = max(1-others, 0) / float64(clients)
	}
	n := float64(holders)
	for i, p := range w.processes {
		if p.MPS == nvmlclient.MPSServer {
			continue // infrastructure: no counters
		}
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
		pa.held += add
		if w.busy.OK {
			share := 1 / n
			switch {
			case shared && p.MPS == nvmlclient.MPSClient:
				share = clientShare
			case shared:
				share = p.BusyShare.Value // absent: 0
			}
			pa.busyOK = true
			pa.busy += w.busy.Value * add * share
		}
		if judged {
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
	if len(a.devices) > 0 {
		a.fresh = false
	}
	for k, pa := range a.processes {
		if pa.seen != a.scrape && !unread[pa.parent] && !a.unlisted[k.device] {
			delete(a.processes, k)
		}
	}
	clear(a.unlisted)
	a.scrape++
}

// recordDeviceAccount records a device's counters, from their account's
// start; base is the builder's.
func recordDeviceAccount(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, acct *deviceAccount, base pcommon.Timestamp) {
	if acct == nil {
		return
	}
	startingAt(mb, acct.start, base, func() { recordDeviceCounters(mb, ts, acct) })
}

func recordDeviceCounters(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, acct *deviceAccount) {
	if acct.holding {
		mb.RecordNvidiaGpuHeldTimeDataPoint(ts, acct.held)
		mb.RecordNvidiaGpuFreeTimeDataPoint(ts, acct.free)
		for _, r := range unobservedReasons {
			mb.RecordNvidiaGpuUnobservedTimeDataPoint(ts, acct.unobserved[r.reason], r.attr)
		}
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

// recordProcessAccount records a process's counters, from their
// account's start; base is the builder's.
func recordProcessAccount(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, pa *processAccount, base pcommon.Timestamp) {
	if pa == nil {
		return
	}
	startingAt(mb, pa.start, base, func() {
		mb.RecordNvidiaGpuProcessHeldTimeDataPoint(ts, pa.held)
		if pa.busyOK {
			mb.RecordNvidiaGpuProcessBusyTimeDataPoint(ts, pa.busy)
		}
		if pa.idleOK {
			mb.RecordNvidiaGpuProcessIdleTimeDataPoint(ts, pa.idle)
		}
	})
}
