package accounting

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/holders"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func testAccountant() *Accountant {
	return New(true, DefaultIdleThreshold, time.Second)
}

func frac(v float64) sample.Opt[float64] { return sample.Opt[float64]{Value: v, OK: true} }

func held(id string, at time.Duration, busy, active float64, procs ...holders.Process) deviceWindow {
	w := deviceWindow{id: id, parent: id, at: t0.Add(at), listed: true, holders: len(procs), processes: procs,
		busy: frac(busy), active: frac(active)}
	return w
}

func process(pid uint32, share float64) holders.Process {
	p := holders.Process{Process: sample.Process{PID: pid}}
	if share >= 0 {
		p.BusyShare = frac(share)
	}
	return p
}

func TestAccountingAddsEachWindow(t *testing.T) {
	a := testAccountant()
	acct, _ := a.add(held("g", 0, 1, 1, process(1, 1)))
	assert.Zero(t, acct.Held, "the first sample only starts the window")
	assert.Equal(t, pcommon.NewTimestampFromTime(t0), acct.Start)
	a.add(held("g", time.Second, 0.5, 0.4, process(1, 1)))
	acct, _ = a.add(held("g", 2*time.Second, 0.01, 0.02, process(1, 1)))
	assert.InDelta(t, 2, acct.Held, 1e-9)
	assert.InDelta(t, 0.51, acct.Busy, 1e-9)
	assert.InDelta(t, 0.42, acct.Active, 1e-9)
	assert.InDelta(t, 1, acct.Idle, 1e-9, "only the window under the threshold (0.02 < 0.05)")
}

func TestAccountingIdleThresholdIsStrict(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 0, 0, process(1, 1)))
	acct, _ := a.add(held("g", time.Second, 1, DefaultIdleThreshold, process(1, 1)))
	assert.Zero(t, acct.Idle, "activity at the threshold is not idle")
}

func TestAccountingFreeGPUIsNotHeldNorIdle(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 0, 0))
	acct, _ := a.add(held("g", time.Second, 0, 0))
	assert.True(t, acct.Holding && acct.IdleOK, "reported, at 0")
	assert.Zero(t, acct.Held)
	assert.Zero(t, acct.Idle)
	assert.InDelta(t, 1, acct.Free, 1e-9, "observed and not held: free")
}

func TestAccountingAllocatedGPUWithoutProcessIsHeld(t *testing.T) {
	a := testAccountant()
	w := held("g", 0, 0, 0)
	w.allocated = true
	a.add(w)
	w.at = t0.Add(time.Second)
	acct, _ := a.add(w)
	assert.InDelta(t, 1, acct.Held, 1e-9)
	assert.InDelta(t, 1, acct.Idle, 1e-9, "allocated to a pod and doing nothing: idle")
}

func TestAccountingWithoutGPMFallsBackToBusy(t *testing.T) {
	a := testAccountant()
	w := held("g", 0, 0.01, 0, process(1, 1))
	w.active = sample.Opt[float64]{}
	a.add(w)
	w.at = t0.Add(time.Second)
	acct, _ := a.add(w)
	assert.False(t, acct.ActiveOK, "no GPM: no active time, not 0")
	assert.InDelta(t, 1, acct.Idle, 1e-9, "busy 0.01 < 0.05")
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
	assert.InDelta(t, 1.5, acct.Unobserved[ReadFailed], 1e-9)
	assert.Zero(t, acct.Free+acct.Idle)
	assert.InDelta(t, 1.5, acct.Held+acct.Active, 1e-9, "activity carried (GPM's last reading), held not known")
	assert.Zero(t, acct.Held)
	acct, _ = a.add(held("g", 2500*time.Millisecond, 1, 1, process(1, 1)))
	assert.InDelta(t, 1, acct.Held, 1e-9, "the next window counts, once")
	assert.InDelta(t, 1, acct.Busy, 1e-9)
}

func TestAccountingALongWindowIsAGap(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 1, process(1, 1)))
	acct, _ := a.add(held("g", 3*time.Second, 1, 1, process(1, 1))) // 2.5 intervals at most
	assert.Zero(t, acct.Held)
	assert.InDelta(t, 3, acct.Unobserved[Gap], 1e-9, "not held, not free: a gap")
	acct, _ = a.add(held("g", 4*time.Second, 1, 1, process(1, 1)))
	assert.InDelta(t, 1, acct.Held, 1e-9)
	acct, _ = a.add(held("g", 3*time.Second, 1, 1, process(1, 1)))
	assert.InDelta(t, 1, acct.Held, 1e-9, "a window that runs backwards adds nothing")
	assert.InDelta(t, 3, acct.Unobserved[Gap], 1e-9, "its length is unknown: it adds nothing anywhere")
	acct, _ = a.add(held("g", 4*time.Second, 1, 1, process(1, 1)))
	assert.InDelta(t, 2, acct.Held, 1e-9, "counting goes on from the clock's new time")
}

func TestAccountingANewOwnerStartsANewStream(t *testing.T) {
	a := testAccountant()
	pod := attribution.Owner{PodUID: "u1", PodName: "a-0", Namespace: "ml"}
	w := held("g", 0, 1, 1, process(1, 1))
	a.add(w)
	w.at = t0.Add(time.Second)
	first, _ := a.add(w)
	require.InDelta(t, 1, first.Held, 1e-9)
	w.owner, w.at = pod, t0.Add(2*time.Second)
	second, _ := a.add(w)
	assert.NotSame(t, first, second)
	assert.Equal(t, pod, second.Owner)
	assert.Equal(t, pcommon.NewTimestampFromTime(t0.Add(time.Second)), second.Start, "from the start of the window in which it took the GPU")
	assert.InDelta(t, 1, second.Held, 1e-9, "that window is the new owner's, and counted once")
	assert.InDelta(t, 1, first.Held, 1e-9, "the old stream does not move")
}

func TestAccountingSplitsBusyTimeByShares(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 0.5, process(1, 0.3), process(2, 0.7)))
	acct, procs := a.add(held("g", 2*time.Second, 0.9, 0.5, process(1, 0.3), process(2, 0.7)))
	require.Len(t, procs, 2)
	assert.InDelta(t, 2*0.9*0.3, procs[0].Busy, 1e-9)
	assert.InDelta(t, 2*0.9*0.7, procs[1].Busy, 1e-9)
	assert.InDelta(t, acct.Busy, procs[0].Busy+procs[1].Busy, 1e-9, "the parts sum to the GPU's")
	assert.InDelta(t, 2, procs[0].Held, 1e-9, "each held it the whole window")
	assert.InDelta(t, 2, procs[1].Held, 1e-9)
}

func TestAccountingWithoutSharesSplitsEvenly(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 0.5, process(1, -1), process(2, -1)))
	_, procs := a.add(held("g", time.Second, 0.8, 0.5, process(1, -1), process(2, -1)))
	assert.InDelta(t, 0.4, procs[0].Busy, 1e-9)
	assert.InDelta(t, 0.4, procs[1].Busy, 1e-9)
}

func TestAccountingSplitsIdleTimeEvenly(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 0, 0, process(1, -1), process(2, -1)))
	acct, procs := a.add(held("g", time.Second, 0, 0, process(1, -1), process(2, -1)))
	assert.InDelta(t, 1, acct.Idle, 1e-9)
	assert.InDelta(t, 0.5, procs[0].Idle, 1e-9)
	assert.InDelta(t, 0.5, procs[1].Idle, 1e-9)
}

func TestAccountingAProcessStartsWhenFirstSeen(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 1, process(1, 1)))
	a.EndScrape(nil)
	_, procs := a.add(held("g", time.Second, 1, 1, process(1, 0.5), process(2, 0.5)))
	a.EndScrape(nil)
	assert.Equal(t, pcommon.NewTimestampFromTime(t0), procs[1].Start, "from the window in which it appeared")
	assert.InDelta(t, 1, procs[1].Held, 1e-9)
	a.add(held("g", 2*time.Second, 1, 1, process(1, 1)))
	a.EndScrape(nil)
	assert.Len(t, a.processes, 1, "an exited process's account ends")

	// The same PID again, a new process: a new stream from zero.
	reused := process(2, 0.5)
	reused.Info.Started = t0.Add(2500 * time.Millisecond)
	_, procs = a.add(held("g", 3*time.Second, 1, 1, process(1, 0.5), reused))
	assert.InDelta(t, 1, procs[1].Held, 1e-9)
}

func TestAccountingProcessesNotListedKeepTheirAccounts(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 1, process(1, 1)))
	a.EndScrape(nil)
	a.add(deviceWindow{id: "g", parent: "g", at: t0.Add(time.Second), busy: frac(1)}) // the list failed
	a.EndScrape(nil)
	_, procs := a.add(held("g", 2*time.Second, 1, 1, process(1, 1)))
	assert.Equal(t, pcommon.NewTimestampFromTime(t0), procs[0].Start, "the same stream: never reset")
	assert.InDelta(t, 1, procs[0].Held, 1e-9)
}

func TestAccountingAStuckGPUKeepsItsAccounts(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 1, process(1, 1)))
	a.add(held("h", 0, 1, 1, process(1, 1)))
	a.EndScrape(nil)
	a.add(held("h", time.Second, 1, 1, process(1, 1)))
	a.EndScrape(map[string]bool{"g": true}) // g's read is stuck
	assert.Contains(t, a.devices, "g")
	a.EndScrape(nil) // g lost: neither read nor stuck
	assert.NotContains(t, a.devices, "g", "no series outlives its GPU")
	assert.NotContains(t, a.devices, "h", "h not seen this scrape either")
	for k := range a.processes {
		assert.NotEqual(t, "g", k.device)
	}
}

func TestAccountingMIGDevice(t *testing.T) {
	a := testAccountant()
	mig := deviceWindow{id: "MIG-1", parent: "GPU-1", at: t0, listed: true, holders: 1,
		processes: []holders.Process{process(7, -1)}, active: frac(0.6)}
	a.add(mig)
	mig.at = t0.Add(time.Second)
	acct, procs := a.add(mig)
	assert.False(t, acct.BusyOK, "NVML gives a MIG device no utilization")
	assert.InDelta(t, 0.6, acct.Active, 1e-9)
	assert.InDelta(t, 1, acct.Held, 1e-9)
	assert.False(t, procs[0].BusyOK)
	a.EndScrape(map[string]bool{"GPU-1": true})
	assert.Contains(t, a.devices, "MIG-1", "its GPU is stuck: kept")
	a.EndScrape(nil)
	assert.NotContains(t, a.devices, "MIG-1", "a MIG device gone ends its streams")
}

func TestAccountingNeverGoesDown(t *testing.T) {
	a := testAccountant()
	prev := 0.0
	for i, u := range []float64{0.5, -1, 2, math.NaN(), 0.3, 0} {
		w := held("g", time.Duration(i)*time.Second, u, u, process(1, 1))
		acct, _ := a.add(w)
		require.GreaterOrEqual(t, acct.Busy+1e-12, prev)
		prev = acct.Busy
	}
}

func TestAccountingResetStartsOver(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 1, process(1, 1)))
	a.add(held("g", time.Second, 1, 1, process(1, 1)))
	a.EndScrape(nil)
	a.Reset(t0.Add(5*time.Second), true) // a new NVML session
	acct, procs := a.add(held("g", 6*time.Second, 1, 1, process(1, 1)))
	assert.Zero(t, acct.Held, "a new session: new counts, no window across it")
	assert.Zero(t, procs[0].Held)
	assert.Equal(t, pcommon.NewTimestampFromTime(t0.Add(time.Second)), acct.Start, "from the end of the device's time in the old session")
	assert.InDelta(t, 5, acct.Unobserved[Restart], 1e-9, "the time between the sessions, and to the first read")

	a.Reset(t0.Add(10*time.Second), false) // the receiver starts again
	acct, _ = a.add(held("g", 10500*time.Millisecond, 1, 1, process(1, 1)))
	assert.Equal(t, pcommon.NewTimestampFromTime(t0.Add(10*time.Second)), acct.Start, "nothing is known of the time before the start")
	assert.InDelta(t, 0.5, acct.Unobserved[Restart], 1e-9, "from the start to the first read")
	a.EndScrape(nil)
	acct, _ = a.add(held("h", 11*time.Second, 1, 1)) // a device new since
	assert.Zero(t, acct.Unobserved[Restart], "a device first seen after the first scrape starts at its first read")
	assert.Equal(t, pcommon.NewTimestampFromTime(t0.Add(11*time.Second)), acct.Start)
}

// The idle criterion on a GPM device stays GPM's: a window without a GPM
// reading (gate timeout, failed call, too short) carries the last reading,
// rather than falling back to general utilization, which reads far higher.
func TestAccountingAWindowWithoutGPMCarriesTheLastActivity(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 0.6, 0.01, process(1, 1)))
	a.add(held("g", time.Second, 0.6, 0.01, process(1, 1)))
	noGPM := held("g", 2*time.Second, 0.6, 0, process(1, 1))
	noGPM.active = sample.Opt[float64]{}
	acct, procs := a.add(noGPM)
	assert.InDelta(t, 2, acct.Idle, 1e-9, "SM activity 0.01 carried: idle, though busy reads 0.6")
	assert.InDelta(t, 0.02, acct.Active, 1e-9, "active time goes on at the carried activity")
	assert.InDelta(t, 2, procs[0].Idle, 1e-9, "and the holder's idle time with it")

	// Carried for up to 2.5 intervals after the last reading; then unknown.
	noGPM.at = t0.Add(3 * time.Second)
	a.add(noGPM)
	noGPM.at = t0.Add(4 * time.Second)
	acct, _ = a.add(noGPM)
	assert.InDelta(t, 3, acct.Idle, 1e-9, "3 s after the reading: no activity known, not idle")
	assert.InDelta(t, 4, acct.Held, 1e-9, "held all along")
	assert.InDelta(t, 0.03, acct.Active, 1e-9)
}

// An account collects every span of its device's time; accounts lists
// each account ever returned, so that over a device's accounts (its
// owners) held + free + unobserved is the time since counting started.
type accountLog struct {
	t        *testing.T
	accounts []*Device
}

func (l *accountLog) note(accts ...*Device) {
	for _, acct := range accts {
		if !slices.Contains(l.accounts, acct) {
			l.accounts = append(l.accounts, acct)
		}
	}
}

func (l *accountLog) total(id string) (sum float64, by [reasons]float64) {
	for _, acct := range l.accounts {
		if acct.MIG.UUID == id || acct.MIG.UUID == "" && acct.parent == id {
			sum += acct.Held + acct.Free
			for r, v := range acct.Unobserved {
				sum += v
				by[r] += v
			}
		}
	}
	return sum, by
}

func TestAccountingEachReason(t *testing.T) {
	a := testAccountant()
	a.Reset(t0, false)
	log := &accountLog{t: t}
	add := func(w deviceWindow) { acct, _ := a.add(w); log.note(acct) }

	add(held("g", 500*time.Millisecond, 1, 1, process(1, 1))) // restart 0.5
	a.EndScrape(nil)
	add(held("g", 1500*time.Millisecond, 1, 1, process(1, 1))) // held 1
	a.EndScrape(nil)
	add(deviceWindow{id: "g", parent: "g", at: t0.Add(2500 * time.Millisecond)}) // read_failed 1
	a.EndScrape(nil)
	log.note(a.Unobserved("g", t0.Add(3500*time.Millisecond), Stuck)...) // stuck 1
	a.EndScrape(map[string]bool{"g": true})
	log.note(a.Unobserved("g", t0.Add(4500*time.Millisecond), Stuck)...) // stuck 1
	a.EndScrape(map[string]bool{"g": true})
	add(held("g", 5500*time.Millisecond, 0, 0)) // free 1
	a.EndScrape(nil)
	add(held("g", 9500*time.Millisecond, 0, 0)) // gap 4
	a.EndScrape(nil)
	log.note(a.Unobserved("g", t0.Add(10500*time.Millisecond), Lost)...) // lost 1
	a.EndScrape(map[string]bool{"g": true})

	sum, by := log.total("g")
	require.Len(t, log.accounts, 1, "one owner throughout")
	acct := log.accounts[0]
	assert.Equal(t, pcommon.NewTimestampFromTime(t0), acct.Start)
	assert.InDelta(t, 1, acct.Held, 1e-9)
	assert.InDelta(t, 1, acct.Free, 1e-9)
	assert.InDeltaSlice(t, []float64{1, 2, 1, 4, 0.5}, by[:], 1e-9, "read_failed, stuck, lost, gap, restart")
	assert.InDelta(t, 10.5, sum, 1e-9, "every second since the start, once")
}

// A GPU whose read is stuck from the first scrape has an account from the
// start all the same.
func TestAccountingStuckFromTheStart(t *testing.T) {
	a := testAccountant()
	a.Reset(t0, false)
	accts := a.Unobserved("g", t0.Add(time.Second), Stuck)
	require.Len(t, accts, 1)
	a.EndScrape(map[string]bool{"g": true})
	accts = a.Unobserved("g", t0.Add(2*time.Second), Stuck)
	assert.InDelta(t, 1, accts[0].Unobserved[Restart], 1e-9, "to the first scrape")
	assert.InDelta(t, 1, accts[0].Unobserved[Stuck], 1e-9)
	assert.Equal(t, attribution.Owner{}, accts[0].Owner, "no owner known yet")
}

// held + free + unobserved = wall-clock time, over a sequence with owner
// changes, failed lists, gaps, stuck and lost scrapes and a new NVML
// session, for the GPU and its MIG device.
func TestAccountingIdentity(t *testing.T) {
	a := testAccountant()
	a.Reset(t0, false)
	log := &accountLog{t: t}
	pod := attribution.Owner{PodUID: "u1", PodName: "a-0", Namespace: "ml"}
	mig := sample.MIGInfo{UUID: "MIG-1", ParentUUID: "GPU-1", Profile: "1g.18gb"}
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
			log.note(a.Unobserved("GPU-1", t0.Add(at), Stuck)...)
			unread = map[string]bool{"GPU-1": true}
		case i%53 == 52:
			log.note(a.Unobserved("GPU-1", t0.Add(at), Lost)...)
			unread = map[string]bool{"GPU-1": true}
		case i == 100:
			a.Reset(t0.Add(at), true) // a new session
			at += 2 * time.Second
			wall = at
			fallthrough
		default:
			w := held("GPU-1", at, 0.5, 0.1, process(1, 1))
			m := deviceWindow{id: "MIG-1", parent: "GPU-1", mig: mig, at: t0.Add(at), listed: true, holders: 1,
				processes: []holders.Process{process(2, -1)}, active: frac(0.3)}
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
		a.EndScrape(unread)
	}
	for _, id := range []string{"GPU-1", "MIG-1"} {
		sum, by := log.total(id)
		assert.InDelta(t, wall.Seconds(), sum, 1e-6, "%s: held + free + unobserved = wall-clock time; unobserved %v", id, by)
		for r, v := range by {
			assert.Positive(t, v, "%s: reason %v happens in the sequence", id, r)
		}
	}
}
