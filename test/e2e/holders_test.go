//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// The holders scenarios 5 and 6 of issue 24, through a real Prometheus
// with the shipped rules (deploy/prometheus/rules.yaml): their truths are
// the rules' figures, GPU-hours to within one collection interval per GPU.

// holdersWithin is one collection interval (1 s) and the points' own
// spacing, in seconds: how far a figure may be from its truth.
const holdersWithin = 1.5

// holderProcess is a GPU process of a shared server: its /proc entry (its
// cgroup file as the kernel writes it, its uid) on one GPU.
type holderProcess struct {
	pid    uint32
	uid    int
	cgroup string // the /proc/<pid>/cgroup file's content
	gpu    int    // its GPU's index in the scenario
}

// writeHolderProcs writes each process under a new proc root (cgroup,
// comm, status with its uid, stat) and the host's passwd under its init's
// root, and makes a cgroup root with no cgroup in it (the holders come
// from the processes' cgroup files); it returns both roots.
func writeHolderProcs(t *testing.T, procs []holderProcess, passwd string) (procRoot, cgroupRoot string) {
	t.Helper()
	procRoot, cgroupRoot = t.TempDir(), t.TempDir()
	write := func(p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(procRoot, "stat"), fmt.Sprintf("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 0\nctxt 0\nbtime %d\n"+
		"processes 1\nprocs_running 1\nprocs_blocked 0\nsoftirq 0\n", time.Now().Unix()-1000))
	write(filepath.Join(cgroupRoot, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	for _, p := range procs {
		dir := filepath.Join(procRoot, fmt.Sprint(p.pid))
		write(filepath.Join(dir, "cgroup"), p.cgroup)
		write(filepath.Join(dir, "comm"), "python3\n")
		write(filepath.Join(dir, "status"), fmt.Sprintf("Name:\tpython3\nUid:\t%[1]d\t%[1]d\t%[1]d\t%[1]d\nGid:\t%[1]d\t%[1]d\t%[1]d\t%[1]d\n", p.uid))
		write(filepath.Join(dir, "stat"), procStatLine(p.pid, "python3", 0, 1000))
	}
	write(filepath.Join(procRoot, "1", "root", "etc", "passwd"), passwd)
	return procRoot, cgroupRoot
}

// holderGPU is a simulated H200: busy (its utilization and GPM SM activity
// at sm) or idle (sm 0), with procs on it.
func holderGPU(uuid string, i int, sm float64, procs []Process) GPU {
	busy := 0.0
	if sm > 0 {
		busy = 1
	}
	return GPU{
		Name: "NVIDIA H200 (SIMULATED)", UUID: uuid, Serial: fmt.Sprintf("SIMULATED-HOLDERS-%s", uuid[len(uuid)-4:]),
		PCIBusID:     fmt.Sprintf("00000000:%02X:00.0", 0x19+i),
		Utilization:  &Utilization{GPU: &Duty{Busy: busy}, Memory: &Duty{Busy: busy / 2}},
		Memory:       &Memory{TotalBytes: 150754820096, ReservedBytes: 617086976, UsedBytes: 0},
		TemperatureC: 30, PowerW: 75 + 500*sm, PowerLimitW: 700, PState: 0,
		Processes: procs,
		GPM:       map[string]Signal{"SM_UTIL": 100 * sm, "SM_OCCUPANCY": 50 * sm, "DRAM_BW_UTIL": 20 * sm},
		MIG:       &MIG{Enabled: ptr(false), Profiles: h200Profiles},
	}
}

// sumAt runs an instant query at at and returns the sum of its series'
// values, and how many series it returned.
func (p *prometheus) sumAt(t *testing.T, q string, at time.Time) (float64, int) {
	t.Helper()
	data, err := p.get("/api/v1/query", url.Values{"query": {q}, "time": {fmt.Sprintf("%.3f", float64(at.UnixMilli())/1000)}})
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	var d struct {
		Result []promSeries `json:"result"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	sum := 0.0
	for _, s := range d.Result {
		sum += s.value(t)
	}
	return sum, len(d.Result)
}

// span is two instants of a Prometheus run, 10 s apart, from now on; it
// returns once the rules have been evaluated at the second.
type span struct {
	prom     *prometheus
	from, to time.Time
}

func newSpan(t *testing.T, prom *prometheus, procs ...*process) span {
	t.Helper()
	s := span{prom: prom, from: time.Now()}
	s.to = s.from.Add(10 * time.Second)
	waitFor(t, 20*time.Second, "the span's end, and the rules evaluated at it", func() bool {
		return time.Now().After(s.to.Add(2 * time.Second))
	}, append(procs, prom.proc)...)
	return s
}

// grew checks how much q (a counter in seconds, or a rule in hours times
// scale) grew over the span, against want seconds per second of it, to
// within one interval for each of the gpus it sums.
func (s span) grew(t *testing.T, what, q string, scale, want float64, gpus int) {
	t.Helper()
	a, na := s.prom.sumAt(t, q, s.from)
	b, nb := s.prom.sumAt(t, q, s.to)
	secs := s.to.Sub(s.from).Seconds()
	switch {
	case na == 0 || nb == 0:
		t.Errorf("%s: no series of %s (%d, %d)", what, q, na, nb)
	case math.Abs((b-a)*scale-want*secs) > holdersWithin*float64(gpus):
		t.Errorf("%s: %s grew %.2f s over %.0f s, want %.2f", what, q, (b-a)*scale, secs, want*secs)
	default:
		t.Logf("%s: %s grew %.2f s over %.0f s (want %.2f)", what, q, (b-a)*scale, secs, want*secs)
	}
}

// is checks q's value (its series summed) at the span's end, and that it
// has n series.
func (s span) is(t *testing.T, q string, n int, want, tol float64) {
	t.Helper()
	got, m := s.prom.sumAt(t, q, s.to)
	if m != n || math.Abs(got-want) > tol {
		t.Errorf("%s = %v (%d series), want %v ± %v (%d series)", q, got, m, want, tol, n)
	}
}

// The Slurm scenario's two nodes (Slurm runs each node in cgroup v1 or v2,
// never both on one: its cgroups documentation). Node a, cgroup v2, a
// shared server: GPU 0 runs alice's job 4711 (busy); GPU 1 a process of
// uid 64999, whom the host's passwd does not name, in an SSH session (no
// job, idle); GPU 2 alice's process in a cgroup that only looks like
// Slurm's (a malformed job id: no job, idle). Node b, cgroup v1: GPU 0
// runs alice's batch job 4720 (idle).
type slurmNode struct {
	name   string
	gpus   []string
	procs  []holderProcess
	busyOn int // the index of its busy GPU; -1: none
}

var slurmNodes = []slurmNode{
	{name: "a", busyOn: 0,
		gpus: []string{"GPU-e2eslurm-0000-4000-8000-0000000000a0", "GPU-e2eslurm-0000-4000-8000-0000000000a1", "GPU-e2eslurm-0000-4000-8000-0000000000a2"},
		procs: []holderProcess{
			{pid: 720001, uid: 2001, gpu: 0, cgroup: "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0\n"},
			{pid: 720002, uid: 64999, gpu: 1, cgroup: "0::/user.slice/user-64999.slice/session-7.scope\n"},
			{pid: 720003, uid: 2001, gpu: 2, cgroup: "0::/system.slice/slurmstepd.scope/job_47x1/step_0/user/task_0\n"},
		}},
	{name: "b", busyOn: -1,
		gpus: []string{"GPU-e2eslurm-0000-4000-8000-0000000000b0"},
		procs: []holderProcess{
			{pid: 720004, uid: 2001, gpu: 0, cgroup: "12:pids:/system.slice/slurmd.service\n" +
				"11:memory:/slurm/uid_2001/job_4720/step_batch/task_0\n" +
				"10:cpu,cpuacct:/slurm/uid_2001/job_4720/step_batch/task_0\n" +
				"9:devices:/slurm/uid_2001/job_4720/step_batch\n" +
				"7:freezer:/slurm/uid_2001/job_4720/step_batch\n" +
				"3:cpuset:/slurm/uid_2001/job_4720/step_batch\n" +
				"1:name=systemd:/system.slice/slurmd.service\n"},
		}},
}

// startSlurmNode starts node n's collector, with its proc root (the host's
// passwd naming alice only) and its simulated GPUs.
func startSlurmNode(t *testing.T, n slurmNode) *collector {
	t.Helper()
	procRoot, cgroupRoot := writeHolderProcs(t, n.procs, "root:x:0:0:root:/root:/bin/bash\nalice:x:2001:2001::/home/alice:/bin/bash\n")
	s := Scenario{Comment: "e2e: Slurm jobs and users, node " + n.name, DriverVersion: driverVersion}
	for i, uuid := range n.gpus {
		sm := 0.0
		if i == n.busyOn {
			sm = 0.9
		}
		var procs []Process
		for _, p := range n.procs {
			if p.gpu == i {
				procs = append(procs, Process{PID: p.pid, Name: "python3", UsedMemoryBytes: uint64(p.pid-720000) << 30, Type: "compute", SMPercent: 100 * sm})
			}
		}
		s.GPUs = append(s.GPUs, holderGPU(uuid, i, sm, procs))
	}
	return startCollector(t, "otelcol-nvml-"+n.name, s.write(t), nil, receiverSettings+fmt.Sprintf(`processes:
  enabled: true
  proc_root: %s
  cgroup_root: %s
`, procRoot, cgroupRoot))
}

// TestSlurmHolders is scenario 5: a Slurm job in cgroup v2 and one in
// cgroup v1, and two users on one server, one named by the host's passwd
// (seen through the proc root), one a uid with no name, kept as the uid.
func TestSlurmHolders(t *testing.T) {
	t.Parallel()
	rules, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a, b := startSlurmNode(t, slurmNodes[0]), startSlurmNode(t, slurmNodes[1])
	prom := startPrometheusScraping(t, a.promAddr, fmt.Sprintf(`  - job_name: otelcol-nvml-b
    static_configs:
      - targets: [%q]
`, b.promAddr), rules)
	// The span starts once every figure it reads has a series: the user
	// figures of the holders group read the waste group's records, which
	// may come an evaluation later than the jobs'.
	waitFor(t, 60*time.Second, "both jobs' and both users' figures in Prometheus", func() bool {
		return len(prom.tryQuery(`slurm_job:nvidia_gpu_held_gpus:5m`)) == 2 &&
			len(prom.tryQuery(`{__name__=~"slurm_job:nvidia_gpu_(held|busy|idle|active)_hours:1h"}`)) == 8 &&
			len(prom.tryQuery(`{__name__=~"user:nvidia_gpu_(held|busy|idle|active)_hours:1h"}`)) == 8
	}, a.proc, b.proc, prom.proc)
	sp := newSpan(t, prom, a.proc, b.proc)

	// Each GPU's holder, on its own series and its process's.
	gpuA, gpuB := slurmNodes[0].gpus, slurmNodes[1].gpus
	for _, want := range []struct{ gpu, job, owner string }{
		{gpuA[0], "4711", "alice"}, {gpuA[1], "", "64999"}, {gpuA[2], "", "alice"}, {gpuB[0], "4720", "alice"},
	} {
		gpu := fmt.Sprintf(`hw_id=%q, slurm_job_id=%q`, want.gpu, want.job)
		sp.is(t, `count(nvidia_gpu_held_time_seconds_total{`+gpu+`})`, 1, 1, 0)
		sp.is(t, fmt.Sprintf(`count(nvidia_gpu_process_held_time_seconds_total{%s, process_owner=%q})`, gpu, want.owner), 1, 1, 0)
		sp.is(t, fmt.Sprintf(`count(nvidia_gpu_process_held_time_seconds_total{hw_id=%q})`, want.gpu), 1, 1, 0)
	}

	// Held, busy, idle and active per job and per user, from the rules:
	// only node a's GPU 0 works.
	for _, c := range []struct {
		rules, sel             string // the rules' level, its series
		held, busy, idle, gpus float64
	}{
		{"slurm_job", `{slurm_job_id="4711", process_owner="alice"}`, 1, 1, 0, 1},
		{"slurm_job", `{slurm_job_id="4720", process_owner="alice"}`, 1, 0, 1, 1},
		{"user", `{process_owner="alice"}`, 3, 1, 2, 3},
		{"user", `{process_owner="64999"}`, 1, 0, 1, 1},
	} {
		for m, want := range map[string]float64{"held": c.held, "busy": c.busy, "idle": c.idle, "active": 0.9 * c.busy} {
			sp.grew(t, c.sel+" "+m, c.rules+":nvidia_gpu_"+m+"_hours:1h"+c.sel, 3600, want, int(c.gpus))
		}
		sp.is(t, c.rules+":nvidia_gpu_held_gpus:5m"+c.sel, 1, c.gpus, 0)
	}
	// Memory held now: each process's (its pid's last digits, in GiB).
	sp.is(t, `slurm_job:nvidia_gpu_process_memory_usage_bytes:sum{slurm_job_id="4711"}`, 1, 1<<30, 0)
	sp.is(t, `slurm_job:nvidia_gpu_process_memory_usage_bytes:sum{slurm_job_id="4720"}`, 1, 4<<30, 0)
	sp.is(t, `user:nvidia_gpu_process_memory_usage_bytes:sum{process_owner="alice"}`, 1, 8<<30, 0)
	sp.is(t, `user:nvidia_gpu_process_memory_usage_bytes:sum{process_owner="64999"}`, 1, 2<<30, 0)
	// Only two jobs: the malformed job id is no job.
	sp.is(t, `count(slurm_job:nvidia_gpu_held_hours:1h)`, 1, 2, 0)
	// The raw counters agree with the truth too: held every second.
	for i, gpu := range []string{gpuA[0], gpuA[1], gpuA[2], gpuB[0]} {
		idle := 1.0
		if i == 0 {
			idle = 0
		}
		sp.grew(t, gpu+" held", fmt.Sprintf(`nvidia_gpu_process_held_time_seconds_total{hw_id=%q}`, gpu), 1, 1, 1)
		sp.grew(t, gpu+" idle", fmt.Sprintf(`nvidia_gpu_process_idle_time_seconds_total{hw_id=%q}`, gpu), 1, idle, 1)
	}
}

// The quota scenario's node: node2, four GPUs, three of them allocated by
// DRA claims to pods of namespace lab, whose GPU quota is 4; only lab-0's
// GPU works (SM activity 0.8).
const (
	quotaNode     = "node2"
	quotaActiveSM = 0.8
)

func quotaGPU(i int) string { return fmt.Sprintf("GPU-e2equota-0000-4000-8000-00000000000%d", i) }

// kubeStateMetricsQuota serves kube-state-metrics' kube_resourcequota for
// namespace lab: a DRA device-class quota of 4 GPUs, 3 used, and a CPU
// quota that is not a GPU's; it returns the scrape_configs item.
func kubeStateMetricsQuota(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, "# TYPE kube_resourcequota gauge\n"+
			`kube_resourcequota{namespace="lab",resource="gpu.nvidia.com.deviceclass.resource.k8s.io/devices",resourcequota="gpus",type="hard"} 4`+"\n"+
			`kube_resourcequota{namespace="lab",resource="gpu.nvidia.com.deviceclass.resource.k8s.io/devices",resourcequota="gpus",type="used"} 3`+"\n"+
			`kube_resourcequota{namespace="lab",resource="count/resourceclaims.resource.k8s.io",resourcequota="gpus",type="hard"} 10`+"\n"+
			`kube_resourcequota{namespace="lab",resource="requests.cpu",resourcequota="cpu",type="hard"} 64`+"\n")
	}))
	t.Cleanup(srv.Close)
	return fmt.Sprintf(`  - job_name: kube-state-metrics
    scrape_interval: 1s
    static_configs:
      - targets: [%q]
`, strings.TrimPrefix(srv.URL, "http://"))
}

// quotaRun is scenario 6 while it runs: its collector, on node2 of the
// TestDRA kube-apiserver, and its Prometheus.
type quotaRun struct {
	col  *collector
	prom *prometheus
}

// startQuotaScenario creates node2's ResourceSlice in api and starts a
// collector reading it, beside TestDRA's, and a Prometheus with the rules
// that scrapes it and kube-state-metrics' quota.
func startQuotaScenario(t *testing.T, api *kubeAPI) *quotaRun {
	t.Helper()
	rules, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	node := quotaNode
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node2-gpus"},
		Spec: resourceapi.ResourceSliceSpec{Driver: draDriver, NodeName: &node, Pool: resourceapi.ResourcePool{Name: quotaNode, ResourceSliceCount: 1}}}
	for i := 0; i < 4; i++ {
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"uuid": {StringValue: ptr(quotaGPU(i))}}})
	}
	if _, err := api.resourceClient(t).ResourceSlices().Create(context.Background(), slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating node2's ResourceSlice: %v", err)
	}
	kubelet := &podresourcesv1.ListPodResourcesResponse{}
	s := Scenario{Comment: "e2e: a namespace's GPU quota, 3 of 4 held, 1 active", DriverVersion: driverVersion}
	for i := 0; i < 4; i++ {
		sm := 0.0
		if i == 0 {
			sm = quotaActiveSM
		}
		s.GPUs = append(s.GPUs, holderGPU(quotaGPU(i), i, sm, []Process{}))
		if i < 3 {
			pod := draPod("lab", fmt.Sprintf("lab-%d", i), fmt.Sprintf("lab-gpu-%d", i), fmt.Sprintf("gpu-%d", i), nil)
			pod.Containers[0].DynamicResources[0].ClaimResources[0].PoolName = quotaNode
			kubelet.PodResources = append(kubelet.PodResources, pod)
		}
	}
	col := startCollector(t, "otelcol-nvml-quota", s.write(t), nil,
		draSettings(servePodResources(t, kubelet), quotaNode, api.kubeconfig(t, "admin", adminToken)))
	return &quotaRun{col: col, prom: startPrometheusScraping(t, col.promAddr, kubeStateMetricsQuota(t), rules)}
}

// check is scenario 6's truth: quota 4, allocated 3, held 3, active 1,
// held over quota 0.75, and active GPU-hours over held ones one third of
// the active GPU's SM activity.
func (r *quotaRun) check(t *testing.T) {
	t.Helper()
	waitFor(t, 60*time.Second, "namespace lab's held GPUs in Prometheus", func() bool {
		res := r.prom.tryQuery(`namespace:nvidia_gpu_held_gpus:5m{k8s_namespace_name="lab"}`)
		return len(res) == 1 && res[0].Value[1] == "3"
	}, r.col.proc, r.prom.proc)
	sp := newSpan(t, r.prom, r.col.proc)
	lab := `{k8s_namespace_name="lab"}`
	sp.is(t, "namespace:nvidia_gpu_quota_gpus:hard"+lab, 1, 4, 0)
	sp.is(t, "namespace:nvidia_gpu_allocated_gpus:5m"+lab, 1, 3, 0)
	sp.is(t, "namespace:nvidia_gpu_held_gpus:5m"+lab, 1, 3, 0)
	sp.is(t, "namespace:nvidia_gpu_active_gpus:5m"+lab, 1, 1, 0)
	sp.is(t, "namespace:nvidia_gpu_quota_held:ratio"+lab, 1, 0.75, 1e-9)
	sp.is(t, "count(namespace:nvidia_gpu_quota_gpus:hard)", 1, 1, 0)
	sp.grew(t, "lab held", "namespace:nvidia_gpu_held_hours:1h"+lab, 3600, 3, 3)
	sp.grew(t, "lab active", "namespace:nvidia_gpu_active_hours:1h"+lab, 3600, quotaActiveSM, 1)
	sp.grew(t, "lab idle", "namespace:nvidia_gpu_idle_hours:1h"+lab, 3600, 2, 2)
	// Active over held: the ratio of the counters as Prometheus has them.
	active, _ := r.prom.sumAt(t, `sum(nvidia_gpu_active_time_seconds_total{k8s_namespace_name="lab"})`, sp.to)
	held, _ := r.prom.sumAt(t, `sum(nvidia_gpu_held_time_seconds_total{k8s_namespace_name="lab"})`, sp.to)
	if held == 0 {
		t.Fatal("lab's GPUs have no held time")
	}
	sp.is(t, "namespace:nvidia_gpu_efficiency:1h"+lab, 1, active/held, 0.02)
	sp.is(t, "namespace:nvidia_gpu_efficiency:1h"+lab, 1, quotaActiveSM/3, 0.03)
	// The free GPU: held by no one.
	sp.grew(t, "the free GPU held", fmt.Sprintf(`nvidia_gpu_held_time_seconds_total{hw_id=%q}`, quotaGPU(3)), 1, 0, 1)
}
