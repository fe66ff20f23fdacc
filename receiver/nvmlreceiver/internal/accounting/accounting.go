// Package accounting keeps the GPU-time counters: held, free, unobserved,
// busy, active and idle seconds of each GPU and MIG device, and held, busy
// and idle seconds of each process on it, window by window, with the
// unobserved time of GPUs that are stuck or lost.
package accounting // import "github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/accounting"

import (
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/holders"
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

// Reason says why a span of a device's time was not observed; an
// account's unobserved seconds are indexed by it.
type Reason int

const (
	ReadFailed Reason = iota
	Stuck
	Lost
	Gap
	Restart
	reasons // how many
)

// Accountant holds the accounts; used from the scrape goroutine only.
type Accountant struct {
	// holding says who holds a device can be known (processes or the
	// kubelet read): without, held, free and unobserved time are not
	// reported, rather than all unobserved.
	holding       bool
	idleThreshold float64
	maxWindow     time.Duration
	devices       map[string]*Device // by device UUID (GPU or MIG)
	processes     map[processKey]*Process
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

// Device is one device's counters under one owner.
type Device struct {
	Owner  attribution.Owner
	parent string         // the GPU's UUID (its own for a GPU)
	MIG    sample.MIGInfo // a MIG device's (zero for a GPU)
	last   time.Time      // the end of the time accounted
	Start  pcommon.Timestamp
	seen   uint64

	// mps says the device was shared through MPS (nvidia.gpu.sharing): a
	// change is a new stream, as a new owner is.
	mps bool

	Held, Free, Busy, Active, Idle float64
	Unobserved                     [reasons]float64
	// Which counters the device has: a figure never read (no GPM, a MIG
	// device's busy) leaves its counter out instead of reporting 0.
	Holding, BusyOK, ActiveOK, IdleOK bool
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

// Process is one process's counters on one device.
type Process struct {
	Start  pcommon.Timestamp
	seen   uint64
	parent string

	Held, Busy, Idle float64
	BusyOK, IdleOK   bool
}

// DefaultIdleThreshold is 5 % activity: a training step that does any work
// keeps SM activity well above it, and a process that only holds memory
// reads 0 (docs/runs/h200-runs.md).
const DefaultIdleThreshold = 0.05

// New makes the accounts: holding says who holds a device can be known
// (processes or the kubelet are read), idleThreshold is
// accounting::idle_threshold, interval the collection interval.
func New(holding bool, idleThreshold float64, interval time.Duration) *Accountant {
	return &Accountant{
		holding:       holding,
		idleThreshold: idleThreshold,
		maxWindow:     time.Duration(maxWindowIntervals * float64(interval)),
		devices:       map[string]*Device{},
		processes:     map[processKey]*Process{},
		unlisted:      map[string]bool{},
		carried:       map[string]time.Time{},
	}
}

// Reset drops every account: counting starts again at since, the
// receiver's start or a new NVML session's opening. With carry (a new
// session) each device's next account starts where its last ended, so
// that the time between sessions is reported as a restart; without, the
// receiver knows nothing of the time before since.
func (a *Accountant) Reset(since time.Time, carry bool) {
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
	owner      attribution.Owner
	mig        sample.MIGInfo // a MIG device's
	// listed says the process lists were read, so that held is known;
	// holders counts the processes with a context on the device (on a GPU
	// in MIG mode, those of its MIG devices); allocated says the kubelet
	// gave the device to a pod.
	listed, allocated bool
	holders           int
	// mps says an MPS server or client is on the device.
	mps          bool
	busy, active sample.Opt[float64] // fractions of the window
	// processes are those accounted on this device (none on a GPU in MIG
	// mode: they are its MIG devices').
	processes []holders.Process
}

// add accounts for one device's window and returns its account, with the
// account of each of w.processes (in its order; nil when not listed).
func (a *Accountant) add(w deviceWindow) (*Device, []*Process) {
	acct := a.devices[w.id]
	var dt float64 // seconds to add; 0 when the window is not counted
	switch {
	case acct == nil:
		acct = a.open(w.id, w.owner, w.at)
		acct.mps = w.mps
	case acct.Owner != w.owner || acct.mps != w.mps:
		// A new owner took the device during this window, or MPS came or
		// went: a new stream, from the window's start.
		start := acct.last
		acct = &Device{Owner: w.owner, mps: w.mps, last: start, Start: pcommon.NewTimestampFromTime(start), Holding: a.holding, activity: acct.activity}
		dt = a.window(acct, w.at)
	default:
		dt = a.window(acct, w.at)
	}
	a.devices[w.id] = acct
	acct.parent, acct.MIG, acct.seen = w.parent, w.mig, a.scrape
	windowStart := acct.last
	acct.last = w.at

	w.busy, w.active = fraction(w.busy), fraction(w.active)
	activity := acct.activity.of(w, a.maxWindow)
	if w.busy.OK {
		acct.BusyOK = true
		acct.Busy += w.busy.Value * dt
	}
	if acct.activity.gpm && activity.OK {
		acct.ActiveOK = true
		acct.Active += activity.Value * dt
	}
	known := w.listed || w.allocated
	held := w.holders > 0 || w.allocated
	idle := known && held && activity.OK && activity.Value < a.idleThreshold
	switch {
	case !known:
		acct.Unobserved[ReadFailed] += dt
	case held:
		acct.Held += dt
	default:
		acct.Free += dt
	}
	if known && activity.OK {
		acct.IdleOK = true
		if idle {
			acct.Idle += dt
		}
	}
	if !w.listed {
		// Not listed this time: the processes' accounts wait for the next
		// listing rather than start over (EndScrape keeps them).
		a.unlisted[w.id] = true
		return acct, nil
	}
	return acct, a.addProcesses(w, windowStart, dt, activity.OK, idle)
}

// fraction keeps a figure within 0..1 and drops one that is not a number,
// so that no window takes a counter down or past its wall time.
func fraction(v sample.Opt[float64]) sample.Opt[float64] {
	if !v.OK || math.IsNaN(v.Value) {
		return sample.Opt[float64]{}
	}
	v.Value = math.Min(math.Max(v.Value, 0), 1)
	return v
}

// of is the activity of w's window for the idle criterion and active
// time, and notes a GPM reading: the reading; without one, on a GPM
// device, the last reading up to maxWindow old (0: any age), then none;
// on a device that has given no GPM reading, general utilization.
func (l *lastActivity) of(w deviceWindow, maxWindow time.Duration) sample.Opt[float64] {
	switch {
	case w.active.OK:
		*l = lastActivity{gpm: true, value: w.active.Value, at: w.at}
		return w.active
	case !l.gpm:
		return w.busy
	case maxWindow == 0 || w.at.Sub(l.at) <= maxWindow:
		return sample.Opt[float64]{Value: l.value, OK: true}
	}
	return sample.Opt[float64]{}
}

// open starts a device's first account in this scrape's session. A device
// read before (in the previous session), or there since counting started,
// starts where its time was last accounted, or at the start: the span to
// this read is a restart. A device new since (a MIG device created) starts
// now.
func (a *Accountant) open(id string, o attribution.Owner, at time.Time) *Device {
	from, ok := a.carried[id]
	if !ok && a.fresh && !a.since.IsZero() {
		from, ok = a.since, true
	}
	if !ok || from.After(at) {
		from = at
	}
	delete(a.carried, id)
	acct := &Device{Owner: o, last: at, Start: pcommon.NewTimestampFromTime(from), Holding: a.holding}
	acct.Unobserved[Restart] = at.Sub(from).Seconds()
	return acct
}

// window is the length in seconds of acct's window to at, to count: 0
// when it runs backwards (the clock was set back; its length is unknown)
// or is too long to vouch for, when its length is a gap.
func (a *Accountant) window(acct *Device, at time.Time) float64 {
	d := at.Sub(acct.last)
	switch {
	case d <= 0:
		return 0
	case a.maxWindow > 0 && d > a.maxWindow:
		acct.Unobserved[Gap] += d.Seconds()
		return 0
	}
	return d.Seconds()
}

// Unobserved adds the time since the last account of GPU uuid, and of
// each of its MIG devices, to at as unobserved for reason, and returns
// those accounts: they keep their owner, the last the device had. A GPU
// with no account yet (stuck from the start) gets one, owner unknown, from
// the start of counting. The accounts are kept through the scrape.
func (a *Accountant) Unobserved(uuid string, at time.Time, reason Reason) []*Device {
	if _, carried := a.carried[uuid]; a.devices[uuid] == nil && (a.fresh || carried) {
		acct := a.open(uuid, attribution.Owner{}, at)
		acct.parent = uuid
		a.devices[uuid] = acct
	}
	var out []*Device
	for _, acct := range a.devices {
		if acct.parent != uuid {
			continue
		}
		if d := at.Sub(acct.last); d > 0 {
			acct.Unobserved[reason] += d.Seconds()
			acct.last = at
		}
		acct.seen = a.scrape
		out = append(out, acct)
	}
	// The GPU first, then its MIG devices in UUID order, as in a read.
	slices.SortFunc(out, func(x, y *Device) int { return strings.Compare(x.MIG.UUID, y.MIG.UUID) })
	return out
}

// addProcesses splits the device's window among its processes: each held
// it for the whole window, its part of the busy time is its share of it
// (even parts where NVML saw no process busy), and an idle window is split
// evenly, so that summed over processes the parts give GPU-seconds; judged
// says the window's activity is known, idle whether it was idle.
func (a *Accountant) addProcesses(w deviceWindow, windowStart time.Time, dt float64, judged, idle bool) []*Process {
	out := make([]*Process, len(w.processes))
	shared := false
	// Under MPS NVML samples the server, for its clients together: the
	// clients split evenly what the other processes' shares leave (the
	// server's share), and the server holds nothing (holders.Count).
	holders, clients, others := 0, 0, 0.0
	for _, p := range w.processes {
		shared = shared || p.BusyShare.OK
		switch {
		case p.MPS == sample.MPSServer:
			continue
		case p.MPS == sample.MPSClient:
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
		if p.MPS == sample.MPSServer {
			continue // infrastructure: no counters
		}
		key := processKey{device: w.id, pid: p.PID, started: p.Info.Started}
		pa := a.processes[key]
		add := dt
		if pa == nil {
			start := windowStart
			if dt == 0 {
				start = w.at
			}
			pa = &Process{Start: pcommon.NewTimestampFromTime(start)}
			a.processes[key] = pa
		}
		pa.parent, pa.seen = w.parent, a.scrape
		pa.Held += add
		if w.busy.OK {
			share := 1 / n
			switch {
			case shared && p.MPS == sample.MPSClient:
				share = clientShare
			case shared:
				share = p.BusyShare.Value // absent: 0
			}
			pa.BusyOK = true
			pa.Busy += w.busy.Value * add * share
		}
		if judged {
			pa.IdleOK = true
			if idle {
				pa.Idle += add / n
			}
		}
		out[i] = pa
	}
	return out
}

// EndScrape drops the accounts of devices and processes not seen in this
// scrape, unless their GPU was not read (stuck): a lost GPU, a MIG device
// gone, or an exited process ends its streams.
func (a *Accountant) EndScrape(unread map[string]bool) {
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

// Accounts are one device's accounts in one scrape: its own, its
// processes' (one for each of its holders.Device's, nil for the MPS
// server; none when not listed), and on a GPU its MIG devices' (one for
// each of its holders.GPU's).
type Accounts struct {
	Device    *Device
	Processes []*Process
	MIGs      []Accounts
}

// GPU adds the window of one GPU's sample, and of each of its MIG
// devices', to their GPU-time counters; h is who holds them, allocated
// says the kubelet gave a device (by UUID) to a pod.
func (a *Accountant) GPU(info nvmlclient.DeviceInfo, smp *sample.Sample, h *holders.GPU, allocated func(uuid string) bool) Accounts {
	w := newWindow(info.UUID, info.UUID, smp, &h.Device, smp.GPM, allocated)
	w.busy = smp.Utilization[sample.EngineGeneral]
	for i, m := range h.MIGs {
		w.holders += holders.Count(m.Processes)
		w.allocated = w.allocated || allocated(smp.MIG[i].Info.UUID)
	}
	var out Accounts
	out.Device, out.Processes = a.add(w)
	out.MIGs = make([]Accounts, len(h.MIGs))
	for i := range h.MIGs {
		s := &smp.MIG[i]
		mw := newWindow(s.Info.UUID, info.UUID, smp, &h.MIGs[i], s.GPM, allocated)
		mw.mig = s.Info
		out.MIGs[i].Device, out.MIGs[i].Processes = a.add(mw)
	}
	return out
}

// newWindow is the window of device id (of GPU parent) that smp ends, held
// as h says; gpm is the device's GPM reading (nil: none).
func newWindow(id, parent string, smp *sample.Sample, h *holders.Device, gpm *sample.GPMReading, allocated func(string) bool) deviceWindow {
	w := deviceWindow{id: id, parent: parent, at: smp.Time, owner: h.Owner, listed: smp.ProcessesListed, allocated: allocated(id),
		holders: holders.Count(h.Processes), processes: h.Processes, mps: holders.Shared(h.Processes)}
	if gpm != nil {
		w.active = gpm.Activity[sample.GPMSMActivity]
	}
	return w
}
