//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

var reportPath = flag.String("report", "", "path of the built otelcol-nvml-report binary (make report)")

// reportJSON is what the test reads of `otelcol-nvml-report --format json`.
type reportJSON struct {
	By     string `json:"by"`
	Source string `json:"source"`
	Rows   []struct {
		Holder         map[string]string  `json:"holder"`
		HeldGPUHours   float64            `json:"held_gpu_hours"`
		BusyGPUHours   float64            `json:"busy_gpu_hours"`
		ActiveGPUHours float64            `json:"active_gpu_hours"`
		IdleGPUHours   float64            `json:"idle_gpu_hours"`
		Efficiency     float64            `json:"efficiency"`
		Cost           *float64           `json:"cost"`
		PeakMemory     *float64           `json:"peak_memory_bytes"`
		State          string             `json:"state"`
		States         map[string]float64 `json:"states"`
		Advice         string             `json:"advice"`
		RunbookURL     string             `json:"runbook_url"`
	} `json:"rows"`
}

// runReport runs the report binary against prom and returns its stdout;
// the test fails on a non-zero exit.
func runReport(t *testing.T, prom *prometheus, args ...string) string {
	t.Helper()
	out, errOut, code := runReportCode(t, prom, args...)
	if code != 0 {
		t.Fatalf("otelcol-nvml-report %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

func runReportCode(t *testing.T, prom *prometheus, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin := testutil.AbsFlag(t, "report", *reportPath)
	cmd := exec.Command(bin, append(args, "--prometheus=http://"+prom.addr)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

// TestReport runs otelcol-nvml-report against the real Prometheus of the
// waste scenario (testdata/scenarios/waste.json, as TestWaste runs it) and
// checks its columns against the scenario's own figures: GPU 0's pod held
// its GPU the whole run, idle for the first 20 s and busy half the time
// after; GPU 3's container is input-bound; GPU 5's memory climbs to 146 GB.
func TestReport(t *testing.T) {
	t.Parallel()
	scenario, gpus, procRoot, cgroupRoot, kubelet := wasteFixtures(t)
	rules, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bin := testutil.AbsFlag(t, "otelcol", *otelcolPath)
	sock := servePodResources(t, kubelet)
	growCPU(t, gpus)
	promAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	prom := startPrometheus(t, promAddr, rules)
	cfg := wasteCollectorConfig(t, procRoot, cgroupRoot, sock, promAddr, "")
	col := startProcess(t, "otelcol-nvml", []string{scenarioEnv + "=" + scenario, "K8S_NODE_NAME=" + wasteNode},
		bin, "--config="+writeFile(t, t.TempDir(), "collector.yaml", cfg))
	c := &collector{proc: col, promAddr: promAddr}
	t0 := c.scenarioStart(t, 30*time.Second)
	procs := []*process{col, prom.proc}

	// Bad input first, while the scenario runs: each one line, non-zero.
	t.Run("bad input", func(t *testing.T) {
		for _, args := range [][]string{{"job", "no-such-job", "--from=-10m"}, {"pod", "nobody/nothing", "--from=-10m"}} {
			out, errOut, code := runReportCode(t, prom, args...)
			if code == 0 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "check the") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want one line that says what to check, exit non-zero", args, code, out, errOut)
			}
		}
	})

	waitFor(t, time.Duration((wasteEnd+20)*float64(time.Second)), fmt.Sprintf("the scenario at t = %.0f s", wasteEnd), func() bool {
		return time.Since(t0).Seconds() >= wasteEnd
	}, procs...)
	// A few more scrapes and rule evaluations of the last state.
	time.Sleep(3 * time.Second)
	to := time.Now().Add(-time.Second)
	elapsed := to.Sub(t0).Seconds()
	from := t0.Add(-30 * time.Second)
	rng := []string{"--from=" + from.UTC().Format(time.RFC3339Nano), "--to=" + to.UTC().Format(time.RFC3339Nano)}

	var byPod reportJSON
	out := runReport(t, prom, append([]string{"--by=pod", "--format=json"}, rng...)...)
	if err := json.Unmarshal([]byte(out), &byPod); err != nil {
		t.Fatalf("--format json: %v\n%s", err, out)
	}
	if byPod.Source != "raw" {
		t.Errorf("a %.0f s report read the %s counters; want the raw ones", elapsed, byPod.Source)
	}
	row := func(g *wasteGPU) int {
		for i, r := range byPod.Rows {
			if g.pod != nil && r.Holder["k8s_namespace_name"] == g.pod.namespace && r.Holder["k8s_pod_name"] == g.pod.name {
				return i
			}
		}
		return -1
	}
	near := func(what string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s = %.5f; the scenario says %.5f (± %.5f)", what, got, want, tol)
		}
	}
	// Prometheus's data of a holder starts at its first scrape of the
	// holder's counter, some seconds into the scenario (s0, read from
	// Prometheus); increase() extrapolates up to half the average scrape
	// interval past each end (more than 1 s on a loaded machine), and the
	// collector counts by its 1 s interval: 2.5 s, 6 % of GPU 0's held time.
	const tol = 2.5
	firstSample := func(g *wasteGPU) float64 {
		res := prom.query(t, fmt.Sprintf(`min(min_over_time(timestamp(nvidia_gpu_held_time_seconds_total{hw_id=%q})[5m:1s]))`, g.UUID))
		if len(res) != 1 {
			t.Fatalf("GPU %s: no held-time samples in Prometheus", g.UUID)
		}
		return res[0].value(t) - float64(t0.UnixNano())/1e9
	}
	if i := row(gpus[0]); i < 0 {
		t.Errorf("GPU 0's pod %v has no row: %s", gpus[0].pod, out)
	} else {
		r, s0 := byPod.Rows[i], firstSample(gpus[0])
		t.Logf("GPU 0: Prometheus's first sample at t = %.1f s, the report ends at t = %.1f s", s0, elapsed)
		near("GPU 0's pod: held GPU-hours", r.HeldGPUHours, (elapsed-s0)/3600, tol/3600)
		near("GPU 0's pod: idle GPU-hours (idle for its first 20 s)", r.IdleGPUHours, (wasteIdleAt-s0)/3600, tol/3600)
		near("GPU 0's pod: busy GPU-hours (half the time after 20 s)", r.BusyGPUHours, 0.5*(elapsed-wasteIdleAt)/3600, tol/3600)
		near("GPU 0's pod: efficiency (active over held)", r.Efficiency, r.ActiveGPUHours/r.HeldGPUHours, 1e-3)
		// waste.json's model has no price of its own: the rules' default, 1.5 a GPU-hour.
		if r.Cost == nil {
			t.Errorf("GPU 0's pod: no cost")
		} else {
			near("GPU 0's pod: cost at 1.5 a GPU-hour", *r.Cost, 1.5*r.HeldGPUHours, 1e-5)
		}
		if r.States["idle"] < 0.2 || r.States["underused"] <= 0 {
			t.Errorf("GPU 0's pod: states %v; want idle (its first 20 s) and underused (50 %% after)", r.States)
		}
	}
	if i := row(gpus[3]); i < 0 {
		t.Errorf("GPU 3's pod has no row")
	} else if r := byPod.Rows[i]; r.State != "input_bound" || !strings.Contains(r.Advice, "num_workers") || !strings.HasSuffix(r.RunbookURL, "runbook.md#input_bound") {
		t.Errorf("GPU 3's pod: state %q (%v), advice %q, runbook %q; want input_bound, its advice and runbook", r.State, r.States, r.Advice, r.RunbookURL)
	}
	// GPU 5's memory reaches 146 GB (97 %, over the 95 % bound) at t = 30 s:
	// memory_pressure from then on, underused (30 % activity) before.
	if i := row(gpus[5]); i < 0 {
		t.Errorf("GPU 5's pod has no row")
	} else {
		r, s0 := byPod.Rows[i], firstSample(gpus[5])
		if r.PeakMemory == nil || math.Abs(*r.PeakMemory-146e9) > 1e6 {
			t.Errorf("GPU 5's pod: peak memory %v; want 146e9 bytes", r.PeakMemory)
		}
		near("GPU 5's pod: memory_pressure's share of its time", r.States["memory_pressure"], (elapsed-30)/(elapsed-s0), 0.12)
	}
	for _, r := range byPod.Rows {
		if r.HeldGPUHours > (elapsed+1)/3600 || r.BusyGPUHours > r.HeldGPUHours+1e-6 || r.IdleGPUHours > r.HeldGPUHours+1e-6 {
			t.Errorf("pod %v: held %.5f, busy %.5f, idle %.5f GPU-hours over a %.0f s run", r.Holder, r.HeldGPUHours, r.BusyGPUHours, r.IdleGPUHours, elapsed)
		}
	}

	// GPU 3's and GPU 4's processes have one owner: two GPUs, the whole run.
	var byUser reportJSON
	out = runReport(t, prom, append([]string{"--by=user", "--format=json"}, rng...)...)
	if err := json.Unmarshal([]byte(out), &byUser); err != nil {
		t.Fatalf("--by user: %v\n%s", err, out)
	}
	found := false
	for _, r := range byUser.Rows {
		if r.Holder["user"] == gpus[3].procs[0].owner {
			found = true
			near("GPU 3's and 4's user: held GPU-hours", r.HeldGPUHours, (2*elapsed-firstSample(gpus[3])-firstSample(gpus[4]))/3600, 2*tol/3600)
		}
	}
	if !found {
		t.Errorf("--by user: no row for %q: %s", gpus[3].procs[0].owner, out)
	}

	// The rules' resampled counters (evaluated every second here, as every
	// group of the e2e Prometheus) give the raw counters' figures.
	var resampled reportJSON
	out = runReport(t, prom, append([]string{"--by=pod", "--format=json", "--source=resampled"}, rng...)...)
	if err := json.Unmarshal([]byte(out), &resampled); err != nil {
		t.Fatalf("--source resampled: %v\n%s", err, out)
	}
	if i := row(gpus[0]); i >= 0 {
		found := false
		for _, r := range resampled.Rows {
			if r.Holder["k8s_pod_name"] == gpus[0].pod.name {
				found = true
				near("GPU 0's pod: held GPU-hours from the resampled counters", r.HeldGPUHours, byPod.Rows[i].HeldGPUHours, 2.0/3600)
				near("GPU 0's pod: idle GPU-hours from the resampled counters", r.IdleGPUHours, byPod.Rows[i].IdleGPUHours, 2.0/3600)
			}
		}
		if !found || resampled.Source != "resampled" {
			t.Errorf("--source resampled (%s): no row for GPU 0's pod: %s", resampled.Source, out)
		}
	}
	// No Slurm job in this scenario: the no-data line, not a failed query.
	if _, errOut, code := runReportCode(t, prom, append([]string{"--by=job"}, rng...)...); code != 1 || !strings.Contains(errOut, "no GPU was held by any job") {
		t.Errorf("--by job on a scenario without Slurm: exit %d, %q; want exit 1 and the no-data line", code, errOut)
	}

	// The terminal table and Markdown name the holders and the advice.
	table := runReport(t, prom, append([]string{"--by=namespace"}, rng...)...)
	md := runReport(t, prom, append([]string{"--by=pod", "--format=markdown"}, rng...)...)
	csv := runReport(t, prom, append([]string{"--by=pod", "--format=csv"}, rng...)...)
	for name, s := range map[string]string{"table": table, "markdown": md, "csv": csv} {
		if !strings.Contains(s, gpus[0].pod.namespace) || !strings.Contains(s, "input_bound") {
			t.Errorf("--format %s names no namespace or state:\n%s", name, s)
		}
	}
	if n := strings.Count(strings.TrimSpace(csv), "\n"); n != len(byPod.Rows) {
		t.Errorf("--format csv: %d rows; json has %d:\n%s", n, len(byPod.Rows), csv)
	}
	t.Logf("report by namespace:\n%s", table)

	// A pod's summary: its one GPU over its life, the states and their advice.
	pod := runReport(t, prom, "pod", gpus[0].pod.namespace+"/"+gpus[0].pod.name, "--from="+from.UTC().Format(time.RFC3339Nano), "--to="+to.UTC().Format(time.RFC3339Nano))
	for _, want := range []string{gpus[0].UUID, "idle", "underused", "What to do:", "runbook.md#idle"} {
		if !strings.Contains(pod, want) {
			t.Errorf("pod summary lacks %q:\n%s", want, pod)
		}
	}
	t.Logf("pod summary:\n%s", pod)
	for _, p := range procs {
		p.requireAlive(t)
	}
}

// TestReportSlurmJob runs `otelcol-nvml-report job` on the Slurm allocation
// scenario (slurm_test.go): job 4711 of alice holds GPU 0 at activity 0.6
// and GPU 1 with no process through its gpustat files. Its summary must read
// 2 GPUs, each held the seconds Prometheus has of it (GPUs x seconds / 3600
// GPU-hours), GPU 1 all idle with the idle advice, GPU 0 busy 0.6 of its
// time, and the same job in `--by job`.
func TestReportSlurmJob(t *testing.T) {
	t.Parallel()
	rules, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	run := startSlurmAllocation(t)
	prom := startPrometheus(t, run.col.promAddr, rules)
	procs := []*process{run.col.proc, run.be.proc, prom.proc}
	from := time.Now().Add(-time.Minute)
	// 40 s of the job, then a few scrapes and evaluations more.
	waitFor(t, 90*time.Second, "40 s of the job in Prometheus", func() bool {
		res := prom.tryQuery(fmt.Sprintf(`nvidia_gpu_held_time_seconds_total{hw_id=%q, slurm_job_id=%q}`, slurmAllocGPUs[1], slurmAllocJob))
		return len(res) == 1 && res[0].value(t) >= 40
	}, procs...)
	time.Sleep(3 * time.Second)
	to := time.Now().Add(-time.Second)
	// Each GPU's seconds in Prometheus: from its first sample of the job to
	// the report's end.
	seconds := map[string]float64{}
	for _, uuid := range slurmAllocGPUs[:2] {
		res := prom.query(t, fmt.Sprintf(`min(min_over_time(timestamp(nvidia_gpu_held_time_seconds_total{hw_id=%q, slurm_job_id=%q})[5m:1s]))`, uuid, slurmAllocJob))
		if len(res) != 1 {
			t.Fatalf("GPU %s: no held time of the job in Prometheus", uuid)
		}
		seconds[uuid] = float64(to.UnixNano())/1e9 - res[0].value(t)
	}
	const tol = 2.5 // seconds: as TestReport's
	near := func(what string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s = %.5f; the scenario says %.5f (± %.5f)", what, got, want, tol)
		}
	}
	rng := []string{"--from=" + from.UTC().Format(time.RFC3339Nano), "--to=" + to.UTC().Format(time.RFC3339Nano)}

	var job reportJSON
	out := runReport(t, prom, append([]string{"job", slurmAllocJob, "--format=json"}, rng...)...)
	if err := json.Unmarshal([]byte(out), &job); err != nil {
		t.Fatalf("job --format json: %v\n%s", err, out)
	}
	if len(job.Rows) != 2 {
		t.Fatalf("job %s: %d GPUs; want 2:\n%s", slurmAllocJob, len(job.Rows), out)
	}
	total := 0.0
	for _, r := range job.Rows {
		uuid, s := r.Holder["hw_id"], seconds[r.Holder["hw_id"]]
		total += r.HeldGPUHours
		near(uuid+": held GPU-hours", r.HeldGPUHours, s/3600, tol/3600)
		switch uuid {
		case slurmAllocGPUs[0]:
			near("GPU 0: busy GPU-hours (activity 0.6)", r.BusyGPUHours, slurmAllocActivity*s/3600, tol/3600)
			near("GPU 0: idle GPU-hours", r.IdleGPUHours, 0, tol/3600)
			if r.PeakMemory == nil || *r.PeakMemory != 20<<30 {
				t.Errorf("GPU 0: peak memory %v; want its process's 20 GiB", r.PeakMemory)
			}
		case slurmAllocGPUs[1]:
			near("GPU 1 (no process): idle GPU-hours, all of its held time", r.IdleGPUHours, r.HeldGPUHours, tol/3600)
			near("GPU 1 (no process): busy GPU-hours", r.BusyGPUHours, 0, 1e-9)
			if r.State != "idle" || r.States["idle"] < 0.9 || !strings.HasSuffix(r.RunbookURL, "runbook.md#idle") || !strings.Contains(r.Advice, "release it") {
				t.Errorf("GPU 1: state %q %v, advice %q, runbook %q; want idle nearly all its time, and the idle advice", r.State, r.States, r.Advice, r.RunbookURL)
			}
		default:
			t.Errorf("job %s on GPU %s, which it does not hold", slurmAllocJob, uuid)
		}
	}
	near("the job's held GPU-hours (2 GPUs x seconds / 3600)", total, (seconds[slurmAllocGPUs[0]]+seconds[slurmAllocGPUs[1]])/3600, 2*tol/3600)

	// The table a user reads at the end of the job.
	table := runReport(t, prom, append([]string{"job", slurmAllocJob}, rng...)...)
	for _, want := range []string{"Slurm job " + slurmAllocJob + " (user " + slurmAllocUser + "): 2 GPU(s)", slurmAllocGPUs[1], "idle 100%", "What to do:", "idle (" + slurmAllocGPUs[1] + ")", "runbook.md#idle"} {
		if !strings.Contains(table, want) {
			t.Errorf("the job's table lacks %q:\n%s", want, table)
		}
	}
	t.Logf("job summary:\n%s", table)

	// --by job: one row, the job and its user, the same hours.
	var byJob reportJSON
	out = runReport(t, prom, append([]string{"--by=job", "--format=json"}, rng...)...)
	if err := json.Unmarshal([]byte(out), &byJob); err != nil {
		t.Fatalf("--by job: %v\n%s", err, out)
	}
	if len(byJob.Rows) != 1 || byJob.Rows[0].Holder["slurm_job_id"] != slurmAllocJob || byJob.Rows[0].Holder["user"] != slurmAllocUser {
		t.Fatalf("--by job: %s; want job %s of %s alone", out, slurmAllocJob, slurmAllocUser)
	}
	r := byJob.Rows[0]
	near("--by job: held GPU-hours", r.HeldGPUHours, total, 2*tol/3600)
	near("--by job: idle GPU-hours (GPU 1's)", r.IdleGPUHours, seconds[slurmAllocGPUs[1]]/3600, 2*tol/3600)
	for _, p := range procs {
		p.requireAlive(t)
	}
}
