//go:build e2e

package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// The Slurm allocation scenario (issue 33, part 4): Slurm job 4711 of
// alice (uid 2001) holds GPUs 0 and 1 of one node. Slurm's prolog wrote
// jobstats' gpustat files, /run/gpustat/0 and /run/gpustat/1 (here a
// temporary slurm::gpustat_dir), each holding "4711 2001".
//
//   - GPU 0 runs the job's process 730001 (cgroup
//     .../slurmstepd.scope/job_4711/step_0/...): utilization and SM
//     activity 0.6 the whole run. Held, busy 0.6 of the time, never idle.
//   - GPU 1 has no process, activity 0: held by the job, idle all the time.
//     Without the gpustat file it would read free.
//   - GPU 2 has no file and no process: free.
//
// So the job holds 2 GPUs; per second of the run it gains 2 held GPU
// seconds, 0.6 busy and 1 idle (GPU 1's); after h hours it has held 2h
// GPU-hours, h of them idle. The report's known-truth test reuses
// startSlurmAllocation.
const (
	slurmAllocJob      = "4711"
	slurmAllocUser     = "alice"
	slurmAllocUID      = 2001
	slurmAllocActivity = 0.6
	slurmAllocPID      = 730001
)

var slurmAllocGPUs = [3]string{
	"GPU-e2ealloc-0000-4000-8000-000000000000",
	"GPU-e2ealloc-0000-4000-8000-000000000001",
	"GPU-e2ealloc-0000-4000-8000-000000000002",
}

// slurmAllocation is the scenario running: its collector (OTLP to be, and
// its Prometheus exporter), and the gpustat directory the prolog wrote.
type slurmAllocation struct {
	col       *collector
	be        *backend
	gpustat   string
	startedAt time.Time
}

// startSlurmAllocation starts the scenario's collector, sending to a new
// backend.
func startSlurmAllocation(t *testing.T) *slurmAllocation {
	t.Helper()
	procRoot, cgroupRoot := writeHolderProcs(t, []holderProcess{{
		pid: slurmAllocPID, uid: slurmAllocUID, gpu: 0,
		cgroup: "0::/system.slice/slurmstepd.scope/job_" + slurmAllocJob + "/step_0/user/task_0\n",
	}}, fmt.Sprintf("root:x:0:0:root:/root:/bin/bash\n%s:x:%d:%[2]d::/home/%[1]s:/bin/bash\n", slurmAllocUser, slurmAllocUID))
	gpustat := filepath.Join(t.TempDir(), "gpustat")
	if err := os.Mkdir(gpustat, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"0", "1"} { // the prolog's lines: one file per allocated GPU index
		if err := os.WriteFile(filepath.Join(gpustat, name), []byte(fmt.Sprintf("%s %d\n", slurmAllocJob, slurmAllocUID)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := Scenario{Comment: "e2e: one Slurm job holds GPUs 0 (busy) and 1 (no process) through its gpustat files; GPU 2 free", DriverVersion: driverVersion}
	for i, uuid := range slurmAllocGPUs {
		procs := []Process{} // none: an empty list, not null
		sm := 0.0
		if i == 0 {
			sm = slurmAllocActivity
			procs = []Process{{PID: slurmAllocPID, Name: "python3", UsedMemoryBytes: 20 << 30, Type: "compute", SMPercent: 100 * sm}}
		}
		g := holderGPU(uuid, i, sm, procs)
		g.Utilization = &Utilization{GPU: &Duty{Busy: sm}, Memory: &Duty{Busy: sm / 2}}
		s.GPUs = append(s.GPUs, g)
	}
	be := startBackend(t, testutil.AbsFlag(t, "otelcol", *otelcolPath))
	col := startCollector(t, "otelcol-nvml-slurm", s.write(t), be, receiverSettings+fmt.Sprintf(`processes:
  enabled: true
  proc_root: %s
  cgroup_root: %s
slurm:
  gpustat_dir: %s
`, procRoot, cgroupRoot, gpustat))
	return &slurmAllocation{col: col, be: be, gpustat: gpustat, startedAt: time.Now()}
}

// resourcePoints are the points of one GPU's metric (no process) whose
// resource carries every attribute of attrs (a nil value: the attribute
// absent).
func resourcePoints(pts []point, uuid, metric string, attrs map[string]any) []point {
	var out []point
next:
	for _, p := range filter(pts, uuid, metric, nil) {
		if _, isProcess := p.Resource["process.pid"]; isProcess {
			continue
		}
		for k, v := range attrs {
			got, ok := p.Resource[k]
			if v == nil && ok || v != nil && got != v {
				continue next
			}
		}
		out = append(out, p)
	}
	return out
}

// TestSlurmAllocation: a job's allocated GPU is held with or without a
// process, on the collector's output and through a real Prometheus with
// the shipped rules.
func TestSlurmAllocation(t *testing.T) {
	t.Parallel()
	rules, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	run := startSlurmAllocation(t)
	prom := startPrometheus(t, run.col.promAddr, rules)
	procs := []*process{run.col.proc, run.be.proc, prom.proc}
	job := map[string]any{"slurm.job.id": slurmAllocJob, "user.name": slurmAllocUser}

	// The collector: both GPUs' held time is the job's, and grows; GPU 2's
	// is no one's, and does not.
	var pts []point
	waitFor(t, 30*time.Second, "10 s of held time on GPU 1, the job's GPU without a process", func() bool {
		pts = run.be.points(t)
		held := resourcePoints(pts, slurmAllocGPUs[1], "nvidia.gpu.held.time", job)
		return len(held) > 0 && held[len(held)-1].Value >= 10
	}, procs...)
	t.Run("collector", func(t *testing.T) {
		for i, uuid := range slurmAllocGPUs[:2] {
			held := resourcePoints(pts, uuid, "nvidia.gpu.held.time", job)
			if len(held) < 2 {
				t.Fatalf("GPU %d: %d held-time points of job %s, user %s", i, len(held), slurmAllocJob, slurmAllocUser)
			}
			first, last := held[0], held[len(held)-1]
			if grew, span := last.Value-first.Value, last.Time.Sub(first.Time).Seconds(); math.Abs(grew-span) > holdersWithin {
				t.Errorf("GPU %d: held %.1f s over %.1f s, want all of it", i, grew, span)
			}
			if n := len(resourcePoints(pts, uuid, "nvidia.gpu.held.time", map[string]any{"slurm.job.id": nil})); n > 0 {
				t.Errorf("GPU %d: %d held-time points without the job", i, n)
			}
		}
		idle := resourcePoints(pts, slurmAllocGPUs[1], "nvidia.gpu.idle.time", job)
		held := resourcePoints(pts, slurmAllocGPUs[1], "nvidia.gpu.held.time", job)
		if len(idle) == 0 || math.Abs(idle[len(idle)-1].Value-held[len(held)-1].Value) > holdersWithin {
			t.Errorf("GPU 1: idle time %v, want its held time %.1f s", idle, held[len(held)-1].Value)
		}
		if busy := resourcePoints(pts, slurmAllocGPUs[0], "nvidia.gpu.idle.time", job); len(busy) == 0 || busy[len(busy)-1].Value > holdersWithin {
			t.Errorf("GPU 0 at activity %.1f: idle time %v, want 0", slurmAllocActivity, busy)
		}
		for _, p := range resourcePoints(pts, slurmAllocGPUs[2], "nvidia.gpu.held.time", nil) {
			if p.Value != 0 || p.Resource["slurm.job.id"] != nil {
				t.Fatalf("GPU 2 (no allocation, no process): held %.1f s, resource %v", p.Value, p.Resource)
			}
		}
		// The job's process keeps its own attribution: its job and its
		// owner from /proc, no user.name.
		proc := filter(pts, slurmAllocGPUs[0], "nvidia.gpu.process.held.time", nil)
		if len(proc) == 0 {
			t.Fatal("no process held time on GPU 0")
		}
		if r := proc[len(proc)-1].Resource; r["slurm.job.id"] != slurmAllocJob || r["process.owner"] != slurmAllocUser || r["user.name"] != nil {
			t.Errorf("GPU 0's process: resource %v", r)
		}
	})

	// Prometheus with the shipped rules: the job holds 2 GPUs, and its idle
	// figure is GPU 1's.
	t.Run("prometheus", func(t *testing.T) {
		job := fmt.Sprintf(`{slurm_job_id=%q, process_owner=%q}`, slurmAllocJob, slurmAllocUser)
		waitFor(t, 60*time.Second, "the job's figures in Prometheus", func() bool {
			return len(prom.tryQuery(`slurm_job:nvidia_gpu_held_gpus:5m`+job)) == 1 &&
				len(prom.tryQuery(`slurm_job:nvidia_gpu_idle_hours:1h`+job)) == 1
		}, procs...)
		sp := newSpan(t, prom, procs...)
		sp.is(t, `slurm_job:nvidia_gpu_held_gpus:5m`+job, 1, 2, 0)
		sp.grew(t, "the job's held hours", `slurm_job:nvidia_gpu_held_hours:1h`+job, 3600, 2, 2)
		sp.grew(t, "the job's busy hours", `slurm_job:nvidia_gpu_busy_hours:1h`+job, 3600, slurmAllocActivity, 2)
		sp.grew(t, "the job's idle hours", `slurm_job:nvidia_gpu_idle_hours:1h`+job, 3600, 1, 2)
		// The idle figure is GPU 1's, the GPU without a process.
		sp.grew(t, "GPU 1's idle hours, the job's", fmt.Sprintf(`gpu_slurm_job:nvidia_gpu_idle_hours:1h{hw_id=%q, slurm_job_id=%q}`, slurmAllocGPUs[1], slurmAllocJob), 3600, 1, 1)
		sp.grew(t, "GPU 0's idle hours, the job's", fmt.Sprintf(`gpu_slurm_job:nvidia_gpu_idle_hours:1h{hw_id=%q, slurm_job_id=%q}`, slurmAllocGPUs[0], slurmAllocJob), 3600, 0, 1)
		// On the GPU-level series themselves: the labels of contract 2.
		sp.is(t, fmt.Sprintf(`count(nvidia_gpu_held_time_seconds_total{slurm_job_id=%q, user_name=%q})`, slurmAllocJob, slurmAllocUser), 1, 2, 0)
	})

	// The epilog removes the files: from the next scrape on, GPU 1 is free.
	t.Run("epilog", func(t *testing.T) {
		for _, name := range []string{"0", "1"} {
			if err := os.Remove(filepath.Join(run.gpustat, name)); err != nil {
				t.Fatal(err)
			}
		}
		removed := time.Now()
		waitFor(t, 15*time.Second, "GPU 1 free after the epilog", func() bool {
			free := resourcePoints(run.be.points(t), slurmAllocGPUs[1], "nvidia.gpu.free.time", map[string]any{"slurm.job.id": nil})
			return len(free) > 0 && free[len(free)-1].Time.After(removed.Add(2*time.Second)) && free[len(free)-1].Value > 0
		}, procs...)
	})
	for _, p := range procs {
		p.requireAlive(t)
	}
}
