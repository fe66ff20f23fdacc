package attribution

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// startAttributor starts an Attributor and waits until it holds the
// kubelet's allocation, when it has one.
func startAttributor(t *testing.T, cfg Config, logger *zap.Logger) *Attributor {
	t.Helper()
	a := New(cfg, logger)
	require.NoError(t, a.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, a.Shutdown(ctx))
	})
	if a.pods != nil {
		waitSynced(t, a.pods)
	}
	return a
}

func owners(procs []Process) []Owner {
	out := make([]Owner, len(procs))
	for i, p := range procs {
		out[i] = p.Owner
	}
	return out
}

func TestAttributeFromCgroupsAndKubelet(t *testing.T) {
	sock := socketPath(t)
	k := &fakeKubelet{}
	k.set(nodeAllocation(), nil)
	serve(t, sock, k)
	root := fakeProc(t, map[int]string{
		10: "containerd-v2-systemd-burstable.txt",  // trainer-0's container
		11: "containerd-v2-systemd-guaranteed.txt", // another pod's container
		12: "host-v2-service.txt",                  // a host process
	})
	a := startAttributor(t, Config{ProcRoot: root, PodResources: &PodResourcesConfig{Socket: sock, RefreshInterval: time.Hour}}, nil)
	trainer := Owner{ContainerID: idBurstable, PodUID: uidBurstable, PodName: "trainer-0", Namespace: "ml", ContainerName: "trainer"}

	tests := []struct {
		name      string
		device    string
		pids      []int
		wantProcs []Owner
		wantGPU   Owner
	}{
		{name: "the allocated pod's process: names from the kubelet", device: gpuTrain, pids: []int{10},
			wantProcs: []Owner{trainer}, wantGPU: trainer},
		{name: "a host process does not count", device: gpuTrain, pids: []int{10, 12},
			wantProcs: []Owner{trainer, {}}, wantGPU: trainer},
		{name: "another pod's process too: shared", device: gpuTrain, pids: []int{10, 11},
			wantProcs: []Owner{{ContainerID: idBurstable, PodUID: uidBurstable}, {ContainerID: idGuaranteed, PodUID: uidGuaranteed}}},
		{name: "an exited process is left out of the owner", device: gpuTrain, pids: []int{10, 99},
			wantProcs: []Owner{trainer, {}}, wantGPU: trainer},
		{name: "idle and allocated", device: gpuTrain,
			wantProcs: []Owner{}, wantGPU: Owner{PodName: "trainer-0", Namespace: "ml", ContainerName: "trainer"}},
		{name: "a MIG device by its own UUID", device: migInfer,
			wantProcs: []Owner{}, wantGPU: Owner{PodName: "llm-0", Namespace: "serve", ContainerName: "server"}},
		{name: "not allocated: the cgroups alone", device: gpuIdle, pids: []int{11},
			wantProcs: []Owner{{ContainerID: idGuaranteed, PodUID: uidGuaranteed}}, wantGPU: Owner{ContainerID: idGuaranteed, PodUID: uidGuaranteed}},
		{name: "time-sliced between pods", device: gpuSliced, pids: []int{10},
			wantProcs: []Owner{{ContainerID: idBurstable, PodUID: uidBurstable}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			procs, gpu := a.Attribute(tt.device, tt.pids)
			require.Len(t, procs, len(tt.pids))
			for i, p := range procs {
				assert.Equal(t, tt.pids[i], p.PID, "in the order given")
			}
			assert.Equal(t, tt.wantProcs, owners(procs))
			assert.Equal(t, tt.wantGPU, gpu)
		})
	}
}

// Another device plugin's resource name counts once it is configured.
func TestAttributeResourcePrefixes(t *testing.T) {
	sock := socketPath(t)
	k := &fakeKubelet{}
	k.set(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		pod("ml", "trainer-0", ctr("trainer", dev("example.com/gpu", gpuTrain))),
	}}, nil)
	serve(t, sock, k)

	byDefault := startAttributor(t, Config{PodResources: &PodResourcesConfig{Socket: sock}}, nil)
	_, gpu := byDefault.Attribute(gpuTrain, nil)
	assert.Zero(t, gpu, "not an NVIDIA device plugin resource")

	configured := startAttributor(t, Config{PodResources: &PodResourcesConfig{Socket: sock, ResourcePrefixes: []string{"example.com/gpu"}}}, nil)
	_, gpu = configured.Attribute(gpuTrain, nil)
	assert.Equal(t, Owner{PodName: "trainer-0", Namespace: "ml", ContainerName: "trainer"}, gpu)
}

// Review 3, finding 5: a kubelet that lists GPUs by index ("nvidia0", as
// GKE's device plugin does) gives no GPU its pod names; that is said.
func TestAttributeNonUUIDDeviceIDsAreNotSilent(t *testing.T) {
	sock := socketPath(t)
	k := &fakeKubelet{}
	k.set(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		pod("ml", "trainer-0", ctr("trainer", dev("nvidia.com/gpu", "nvidia0"))),
	}}, nil)
	serve(t, sock, k)
	core, logs := observer.New(zapcore.InfoLevel)
	a := startAttributor(t, Config{PodResources: &PodResourcesConfig{Socket: sock}}, zap.New(core))
	_, gpu := a.Attribute(gpuTrain, nil)
	assert.Zero(t, gpu, "nothing matches a GPU UUID")
	require.Eventually(t, func() bool { return logs.FilterMessageSnippet("pod names").Len() == 1 }, 5*time.Second, time.Millisecond,
		"allocation by non-UUID ids: no pod names and no log")
}

// A GPU allocated to two pods (time-slicing) has no single owner, and is
// still held; a GPU allocated to nobody is not.
func TestAllocated(t *testing.T) {
	sock := socketPath(t)
	k := &fakeKubelet{}
	k.set(&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		pod("ml", "a-0", ctr("a", dev("nvidia.com/gpu", gpuTrain))),
		pod("ml", "b-0", ctr("b", dev("nvidia.com/gpu", gpuTrain))),
	}}, nil)
	serve(t, sock, k)
	a := startAttributor(t, Config{PodResources: &PodResourcesConfig{Socket: sock}}, nil)
	_, gpu := a.Attribute(gpuTrain, nil)
	assert.Zero(t, gpu, "two pods: no single owner")
	assert.True(t, a.Allocated(gpuTrain))
	assert.False(t, a.Allocated("GPU-00000000-0000-4000-8000-000000000000"))
	assert.False(t, startAttributor(t, Config{}, nil).Allocated(gpuTrain), "no kubelet: nothing is allocated")
}

func TestAttributeWithoutProcRoot(t *testing.T) {
	a := startAttributor(t, Config{}, nil)
	procs, gpu := a.Attribute(gpuTrain, []int{10, 11})
	assert.Equal(t, []Process{{PID: 10}, {PID: 11}}, procs)
	assert.Zero(t, gpu)
}

// A proc root that shows only the collector's own PID namespace: said
// once, whatever the number of GPUs and scrapes; the processes keep their
// PIDs.
func TestAttributeHiddenPIDsWarnOnce(t *testing.T) {
	root := fakeProc(t, nil)
	withSelf(t, root, "7", "pid:[4026532999]")
	core, logs := observer.New(zapcore.InfoLevel)
	a := startAttributor(t, Config{ProcRoot: root}, zap.New(core))
	for range 3 {
		procs, gpu := a.Attribute(gpuTrain, []int{998, 999})
		assert.Equal(t, []Process{{PID: 998}, {PID: 999}}, procs)
		assert.Zero(t, gpu)
	}
	require.Equal(t, 1, logs.Len())
	assert.Contains(t, logs.All()[0].Message, "own PID namespace")
}

// Review 3, finding 3: a GPU whose only process had exited by the time
// /proc was read (or a /proc mounted with hidepid=2) set off the once-only
// "own PID namespace" warning, although the proc root is the host's; a
// real PID namespace problem later went unsaid. Only the resolver's
// verdict says so now.
func TestAttributeExitedProcessesAreNoPIDNamespaceProblem(t *testing.T) {
	for name, self := range map[string][2]string{
		"the host's /proc":                 {"1234", initialPIDNamespace},
		"the host's /proc in a container":  {"1234\t5", "pid:[4026532999]"},
		"not a procfs (no self, no NSpid)": {},
	} {
		t.Run(name, func(t *testing.T) {
			root := fakeProc(t, map[int]string{7: "host-v2-init.txt"})
			if self[0] != "" {
				withSelf(t, root, self[0], self[1])
			}
			core, logs := observer.New(zapcore.InfoLevel)
			a := New(Config{ProcRoot: root}, zap.New(core))
			procs, _ := a.Attribute(gpuTrain, []int{99}) // exited
			assert.Equal(t, []Process{{PID: 99}}, procs)
			_, _ = a.Attribute(gpuIdle, []int{98, 97})
			assert.Zero(t, logs.Len(), "an exited process is not worth a log: %v", logs.All())
		})
	}
}

// Review 3, finding 3: a process's cgroup or /proc details that cannot be
// read for another reason than its exit (EACCES, a read error) was dropped
// without a word. It is logged once per cause, however many processes and
// scrapes it hits.
func TestAttributeUnreadableProcessLoggedOncePerCause(t *testing.T) {
	root := fakeProc(t, nil)
	withSelf(t, root, "1234", initialPIDNamespace)
	for _, pid := range []string{"41", "42", "43"} {
		// Directories where files should be: reading them fails (EISDIR),
		// as an unreadable file would for a non-root collector.
		require.NoError(t, os.MkdirAll(filepath.Join(root, pid, "cgroup"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(root, pid, "comm"), 0o755))
	}
	core, logs := observer.New(zapcore.DebugLevel)
	a := New(Config{ProcRoot: root}, zap.New(core))
	for range 3 {
		procs, _ := a.Attribute(gpuTrain, []int{41, 42, 43})
		assert.Equal(t, []Process{{PID: 41}, {PID: 42}, {PID: 43}}, procs)
	}
	warned := logs.FilterLevelExact(zapcore.WarnLevel)
	require.Equal(t, 2, warned.Len(), "one per cause (the details, the cgroup), not per process: %v", logs.All())
	assert.Equal(t, 1, warned.FilterMessageSnippet("cgroup").Len())
	assert.Equal(t, 1, warned.FilterMessageSnippet("executable").Len())
	assert.Equal(t, 2, logs.Len(), "nothing more, at any level")

	for i := range 3 * maxWarnedCauses {
		a.warnRead(readCgroup, i, fmt.Errorf("cause %d", i))
	}
	assert.Equal(t, maxWarnedCauses, logs.FilterLevelExact(zapcore.WarnLevel).Len(), "bounded: the 2 causes above, and the first new ones")
	assert.Equal(t, 3*maxWarnedCauses-(maxWarnedCauses-2), logs.FilterLevelExact(zapcore.DebugLevel).Len(), "the others at debug")
}

func TestAttributeUnreadableProcRoot(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	a := startAttributor(t, Config{ProcRoot: "/nonexistent/proc"}, zap.New(core))
	procs, _ := a.Attribute(gpuTrain, []int{1})
	assert.Equal(t, []Process{{PID: 1}}, procs)
	assert.GreaterOrEqual(t, logs.FilterMessageSnippet("proc root").Len(), 1)
}

// statLine is a /proc/<pid>/stat line whose start time is startTicks.
func statLine(pid int, comm string, startTicks uint64) string {
	f := make([]string, 50)
	for i := range f {
		f[i] = "0"
	}
	f[18] = strconv.FormatUint(startTicks, 10)
	return fmt.Sprintf("%d (%s) S %s\n", pid, comm, strings.Join(f, " "))
}

// Review 3, finding 1: a proc root that shows only the collector's own PID
// namespace gave NVML's host PID 42 the executable, owner and start time of
// whatever process is 42 in that namespace. Nothing is read from it now.
func TestAttributeNoProcessInfoFromTheCollectorsOwnPIDNamespace(t *testing.T) {
	root := fakeProc(t, map[int]string{42: "host-v2-init.txt"})
	writeTree(t, root, map[string]string{
		"stat":      "cpu  1 2 3 4 5 6 7 8 9 10\nbtime 1600000000\n",
		"42/comm":   "sh\n",
		"42/status": "Name:\tsh\nUid:\t0\t0\t0\t0\n",
		"42/stat":   statLine(42, "sh", 100),
	})
	withSelf(t, root, "7", "pid:[4026532999]") // its own namespace, not the host's
	core, logs := observer.New(zapcore.InfoLevel)
	a := New(Config{ProcRoot: root}, zap.New(core))
	for range 2 {
		procs, gpu := a.Attribute(gpuTrain, []int{42}) // a host PID from NVML
		assert.Equal(t, []Process{{PID: 42}}, procs, "by PID alone")
		assert.Zero(t, gpu)
	}
	assert.Equal(t, 1, logs.FilterMessageSnippet("own PID namespace").Len())
}
