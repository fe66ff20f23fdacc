//go:build cgo

package nvmlreceiver

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
