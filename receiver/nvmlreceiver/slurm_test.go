//go:build cgo

package nvmlreceiver

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// slurmProcRoot returns a proc root in which each pid's cgroup file is the
// given line.
func slurmProcRoot(t *testing.T, cgroups map[uint32]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, line := range cgroups {
		dir := filepath.Join(root, strconv.Itoa(int(pid)))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(line+"\n"), 0o644))
	}
	// The host's passwd, through its init's root: uid 1001 is alice.
	etc := filepath.Join(root, "1", "root", "etc")
	require.NoError(t, os.MkdirAll(etc, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(etc, "passwd"),
		[]byte("root:x:0:0:root:/root:/bin/bash\nalice:x:1001:1001::/home/alice:/bin/bash\n"), 0o644))
	return root
}

// A Slurm job's processes carry its id, and so does a GPU that only that
// job's processes use; the step is off by default, and a GPU that two jobs
// share has no job.
func TestSlurmJobOnProcessesAndGPU(t *testing.T) {
	t.Parallel()
	root := slurmProcRoot(t, map[uint32]string{
		4242: "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0",
		4343: "0::/system.slice/slurmstepd.scope/job_4711/step_batch/user/task_0",
		5555: "5:memory:/slurm/uid_1001/job_4720/step_0/task_0\n0::/system.slice/slurmd.service",
	})
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(4242, 1), proc(4343, 1)) // one job, two steps
	m.GPUs[1].SetProcesses(proc(4242, 1), proc(5555, 1)) // two jobs
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.ProcRoot = root })
	ts.start(t)
	md := ts.scrapeOK(t)

	assert.Equal(t, "4711", gpuResourceAttrs(md, nvmltest.UUID(0))["slurm.job.id"])
	assert.NotContains(t, gpuResourceAttrs(md, nvmltest.UUID(1)), "slurm.job.id", "shared by two jobs")
	procs := processResources(md, nvmltest.UUID(1))
	assert.Equal(t, "4711", procs[4242]["slurm.job.id"])
	assert.Equal(t, "4720", procs[5555]["slurm.job.id"], "cgroup v1")
	for _, p := range processResources(md, nvmltest.UUID(0)) {
		assert.NotContains(t, p, "slurm.job.step", "off by default")
	}
}

func TestSlurmStepWhenTurnedOn(t *testing.T) {
	t.Parallel()
	root := slurmProcRoot(t, map[uint32]string{
		4242: "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0",
		4343: "0::/system.slice/slurmstepd.scope/job_4711/step_batch/user/task_0",
	})
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(4242, 1), proc(4343, 1))
	m.GPUs[1].SetProcesses(proc(4343, 1))
	ts := newTestScraper(t, m, func(cfg *Config) {
		cfg.Processes.ProcRoot = root
		cfg.ResourceAttributes.SlurmJobStep.Enabled = true
	})
	ts.start(t)
	md := ts.scrapeOK(t)
	assert.Equal(t, "0", processResources(md, nvmltest.UUID(0))[4242]["slurm.job.step"])
	assert.Equal(t, "batch", gpuResourceAttrs(md, nvmltest.UUID(1))["slurm.job.step"])
	gpu0 := gpuResourceAttrs(md, nvmltest.UUID(0))
	assert.Equal(t, "4711", gpu0["slurm.job.id"])
	assert.NotContains(t, gpu0, "slurm.job.step", "two steps of one job: the job alone")
}

// gpuStatDir writes a gpustat directory, as Slurm's prolog would: one
// file per device name, holding "<jobid> <uid>".
func gpuStatDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "gpustat")
	require.NoError(t, os.Mkdir(dir, 0o755))
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content+"\n"), 0o644))
	}
	return dir
}

// A uid the host's passwd has no entry for: its user.name is the uid.
const unknownUID = "4123456789"

// The contract of docs/reference/resources.md: a GPU that Slurm's prolog
// allocated to a job (its gpustat file) is held by the job, with or without
// a process, and its GPU resource names the job and the user. Job 4711
// holds GPUs 0 (by UUID) and 1 (by index): GPU 1 runs one of its
// processes, GPU 0 (0 % SM activity in the mock) none. Nothing names GPU 2
// or 3: they are free.
func TestSlurmAllocatedGPUIsHeldWithoutProcess(t *testing.T) {
	t.Parallel()
	root := slurmProcRoot(t, map[uint32]string{
		4242: "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0",
	})
	m := nvmltest.NewH200GPUs(4)
	m.GPUs[1].SetProcesses(proc(4242, 1<<30))
	dir := gpuStatDir(t, map[string]string{nvmltest.UUID(0): "4711 1001", "1": "4711 1001"})
	ts := newTestScraper(t, m, func(cfg *Config) {
		cfg.Processes.ProcRoot = root
		cfg.Slurm.GPUStatDir = dir
	})
	ts.start(t)
	ts.scrapeOK(t)
	ts.clock.Advance(10 * time.Second)
	md := ts.scrapeOK(t)

	for _, gpu := range []int{0, 1} {
		attrs := gpuResourceAttrs(md, nvmltest.UUID(gpu))
		assert.Equal(t, "4711", attrs["slurm.job.id"], "GPU %d", gpu)
		assert.Equal(t, "alice", attrs["user.name"], "GPU %d: uid 1001's login name in the host's passwd", gpu)
		held, ok := metricValue(md, nvmltest.UUID(gpu), 0, "nvidia.gpu.held.time")
		require.True(t, ok, "GPU %d", gpu)
		holder := resourcesWith(md, nvmltest.UUID(gpu), "nvidia.gpu.held.time")
		require.Len(t, holder, 1)
		assert.Equal(t, "4711", holder[0]["slurm.job.id"], "GPU %d: its held time is the job's", gpu)
		assert.Equal(t, "alice", holder[0]["user.name"], "GPU %d", gpu)
		assert.InDelta(t, 10, held, 1e-6, "GPU %d is held the whole window", gpu)
		free, _ := metricValue(md, nvmltest.UUID(gpu), 0, "nvidia.gpu.free.time")
		assert.Zero(t, free, "GPU %d", gpu)
		share, ok := metricValue(md, nvmltest.UUID(gpu), 0, "nvidia.gpu.allocation")
		require.True(t, ok, "GPU %d: its holder, the job", gpu)
		assert.InDelta(t, 1, share, 1e-9)
	}
	idle, _ := metricValue(md, nvmltest.UUID(0), 0, "nvidia.gpu.idle.time")
	assert.InDelta(t, 10, idle, 1e-6, "no process, no activity: idle")
	p := processResources(md, nvmltest.UUID(1))[4242]
	assert.Equal(t, "4711", p["slurm.job.id"], "the process keeps its own job")
	assert.NotContains(t, p, "user.name", "a process's user is its process.owner")
	for _, gpu := range []int{2, 3} {
		assert.NotContains(t, gpuResourceAttrs(md, nvmltest.UUID(gpu)), "slurm.job.id", "GPU %d", gpu)
		free, _ := metricValue(md, nvmltest.UUID(gpu), 0, "nvidia.gpu.free.time")
		assert.InDelta(t, 10, free, 1e-6, "GPU %d", gpu)
	}

	// The epilog removes the files: the GPUs are free from the next scrape.
	require.NoError(t, os.Remove(filepath.Join(dir, nvmltest.UUID(0))))
	ts.clock.Advance(10 * time.Second)
	md = ts.scrapeOK(t)
	assert.NotContains(t, gpuResourceAttrs(md, nvmltest.UUID(0)), "slurm.job.id")
	free, _ := metricValue(md, nvmltest.UUID(0), 0, "nvidia.gpu.free.time")
	assert.InDelta(t, 10, free, 1e-6)
}

// When the allocation and the processes disagree, as with the kubelet's
// allocation: a process of another job (or a pod) on a job's GPU makes the
// GPU shared, without job or user; it stays held, and each process keeps
// its own job. A uid without a passwd entry is its decimal.
func TestSlurmAllocationAndProcessesDisagree(t *testing.T) {
	t.Parallel()
	root := slurmProcRoot(t, map[uint32]string{
		4242: "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0",
		5555: "0::/system.slice/slurmstepd.scope/job_4720/step_0/user/task_0",
	})
	m := nvmltest.NewH200GPUs(2)
	m.GPUs[0].SetProcesses(proc(5555, 1<<30))                    // job 4720 on job 4711's GPU
	m.GPUs[1].SetProcesses(proc(4242, 1<<30), proc(5555, 1<<30)) // both jobs
	dir := gpuStatDir(t, map[string]string{"0": "4711 " + unknownUID, "1": "4711 " + unknownUID})
	ts := newTestScraper(t, m, func(cfg *Config) {
		cfg.Processes.ProcRoot = root
		cfg.Slurm.GPUStatDir = dir
	})
	ts.start(t)
	ts.scrapeOK(t)
	ts.clock.Advance(10 * time.Second)
	md := ts.scrapeOK(t)
	for _, gpu := range []int{0, 1} {
		attrs := gpuResourceAttrs(md, nvmltest.UUID(gpu))
		// The last resource of the GPU is its holder's (nvidia.gpu.allocation):
		// the job, by the file.
		assert.Equal(t, unknownUID, attrs["user.name"], "GPU %d", gpu)
		held, _ := metricValue(md, nvmltest.UUID(gpu), 0, "nvidia.gpu.held.time")
		assert.InDelta(t, 10, held, 1e-6, "GPU %d", gpu)
		for _, r := range resourcesWith(md, nvmltest.UUID(gpu), "nvidia.gpu.held.time") {
			assert.NotContains(t, r, "slurm.job.id", "GPU %d: shared, its held time on no job", gpu)
		}
		assert.Equal(t, "4720", processResources(md, nvmltest.UUID(gpu))[5555]["slurm.job.id"])
	}
}

// A MIG device's file is named by its UUID; a malformed file is no
// allocation, logged once.
func TestSlurmAllocationOfMIGDevice(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200GPUs(1)
	migs := m.GPUs[0].EnableMIG(nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	dir := gpuStatDir(t, map[string]string{migs[0].UUID: "4711 0", migs[1].UUID: "job 4711"})
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Slurm.GPUStatDir = dir })
	ts.start(t)
	ts.scrapeOK(t)
	ts.clock.Advance(10 * time.Second)
	md := ts.scrapeOK(t)
	mr := migResources(md)
	assert.Equal(t, "4711", mr[migs[0].UUID]["slurm.job.id"])
	assert.NotContains(t, mr[migs[1].UUID], "slurm.job.id")
	held, _ := metricValue(md, migs[0].UUID, 0, "nvidia.gpu.held.time")
	assert.InDelta(t, 10, held, 1e-6)
	free, _ := metricValue(md, migs[1].UUID, 0, "nvidia.gpu.free.time")
	assert.InDelta(t, 10, free, 1e-6)
	held, _ = metricValue(md, nvmltest.UUID(0), 0, "nvidia.gpu.held.time")
	assert.InDelta(t, 10, held, 1e-6, "a GPU with a held MIG device is held")
	assert.Equal(t, 1, ts.logs.FilterMessageSnippet("does not hold").Len(), "logged once, over two scrapes")
}

// resourcesWith returns the attributes of the GPU's resources (no process)
// that carry the metric.
func resourcesWith(md pmetric.Metrics, uuid, metric string) []map[string]any {
	var out []map[string]any
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		attrs := rm.Resource().Attributes()
		id, _ := attrs.Get("hw.id")
		if _, isProcess := attrs.Get("process.pid"); isProcess || id.Str() != uuid {
			continue
		}
		ms := rm.ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if ms.At(j).Name() == metric {
				out = append(out, attrs.AsRaw())
			}
		}
	}
	return out
}
