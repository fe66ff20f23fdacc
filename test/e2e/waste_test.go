//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"gopkg.in/yaml.v3"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// The waste accounting of issue 15, end to end: the scenario
// testdata/scenarios/waste.json (six simulated GPUs with known activity)
// and, under testdata/waste/, the /proc of their processes, the cgroups of
// their containers and the kubelet's allocation. The collector sends OTLP to
// a backend, where the GPU-time counters are checked against the scenario,
// and is scraped by a real Prometheus that loads deploy/prometheus/rules.yaml,
// where every recording rule must have data and every GPU holder its
// diagnosis.

const (
	wasteInterval = time.Second // the receiver's collection_interval
	wasteEnd      = 41.0        // scenario seconds of data: GPU 0's two 20 s phases and a scrape after them
	wasteIdleAt   = 20.0        // GPU 0 is idle before, at 50 % after
	wasteNode     = "waste-node"
	// wasteIdleThreshold is accounting::idle_threshold's default, which the
	// collector below keeps.
	wasteIdleThreshold = 0.05
)

// wasteStates are the diagnoses the scenario's holders must get at its end
// (gpu_holder:nvidia_gpu_diagnosis:5m), by GPU index, and why. GPU 1 has no
// holder, so no diagnosis.
var wasteStates = map[int]struct{ state, why string }{
	0: {"underused", "50 % activity in the last 20 s of its 40 s: 0.25 of its held time, CPU idle, memory at 7 %"},
	2: {"gpu_bound", "80 % SM activity (busy all the time)"},
	3: {"input_bound", "20 % activity, and its container at its 1-CPU limit"},
	4: {"input_bound", "20 % activity, no CPU limit, and its process at one core"},
	5: {"memory_pressure", "memory at 97 % of the total (30 % activity, which alone reads underused)"},
}

// wasteGrowth is the CPU, in cores, that the test keeps adding, by GPU
// index: to the cgroup cpu.stat of the container of the GPU's process, and
// to the utime of the process's /proc/<pid>/stat. Every other CPU figure of
// the fixtures stays where it is.
var wasteGrowth = map[int]struct{ container, process float64 }{
	3: {container: 1}, // the DataLoader's workers, in the container, beside the GPU process
	4: {container: 1, process: 1},
}

// wasteNoData are the recording rules of rules.yaml that cannot have data in
// this scenario, and why. Each must be a rule of the file, and have no data.
var wasteNoData = map[string]string{
	"gpu:nvidia_gpu_mig_parent:5m":                        wasteNoMIG,
	"gpu:nvidia_gpu_mig_parent:1h":                        wasteNoMIG,
	"gpu:nvidia_gpu_mig_parent:24h":                       wasteNoMIG,
	"gpu_slurm_job:nvidia_gpu_held_hours:1h":              wasteNoSlurm,
	"gpu_slurm_job:nvidia_gpu_busy_hours:1h":              wasteNoSlurm,
	"gpu_slurm_job:nvidia_gpu_idle_hours:1h":              wasteNoSlurm,
	"gpu_slurm_job:nvidia_gpu_active_hours:1h":            wasteNoSlurm,
	"slurm_job:nvidia_gpu_held_hours:1h":                  wasteNoSlurm,
	"slurm_job:nvidia_gpu_busy_hours:1h":                  wasteNoSlurm,
	"slurm_job:nvidia_gpu_idle_hours:1h":                  wasteNoSlurm,
	"slurm_job:nvidia_gpu_active_hours:1h":                wasteNoSlurm,
	"slurm_job:nvidia_gpu_held_gpus:5m":                   wasteNoSlurm,
	"gpu_slurm_job:nvidia_gpu_held_hours:24h":             wasteNoSlurm,
	"gpu_slurm_job:nvidia_gpu_busy_hours:24h":             wasteNoSlurm,
	"gpu_slurm_job:nvidia_gpu_idle_hours:24h":             wasteNoSlurm,
	"gpu_slurm_job:nvidia_gpu_active_hours:24h":           wasteNoSlurm,
	"slurm_job:nvidia_gpu_held_hours:24h":                 wasteNoSlurm,
	"slurm_job:nvidia_gpu_busy_hours:24h":                 wasteNoSlurm,
	"slurm_job:nvidia_gpu_idle_hours:24h":                 wasteNoSlurm,
	"slurm_job:nvidia_gpu_active_hours:24h":               wasteNoSlurm,
	"slurm_job:nvidia_gpu_idle_cost:24h":                  wasteNoSlurm,
	"slurm_job:nvidia_gpu_process_memory_usage_bytes:sum": wasteNoSlurm,
	"namespace:nvidia_gpu_quota_gpus:hard":                wasteNoQuota,
	"namespace:nvidia_gpu_quota_held:ratio":               wasteNoQuota,
}

const wasteNoSlurm = "a Slurm job; the waste scenario has none (TestDashboardAndRules has data for them)"

const wasteNoQuota = "kube-state-metrics' GPU quota; the waste scenario has no kube-state-metrics (TestDashboardAndRules has data for them)"

const wasteNoMIG = "the GPUs in MIG mode; no GPU of the scenario is (MIG devices' counters are the receiver's unit tests', the rules' are rules_test.yaml's)"

// wasteRecords are the recording rules the spec of issue 15 fixes the names
// of (the dashboard and other rules query them); each must be in rules.yaml.
func wasteRecords() []string {
	var out []string
	for _, r := range []string{"1h", "24h"} {
		for _, m := range []string{"held", "busy", "active", "idle"} {
			for _, by := range []string{"namespace_pod", "namespace", "node", "model"} {
				out = append(out, fmt.Sprintf("%s:nvidia_gpu_%s_hours:%s", by, m, r))
			}
			if m != "active" {
				out = append(out, fmt.Sprintf("user:nvidia_gpu_%s_hours:%s", m, r))
			}
		}
		for _, by := range []string{"namespace_pod", "namespace", "user"} {
			out = append(out, fmt.Sprintf("%s:nvidia_gpu_efficiency:%s", by, r))
		}
	}
	for _, by := range []string{"namespace_pod", "namespace", "user"} {
		out = append(out, by+":nvidia_gpu_idle_cost:24h")
	}
	return append(out, "nvidia_gpu_price_per_hour", "gpu_holder:nvidia_gpu_diagnosis:5m", "gpu_holder:nvidia_gpu_activity:5m",
		"gpu_holder:nvidia_gpu_cpu_of_limit:5m", "gpu_holder:nvidia_gpu_memory_headroom:5m")
}

var wasteDiagnosisStates = []string{"idle", "input_bound", "memory_pressure", "gpu_bound", "underused"}

// ---- the scenario and the fixtures ----------------------------------------------------

// wasteGPU is what the test reads of a GPU of waste.json.
type wasteGPU struct {
	UUID        string `json:"uuid"`
	Name        string `json:"name"`
	Utilization struct {
		GPU struct {
			Busy any `json:"busy"`
		} `json:"gpu"`
	} `json:"utilization"`
	Memory struct {
		TotalBytes uint64 `json:"total_bytes"`
		UsedBytes  any    `json:"used_bytes"`
	} `json:"memory"`
	GPM       map[string]any `json:"gpm"`
	Processes []struct {
		PID       int      `json:"pid"`
		SMPercent any      `json:"sm_percent"`
		From      float64  `json:"from"`
		Until     *float64 `json:"until"`
	} `json:"processes"`

	// From the fixtures, per process (in Processes' order).
	procs []wasteProc
	// The pod the kubelet allocated the GPU to, when exactly one was.
	pod *wastePod
}

type wasteProc struct {
	pid                 int
	containerID, podUID string
	owner               string // the user name of the uid in its status file, or the uid
	executable          string // the base name of its exe link
	statPath            string
	cgroupDir           string // its container's cgroup, under the copied cgroup root
}

type wastePod struct{ namespace, name, container string }

// signal converts a signal of the scenario's JSON (a number or steps) to the
// Signal of scenario_test.go.
func (wasteGPU) signal(t *testing.T, v any) Signal {
	t.Helper()
	switch s := v.(type) {
	case float64:
		return s
	case map[string]any:
		raw, _ := json.Marshal(s)
		var st Steps
		if err := json.Unmarshal(raw, &st); err != nil || len(st.Steps) == 0 || len(s) != 1 {
			t.Fatalf("waste.json: %v is not a steps signal", v)
		}
		return st
	}
	t.Fatalf("waste.json: the test reads only numbers and steps, not %v", v)
	return nil
}

// integral is ∫ f over scenario time [a, b], numerically.
func integral(a, b float64, f func(float64) float64) float64 {
	const dt = 0.005
	sum := 0.0
	for x := a; x < b; x += dt {
		sum += f(math.Min(x+dt/2, b)) * math.Min(dt, b-x)
	}
	return sum
}

// copyTree copies the fixture tree src (files, directories and symlinks)
// into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, to)
		case fi.IsDir():
			return os.MkdirAll(to, 0o755)
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, data, 0o644)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// replaceFile writes content to p through a rename, so that the collector
// never reads half a file.
func replaceFile(p, content string) error {
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

var (
	cgroupContainer = regexp.MustCompile(`cri-containerd-([0-9a-f]{64})\.scope`)
	cgroupPod       = regexp.MustCompile(`-pod([0-9a-f_]{36})\.slice`)
	statusUID       = regexp.MustCompile(`(?m)^Uid:\s+(\d+)`)
)

// wasteFixtures loads the scenario and copies the fixtures to temporary
// roots: the scenario's path, its GPUs (with their processes' fixtures) and
// the proc and cgroup roots.
func wasteFixtures(t *testing.T) (scenario string, gpus []*wasteGPU, procRoot, cgroupRoot string, kubelet *podresourcesv1.ListPodResourcesResponse) {
	t.Helper()
	scenario, err := filepath.Abs(filepath.Join("..", "..", "testdata", "scenarios", "waste.json"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(scenario)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		GPUs []*wasteGPU `json:"gpus"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.GPUs) != 6 {
		t.Fatalf("waste.json has %d GPUs; the test knows six", len(s.GPUs))
	}
	procRoot, cgroupRoot = t.TempDir(), t.TempDir()
	fixtures := filepath.Join("testdata", "waste")
	copyTree(t, filepath.Join(fixtures, "proc"), procRoot)
	copyTree(t, filepath.Join(fixtures, "cgroup"), cgroupRoot)

	kubelet = &podresourcesv1.ListPodResourcesResponse{}
	raw, err = os.ReadFile(filepath.Join(fixtures, "podresources.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, kubelet); err != nil {
		t.Fatalf("podresources.json: %v", err)
	}
	for _, g := range s.GPUs {
		var pods []wastePod
		for _, pr := range kubelet.PodResources {
			for _, c := range pr.Containers {
				for _, d := range c.Devices {
					for _, id := range d.DeviceIds {
						if id == g.UUID || strings.HasPrefix(id, g.UUID+"::") {
							pods = append(pods, wastePod{pr.Namespace, pr.Name, c.Name})
						}
					}
				}
			}
		}
		if len(pods) == 1 {
			g.pod = &pods[0]
		}
		for _, p := range g.Processes {
			wp := wasteProc{pid: p.PID, statPath: filepath.Join(procRoot, strconv.Itoa(p.PID), "stat")}
			cg, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(p.PID), "cgroup"))
			if err != nil {
				t.Fatalf("GPU %s, pid %d: no /proc fixture: %v", g.UUID, p.PID, err)
			}
			m, pm := cgroupContainer.FindSubmatch(cg), cgroupPod.FindSubmatch(cg)
			if m == nil || pm == nil {
				t.Fatalf("pid %d: cgroup %q names no containerd container of a pod", p.PID, cg)
			}
			wp.containerID, wp.podUID = string(m[1]), strings.ReplaceAll(string(pm[1]), "_", "-")
			wp.cgroupDir = filepath.Join(cgroupRoot, strings.TrimPrefix(strings.TrimSpace(string(cg)), "0::"))
			status, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(p.PID), "status"))
			if err != nil {
				t.Fatal(err)
			}
			um := statusUID.FindSubmatch(status)
			if um == nil {
				t.Fatalf("pid %d: no Uid line in its status", p.PID)
			}
			wp.owner = string(um[1])
			if u, err := user.LookupId(wp.owner); err == nil && u.Username != "" {
				wp.owner = u.Username // as the receiver names it
			}
			exe, err := os.Readlink(filepath.Join(procRoot, strconv.Itoa(p.PID), "exe"))
			if err != nil {
				t.Fatal(err)
			}
			wp.executable = filepath.Base(exe)
			g.procs = append(g.procs, wp)
		}
	}
	return scenario, s.GPUs, procRoot, cgroupRoot, kubelet
}

// growCPU keeps adding wasteGrowth's CPU to the fixtures, from now until the
// test ends, every 100 ms.
func growCPU(t *testing.T, gpus []*wasteGPU) {
	t.Helper()
	type grower struct {
		path  string
		write func(el float64) string
	}
	var gs []grower
	for i, g := range gpus {
		gr, ok := wasteGrowth[i]
		if !ok {
			continue
		}
		if len(g.procs) != 1 {
			t.Fatalf("GPU %d: wasteGrowth needs exactly one process", i)
		}
		p := g.procs[0]
		if gr.container > 0 {
			statPath := filepath.Join(p.cgroupDir, "cpu.stat")
			base := readCPUStatUsage(t, statPath)
			rate := gr.container
			gs = append(gs, grower{statPath, func(el float64) string {
				u := base + int64(el*rate*1e6)
				return fmt.Sprintf("usage_usec %d\nuser_usec %d\nsystem_usec %d\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n", u, u*9/10, u-u*9/10)
			}})
		}
		if gr.process > 0 {
			raw, err := os.ReadFile(p.statPath)
			if err != nil {
				t.Fatal(err)
			}
			line := strings.TrimSpace(string(raw))
			r := strings.LastIndex(line, ")")
			fields := strings.Fields(line[r+1:])
			// After the comm: state is field 3 of the line, utime field 14.
			const utime = 14 - 3
			base, err := strconv.ParseInt(fields[utime], 10, 64)
			if err != nil {
				t.Fatalf("%s: utime %q: %v", p.statPath, fields[utime], err)
			}
			rate := gr.process
			gs = append(gs, grower{p.statPath, func(el float64) string {
				f := append([]string(nil), fields...)
				f[utime] = strconv.FormatInt(base+int64(el*rate*100), 10) // USER_HZ = 100
				return line[:r+1] + " " + strings.Join(f, " ") + "\n"
			}})
		}
	}
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			el := time.Since(start).Seconds()
			for _, g := range gs {
				if err := replaceFile(g.path, g.write(el)); err != nil {
					t.Errorf("rewriting %s: %v", g.path, err)
					return
				}
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
}

func readCPUStatUsage(t *testing.T, p string) int64 {
	t.Helper()
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^usage_usec (\d+)$`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("%s: no usage_usec", p)
	}
	v, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return v
}

// podResources serves a fixed allocation over the kubelet's PodResources v1.
type podResources struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	resp *podresourcesv1.ListPodResourcesResponse
}

func (k podResources) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return k.resp, nil
}

// servePodResources serves resp on a kubelet socket of its own and returns
// the socket's path.
func servePodResources(t *testing.T, resp *podresourcesv1.ListPodResourcesResponse) string {
	t.Helper()
	return serveKubelet(t, podResources{resp: resp})
}

// serveKubelet serves lister as the kubelet's PodResources API on a socket
// of its own and returns the socket's path.
func serveKubelet(t *testing.T, lister podresourcesv1.PodResourcesListerServer) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kubelet") // short: a unix socket path has 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "kubelet.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, lister)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return sock
}

// ---- the test ----------------------------------------------------------------------------

// TestWaste runs the waste scenario: GPU 0 held by one pod, idle for 20 s,
// then at 50 % for 20 s; GPU 1 free; GPU 2 time-sliced between two pods at
// 30 and 70 % of its busy time; GPU 3 and GPU 4 at 20 % with the CPU at the
// container's limit, or at one core in a process without a limit; GPU 5's
// memory climbing to 97 %.
func TestWaste(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	scenario, gpus, procRoot, cgroupRoot, kubelet := wasteFixtures(t)
	rules, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bin := testutil.AbsFlag(t, "otelcol", *otelcolPath)
	sock := servePodResources(t, kubelet)
	growCPU(t, gpus)
	be := startBackend(t, bin)
	promAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	prom := startPrometheus(t, promAddr, rules)

	cfg := wasteCollectorConfig(t, procRoot, cgroupRoot, sock, promAddr, be.endpoint)
	col := startProcess(t, "otelcol-nvml", []string{scenarioEnv + "=" + scenario, "K8S_NODE_NAME=" + wasteNode},
		bin, "--config="+writeFile(t, t.TempDir(), "collector.yaml", cfg))
	c := &collector{proc: col, promAddr: promAddr}
	t0 := c.scenarioStart(t, 30*time.Second)
	now := func() float64 { return time.Since(t0).Seconds() }
	procs := []*process{col, be.proc, prom.proc}

	// GPU 0 in its idle phase: before t = 20 s, once Prometheus has samples
	// (its first scrape comes about 5 s after its start), its holder must
	// read idle.
	idle := map[string]string{"hw_id": gpus[0].UUID, "state": "idle"}
	waitFor(t, time.Duration((wasteIdleAt+5)*float64(time.Second)), "GPU 0's holder diagnosed idle in its idle phase", func() bool {
		if len(prom.tryQuery(`gpu_holder:nvidia_gpu_diagnosis:5m`+selector(idle)+` == 1`)) > 0 {
			t.Logf("GPU 0 diagnosed idle at t = %.1f s", now())
			return true
		}
		if now() > wasteIdleAt-0.5 {
			res := prom.tryQuery(`gpu_holder:nvidia_gpu_diagnosis:5m{hw_id="` + gpus[0].UUID + `"}`)
			t.Errorf("GPU 0 was not diagnosed idle by t = %.1f s (idle until %.0f s); its diagnosis: %s", now(), wasteIdleAt, seriesString(res))
			return true
		}
		return false
	}, procs...)

	var pts []point
	waitFor(t, time.Duration((wasteEnd+20)*float64(time.Second)), fmt.Sprintf("data points up to t = %.0f s", wasteEnd), func() bool {
		pts = be.points(t)
		last := times(filter(pts, gpus[0].UUID, "nvidia.gpu.held.time", nil), t0)
		return len(last) > 0 && last[len(last)-1] >= wasteEnd
	}, procs...)
	// One more Prometheus scrape and rule evaluation of the last state.
	time.Sleep(2 * time.Second)
	evalAt := time.Now().Add(-500 * time.Millisecond)
	run := &wasteRun{gpus: gpus, t0: t0, pts: pts, prom: prom, rules: rules, at: evalAt}

	t.Run("counters", run.counters)
	t.Run("process CPU", run.processCPU)
	t.Run("every recording rule has data", run.recordingRules)
	t.Run("hours match the counters", run.hours)
	t.Run("diagnosis", run.diagnosis)
	for _, p := range procs {
		p.requireAlive(t)
	}
	t.Logf("wall time %.1f s", time.Since(begin).Seconds())
}

type wasteRun struct {
	gpus  []*wasteGPU
	t0    time.Time
	pts   []point
	prom  *prometheus
	rules string
	at    time.Time // the instant of every Prometheus query of the checks
}

// stream is one counter's points, in time order, of one resource.
type stream []point

// streams splits a GPU's (or a process's) points of one metric by
// resource: a new owner is a new stream.
func streams(pts []point) []stream {
	byRes := map[string]stream{}
	var keys []string
	for _, p := range pts {
		k := fmt.Sprint(p.Resource, p.Attrs)
		if _, ok := byRes[k]; !ok {
			keys = append(keys, k)
		}
		byRes[k] = append(byRes[k], p)
	}
	out := make([]stream, 0, len(keys))
	for _, k := range keys {
		s := byRes[k]
		sort.Slice(s, func(i, j int) bool { return s[i].Time.Before(s[j].Time) })
		out = append(out, s)
	}
	return out
}

// gpuPoints are the points on the GPU's own resource (no process.pid) of one
// metric; procPoints those on the resource of the process pid.
func (r *wasteRun) gpuPoints(g *wasteGPU, metric string) []point {
	var out []point
	for _, p := range filter(r.pts, g.UUID, metric, nil) {
		if _, ok := p.Resource["process.pid"]; !ok {
			out = append(out, p)
		}
	}
	return out
}

func (r *wasteRun) procPoints(g *wasteGPU, pid int, metric string, attrs map[string]any) []point {
	var out []point
	for _, p := range filter(r.pts, g.UUID, metric, attrs) {
		if p.Resource["process.pid"] == int64(pid) {
			out = append(out, p)
		}
	}
	return out
}

// one returns the single stream of pts, failing when the counter restarted
// (a new owner) or has no points.
func (r *wasteRun) one(t *testing.T, what string, pts []point) (stream, bool) {
	t.Helper()
	ss := streams(pts)
	switch {
	case len(ss) == 0:
		t.Errorf("%s: no points", what)
		return nil, false
	case len(ss) > 1:
		var firsts []string
		for _, s := range ss {
			firsts = append(firsts, fmt.Sprintf("from t=%.1f: %v", rel(s[0], r.t0), s[0].Resource))
		}
		t.Errorf("%s: %d streams; the owner stayed the same all the run, so one was due:\n%s", what, len(ss), strings.Join(firsts, "\n"))
		return nil, false
	}
	s := ss[0]
	for i := 1; i < len(s); i++ {
		if s[i].Value < s[i-1].Value {
			t.Errorf("%s: goes down at t=%.2f: %v -> %v", what, rel(s[i], r.t0), s[i-1].Value, s[i].Value)
		}
	}
	return s, len(s) >= 2
}

// checkIncrease checks a counter's increase from its first to its last point
// against the scenario's truth over the same scenario times, to within one
// collection interval of the truth's rate (at most max).
func (r *wasteRun) checkIncrease(t *testing.T, what string, s stream, max float64, truth func(float64) float64) (got, want float64) {
	t.Helper()
	a, b := rel(s[0], r.t0), rel(s[len(s)-1], r.t0)
	got = s[len(s)-1].Value - s[0].Value
	want = integral(a, b, truth)
	tol := wasteInterval.Seconds()*max + 0.05
	if math.Abs(got-want) > tol {
		t.Errorf("%s: increase %.3f s over t=[%.1f, %.1f], want %.3f ± %.2f (the scenario's)", what, got, a, b, want, tol)
	}
	// Nothing is counted before the first scrape: the counter's value is
	// at most the time since t = 0 at the truth's rate.
	if first := s[0].Value; first > integral(0, a, truth)+tol {
		t.Errorf("%s: %.3f s at its first point (t=%.1f), more than the %.3f s since t = 0", what, first, a, integral(0, a, truth))
	}
	t.Logf("%s: %.3f s over t=[%.1f, %.1f] (want %.3f)", what, got, a, b, want)
	return got, want
}

// truths of a GPU over scenario time: held, busy, active (GPM SM_UTIL), idle.
func (r *wasteRun) truths(t *testing.T, g *wasteGPU) (held, busy, active, idle func(float64) float64) {
	busySig := g.signal(t, g.Utilization.GPU.Busy)
	smSig := g.signal(t, g.GPM["SM_UTIL"])
	held = func(x float64) float64 {
		for _, p := range g.Processes {
			if x >= p.From && (p.Until == nil || x < *p.Until) {
				return 1
			}
		}
		if g.pod != nil {
			return 1
		}
		return 0
	}
	busy = func(x float64) float64 { return signalAt(busySig, x) }
	active = func(x float64) float64 { return signalAt(smSig, x) / 100 }
	idle = func(x float64) float64 {
		if held(x) == 1 && active(x) < wasteIdleThreshold {
			return 1
		}
		return 0
	}
	return held, busy, active, idle
}

// counters: the GPU-time counters in the OTLP backend against the scenario.
func (r *wasteRun) counters(t *testing.T) {
	for i, g := range r.gpus {
		held, busy, active, idle := r.truths(t, g)
		if integral(0, wasteEnd, held) == 0 {
			// GPU 1: free. Its held and idle time are absent or 0.
			for _, m := range []string{"nvidia.gpu.held.time", "nvidia.gpu.idle.time"} {
				for _, p := range r.gpuPoints(g, m) {
					if p.Value != 0 {
						t.Errorf("GPU %d (free): %s = %v at t=%.1f, want 0 or absent", i, m, p.Value, rel(p, r.t0))
						break
					}
				}
			}
			if s, ok := r.one(t, fmt.Sprintf("GPU %d busy", i), r.gpuPoints(g, "nvidia.gpu.busy.time")); ok {
				r.checkIncrease(t, fmt.Sprintf("GPU %d busy", i), s, 1, busy)
			}
			continue
		}
		gpu := map[string]stream{}
		for _, c := range []struct {
			metric string
			truth  func(float64) float64
		}{
			{"nvidia.gpu.held.time", held}, {"nvidia.gpu.busy.time", busy},
			{"nvidia.gpu.active.time", active}, {"nvidia.gpu.idle.time", idle},
		} {
			what := fmt.Sprintf("GPU %d %s", i, c.metric)
			s, ok := r.one(t, what, r.gpuPoints(g, c.metric))
			if !ok {
				continue
			}
			r.checkIncrease(t, what, s, 1, c.truth)
			gpu[c.metric] = s
			if g.pod != nil {
				// The owner is on the GPU's resource.
				res := s[0].Resource
				if res["k8s.pod.name"] != g.pod.name || res["k8s.namespace.name"] != g.pod.namespace || res["container.id"] != g.procs[0].containerID {
					t.Errorf("%s: resource %v, want the pod %s/%s, container %s", what, res, g.pod.namespace, g.pod.name, g.procs[0].containerID)
				}
			}
		}

		// The processes: held, their shares of busy and of idle.
		var idleSum float64
		sms := make([]Signal, len(g.Processes))
		for j, p := range g.Processes {
			sms[j] = g.signal(t, p.SMPercent)
		}
		// share is process j's part of the GPU's busy time at x: its
		// sm_percent over the processes' (evenly where they all say 0).
		share := func(j int, x float64) float64 {
			sum := 0.0
			for _, sm := range sms {
				sum += signalAt(sm, x)
			}
			if sum == 0 {
				return 1 / float64(len(sms))
			}
			return signalAt(sms[j], x) / sum
		}
		var lastBusy []point
		for j, p := range g.Processes {
			wp := g.procs[j]
			pheld := func(x float64) float64 {
				if x >= p.From && (p.Until == nil || x < *p.Until) {
					return 1
				}
				return 0
			}
			what := fmt.Sprintf("GPU %d pid %d", i, p.PID)
			if s, ok := r.one(t, what+" held", r.procPoints(g, p.PID, "nvidia.gpu.process.held.time", nil)); ok {
				r.checkIncrease(t, what+" held", s, 1, pheld)
				res := s[0].Resource
				if res["container.id"] != wp.containerID || res["process.owner"] != wp.owner || res["process.executable.name"] != wp.executable {
					t.Errorf("%s: resource %v, want container.id %s, process.owner %s, process.executable.name %s", what, res, wp.containerID, wp.owner, wp.executable)
				}
				if g.pod != nil && (res["k8s.pod.name"] != g.pod.name || res["k8s.namespace.name"] != g.pod.namespace) {
					t.Errorf("%s: resource %v, want the pod %s/%s", what, res, g.pod.namespace, g.pod.name)
				}
			}
			// Its share of the GPU's busy time: the GPU's busy rate times its
			// sm_percent over the processes' (the scenario's shares sum to 100
			// where the GPU is busy).
			if s, ok := r.one(t, what+" busy", r.procPoints(g, p.PID, "nvidia.gpu.process.busy.time", nil)); ok {
				r.checkIncrease(t, what+" busy", s, 1, func(x float64) float64 { return busy(x) * share(j, x) })
				lastBusy = append(lastBusy, s[len(s)-1])
			}
			if s, ok := r.one(t, what+" idle", r.procPoints(g, p.PID, "nvidia.gpu.process.idle.time", nil)); ok {
				n := float64(len(g.Processes))
				r.checkIncrease(t, what+" idle", s, 1/n, func(x float64) float64 { return idle(x) / n })
				idleSum += s[len(s)-1].Value - s[0].Value
			}
		}
		// The processes' parts sum to the GPU's, over the same scrapes.
		if gb, ok := gpu["nvidia.gpu.busy.time"]; ok && len(lastBusy) == len(g.Processes) {
			sum := 0.0
			for _, p := range lastBusy {
				sum += p.Value
			}
			gpuAt := valueAt(gb, lastBusy[0].Time)
			if math.Abs(sum-gpuAt) > wasteInterval.Seconds() {
				t.Errorf("GPU %d: its processes' busy times sum to %.3f s, the GPU's busy time is %.3f s", i, sum, gpuAt)
			}
			t.Logf("GPU %d: processes' busy %.3f s, GPU's %.3f s", i, sum, gpuAt)
		}
		if gi, ok := gpu["nvidia.gpu.idle.time"]; ok {
			d := gi[len(gi)-1].Value - gi[0].Value
			if math.Abs(idleSum-d) > wasteInterval.Seconds() {
				t.Errorf("GPU %d: its processes' idle times increase by %.3f s together, the GPU's by %.3f s", i, idleSum, d)
			}
		}
	}

	// GPU 2 splits 30/70 between its two pods.
	g := r.gpus[2]
	var d []float64
	for _, p := range g.Processes {
		s := streams(r.procPoints(g, p.PID, "nvidia.gpu.process.busy.time", nil))
		if len(s) != 1 || len(s[0]) < 2 {
			t.Fatalf("GPU 2 pid %d: no busy time stream", p.PID)
		}
		d = append(d, s[0][len(s[0])-1].Value-s[0][0].Value)
	}
	want := signalAt(g.signal(t, g.Processes[0].SMPercent), wasteEnd) /
		(signalAt(g.signal(t, g.Processes[0].SMPercent), wasteEnd) + signalAt(g.signal(t, g.Processes[1].SMPercent), wasteEnd))
	if got := d[0] / (d[0] + d[1]); math.Abs(got-want) > 0.02 {
		t.Errorf("GPU 2: the first pod has %.3f of the busy time, want %.2f", got, want)
	}
}

// valueAt is the value of s's last point at or before at.
func valueAt(s stream, at time.Time) float64 {
	v := math.NaN()
	for _, p := range s {
		if !p.Time.After(at) {
			v = p.Value
		}
	}
	return v
}

// processCPU: process.cpu.time from /proc/<pid>/stat (and container.cpu.time
// from the cgroups) grow at the rates the test writes them at.
func (r *wasteRun) processCPU(t *testing.T) {
	for i, g := range r.gpus {
		for _, p := range g.Processes {
			gr := wasteGrowth[i]
			for mode, rate := range map[string]float64{"user": gr.process, "system": 0} {
				what := fmt.Sprintf("GPU %d pid %d process.cpu.time %s", i, p.PID, mode)
				s, ok := r.one(t, what, r.procPoints(g, p.PID, "process.cpu.time", map[string]any{"cpu.mode": mode}))
				if !ok {
					continue
				}
				// The test's clock started before t = 0: compare rates.
				a, b := rel(s[0], r.t0), rel(s[len(s)-1], r.t0)
				got := s[len(s)-1].Value - s[0].Value
				if want := rate * (b - a); math.Abs(got-want) > wasteInterval.Seconds()*math.Max(rate, 0.05) {
					t.Errorf("%s: +%.2f s over %.1f s, want %.2f (%g cores)", what, got, b-a, want, rate)
				} else {
					t.Logf("%s: +%.2f s over %.1f s (%g cores)", what, got, b-a, rate)
				}
			}
		}
		if gr, ok := wasteGrowth[i]; ok && gr.container > 0 {
			var pts []point
			for _, p := range filter(r.pts, "", "container.cpu.time", nil) {
				if p.Resource["container.id"] == g.procs[0].containerID {
					pts = append(pts, p)
				}
			}
			what := fmt.Sprintf("GPU %d container.cpu.time", i)
			if s, ok := r.one(t, what, pts); ok {
				a, b := rel(s[0], r.t0), rel(s[len(s)-1], r.t0)
				got := s[len(s)-1].Value - s[0].Value
				if want := gr.container * (b - a); math.Abs(got-want) > wasteInterval.Seconds()*gr.container {
					t.Errorf("%s: +%.2f s over %.1f s, want %.2f", what, got, b-a, want)
				}
			}
		}
	}
}

// ---- Prometheus --------------------------------------------------------------------------

// queryAt runs an instant query at r.at.
func (r *wasteRun) queryAt(t *testing.T, q string) []promSeries {
	t.Helper()
	data, err := r.prom.get("/api/v1/query", url.Values{"query": {q}, "time": {fmt.Sprintf("%.3f", float64(r.at.UnixMilli())/1000)}})
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	var d struct {
		Result []promSeries `json:"result"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	return d.Result
}

func selector(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func seriesString(res []promSeries) string {
	var out []string
	for _, s := range res {
		out = append(out, fmt.Sprintf("%v = %v", s.Metric, s.Value[1]))
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "(none)"
	}
	return "\n  " + strings.Join(out, "\n  ")
}

// recordNames are the recording rules' names in the rules file, in order.
func recordNames(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	seen := map[string]bool{}
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Record != "" && !seen[r.Record] {
				seen[r.Record] = true
				out = append(out, r.Record)
			}
		}
	}
	return out
}

// recordingRules: every recording rule of rules.yaml has data, but those
// wasteNoData lists (which must have none); the names the spec fixes are
// all there.
func (r *wasteRun) recordingRules(t *testing.T) {
	names := recordNames(t, r.rules)
	inFile := map[string]bool{}
	for _, n := range names {
		inFile[n] = true
	}
	for _, n := range wasteRecords() {
		if !inFile[n] {
			t.Errorf("rules.yaml has no recording rule %s (a name the spec of issue 15 fixes)", n)
		}
	}
	for n, why := range wasteNoData {
		if !inFile[n] {
			t.Errorf("wasteNoData lists %s (%s), which rules.yaml does not record", n, why)
		}
	}
	// The rules Prometheus loaded have all been evaluated, without error.
	for _, g := range r.prom.rules(t) {
		for _, rule := range g.Rules {
			if rule.Health != "ok" || rule.LastError != "" {
				t.Errorf("rule %s: health %q, error %q", rule.Name, rule.Health, rule.LastError)
			}
		}
	}
	withData := 0
	for _, n := range names {
		res := r.queryAt(t, n)
		why, noData := wasteNoData[n]
		switch {
		case noData && len(res) > 0:
			t.Errorf("%s has data (%s), though wasteNoData says it cannot: %s", n, seriesString(res), why)
		case !noData && len(res) == 0:
			t.Errorf("recording rule %s has no data", n)
		case !noData:
			withData++
			for _, s := range res {
				if v := s.value(t); math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					t.Errorf("%s%v = %v", n, s.Metric, v)
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("rules.yaml has no recording rules")
	}
	t.Logf("%d recording rules, %d with data, %d without (wasteNoData)", len(names), withData, len(wasteNoData))
}

// hours: a few GPU-hour rules against the raw counters in the same
// Prometheus, where the truth is plain: a pod alone on its GPU, a user with
// two GPUs, a model with one.
func (r *wasteRun) hours(t *testing.T) {
	// check compares a GPU-hours rule with the increase of the counters it
	// sums as Prometheus saw them: from each series' first sample on (the
	// time before Prometheus's first scrape of a new series is not in its
	// data), to within what increase() extrapolates, up to a scrape
	// interval at each end of each series.
	check := func(record, counters string) {
		t.Helper()
		rec := r.queryAt(t, record)
		raw := r.queryAt(t, fmt.Sprintf("%s - min_over_time(%s[1h])", counters, counters))
		if len(rec) == 0 || len(raw) == 0 {
			t.Errorf("%s: %d series; %s: %d series", record, len(rec), counters, len(raw))
			return
		}
		got, want := 0.0, 0.0
		for _, s := range rec {
			got += s.value(t)
		}
		for _, s := range raw {
			want += s.value(t) / 3600
		}
		if tol := 2 * wasteInterval.Seconds() * float64(len(raw)) / 3600; math.Abs(got-want) > tol {
			t.Errorf("%s = %.6f GPU-hours; the counters say %.6f (%s, %d series)", record, got, want, counters, len(raw))
		}
	}
	sum := func(q string) (float64, bool) {
		res := r.queryAt(t, q)
		v := 0.0
		for _, s := range res {
			v += s.value(t)
		}
		return v, len(res) > 0
	}
	for _, g := range r.gpus {
		if g.pod == nil {
			continue
		}
		pod := map[string]string{"k8s_namespace_name": g.pod.namespace, "k8s_pod_name": g.pod.name}
		for _, m := range []string{"held", "busy", "active", "idle"} {
			check(fmt.Sprintf("namespace_pod:nvidia_gpu_%s_hours:1h%s", m, selector(pod)),
				fmt.Sprintf(`nvidia_gpu_%s_time_seconds_total{hw_id=%q}`, m, g.UUID))
		}
	}
	// The user of GPU 3 and GPU 4 holds two GPUs.
	owner := r.gpus[3].procs[0].owner
	if r.gpus[4].procs[0].owner != owner {
		t.Fatal("the scenario gives GPU 3 and GPU 4 one user")
	}
	check(fmt.Sprintf(`user:nvidia_gpu_held_hours:1h{process_owner=%q}`, owner),
		fmt.Sprintf(`nvidia_gpu_process_held_time_seconds_total{process_owner=%q}`, owner))
	model := r.queryAt(t, fmt.Sprintf(`nvidia_gpu_held_time_seconds_total{hw_id=%q}`, r.gpus[4].UUID))
	if len(model) == 1 {
		check(fmt.Sprintf(`model:nvidia_gpu_held_hours:1h{hw_model=%q}`, model[0].Metric["hw_model"]),
			fmt.Sprintf(`nvidia_gpu_held_time_seconds_total{hw_model=%q}`, model[0].Metric["hw_model"]))
	} else {
		t.Errorf("GPU 4's held time in Prometheus: %s", seriesString(model))
	}
	check(fmt.Sprintf(`node:nvidia_gpu_held_hours:1h{k8s_node_name=%q}`, wasteNode), `nvidia_gpu_held_time_seconds_total`)
	// Efficiency of GPU 0's pod: active / held.
	if p := r.gpus[0].pod; p != nil {
		sel := selector(map[string]string{"k8s_namespace_name": p.namespace, "k8s_pod_name": p.name})
		eff, ok := sum("namespace_pod:nvidia_gpu_efficiency:1h" + sel)
		seen := func(metric string) float64 { // the counter's increase as Prometheus saw it
			c := fmt.Sprintf(`%s{hw_id=%q}`, metric, r.gpus[0].UUID)
			v, _ := sum(fmt.Sprintf("%s - min_over_time(%s[1h])", c, c))
			return v
		}
		a, h := seen("nvidia_gpu_active_time_seconds_total"), seen("nvidia_gpu_held_time_seconds_total")
		if !ok || h == 0 || math.Abs(eff-a/h) > 0.05 {
			t.Errorf("namespace_pod:nvidia_gpu_efficiency:1h%s = %v (%v), the counters say %.3f", sel, eff, ok, a/h)
		}
	}
}

// diagnosis: one state per holder, each 0 but one, and the state the
// scenario says.
func (r *wasteRun) diagnosis(t *testing.T) {
	res := r.queryAt(t, "gpu_holder:nvidia_gpu_diagnosis:5m")
	holders := map[string][]promSeries{}
	for _, s := range res {
		labels := map[string]string{}
		for k, v := range s.Metric {
			if k != "state" && k != "__name__" {
				labels[k] = v
			}
		}
		k := selector(labels)
		holders[k] = append(holders[k], s)
	}
	state := map[string]string{} // holder -> its state
	for h, ss := range holders {
		var on []string
		states := map[string]bool{}
		for _, s := range ss {
			states[s.Metric["state"]] = true
			switch v := s.value(t); v {
			case 1:
				on = append(on, s.Metric["state"])
			case 0:
			default:
				t.Errorf("holder %s: state %s = %v, want 0 or 1", h, s.Metric["state"], v)
			}
		}
		for _, st := range wasteDiagnosisStates {
			if !states[st] {
				t.Errorf("holder %s has no series for state %s", h, st)
			}
		}
		if len(ss) != len(wasteDiagnosisStates) || len(on) != 1 {
			t.Errorf("holder %s: %d series, states at 1: %v; want one series per state and exactly one at 1", h, len(ss), on)
			continue
		}
		state[h] = on[0]
	}
	detail := func(uuid string) string {
		var out []string
		for _, rec := range []string{"gpu_holder:nvidia_gpu_activity:5m", "gpu_holder:nvidia_gpu_cpu_of_limit:5m", "gpu_holder:nvidia_gpu_memory_headroom:5m"} {
			out = append(out, rec+seriesString(r.queryAt(t, fmt.Sprintf(`%s{hw_id=%q}`, rec, uuid))))
		}
		return strings.Join(out, "\n")
	}
	for i, g := range r.gpus {
		var mine []string
		for h := range holders {
			if strings.Contains(h, fmt.Sprintf("hw_id=%q", g.UUID)) {
				mine = append(mine, h)
			}
		}
		want, held := wasteStates[i]
		switch {
		case !held:
			if len(mine) > 0 {
				t.Errorf("GPU %d holds nothing, and has a diagnosis: %v", i, mine)
			}
			continue
		case len(mine) == 0:
			t.Errorf("GPU %d: no holder in gpu_holder:nvidia_gpu_diagnosis:5m", i)
			continue
		case g.pod != nil && len(mine) != 1:
			t.Errorf("GPU %d, held by one pod: %d holders %v", i, len(mine), mine)
		}
		for _, h := range mine {
			if g.pod != nil && !strings.Contains(h, fmt.Sprintf("k8s_pod_name=%q", g.pod.name)) {
				t.Errorf("GPU %d: holder %s, want the pod %s/%s", i, h, g.pod.namespace, g.pod.name)
			}
			if got, ok := state[h]; ok && got != want.state {
				t.Errorf("GPU %d, holder %s: %s, want %s (%s)\n%s", i, h, got, want.state, want.why, detail(g.UUID))
			} else if ok {
				t.Logf("GPU %d, holder %s: %s", i, h, got)
			}
		}
		// The table's columns have data for every holder.
		for _, rec := range []string{"gpu_holder:nvidia_gpu_activity:5m", "gpu_holder:nvidia_gpu_memory_headroom:5m"} {
			if len(r.queryAt(t, fmt.Sprintf(`%s{hw_id=%q}`, rec, g.UUID))) == 0 {
				t.Errorf("GPU %d: %s has no data", i, rec)
			}
		}
	}
	if _, ok := wasteGrowth[3]; ok {
		if len(r.queryAt(t, fmt.Sprintf(`gpu_holder:nvidia_gpu_cpu_of_limit:5m{hw_id=%q}`, r.gpus[3].UUID))) == 0 {
			t.Errorf("GPU 3 (a container at its CPU limit): gpu_holder:nvidia_gpu_cpu_of_limit:5m has no data")
		}
	}
}

// wasteCollectorConfig is the collector's config in the waste scenario's
// tests: the simulated NVML every wasteInterval, its processes, cgroups and
// kubelet, the node's name, the Prometheus exporter on promAddr and, where
// otlpEndpoint is set, OTLP to that backend too.
func wasteCollectorConfig(t *testing.T, procRoot, cgroupRoot, sock, promAddr, otlpEndpoint string) string {
	t.Helper()
	otlp, exporters := "", "[prometheus]"
	if otlpEndpoint != "" {
		otlp = fmt.Sprintf("  otlp_grpc:\n    endpoint: %s\n    tls:\n      insecure: true\n", otlpEndpoint)
		exporters = "[otlp_grpc, prometheus]"
	}
	return fmt.Sprintf(`receivers:
  nvml:
    library_path: %s
    collection_interval: %s
    initial_delay: 500ms
    processes:
      enabled: true
      proc_root: %s
      cgroup_root: %s
    kubernetes:
      enabled: true
      pod_resources_socket: %s
      refresh_interval: 1s
processors:
  resource:
    attributes:
      - {key: k8s.node.name, value: "${env:K8S_NODE_NAME}", action: insert}
exporters:
%s  prometheus:
    endpoint: %s
    resource_constant_labels:
      included: ["*"]
service:
  pipelines:
    metrics:
      receivers: [nvml]
      processors: [resource]
      exporters: %s
  telemetry:
    metrics:
      level: none
`, testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath), wasteInterval, procRoot, cgroupRoot, sock, otlp, promAddr, exporters)
}
