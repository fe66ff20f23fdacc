//go:build cgo

package nvmlreceiver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

const fixtureContainer = "1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a7988"

// containerResources returns, per container.id, the attributes and metric
// values of the resources that carry no hw.id (the containers').
func containerResources(md pmetric.Metrics) map[string]map[string]any {
	out := map[string]map[string]any{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		attrs := rm.Resource().Attributes()
		if _, isGPU := attrs.Get("hw.id"); isGPU {
			continue
		}
		id, _ := attrs.Get("container.id")
		entry := attrs.AsRaw()
		ms := rm.ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			entry[m.Name()] = m.Sum().DataPoints().At(0).DoubleValue()
			entry[m.Name()+"/monotonic"] = m.Sum().IsMonotonic()
		}
		out[id.Str()] = entry
	}
	return out
}

func TestContainerCPUBesideTheGPU(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	// 4242 runs in a pod's container (testdata/proc/4242/cgroup) and uses
	// two GPUs; 4343 is a host process.
	m.GPUs[0].SetProcesses(proc(4242, 8<<30), proc(4343, 1<<30))
	m.GPUs[1].SetProcesses(proc(4242, 2<<30))
	ts := newTestScraper(t, m)
	ts.start(t)
	md := ts.scrapeOK(t)

	ctrs := containerResources(md)
	require.Len(t, ctrs, 1, "one resource per container, however many GPUs it holds; none for host processes")
	c := ctrs[fixtureContainer]
	require.NotNil(t, c)
	assert.Equal(t, "0d3e0c8a-1111-4222-8333-944455556666", c["k8s.pod.uid"])
	assert.InDelta(t, 12.5, c["container.cpu.time"], 1e-9, "cpu.stat usage_usec in seconds")
	assert.Equal(t, true, c["container.cpu.time/monotonic"])
	assert.InDelta(t, 4.0, c["nvidia.gpu.container.cpu.limit"], 1e-9, "cpu.max 400000/100000")
	assert.Zero(t, ts.logs.FilterMessageSnippet("Cannot read the CPU").Len())
}

func TestContainerCPUUnreadableWarnsOnce(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(4242, 8<<30))
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.CgroupRoot = t.TempDir() })
	ts.start(t)
	for i := 0; i < 3; i++ {
		md := ts.scrapeOK(t)
		assert.Empty(t, containerResources(md), "no CPU without the cgroup")
		assert.NotEmpty(t, gpuResourceAttrs(md, nvmltest.UUID(0)), "the GPU's metrics go on")
	}
	assert.Equal(t, 1, ts.logs.FilterMessageSnippet("Cannot read the CPU").Len(), "one warning per container")
}

func TestContainerCPUOffWithProcesses(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(4242, 8<<30))
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.Enabled = false })
	ts.start(t)
	assert.Empty(t, containerResources(ts.scrapeOK(t)))
}

// Review 2, finding 7: the warned map kept one entry per failing
// container id for ever, and each new container logged its own warning
// when the cgroup root was wrong. One warning per cause now, and the map
// holds causes, at most maxWarnedCauses.
func TestContainerCPUWarnsOncePerCauseNotPerContainer(t *testing.T) {
	t.Parallel()
	procRoot, cgroupRoot := t.TempDir(), t.TempDir()
	// cgroup v2, but not the one the containers are in: a wrong cgroup_root.
	require.NoError(t, os.WriteFile(filepath.Join(cgroupRoot, "cgroup.controllers"), []byte("cpu\n"), 0o600))
	const containers = 60
	for pid := 1000; pid < 1000+containers; pid++ {
		require.NoError(t, os.MkdirAll(filepath.Join(procRoot, fmt.Sprint(pid)), 0o700))
		cg := fmt.Sprintf("0::/kubepods.slice/kubepods-pod%d.slice/cri-containerd-%064d.scope\n", pid, pid)
		if pid == 1000+containers-1 {
			cg = fmt.Sprintf("4:cpuacct:/docker/%064d\n", pid) // no v2 path: another cause
		}
		require.NoError(t, os.WriteFile(filepath.Join(procRoot, fmt.Sprint(pid), "cgroup"), []byte(cg), 0o600))
	}
	core, logs := observer.New(zapcore.DebugLevel)
	c := &containerCPU{logger: zap.New(core), warned: attribution.NewCauseLog(maxWarnedCauses),
		reader: attribution.NewCgroupCPUReader(procRoot, cgroupRoot)}
	mb := metadata.NewMetricsBuilder(metadata.NewDefaultMetricsBuilderConfig(), newTestSettings())
	// Each scrape sees two containers, new ones each time.
	for pid := 1000; pid < 1000+containers; pid += 2 {
		c.record(mb, pcommon.NewTimestampFromTime(time.Now()), map[string]gpuContainer{
			fmt.Sprintf("%064d", pid): {pid: pid}, fmt.Sprintf("%064d", pid+1): {pid: pid + 1},
		})
	}
	warned := logs.FilterMessageSnippet("Cannot read the CPU").FilterLevelExact(zapcore.WarnLevel)
	assert.Equal(t, 2, warned.Len(), "one warning per cause, not per container")

	for i := range 3 * maxWarnedCauses {
		c.warn("x", fmt.Errorf("cause %d", i))
	}
	assert.Equal(t, maxWarnedCauses, logs.FilterMessageSnippet("Cannot read the CPU").FilterLevelExact(zapcore.WarnLevel).Len(), "bounded: the causes remembered")
	assert.Equal(t, 3*maxWarnedCauses-(maxWarnedCauses-2), logs.FilterMessageSnippet("Cannot read the CPU").FilterLevelExact(zapcore.DebugLevel).Len(),
		"the others at debug")
}

// Review 3, finding 2: the PID found in container A during attribution is
// read again at emit. Had it exited and been reused by a process of
// container B in between, B's CPU went out on A's container.id. It is
// skipped now, without a log: a process that exits is normal.
func TestContainerCPUOfAReusedPIDIsNotAnotherContainers(t *testing.T) {
	t.Parallel()
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	procRoot, cgroupRoot := t.TempDir(), t.TempDir()
	bPath := "system.slice/docker-" + b + ".scope"
	for p, content := range map[string]string{
		filepath.Join(procRoot, "1000", "cgroup"):       "0::/" + bPath + "\n", // pid 1000 is in B now
		filepath.Join(cgroupRoot, "cgroup.controllers"): "cpu\n",
		filepath.Join(cgroupRoot, bPath, "cpu.stat"):    "usage_usec 5000000\n",
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	core, logs := observer.New(zapcore.DebugLevel)
	c := &containerCPU{logger: zap.New(core), warned: attribution.NewCauseLog(maxWarnedCauses),
		reader: attribution.NewCgroupCPUReader(procRoot, cgroupRoot)}
	mb := metadata.NewMetricsBuilder(metadata.NewDefaultMetricsBuilderConfig(), newTestSettings())
	ts := pcommon.NewTimestampFromTime(time.Now())

	c.record(mb, ts, map[string]gpuContainer{a: {owner: owner{ContainerID: a}, pid: 1000}})
	assert.Empty(t, containerResources(mb.Emit()), "container B's CPU on container A")
	assert.Zero(t, logs.Len(), "a reused PID is not worth a log")

	c.record(mb, ts, map[string]gpuContainer{b: {owner: owner{ContainerID: b}, pid: 1000}})
	got := containerResources(mb.Emit())
	require.Contains(t, got, b, "B's own process gives B's CPU")
	assert.InDelta(t, 5.0, got[b]["container.cpu.time"], 1e-9)
}

// Review 3, finding 4: the cgroup reader's errors name the process ("pid
// 1000: parse cgroup file: ..."), so every container with a malformed
// cgroup file was a cause of its own and used up the warned causes; a new
// cause after them went to debug level. The cause leaves the PID out now.
func TestContainerCPUCauseLeavesThePIDOut(t *testing.T) {
	t.Parallel()
	procRoot, cgroupRoot := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cgroupRoot, "cgroup.controllers"), []byte("cpu\n"), 0o600))
	const malformed = 20
	containers := map[string]gpuContainer{}
	for pid := 1000; pid < 1000+malformed+1; pid++ {
		cg, id := "garbage\n", fmt.Sprintf("%064d", pid)
		if pid == 1000+malformed {
			cg = "4:cpuacct:/docker/" + id + "\n" // no v2 path: a new cause
		}
		require.NoError(t, os.MkdirAll(filepath.Join(procRoot, fmt.Sprint(pid)), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(procRoot, fmt.Sprint(pid), "cgroup"), []byte(cg), 0o600))
		containers[id] = gpuContainer{pid: pid}
	}
	core, logs := observer.New(zapcore.DebugLevel)
	c := &containerCPU{logger: zap.New(core), warned: attribution.NewCauseLog(maxWarnedCauses),
		reader: attribution.NewCgroupCPUReader(procRoot, cgroupRoot)}
	mb := metadata.NewMetricsBuilder(metadata.NewDefaultMetricsBuilderConfig(), newTestSettings())
	c.record(mb, pcommon.NewTimestampFromTime(time.Now()), containers) // in container id order: the new cause last

	warned := logs.FilterMessageSnippet("Cannot read the CPU").FilterLevelExact(zapcore.WarnLevel)
	require.Equal(t, 2, warned.Len(), "one warning per cause, whatever the PIDs")
	assert.Contains(t, warned.All()[0].ContextMap()["error"], "parse cgroup file")
	assert.Contains(t, warned.All()[1].ContextMap()["error"], "no v2 path", "the new cause is a warning")
}
