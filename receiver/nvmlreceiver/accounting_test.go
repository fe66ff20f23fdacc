package nvmlreceiver

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmltest"
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

// sumPoint returns metric name's point on uuid's resource (pid 0: the
// GPU's own) in md.
func sumPoint(t *testing.T, md pmetric.Metrics, uuid string, pid int64, name string) pmetric.NumberDataPoint {
	t.Helper()
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		attrs := rm.Resource().Attributes()
		id, _ := attrs.Get("hw.id")
		p, isProcess := attrs.Get("process.pid")
		if id.Str() != uuid || isProcess != (pid != 0) || isProcess && p.Int() != pid {
			continue
		}
		ms := rm.ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if ms.At(j).Name() == name {
				return ms.At(j).Sum().DataPoints().At(0)
			}
		}
	}
	t.Fatalf("no %s on %s/%d", name, uuid, pid)
	return pmetric.NumberDataPoint{}
}

// GPU 2 of the mock: general utilization 12 % (GPM graphics), SM activity
// 10 %, two processes whose NVML shares are 30 and 70.
func TestAccountingThroughTheScraper(t *testing.T) {
	t.Parallel()
	root := cgroupProcRoot(t, map[uint32]struct{ digit, podUID string }{
		4242: {"1", "11111111-1111-4111-8111-111111111111"}, 4343: {"2", "22222222-2222-4222-8222-222222222222"}})
	for pid, ticks := range map[string]string{"4242": "250", "4343": "10"} {
		f := make([]string, 50)
		for i := range f {
			f[i] = "0"
		}
		f[10], f[11], f[18] = ticks, "5", "360012"
		require.NoError(t, os.WriteFile(filepath.Join(root, pid, "stat"), []byte(pid+" (python3) S "+strings.Join(f, " ")+"\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(root, pid, "comm"), []byte("python3\n"), 0o644))
	}
	stat, err := os.ReadFile(filepath.Join("testdata", "proc", "stat")) // btime 2025-11-30T00:00:00Z
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "stat"), stat, 0o644))
	m := nvmltest.NewH200()
	m.GPUs[2].SetProcesses(proc(4242, 1<<30), proc(4343, 1<<30))
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.ProcRoot = root })
	ts.start(t)
	first := ts.scrapeOK(t)
	start := scrapeTime(t, first)
	for range 3 {
		ts.clock.Advance(10 * time.Second)
		m.GPUs[2].AddProcessSamples(
			nvml.ProcessUtilizationSample{Pid: 4242, TimeStamp: ts.micros(0), SmUtil: 30},
			nvml.ProcessUtilizationSample{Pid: 4343, TimeStamp: ts.micros(0), SmUtil: 70})
		ts.scrapeOK(t)
	}
	ts.clock.Advance(10 * time.Second)
	md := ts.scrapeOK(t)
	uuid := nvmltest.UUID(2)

	busy := sumPoint(t, md, uuid, 0, "nvidia.gpu.busy.time")
	assert.InDelta(t, 40*0.12, busy.DoubleValue(), 1e-9, "4 windows of 10 s at 12 %")
	assert.Equal(t, start, busy.StartTimestamp(), "from the first sample: the GPU has had no owner change")
	assert.InDelta(t, 40*0.10, sumPoint(t, md, uuid, 0, "nvidia.gpu.active.time").DoubleValue(), 1e-9)
	assert.InDelta(t, 40, sumPoint(t, md, uuid, 0, "nvidia.gpu.held.time").DoubleValue(), 1e-9)
	assert.Zero(t, sumPoint(t, md, uuid, 0, "nvidia.gpu.idle.time").DoubleValue(), "10 % SM activity is not idle")

	p1 := sumPoint(t, md, uuid, 4242, "nvidia.gpu.process.busy.time").DoubleValue()
	p2 := sumPoint(t, md, uuid, 4343, "nvidia.gpu.process.busy.time").DoubleValue()
	assert.InDelta(t, busy.DoubleValue(), p1+p2, 1e-9, "the processes' parts sum to the GPU's busy time")
	// The first window had no share sample yet: split evenly.
	assert.InDelta(t, 10*0.12*0.5+30*0.12*0.3, p1, 1e-9)
	assert.InDelta(t, 40, sumPoint(t, md, uuid, 4343, "nvidia.gpu.process.held.time").DoubleValue(), 1e-9)

	cpu := sumPoint(t, md, uuid, 4242, "process.cpu.time")
	assert.InDelta(t, 2.5, cpu.DoubleValue(), 1e-9, "utime 250 ticks")
	assert.Equal(t, pcommon.NewTimestampFromTime(time.Date(2025, 11, 30, 1, 0, 0, 120_000_000, time.UTC)), cpu.StartTimestamp(),
		"a process's CPU starts with the process")
}

// GPU 0 of the mock reads 0 % SM activity: a process holding it idles it.
func TestAccountingOwnerChangeThroughTheScraper(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m)
	ts.start(t)
	uuid := nvmltest.UUID(0)
	ts.scrapeOK(t)
	ts.clock.Advance(10 * time.Second)
	md := ts.scrapeOK(t)
	assert.Zero(t, sumPoint(t, md, uuid, 0, "nvidia.gpu.held.time").DoubleValue(), "free")
	taken := scrapeTime(t, md)
	m.GPUs[0].SetProcesses(proc(4242, 1<<30)) // in the fixture's container
	ts.clock.Advance(10 * time.Second)
	ts.scrapeOK(t)
	ts.clock.Advance(10 * time.Second)
	md = ts.scrapeOK(t)
	require.NotEmpty(t, gpuResourceAttrs(md, uuid)["container.id"], "the GPU's owner is the container")
	heldTime := sumPoint(t, md, uuid, 0, "nvidia.gpu.held.time")
	assert.InDelta(t, 20, heldTime.DoubleValue(), 1e-9)
	assert.Equal(t, taken, heldTime.StartTimestamp(), "a new owner: a new stream, from the window in which it took the GPU")
	assert.InDelta(t, 20, sumPoint(t, md, uuid, 0, "nvidia.gpu.idle.time").DoubleValue(), 1e-9)
	assert.InDelta(t, 20, sumPoint(t, md, uuid, 4242, "nvidia.gpu.process.idle.time").DoubleValue(), 1e-9)
	other := sumPoint(t, md, uuid, 0, "hw.energy")
	assert.NotEqual(t, taken, other.StartTimestamp(), "the GPU's other counters keep the receiver's start")
}

// After a re-initialization (every GPU lost, then back) the counters start
// again from zero with the new session's start time.
func TestAccountingAfterReinitStartsOver(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[2].SetProcesses(proc(4242, 1<<30))
	ts := newTestScraper(t, m)
	ts.start(t)
	lost := lossSwitch(m)
	uuid := nvmltest.UUID(2)
	var before pmetric.NumberDataPoint
	for range 3 {
		ts.clock.Advance(10 * time.Second)
		before = sumPoint(t, ts.scrapeOK(t), uuid, 0, "nvidia.gpu.held.time")
	}
	require.InDelta(t, 20, before.DoubleValue(), 1e-9)
	lost.Store(true)
	ts.clock.Advance(10 * time.Second)
	md := ts.scrapeOK(t)
	assert.Nil(t, gpuMetric(md, uuid, "nvidia.gpu.held.time"), "no point for a lost GPU")
	lost.Store(false)
	var after pmetric.NumberDataPoint
	for range 4 {
		ts.clock.Advance(10 * time.Second)
		if md := ts.scrapeOK(t); gpuMetric(md, uuid, "nvidia.gpu.held.time") != nil {
			after = sumPoint(t, md, uuid, 0, "nvidia.gpu.held.time")
		}
	}
	require.NotZero(t, after.Timestamp())
	assert.Less(t, after.DoubleValue(), before.DoubleValue()+20, "no window across the loss")
	assert.Greater(t, after.StartTimestamp(), before.Timestamp(), "a new start time")
}
