//go:build cgo

package nvmlreceiver

import (
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

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// The accounting through the scraper, on the mock machine.

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
// again from zero, from the end of the GPU's time in the old session; the
// lost scrapes and the time to the new session's first read are
// unobserved, so that no second goes missing.
func TestAccountingAfterReinitStartsOver(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[2].SetProcesses(proc(4242, 1<<30))
	ts := newTestScraper(t, m)
	ts.start(t)
	began := ts.clock.Now()
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
	assert.Equal(t, before.DoubleValue(), sumPoint(t, md, uuid, 0, "nvidia.gpu.held.time").DoubleValue(), "a lost GPU's held time stands still")
	assert.InDelta(t, 10, unobservedSeconds(t, md, uuid, "lost"), 1e-9, "its time goes on, unobserved: lost")
	oldTotal := accountedSeconds(t, md, uuid)
	lostAt := pcommon.NewTimestampFromTime(ts.clock.Now())
	ts.waitReset(t)
	lost.Store(false)
	var after pmetric.Metrics
	for range 4 {
		ts.clock.Advance(10 * time.Second)
		if md := ts.scrapeOK(t); gpuMetric(md, uuid, "nvidia.gpu.held.time") != nil {
			after = md
		}
	}
	require.NotZero(t, after.ResourceMetrics().Len())
	held := sumPoint(t, after, uuid, 0, "nvidia.gpu.held.time")
	assert.Less(t, held.DoubleValue(), before.DoubleValue()+20, "no window across the loss")
	assert.Equal(t, lostAt, held.StartTimestamp(), "a new stream, from the end of the GPU's time in the old session")
	assert.Positive(t, unobservedSeconds(t, after, uuid, "restart"), "the time to the new session's first read")
	assert.InDelta(t, ts.clock.Now().Sub(began).Seconds(), oldTotal+accountedSeconds(t, after, uuid), 1e-6,
		"held + free + unobserved, over both sessions, is the wall-clock time")
}

// unobservedSeconds is the GPU's nvidia.gpu.unobserved.time for reason.
func unobservedSeconds(t *testing.T, md pmetric.Metrics, uuid, reason string) float64 {
	t.Helper()
	dps := gpuMetric(md, uuid, "nvidia.gpu.unobserved.time").Sum().DataPoints()
	for i := 0; i < dps.Len(); i++ {
		if r, _ := dps.At(i).Attributes().Get("nvidia.gpu.unobserved.reason"); r.Str() == reason {
			return dps.At(i).DoubleValue()
		}
	}
	t.Fatalf("no unobserved time for %s on %s", reason, uuid)
	return 0
}

// accountedSeconds is the GPU's held + free + unobserved time.
func accountedSeconds(t *testing.T, md pmetric.Metrics, uuid string) float64 {
	t.Helper()
	sum := sumPoint(t, md, uuid, 0, "nvidia.gpu.held.time").DoubleValue() + sumPoint(t, md, uuid, 0, "nvidia.gpu.free.time").DoubleValue()
	dps := gpuMetric(md, uuid, "nvidia.gpu.unobserved.time").Sum().DataPoints()
	for i := 0; i < dps.Len(); i++ {
		sum += dps.At(i).DoubleValue()
	}
	return sum
}
