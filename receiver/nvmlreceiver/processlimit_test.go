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

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// The processes::max_per_gpu cap, through the scraper.

// writeStarted writes a /proc/<pid>/stat under root for a process started
// ticks (1/100 s) after boot, and the boot time the fixture's /proc/stat
// gives.
func writeStarted(t *testing.T, root, pid, ticks string) {
	t.Helper()
	f := make([]string, 50)
	for i := range f {
		f[i] = "0"
	}
	f[18] = ticks
	require.NoError(t, os.MkdirAll(filepath.Join(root, pid), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, pid, "stat"), []byte(pid+" (python3) S "+strings.Join(f, " ")+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, pid, "comm"), []byte("python3\n"), 0o644))
	stat, err := os.ReadFile(filepath.Join("testdata", "proc", "stat"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "stat"), stat, 0o644))
}

// GPU 2 of the mock is 12 % busy. Of its three processes the cap keeps
// the two largest; the shares of those two are what the GPU's busy time
// is split by, so that summed they give the GPU's (docs/design/waste.md).
func TestCappedProcessesShareTheGPUsBusyTime(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[2].SetProcesses(proc(4242, 3<<30), proc(4343, 2<<30), proc(5555, 1<<30))
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.MaxPerGPU = 2 })
	ts.start(t)
	ts.scrapeOK(t)
	md := ts.scrapeOK(t)
	for range 3 {
		ts.clock.Advance(10 * time.Second)
		m.GPUs[2].AddProcessSamples(
			nvml.ProcessUtilizationSample{Pid: 4242, TimeStamp: ts.micros(0), SmUtil: 30},
			nvml.ProcessUtilizationSample{Pid: 4343, TimeStamp: ts.micros(0), SmUtil: 50},
			nvml.ProcessUtilizationSample{Pid: 5555, TimeStamp: ts.micros(0), SmUtil: 20})
		md = ts.scrapeOK(t)
	}
	uuid := nvmltest.UUID(2)
	require.Len(t, processResources(md, uuid), 2)
	busy := sumPoint(t, md, uuid, 0, "nvidia.gpu.busy.time").DoubleValue()
	require.InDelta(t, 30*0.12, busy, 1e-9)
	p1 := sumPoint(t, md, uuid, 4242, "nvidia.gpu.process.busy.time").DoubleValue()
	p2 := sumPoint(t, md, uuid, 4343, "nvidia.gpu.process.busy.time").DoubleValue()
	assert.InDelta(t, busy, p1+p2, 1e-9, "the reported processes' parts sum to the GPU's busy time")
	assert.InDelta(t, busy*30/80, p1, 1e-9, "renormalised over the processes kept")
}

// nvidia.gpu.process.dropped counts each process left out once, however
// many scrapes it stays left out; a reused PID is a new process.
func TestDroppedCountsEachProcessOnce(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for pid, ticks := range map[string]string{"4242": "100", "5555": "200", "4343": "300", "6666": "400"} {
		writeStarted(t, root, pid, ticks)
	}
	m := nvmltest.NewH200()
	m.GPUs[3].SetProcesses(proc(4242, 4<<30), proc(5555, 2<<30), proc(4343, 1<<20))
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.ProcRoot, cfg.Processes.MaxPerGPU = root, 2 })
	ts.start(t)
	uuid := nvmltest.UUID(3)
	dropped := func() float64 {
		t.Helper()
		ts.clock.Advance(10 * time.Second)
		v, ok := metricValue(ts.scrapeOK(t), uuid, 0, "nvidia.gpu.process.dropped")
		require.True(t, ok)
		return v
	}
	for range 3 {
		assert.Equal(t, 1.0, dropped(), "4343, once")
	}
	m.GPUs[3].SetProcesses(proc(4242, 4<<30), proc(4343, 3<<30), proc(5555, 2<<30))
	assert.Equal(t, 2.0, dropped(), "5555 left out now")
	m.GPUs[3].SetProcesses(proc(4242, 4<<30), proc(5555, 2<<30), proc(4343, 1<<20))
	assert.Equal(t, 2.0, dropped(), "4343 left out again: the same process")
	writeStarted(t, root, "4343", "900")
	assert.Equal(t, 3.0, dropped(), "PID 4343 reused: another process")
	m.GPUs[3].SetProcesses(proc(4242, 4<<30), proc(5555, 2<<30), proc(6666, 1<<20))
	assert.Equal(t, 4.0, dropped(), "6666")
	m.GPUs[3].SetProcesses(proc(4242, 4<<30))
	assert.Equal(t, 4.0, dropped()) // and the processes gone are forgotten (holders' TestLeftOutForgetsTheProcessesGone)
}
