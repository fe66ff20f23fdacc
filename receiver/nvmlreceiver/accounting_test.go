package nvmlreceiver

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func testAccountant() *accountant {
	cfg := createDefaultConfig().(*Config)
	cfg.CollectionInterval = time.Second
	return newAccountant(cfg)
}

func frac(v float64) nvmlclient.Opt[float64] { return nvmlclient.Opt[float64]{Value: v, OK: true} }

func held(id string, at time.Duration, busy, active float64, procs ...ownedProcess) deviceWindow {
	w := deviceWindow{id: id, parent: id, at: t0.Add(at), listed: true, holders: len(procs), processes: procs,
		busy: frac(busy), active: frac(active)}
	return w
}

func process(pid uint32, share float64) ownedProcess {
	p := ownedProcess{Process: nvmlclient.Process{PID: pid}}
	if share >= 0 {
		p.BusyShare = frac(share)
	}
	return p
}

func TestAccountingAddsEachWindow(t *testing.T) {
	a := testAccountant()
	acct, _ := a.add(held("g", 0, 1, 1, process(1, 1)))
	assert.Zero(t, acct.held, "the first sample only starts the window")
	assert.Equal(t, pcommon.NewTimestampFromTime(t0), acct.start)
	a.add(held("g", time.Second, 0.5, 0.4, process(1, 1)))
	acct, _ = a.add(held("g", 2*time.Second, 0.01, 0.02, process(1, 1)))
	assert.InDelta(t, 2, acct.held, 1e-9)
	assert.InDelta(t, 0.51, acct.busy, 1e-9)
	assert.InDelta(t, 0.42, acct.active, 1e-9)
	assert.InDelta(t, 1, acct.idle, 1e-9, "only the window under the threshold (0.02 < 0.05)")
}

func TestAccountingIdleThresholdIsStrict(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 0, 0, process(1, 1)))
	acct, _ := a.add(held("g", time.Second, 1, DefaultIdleThreshold, process(1, 1)))
	assert.Zero(t, acct.idle, "activity at the threshold is not idle")
}

func TestAccountingFreeGPUIsNotHeldNorIdle(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 0, 0))
	acct, _ := a.add(held("g", time.Second, 0, 0))
	assert.True(t, acct.holding && acct.idleOK, "reported, at 0")
	assert.Zero(t, acct.held)
	assert.Zero(t, acct.idle)
	assert.InDelta(t, 1, acct.free, 1e-9, "observed and not held: free")
}

func TestAccountingAllocatedGPUWithoutProcessIsHeld(t *testing.T) {
	a := testAccountant()
	w := held("g", 0, 0, 0)
	w.allocated = true
	a.add(w)
	w.at = t0.Add(time.Second)
	acct, _ := a.add(w)
	assert.InDelta(t, 1, acct.held, 1e-9)
	assert.InDelta(t, 1, acct.idle, 1e-9, "allocated to a pod and doing nothing: idle")
}

func TestAccountingWithoutGPMFallsBackToBusy(t *testing.T) {
	a := testAccountant()
	w := held("g", 0, 0.01, 0, process(1, 1))
	w.active = nvmlclient.Opt[float64]{}
	a.add(w)
	w.at = t0.Add(time.Second)
	acct, _ := a.add(w)
	assert.False(t, acct.activeOK, "no GPM: no active time, not 0")
	assert.InDelta(t, 1, acct.idle, 1e-9, "busy 0.01 < 0.05")
}

// A failed window: the utilization and GPM calls failed, so nothing tells
// activity, and a read that did not list the processes tells nothing of
// who held the GPU: its time is unobserved, read_failed.
func TestAccountingAFailedWindowIsUnobserved(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 1, process(1, 1)))
	failed := deviceWindow{id: "g", parent: "g", at: t0.Add(1500 * time.Millisecond)}
	acct, procs := a.add(failed)
	assert.Nil(t, procs)
	assert.InDelta(t, 1.5, acct.unobserved[reasonReadFailed], 1e-9)
	assert.Zero(t, acct.free+acct.idle)
	assert.InDelta(t, 1.5, acct.held+acct.active, 1e-9, "activity carried (GPM's last reading), held not known")
	assert.Zero(t, acct.held)
	acct, _ = a.add(held("g", 2500*time.Millisecond, 1, 1, process(1, 1)))
	assert.InDelta(t, 1, acct.held, 1e-9, "the next window counts, once")
	assert.InDelta(t, 1, acct.busy, 1e-9)
}

func TestAccountingALongWindowIsAGap(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 1, process(1, 1)))
	acct, _ := a.add(held("g", 3*time.Second, 1, 1, process(1, 1))) // 2.5 intervals at most
	assert.Zero(t, acct.held)
	assert.InDelta(t, 3, acct.unobserved[reasonGap], 1e-9, "not held, not free: a gap")
	acct, _ = a.add(held("g", 4*time.Second, 1, 1, process(1, 1)))
	assert.InDelta(t, 1, acct.held, 1e-9)
	acct, _ = a.add(held("g", 3*time.Second, 1, 1, process(1, 1)))
	assert.InDelta(t, 1, acct.held, 1e-9, "a window that runs backwards adds nothing")
	assert.InDelta(t, 3, acct.unobserved[reasonGap], 1e-9, "its length is unknown: it adds nothing anywhere")
	acct, _ = a.add(held("g", 4*time.Second, 1, 1, process(1, 1)))
	assert.InDelta(t, 2, acct.held, 1e-9, "counting goes on from the clock's new time")
}

func TestAccountingANewOwnerStartsANewStream(t *testing.T) {
	a := testAccountant()
	pod := owner{PodUID: "u1", PodName: "a-0", Namespace: "ml"}
	w := held("g", 0, 1, 1, process(1, 1))
	a.add(w)
	w.at = t0.Add(time.Second)
	first, _ := a.add(w)
	require.InDelta(t, 1, first.held, 1e-9)
	w.owner, w.at = pod, t0.Add(2*time.Second)
	second, _ := a.add(w)
	assert.NotSame(t, first, second)
	assert.Equal(t, pod, second.owner)
	assert.Equal(t, pcommon.NewTimestampFromTime(t0.Add(time.Second)), second.start, "from the start of the window in which it took the GPU")
	assert.InDelta(t, 1, second.held, 1e-9, "that window is the new owner's, and counted once")
	assert.InDelta(t, 1, first.held, 1e-9, "the old stream does not move")
}

func TestAccountingSplitsBusyTimeByShares(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 0.5, process(1, 0.3), process(2, 0.7)))
	acct, procs := a.add(held("g", 2*time.Second, 0.9, 0.5, process(1, 0.3), process(2, 0.7)))
	require.Len(t, procs, 2)
	assert.InDelta(t, 2*0.9*0.3, procs[0].busy, 1e-9)
	assert.InDelta(t, 2*0.9*0.7, procs[1].busy, 1e-9)
	assert.InDelta(t, acct.busy, procs[0].busy+procs[1].busy, 1e-9, "the parts sum to the GPU's")
	assert.InDelta(t, 2, procs[0].held, 1e-9, "each held it the whole window")
	assert.InDelta(t, 2, procs[1].held, 1e-9)
}

func TestAccountingWithoutSharesSplitsEvenly(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 0.5, process(1, -1), process(2, -1)))
	_, procs := a.add(held("g", time.Second, 0.8, 0.5, process(1, -1), process(2, -1)))
	assert.InDelta(t, 0.4, procs[0].busy, 1e-9)
	assert.InDelta(t, 0.4, procs[1].busy, 1e-9)
}

func TestAccountingSplitsIdleTimeEvenly(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 0, 0, process(1, -1), process(2, -1)))
	acct, procs := a.add(held("g", time.Second, 0, 0, process(1, -1), process(2, -1)))
	assert.InDelta(t, 1, acct.idle, 1e-9)
	assert.InDelta(t, 0.5, procs[0].idle, 1e-9)
	assert.InDelta(t, 0.5, procs[1].idle, 1e-9)
}

func TestAccountingAProcessStartsWhenFirstSeen(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 1, process(1, 1)))
	a.endScrape(nil)
	_, procs := a.add(held("g", time.Second, 1, 1, process(1, 0.5), process(2, 0.5)))
	a.endScrape(nil)
	assert.Equal(t, pcommon.NewTimestampFromTime(t0), procs[1].start, "from the window in which it appeared")
	assert.InDelta(t, 1, procs[1].held, 1e-9)
	a.add(held("g", 2*time.Second, 1, 1, process(1, 1)))
	a.endScrape(nil)
	assert.Len(t, a.processes, 1, "an exited process's account ends")

	// The same PID again, a new process: a new stream from zero.
	reused := process(2, 0.5)
	reused.info.Started = t0.Add(2500 * time.Millisecond)
	_, procs = a.add(held("g", 3*time.Second, 1, 1, process(1, 0.5), reused))
	assert.InDelta(t, 1, procs[1].held, 1e-9)
}

func TestAccountingProcessesNotListedKeepTheirAccounts(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 1, process(1, 1)))
	a.endScrape(nil)
	a.add(deviceWindow{id: "g", parent: "g", at: t0.Add(time.Second), busy: frac(1)}) // the list failed
	a.endScrape(nil)
	_, procs := a.add(held("g", 2*time.Second, 1, 1, process(1, 1)))
	assert.Equal(t, pcommon.NewTimestampFromTime(t0), procs[0].start, "the same stream: never reset")
	assert.InDelta(t, 1, procs[0].held, 1e-9)
}

func TestAccountingAStuckGPUKeepsItsAccounts(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 1, process(1, 1)))
	a.add(held("h", 0, 1, 1, process(1, 1)))
	a.endScrape(nil)
	a.add(held("h", time.Second, 1, 1, process(1, 1)))
	a.endScrape(map[string]bool{"g": true}) // g's read is stuck
	assert.Contains(t, a.devices, "g")
	a.endScrape(nil) // g lost: neither read nor stuck
	assert.NotContains(t, a.devices, "g", "no series outlives its GPU")
	assert.NotContains(t, a.devices, "h", "h not seen this scrape either")
	for k := range a.processes {
		assert.NotEqual(t, "g", k.device)
	}
}

func TestAccountingMIGDevice(t *testing.T) {
	a := testAccountant()
	mig := deviceWindow{id: "MIG-1", parent: "GPU-1", at: t0, listed: true, holders: 1,
		processes: []ownedProcess{process(7, -1)}, active: frac(0.6)}
	a.add(mig)
	mig.at = t0.Add(time.Second)
	acct, procs := a.add(mig)
	assert.False(t, acct.busyOK, "NVML gives a MIG device no utilization")
	assert.InDelta(t, 0.6, acct.active, 1e-9)
	assert.InDelta(t, 1, acct.held, 1e-9)
	assert.False(t, procs[0].busyOK)
	a.endScrape(map[string]bool{"GPU-1": true})
	assert.Contains(t, a.devices, "MIG-1", "its GPU is stuck: kept")
	a.endScrape(nil)
	assert.NotContains(t, a.devices, "MIG-1", "a MIG device gone ends its streams")
}

func TestAccountingNeverGoesDown(t *testing.T) {
	a := testAccountant()
	prev := 0.0
	for i, u := range []float64{0.5, -1, 2, math.NaN(), 0.3, 0} {
		w := held("g", time.Duration(i)*time.Second, u, u, process(1, 1))
		acct, _ := a.add(w)
		require.GreaterOrEqual(t, acct.busy+1e-12, prev)
		prev = acct.busy
	}
}

func TestAccountingResetStartsOver(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 1, process(1, 1)))
	a.add(held("g", time.Second, 1, 1, process(1, 1)))
	a.endScrape(nil)
	a.reset(t0.Add(5*time.Second), true) // a new NVML session
	acct, procs := a.add(held("g", 6*time.Second, 1, 1, process(1, 1)))
	assert.Zero(t, acct.held, "a new session: new counts, no window across it")
	assert.Zero(t, procs[0].held)
	assert.Equal(t, pcommon.NewTimestampFromTime(t0.Add(time.Second)), acct.start, "from the end of the device's time in the old session")
	assert.InDelta(t, 5, acct.unobserved[reasonRestart], 1e-9, "the time between the sessions, and to the first read")

	a.reset(t0.Add(10*time.Second), false) // the receiver starts again
	acct, _ = a.add(held("g", 10500*time.Millisecond, 1, 1, process(1, 1)))
	assert.Equal(t, pcommon.NewTimestampFromTime(t0.Add(10*time.Second)), acct.start, "nothing is known of the time before the start")
	assert.InDelta(t, 0.5, acct.unobserved[reasonRestart], 1e-9, "from the start to the first read")
	a.endScrape(nil)
	acct, _ = a.add(held("h", 11*time.Second, 1, 1)) // a device new since
	assert.Zero(t, acct.unobserved[reasonRestart], "a device first seen after the first scrape starts at its first read")
	assert.Equal(t, pcommon.NewTimestampFromTime(t0.Add(11*time.Second)), acct.start)
}

// The idle criterion on a GPM device stays GPM's: a window without a GPM
// reading (gate timeout, failed call, too short) carries the last reading,
// rather than falling back to general utilization, which reads far higher.
func TestAccountingAWindowWithoutGPMCarriesTheLastActivity(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 0.6, 0.01, process(1, 1)))
	a.add(held("g", time.Second, 0.6, 0.01, process(1, 1)))
	noGPM := held("g", 2*time.Second, 0.6, 0, process(1, 1))
	noGPM.active = nvmlclient.Opt[float64]{}
	acct, procs := a.add(noGPM)
	assert.InDelta(t, 2, acct.idle, 1e-9, "SM activity 0.01 carried: idle, though busy reads 0.6")
	assert.InDelta(t, 0.02, acct.active, 1e-9, "active time goes on at the carried activity")
	assert.InDelta(t, 2, procs[0].idle, 1e-9, "and the holder's idle time with it")

	// Carried for up to 2.5 intervals after the last reading; then unknown.
	noGPM.at = t0.Add(3 * time.Second)
	a.add(noGPM)
	noGPM.at = t0.Add(4 * time.Second)
	acct, _ = a.add(noGPM)
	assert.InDelta(t, 3, acct.idle, 1e-9, "3 s after the reading: no activity known, not idle")
	assert.InDelta(t, 4, acct.held, 1e-9, "held all along")
	assert.InDelta(t, 0.03, acct.active, 1e-9)
}

// An account collects every span of its device's time; accounts lists
// each account ever returned, so that over a device's accounts (its
// owners) held + free + unobserved is the time since counting started.
type accountLog struct {
	t        *testing.T
	accounts []*deviceAccount
}

func (l *accountLog) note(accts ...*deviceAccount) {
	for _, acct := range accts {
		if !slices.Contains(l.accounts, acct) {
			l.accounts = append(l.accounts, acct)
		}
	}
}

func (l *accountLog) total(id string) (sum float64, by [len(unobservedReasons)]float64) {
	for _, acct := range l.accounts {
		if acct.mig.UUID == id || acct.mig.UUID == "" && acct.parent == id {
			sum += acct.held + acct.free
			for r, v := range acct.unobserved {
				sum += v
				by[r] += v
			}
		}
	}
	return sum, by
}

func TestAccountingEachReason(t *testing.T) {
	a := testAccountant()
	a.reset(t0, false)
	log := &accountLog{t: t}
	add := func(w deviceWindow) { acct, _ := a.add(w); log.note(acct) }

	add(held("g", 500*time.Millisecond, 1, 1, process(1, 1))) // restart 0.5
	a.endScrape(nil)
	add(held("g", 1500*time.Millisecond, 1, 1, process(1, 1))) // held 1
	a.endScrape(nil)
	add(deviceWindow{id: "g", parent: "g", at: t0.Add(2500 * time.Millisecond)}) // read_failed 1
	a.endScrape(nil)
	log.note(a.unobserved("g", t0.Add(3500*time.Millisecond), reasonStuck)...) // stuck 1
	a.endScrape(map[string]bool{"g": true})
	log.note(a.unobserved("g", t0.Add(4500*time.Millisecond), reasonStuck)...) // stuck 1
	a.endScrape(map[string]bool{"g": true})
	add(held("g", 5500*time.Millisecond, 0, 0)) // free 1
	a.endScrape(nil)
	add(held("g", 9500*time.Millisecond, 0, 0)) // gap 4
	a.endScrape(nil)
	log.note(a.unobserved("g", t0.Add(10500*time.Millisecond), reasonLost)...) // lost 1
	a.endScrape(map[string]bool{"g": true})

	sum, by := log.total("g")
	require.Len(t, log.accounts, 1, "one owner throughout")
	acct := log.accounts[0]
	assert.Equal(t, pcommon.NewTimestampFromTime(t0), acct.start)
	assert.InDelta(t, 1, acct.held, 1e-9)
	assert.InDelta(t, 1, acct.free, 1e-9)
	assert.InDeltaSlice(t, []float64{1, 2, 1, 4, 0.5}, by[:], 1e-9, "read_failed, stuck, lost, gap, restart")
	assert.InDelta(t, 10.5, sum, 1e-9, "every second since the start, once")
}

// A GPU whose read is stuck from the first scrape has an account from the
// start all the same.
func TestAccountingStuckFromTheStart(t *testing.T) {
	a := testAccountant()
	a.reset(t0, false)
	accts := a.unobserved("g", t0.Add(time.Second), reasonStuck)
	require.Len(t, accts, 1)
	a.endScrape(map[string]bool{"g": true})
	accts = a.unobserved("g", t0.Add(2*time.Second), reasonStuck)
	assert.InDelta(t, 1, accts[0].unobserved[reasonRestart], 1e-9, "to the first scrape")
	assert.InDelta(t, 1, accts[0].unobserved[reasonStuck], 1e-9)
	assert.Equal(t, owner{}, accts[0].owner, "no owner known yet")
}

// held + free + unobserved = wall-clock time, over a sequence with owner
// changes, failed lists, gaps, stuck and lost scrapes and a new NVML
// session, for the GPU and its MIG device.
func TestAccountingIdentity(t *testing.T) {
	a := testAccountant()
	a.reset(t0, false)
	log := &accountLog{t: t}
	pod := owner{PodUID: "u1", PodName: "a-0", Namespace: "ml"}
	mig := nvmlclient.MIGInfo{UUID: "MIG-1", ParentUUID: "GPU-1", Profile: "1g.18gb"}
	at := 300 * time.Millisecond
	var wall time.Duration
	for i := range 200 {
		step := time.Second
		switch {
		case i%37 == 36:
			step = 4 * time.Second // a gap
		case i%23 == 22:
			step = 1700 * time.Millisecond
		}
		at += step
		wall = at
		var unread map[string]bool
		switch {
		case i%41 == 40:
			log.note(a.unobserved("GPU-1", t0.Add(at), reasonStuck)...)
			unread = map[string]bool{"GPU-1": true}
		case i%53 == 52:
			log.note(a.unobserved("GPU-1", t0.Add(at), reasonLost)...)
			unread = map[string]bool{"GPU-1": true}
		case i == 100:
			a.reset(t0.Add(at), true) // a new session
			at += 2 * time.Second
			wall = at
			fallthrough
		default:
			w := held("GPU-1", at, 0.5, 0.1, process(1, 1))
			m := deviceWindow{id: "MIG-1", parent: "GPU-1", mig: mig, at: t0.Add(at), listed: true, holders: 1,
				processes: []ownedProcess{process(2, -1)}, active: frac(0.3)}
			if i%7 == 3 {
				w.listed, m.listed = false, false // the lists failed
			}
			if i%11 < 4 {
				w.owner, m.owner = pod, pod
			}
			if i%13 == 5 {
				w.holders, w.processes, m.holders, m.processes = 0, nil, 0, nil
			}
			acct, _ := a.add(w)
			macct, _ := a.add(m)
			log.note(acct, macct)
		}
		a.endScrape(unread)
	}
	for _, id := range []string{"GPU-1", "MIG-1"} {
		sum, by := log.total(id)
		assert.InDelta(t, wall.Seconds(), sum, 1e-6, "%s: held + free + unobserved = wall-clock time; unobserved %v", id, by)
		for r, v := range by {
			assert.Positive(t, v, "%s: reason %v happens in the sequence", id, unobservedReasons[r].attr)
		}
	}
}
