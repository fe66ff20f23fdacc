package holders

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
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

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
	c := NewContainers(zap.New(core), attribution.NewCgroupCPUReader(procRoot, cgroupRoot))
	mb := metadata.NewMetricsBuilder(metadata.NewDefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type))
	// Each scrape sees two containers, new ones each time.
	for pid := 1000; pid < 1000+containers; pid += 2 {
		c.seen = map[string]container{
			fmt.Sprintf("%064d", pid): {pid: pid}, fmt.Sprintf("%064d", pid+1): {pid: pid + 1},
		}
		c.Record(mb, pcommon.NewTimestampFromTime(time.Now()))
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
	c := NewContainers(zap.New(core), attribution.NewCgroupCPUReader(procRoot, cgroupRoot))
	mb := metadata.NewMetricsBuilder(metadata.NewDefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type))
	ts := pcommon.NewTimestampFromTime(time.Now())

	c.seen = map[string]container{a: {owner: attribution.Owner{ContainerID: a}, pid: 1000}}
	c.Record(mb, ts)
	assert.Empty(t, testutil.ContainerResources(mb.Emit()), "container B's CPU on container A")
	assert.Zero(t, logs.Len(), "a reused PID is not worth a log")

	c.seen = map[string]container{b: {owner: attribution.Owner{ContainerID: b}, pid: 1000}}
	c.Record(mb, ts)
	got := testutil.ContainerResources(mb.Emit())
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
	containers := map[string]container{}
	for pid := 1000; pid < 1000+malformed+1; pid++ {
		cg, id := "garbage\n", fmt.Sprintf("%064d", pid)
		if pid == 1000+malformed {
			cg = "4:cpuacct:/docker/" + id + "\n" // no v2 path: a new cause
		}
		require.NoError(t, os.MkdirAll(filepath.Join(procRoot, fmt.Sprint(pid)), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(procRoot, fmt.Sprint(pid), "cgroup"), []byte(cg), 0o600))
		containers[id] = container{pid: pid}
	}
	core, logs := observer.New(zapcore.DebugLevel)
	c := NewContainers(zap.New(core), attribution.NewCgroupCPUReader(procRoot, cgroupRoot))
	mb := metadata.NewMetricsBuilder(metadata.NewDefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type))
	c.seen = containers
	c.Record(mb, pcommon.NewTimestampFromTime(time.Now())) // in container id order: the new cause last

	warned := logs.FilterMessageSnippet("Cannot read the CPU").FilterLevelExact(zapcore.WarnLevel)
	require.Equal(t, 2, warned.Len(), "one warning per cause, whatever the PIDs")
	assert.Contains(t, warned.All()[0].ContextMap()["error"], "parse cgroup file")
	assert.Contains(t, warned.All()[1].ContextMap()["error"], "no v2 path", "the new cause is a warning")
}

// A container's CPU is read by the cgroup attribution found its process in,
// without reading /proc again: after its PID was reused by a process of
// another container, the container's own CPU still goes out, and never the
// other container's.
func TestContainerCPUByTheAttributedCgroup(t *testing.T) {
	t.Parallel()
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	procRoot, cgroupRoot := t.TempDir(), t.TempDir()
	aPath, bPath := "system.slice/docker-"+a+".scope", "system.slice/docker-"+b+".scope"
	for p, content := range map[string]string{
		filepath.Join(procRoot, "1000", "cgroup"):       "0::/" + aPath + "\n",
		filepath.Join(cgroupRoot, "cgroup.controllers"): "cpu\n",
		filepath.Join(cgroupRoot, aPath, "cpu.stat"):    "usage_usec 7000000\n",
		filepath.Join(cgroupRoot, bPath, "cpu.stat"):    "usage_usec 5000000\n",
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	procs, _ := attribution.New(attribution.Config{ProcRoot: procRoot}, nil).Attribute("GPU-0", []int{1000})
	require.Equal(t, a, procs[0].Owner.ContainerID)
	require.False(t, procs[0].Cgroup.IsZero())
	// PID 1000 is in B now.
	require.NoError(t, os.WriteFile(filepath.Join(procRoot, "1000", "cgroup"), []byte("0::/"+bPath+"\n"), 0o644))

	core, logs := observer.New(zapcore.DebugLevel)
	c := NewContainers(zap.New(core), attribution.NewCgroupCPUReader(procRoot, cgroupRoot))
	mb := metadata.NewMetricsBuilder(metadata.NewDefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type))
	ts := pcommon.NewTimestampFromTime(time.Now())
	c.seen = map[string]container{a: {owner: procs[0].Owner, pid: 1000, cgroup: procs[0].Cgroup}}
	c.Record(mb, ts)
	got := testutil.ContainerResources(mb.Emit())
	require.Contains(t, got, a, "A's cgroup, read by its path")
	assert.InDelta(t, 7.0, got[a]["container.cpu.time"], 1e-9, "A's CPU, not B's")

	// A gone (its cgroup removed) and its PID B's: nothing, and no log.
	require.NoError(t, os.RemoveAll(filepath.Join(cgroupRoot, aPath)))
	c.seen = map[string]container{a: {owner: procs[0].Owner, pid: 1000, cgroup: procs[0].Cgroup}}
	c.Record(mb, ts)
	assert.Empty(t, testutil.ContainerResources(mb.Emit()))
	assert.Zero(t, logs.Len(), "a container that is gone is not worth a log")
}
