package nvmlreceiver

import (
	"math"
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
	assert.True(t, acct.heldOK && acct.idleOK, "reported, at 0")
	assert.Zero(t, acct.held)
	assert.Zero(t, acct.idle)
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
// who held the GPU.
func TestAccountingAFailedWindowAddsNothing(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 1, process(1, 1)))
	failed := deviceWindow{id: "g", parent: "g", at: t0.Add(time.Second)}
	acct, procs := a.add(failed)
	assert.Nil(t, procs)
	assert.Zero(t, acct.held+acct.busy+acct.active+acct.idle)
	acct, _ = a.add(held("g", 2*time.Second, 1, 1, process(1, 1)))
	assert.InDelta(t, 1, acct.held, 1e-9, "the next window counts, once")
	assert.InDelta(t, 1, acct.busy, 1e-9)
}

func TestAccountingALongGapAddsNothing(t *testing.T) {
	a := testAccountant()
	a.add(held("g", 0, 1, 1, process(1, 1)))
	acct, _ := a.add(held("g", 3*time.Second, 1, 1, process(1, 1))) // 2.5 intervals at most
	assert.Zero(t, acct.held)
	acct, _ = a.add(held("g", 4*time.Second, 1, 1, process(1, 1)))
	assert.InDelta(t, 1, acct.held, 1e-9)
	acct, _ = a.add(held("g", 3*time.Second, 1, 1, process(1, 1)))
	assert.InDelta(t, 1, acct.held, 1e-9, "a window that runs backwards adds nothing")
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
	a.reset()
	acct, procs := a.add(held("g", 2*time.Second, 1, 1, process(1, 1)))
	assert.Zero(t, acct.held, "a new session: a new start, no window across it")
	assert.Equal(t, pcommon.NewTimestampFromTime(t0.Add(2*time.Second)), acct.start)
	assert.Zero(t, procs[0].held)
}
