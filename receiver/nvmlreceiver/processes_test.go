//go:build cgo

package nvmlreceiver

import (
	"time"

	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// gpuResourceAttrs returns the attributes of GPU uuid's holder resource:
// the last of its own resources, the one with its owner (its device
// resource comes first, and is the same one when it has no owner).
func gpuResourceAttrs(md pmetric.Metrics, uuid string) map[string]any {
	var out map[string]any
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		attrs := md.ResourceMetrics().At(i).Resource().Attributes()
		id, _ := attrs.Get("hw.id")
		if _, isProcess := attrs.Get("process.pid"); !isProcess && id.Str() == uuid {
			out = attrs.AsRaw()
		}
	}
	return out
}

func metricValue(md pmetric.Metrics, uuid string, pid int64, name string) (float64, bool) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		attrs := rm.Resource().Attributes()
		id, _ := attrs.Get("hw.id")
		p, isProcess := attrs.Get("process.pid")
		if id.Str() != uuid || isProcess != (pid != 0) || (isProcess && p.Int() != pid) {
			continue
		}
		ms := rm.ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			if m.Name() != name {
				continue
			}
			var dp pmetric.NumberDataPoint
			switch m.Type() {
			case pmetric.MetricTypeGauge:
				dp = m.Gauge().DataPoints().At(0)
			case pmetric.MetricTypeSum:
				dp = m.Sum().DataPoints().At(0)
			}
			if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
				return float64(dp.IntValue()), true
			}
			return dp.DoubleValue(), true
		}
	}
	return 0, false
}

func TestProcessesAreTheirOwnResources(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(4242, 8<<30), proc(4343, 1<<30))
	ts := newTestScraper(t, m)
	ts.start(t)
	m.GPUs[0].AddProcessSamples(nvml.ProcessUtilizationSample{Pid: 4242, TimeStamp: ts.micros(time.Second), SmUtil: 40})
	md := ts.scrapeOK(t)

	procs := processResources(md, nvmltest.UUID(0))
	require.Len(t, procs, 2)
	assert.Equal(t, "python3.12", procs[4242]["process.executable.name"], "the base name of exe, not comm (pt_main_thread)")
	assert.Equal(t, "torchrun", procs[4343]["process.executable.name"], "comm where exe cannot be read")
	assert.Equal(t, "2025-11-30T01:00:00.12Z", procs[4242]["process.creation.time"], "boot time + start time")
	assert.Equal(t, "4000123", procs[4343]["process.owner"])
	assert.Equal(t, "NVIDIA", procs[4242]["hw.vendor"], "a process resource carries its GPU's attributes")
	assert.NotContains(t, procs[4242], "process.command_line", "command lines are off by default")

	v, ok := metricValue(md, nvmltest.UUID(0), 4242, "nvidia.gpu.process.memory.usage")
	require.True(t, ok)
	assert.Equal(t, float64(8<<30), v)
	v, _ = metricValue(md, nvmltest.UUID(0), 4242, "nvidia.gpu.process.utilization")
	assert.InDelta(t, 0.40, v, 1e-9)
	v, _ = metricValue(md, nvmltest.UUID(0), 0, "nvidia.gpu.process.count")
	assert.Equal(t, 2.0, v)
}

func TestCommandLineWhenTurnedOn(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(4242, 1))
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.ResourceAttributes.ProcessCommandLine.Enabled = true })
	ts.start(t)
	procs := processResources(ts.scrapeOK(t), nvmltest.UUID(0))
	assert.Equal(t, "python3 train.py --hf-token=hunter2", procs[4242]["process.command_line"])
}

func TestProcessLimitKeepsTheLargestAndCountsTheRest(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[3].SetProcesses(proc(4343, 1<<20), proc(4242, 4<<30), proc(5555, 2<<30))
	ts := newTestScraper(t, m)
	ts.cfg.Processes.MaxPerGPU = 2
	ts.start(t)
	md := ts.scrapeOK(t)
	procs := processResources(md, nvmltest.UUID(3))
	assert.Len(t, procs, 2)
	assert.Contains(t, procs, int64(4242))
	assert.Contains(t, procs, int64(5555))
	v, _ := metricValue(md, nvmltest.UUID(3), 0, "nvidia.gpu.process.dropped")
	assert.Equal(t, 1.0, v)
	md = ts.scrapeOK(t)
	v, _ = metricValue(md, nvmltest.UUID(3), 0, "nvidia.gpu.process.dropped")
	assert.Equal(t, 1.0, v, "a count of processes, not of scrapes: 4343 once")
	v, _ = metricValue(md, nvmltest.UUID(3), 0, "nvidia.gpu.process.count")
	assert.Equal(t, 3.0, v, "the count covers every process")
}

func TestExitedProcessLeavesNoSeries(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(4242, 1), proc(4343, 1))
	ts := newTestScraper(t, m)
	ts.start(t)
	assert.Len(t, processResources(ts.scrapeOK(t), nvmltest.UUID(0)), 2)
	m.GPUs[0].SetProcesses(proc(4242, 1))
	procs := processResources(ts.scrapeOK(t), nvmltest.UUID(0))
	assert.Len(t, procs, 1)
	assert.NotContains(t, procs, int64(4343))
}

// A proc root that shows only the collector's own PID namespace (a pod
// without hostPID): said once; every process by PID alone, even one whose
// PID also exists in that namespace.
func TestForeignPIDNamespaceWarnsOnce(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for p, content := range map[string]string{
		"4242/comm":   "sh\n",
		"4242/cgroup": "0::/\n",
		"self/status": "Name:\totelcol-nvml\nNSpid:\t7\n",
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, p), []byte(content), 0o644))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "self", "ns"), 0o755))
	require.NoError(t, os.Symlink("pid:[4026532999]", filepath.Join(root, "self", "ns", "pid")))
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(999, 1), proc(4242, 1))
	m.GPUs[1].SetProcesses(proc(998, 1))
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.ProcRoot = root })
	ts.start(t)
	for range 3 {
		md := ts.scrapeOK(t)
		procs := processResources(md, nvmltest.UUID(0))
		require.Len(t, procs, 2, "still reported, by pid")
		assert.NotContains(t, procs[999], "process.executable.name")
		assert.NotContains(t, procs[4242], "process.executable.name", "another process's, in the collector's namespace")
	}
	assert.Equal(t, 1, ts.logs.FilterMessageSnippet("own PID namespace").Len())
}

// cgroupProcRoot returns a proc root in which each pid's cgroup file puts
// it in a containerd container (id: 64 times digit) of pod podUID.
func cgroupProcRoot(t *testing.T, pods map[uint32]struct{ digit, podUID string }) string {
	t.Helper()
	root := t.TempDir()
	for pid, c := range pods {
		dir := filepath.Join(root, strconv.Itoa(int(pid)))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		line := "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(c.podUID, "-", "_") +
			".slice/cri-containerd-" + strings.Repeat(c.digit, 64) + ".scope\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(line), 0o644))
	}
	return root
}

func TestSingleOwnerGoesOnTheGPUResource(t *testing.T) {
	t.Parallel()
	const pod1, pod2 = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	root := cgroupProcRoot(t, map[uint32]struct{ digit, podUID string }{4242: {"1", pod1}, 4343: {"2", pod2}})
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(4242, 1), proc(4343, 1)) // two containers
	m.GPUs[1].SetProcesses(proc(4242, 1))                // one
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.ProcRoot = root })
	ts.start(t)
	md := ts.scrapeOK(t)
	assert.Equal(t, strings.Repeat("1", 64), gpuResourceAttrs(md, nvmltest.UUID(1))["container.id"])
	assert.Equal(t, pod1, gpuResourceAttrs(md, nvmltest.UUID(1))["k8s.pod.uid"])
	assert.NotContains(t, gpuResourceAttrs(md, nvmltest.UUID(0)), "container.id", "shared GPU: owners only on processes")
	assert.Equal(t, strings.Repeat("2", 64), processResources(md, nvmltest.UUID(0))[4343]["container.id"])
}

func TestProcessesDisabled(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(4242, 1))
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.Enabled = false })
	ts.start(t)
	md := ts.scrapeOK(t)
	assert.Empty(t, processResources(md, nvmltest.UUID(0)))
}
