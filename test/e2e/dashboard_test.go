//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// The GPU-holding containers of the dashboard scenario: a pod's container
// per GPU, each with a process on its GPU (its /proc entry, a cgroup) and a
// kubelet allocation. One pod per state of the waste diagnosis
// (deploy/prometheus/rules.yaml), so that every row of the Waste panels
// has data and the table has each state.
type dashboardPod struct {
	namespace, pod, container string
	podUID, containerID       string
	pid                       uint32
	uid                       int // the process's owner
	gpu                       string
	busy                      float64 // the GPU's utilization (general)
	smActivity                float64 // its GPM SM activity: the diagnosis's activity
	memoryUsed                float64 // of the GPU's total memory
	cpuCores                  float64 // the rate its cgroup's usage grows at
	limitCores                float64 // 0: no CPU limit (cpu.max "max")
	processCores              float64 // the rate its process's utime grows at
	state                     string  // what the diagnosis must say
}

var dashboardPods = []dashboardPod{
	// At its CPU limit with the GPU at 40 %: input-bound.
	{namespace: "ml", pod: "trainer-0", container: "trainer", podUID: "5f0c7a1e-2b3c-4d5e-8f90-a1b2c3d4e5f6",
		containerID: "aa11bb22cc33dd44ee55ff6600112233445566778899aabbccddeeff00112233", pid: 710001, uid: 1000,
		gpu: "GPU-da5b0a2d-0000-4000-8000-000000000000", busy: 0.9, smActivity: 0.4, memoryUsed: 0.4,
		cpuCores: 2, limitCores: 2, processCores: 1, state: "input_bound"},
	// Little CPU, the GPU at 40 %: underused.
	{namespace: "ml", pod: "infer-0", container: "server", podUID: "6a1d8b2f-3c4d-4e5f-9a01-b2c3d4e5f6a7",
		containerID: "bb22cc33dd44ee55ff6600112233445566778899aabbccddeeff0011223344aa", pid: 710002, uid: 1000,
		gpu: "GPU-da5b0a2d-0000-4000-8000-000000000001", busy: 0.3, smActivity: 0.4, memoryUsed: 0.3,
		cpuCores: 0.25, limitCores: 4, processCores: 0.2, state: "underused"},
	// A notebook holding its GPU and doing nothing: idle.
	{namespace: "research", pod: "notebook-0", container: "jupyter", podUID: "7b2e9c3a-4d5e-4f6a-8b12-c3d4e5f6a7b8",
		containerID: "cc33dd44ee55ff6600112233445566778899aabbccddeeff0011223344aabbcc", pid: 710003, uid: 4242,
		gpu: "GPU-da5b0a2d-0000-4000-8000-000000000002", busy: 0, smActivity: 0, memoryUsed: 0.2,
		cpuCores: 0.02, limitCores: 1, processCores: 0.01, state: "idle"},
	// SMs at 85 %, no CPU limit (its process's CPU instead): GPU-bound.
	{namespace: "vision", pod: "render-0", container: "render", podUID: "8c3fad4b-5e6f-4a7b-9c23-d4e5f6a7b8c9",
		containerID: "dd44ee55ff6600112233445566778899aabbccddeeff0011223344aabbccdd00", pid: 710004, uid: 0,
		gpu: "GPU-da5b0a2d-0000-4000-8000-000000000003", busy: 1, smActivity: 0.85, memoryUsed: 0.5,
		cpuCores: 0.4, processCores: 0.3, state: "gpu_bound"},
	// Its GPU's memory 98 % used: memory pressure, whatever its activity.
	{namespace: "ml", pod: "finetune-0", container: "finetune", podUID: "9d4abe5c-6f7a-4b8c-8d34-e5f6a7b8c9d0",
		containerID: "ee55ff6600112233445566778899aabbccddeeff0011223344aabbccddee0011", pid: 710005, uid: 1000,
		gpu: "GPU-da5b0a2d-0000-4000-8000-000000000004", busy: 0.6, smActivity: 0.4, memoryUsed: 0.98,
		cpuCores: 0.5, limitCores: 2, processCores: 0.4, state: "memory_pressure"},
}

// slurmJob is the dashboard scenario's Slurm job: a process on a GPU of its
// own, outside Kubernetes, in a slurmstepd cgroup (v2), owned by a user
// the host's passwd (seen through the proc root) names.
var slurmJob = struct {
	id, user, gpu, cgroup string
	pid                   uint32
	uid                   int
}{
	id: "4242", user: "alice", gpu: "GPU-da5b0a2d-0000-4000-8000-000000000005", pid: 710006, uid: 2001,
	cgroup: "/system.slice/e2e-node_slurmstepd.scope/job_4242/step_0/user/task_0",
}

// kubeStateMetricsScrape serves the GPU quota of kube-state-metrics
// (kube_resourcequota) for the fixture's namespaces and returns the
// scrape_configs item that scrapes it every second.
func kubeStateMetricsScrape(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, "# TYPE kube_resourcequota gauge\n")
		for _, ns := range []string{"ml", "research", "vision"} {
			for typ, v := range map[string]int{"hard": 4, "used": 1} {
				fmt.Fprintf(w, "kube_resourcequota{namespace=%q,resource=\"requests.nvidia.com/gpu\",resourcequota=\"gpu\",type=%q} %d\n", ns, typ, v)
			}
		}
	}))
	t.Cleanup(srv.Close)
	return fmt.Sprintf(`  - job_name: kube-state-metrics
    scrape_interval: 1s
    static_configs:
      - targets: [%q]
`, strings.TrimPrefix(srv.URL, "http://"))
}

// owner is the process.owner the collector reports for a uid: the user
// name where this machine's user database has one, else the uid.
func (p dashboardPod) owner() string {
	if u, err := user.LookupId(fmt.Sprint(p.uid)); err == nil && u.Username != "" {
		return u.Username
	}
	return fmt.Sprint(p.uid)
}

// gpmWithSM is gpm0 with the SM activity (and the tensor activity under
// it) set to sm.
func gpmWithSM(sm float64) map[string]Signal {
	g := map[string]Signal{}
	for k, v := range gpm0 {
		g[k] = v
	}
	g["SM_UTIL"] = 100 * sm
	g["ANY_TENSOR_UTIL"] = 100 * sm * 0.75
	g["HMMA_TENSOR_UTIL"] = 100 * sm * 0.75
	return g
}

func dashboardScenario() Scenario {
	s := Scenario{Comment: "e2e: every dashboard panel has data", DriverVersion: driverVersion, Sampling: &Sampling{Hz: 6, Buffer: 120}}
	const total = 150754820096
	for i, p := range dashboardPods {
		g := GPU{
			Name: "NVIDIA H200 (SIMULATED)", UUID: p.gpu, Serial: fmt.Sprintf("SIMULATED-DASH-%d", i),
			PCIBusID:    fmt.Sprintf("00000000:%02X:00.0", 0x19+i),
			Utilization: &Utilization{GPU: &Duty{Busy: p.busy, PeriodS: 2.0 / 3}, Memory: &Duty{Busy: 0.4 * p.busy, PeriodS: 1.0 / 3}},
			// Constant: a trend would read as memory filling up, which is
			// only finetune-0's state.
			Memory:        &Memory{TotalBytes: total, ReservedBytes: 617086976, UsedBytes: p.memoryUsed * total},
			TemperatureC:  55 + 5*i,
			PowerW:        Sine{Mean: 150 + 400*p.busy, Amplitude: 100 * p.busy, PeriodS: 10},
			PowerLimitW:   700,
			EnergyOffsetJ: 1e6,
			ClocksMHz:     &Clocks{SM: 1980, Memory: 3201, Graphics: 1980, Video: 1755},
			PState:        0,
			GPM:           gpmWithSM(p.smActivity),
			Processes: []Process{{PID: p.pid, Name: "python3", UsedMemoryBytes: 40 << 30, Type: "compute",
				SMPercent: 100 * p.busy, MemoryPercent: 40 * p.busy}},
			ECCErrors:          map[string]Signal{"corrected": steps(0, 0, 3, 4), "uncorrected": 0},
			RemappedRows:       map[string]Signal{"correctable": 1, "uncorrectable": 0, "pending": 0, "failure": 0},
			ClocksEventReasons: clockEventBits["sw_power_cap"],
			Violation:          map[string]Signal{"power": 0.25, "thermal": 0, "sync_boost": 0, "board_limit": 0, "low_utilization": 0, "reliability": 0},
			PCIe:               map[string]Signal{"link_generation": 5, "link_width": 16, "replays": 0},
			Events:             []Event{{At: 1, XID: 13}},
		}
		s.GPUs = append(s.GPUs, g)
	}
	// The Slurm job's GPU: busy, as a GPU-bound job's.
	slurm := s.GPUs[3]
	slurm.UUID, slurm.Serial, slurm.PCIBusID = slurmJob.gpu, "SIMULATED-DASH-SLURM", "00000000:1F:00.0"
	slurm.Processes = []Process{{PID: slurmJob.pid, Name: "python3", UsedMemoryBytes: 40 << 30, Type: "compute", SMPercent: 100, MemoryPercent: 40}}
	s.GPUs = append(s.GPUs, slurm)
	return s
}

// dashboardKubelet serves the pods' GPU allocation over PodResources v1.
type dashboardKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
}

func (dashboardKubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for _, p := range dashboardPods {
		resp.PodResources = append(resp.PodResources, &podresourcesv1.PodResources{
			Name: p.pod, Namespace: p.namespace,
			Containers: []*podresourcesv1.ContainerResources{{
				Name:    p.container,
				Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{p.gpu}}},
			}},
		})
	}
	return resp, nil
}

// procStatLine is a /proc/<pid>/stat line with every field the kernel
// writes; utime (field 14) in clock ticks (USER_HZ = 100).
func procStatLine(pid uint32, comm string, utimeTicks, startTicks int64) string {
	f := make([]string, 50)
	for i := range f {
		f[i] = "0"
	}
	f[10] = fmt.Sprint(utimeTicks) // utime, the 11th field after the state
	f[18] = fmt.Sprint(startTicks)
	return fmt.Sprintf("%d (%s) S %s\n", pid, comm, strings.Join(f, " "))
}

// cgroupFixture writes each pod's process under a proc root (cgroup, comm,
// status with its uid, stat) and its container's cgroup v2 files under a
// cgroup root, and keeps each container's CPU usage and each process's
// utime growing at their rates until the test ends.
func cgroupFixture(t *testing.T) (procRoot, cgroupRoot string) {
	t.Helper()
	procRoot, cgroupRoot = t.TempDir(), t.TempDir()
	write := func(p, content string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil { // the collector never reads half a file
			t.Fatal(err)
		}
	}
	// Booted 1000 s ago; each process started 10 s after boot.
	const startTicks = 1000
	write(filepath.Join(procRoot, "stat"), fmt.Sprintf("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 0\nctxt 0\nbtime %d\n"+
		"processes 1\nprocs_running 1\nprocs_blocked 0\nsoftirq 0\n", time.Now().Unix()-1000))
	write(filepath.Join(cgroupRoot, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	dirs := make([]string, len(dashboardPods))
	for i, p := range dashboardPods {
		rel := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(p.podUID, "-", "_") +
			".slice/cri-containerd-" + p.containerID + ".scope"
		proc := filepath.Join(procRoot, fmt.Sprint(p.pid))
		write(filepath.Join(proc, "cgroup"), "0::"+rel+"\n")
		write(filepath.Join(proc, "comm"), "python3\n")
		write(filepath.Join(proc, "status"), fmt.Sprintf("Name:\tpython3\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\n",
			p.uid, p.uid, p.uid, p.uid, p.uid, p.uid, p.uid, p.uid))
		write(filepath.Join(proc, "stat"), procStatLine(p.pid, "python3", 0, startTicks))
		dirs[i] = filepath.Join(cgroupRoot, rel)
		limit := "max 100000\n"
		if p.limitCores > 0 {
			limit = fmt.Sprintf("%d 100000\n", int(p.limitCores*100000))
		}
		write(filepath.Join(dirs[i], "cpu.max"), limit)
		write(filepath.Join(dirs[i], "cpu.stat"), "usage_usec 0\n")
	}
	slurmProc := filepath.Join(procRoot, fmt.Sprint(slurmJob.pid))
	write(filepath.Join(slurmProc, "cgroup"), "0::"+slurmJob.cgroup+"\n")
	write(filepath.Join(slurmProc, "comm"), "python3\n")
	write(filepath.Join(slurmProc, "status"), fmt.Sprintf("Name:\tpython3\nUid:\t%[1]d\t%[1]d\t%[1]d\t%[1]d\nGid:\t%[1]d\t%[1]d\t%[1]d\t%[1]d\n", slurmJob.uid))
	write(filepath.Join(slurmProc, "stat"), procStatLine(slurmJob.pid, "python3", 0, startTicks))
	write(filepath.Join(cgroupRoot, slurmJob.cgroup, "cpu.max"), "max 100000\n")
	write(filepath.Join(cgroupRoot, slurmJob.cgroup, "cpu.stat"), "usage_usec 0\n")
	write(filepath.Join(procRoot, "1", "root", "etc", "passwd"), fmt.Sprintf("%s:x:%d:%d::/home/%[1]s:/bin/bash\n", slurmJob.user, slurmJob.uid, slurmJob.uid))
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			el := time.Since(start).Seconds()
			for i, p := range dashboardPods {
				write(filepath.Join(dirs[i], "cpu.stat"), fmt.Sprintf("usage_usec %d\nuser_usec 0\nsystem_usec 0\n", int64(el*p.cpuCores*1e6)))
				write(filepath.Join(procRoot, fmt.Sprint(p.pid), "stat"), procStatLine(p.pid, "python3", int64(el*p.processCores*100), startTicks))
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
	return procRoot, cgroupRoot
}

// grafanaDashboard is the part of the dashboard JSON the test reads.
type grafanaDashboard struct {
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name     string          `json:"name"`
			Type     string          `json:"type"`
			Query    json.RawMessage `json:"query"`
			AllValue string          `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
}

// Grafana's built-in variables, as the e2e's short history needs them.
var builtins = map[string]string{"$__rate_interval": "10s", "$__interval": "2s", "$__range": "1m"}

// substitute replaces every $variable with its match-all (not
// label_replace's $1) (and Grafana's
// built-ins with short windows); a variable left over fails.
func substitute(t *testing.T, expr string, allValues map[string]string) string {
	t.Helper()
	for k, v := range builtins {
		expr = strings.ReplaceAll(expr, k, v)
	}
	expr = regexp.MustCompile(`\$\{?([A-Za-z_]\w*)\}?`).ReplaceAllStringFunc(expr, func(m string) string {
		name := strings.Trim(m, "${}")
		v, ok := allValues[name]
		if !ok {
			t.Errorf("%q uses $%s, which the dashboard does not define", expr, name)
		}
		return v
	})
	return expr
}

// allValues maps each query variable to its match-all, as the panels get it.
func (d *grafanaDashboard) allValues() map[string]string {
	all := map[string]string{"datasource": "prometheus"}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			all[v.Name] = v.AllValue
		}
	}
	return all
}

// variableAnswer is what Prometheus answers one query variable.
type variableAnswer struct {
	name, selector, label string
	values                []string
}

// variableValues asks Prometheus each query variable's
// label_values(selector, label), the other variables at their match-all; a
// variable of another form fails the test.
func variableValues(t *testing.T, prom *prometheus, dash *grafanaDashboard, allValues map[string]string) []variableAnswer {
	t.Helper()
	var answers []variableAnswer
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: query %s: %v", v.Name, v.Query, err)
		}
		m := regexp.MustCompile(`^label_values\((.+), (\w+)\)$`).FindStringSubmatch(substitute(t, q.Query, allValues))
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, q.Query)
			continue
		}
		a := variableAnswer{name: v.Name, selector: m[1], label: m[2], values: prom.labelValues(t, m[2], m[1])}
		t.Logf("variable %s: %v", a.name, a.values)
		answers = append(answers, a)
	}
	return answers
}

// checkPanelQueries requires data from every panel query, each variable at
// its match-all; where names the setting in the message. It fails when the
// dashboard has fewer than 20 queries.
func checkPanelQueries(t *testing.T, prom *prometheus, dash *grafanaDashboard, allValues map[string]string, where string) {
	t.Helper()
	queries := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			queries++
			expr := substitute(t, target.Expr, allValues)
			res, err := prom.queryErr(expr)
			switch {
			case err != nil:
				t.Errorf("panel %q, query %s: %s: %v", p.Title, target.RefID, expr, err)
			case len(res) == 0:
				t.Errorf("panel %q, query %s returns no data %s: %s", p.Title, target.RefID, where, expr)
			}
		}
	}
	if queries < 20 {
		t.Fatalf("only %d panel queries found", queries)
	}
	t.Logf("%d panel queries %s", queries, where)
}

// TestDashboardAndRules runs every panel query of the committed dashboard
// against a real Prometheus that scrapes otelcol-nvml on simulated GPUs,
// with each variable set to its match-all, and requires data from each.
// The alert rules are loaded into the same Prometheus; each must evaluate.
func TestDashboardAndRules(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "otelcol-nvml.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash grafanaDashboard
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs(filepath.Join("..", "..", "deploy", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	procRoot, cgroupRoot := cgroupFixture(t)
	sock := serveKubelet(t, dashboardKubelet{})
	scenario := dashboardScenario().write(t)
	promAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	cfg := fmt.Sprintf(`receivers:
  nvml:
    library_path: %s
    collection_interval: 1s
    processes:
      enabled: true
      proc_root: %s
      cgroup_root: %s
    kubernetes:
      enabled: true
      pod_resources_socket: %s
      refresh_interval: 1s
  host_metrics:
    collection_interval: 1s
    scrapers:
      cpu:
processors:
  resource:
    attributes:
      - {key: k8s.node.name, value: "${env:K8S_NODE_NAME}", action: insert}
exporters:
  prometheus:
    endpoint: %s
    resource_constant_labels:
      included: ["*"]
service:
  pipelines:
    metrics:
      receivers: [nvml, host_metrics]
      processors: [resource]
      exporters: [prometheus]
  telemetry:
    metrics:
      level: none
`, testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath), procRoot, cgroupRoot, sock, promAddr)
	col := startProcess(t, "otelcol-nvml", []string{scenarioEnv + "=" + scenario, "K8S_NODE_NAME=e2e-node"},
		testutil.AbsFlag(t, "otelcol", *otelcolPath), "--config="+writeFile(t, t.TempDir(), "collector.yaml", cfg))
	prom := startPrometheusScraping(t, promAddr, kubeStateMetricsScrape(t), rules)

	// Enough history for the rate windows ($__rate_interval = 10s).
	waitFor(t, 60*time.Second, "GPU and container series in Prometheus", func() bool {
		return len(prom.tryQuery(`hw_gpu_utilization_ratio{k8s_pod_name="trainer-0"}`)) > 0 &&
			len(prom.tryQuery(`rate(container_cpu_time_seconds_total[10s])`)) == len(dashboardPods)
	}, col, prom.proc)
	time.Sleep(12 * time.Second)

	allValues := dash.allValues()

	t.Run("variables", func(t *testing.T) {
		answers := variableValues(t, prom, &dash, allValues)
		for _, a := range answers {
			if len(a.values) == 0 {
				t.Errorf("variable %s: label_values(%s, %s) has no value", a.name, a.selector, a.label)
			}
		}
		n := len(answers)
		for _, want := range []string{"node", "gpu", "pod"} {
			if _, ok := allValues[want]; !ok {
				t.Errorf("the dashboard has no %s variable", want)
			}
		}
		if n == 0 {
			t.Fatal("no query variables")
		}
	})

	t.Run("every panel query returns data", func(t *testing.T) {
		checkPanelQueries(t, prom, &dash, allValues, "on the simulated GPUs")
	})

	t.Run("input-bound or GPU-bound reads right", func(t *testing.T) {
		for _, p := range dashboardPods {
			res := prom.query(t, fmt.Sprintf(`rate(container_cpu_time_seconds_total{k8s_pod_name=%q, k8s_container_name=%q, container_id=%q, k8s_node_name="e2e-node"}[10s])`,
				p.pod, p.container, p.containerID))
			if len(res) != 1 {
				t.Fatalf("%s: %d container CPU series", p.pod, len(res))
			}
			if got := res[0].value(t); got < p.cpuCores*0.8 || got > p.cpuCores*1.2 {
				t.Errorf("%s: CPU rate %.3f cores, want about %.2f", p.pod, got, p.cpuCores)
			}
			lim := prom.query(t, fmt.Sprintf(`nvidia_gpu_container_cpu_limit{container_id=%q}`, p.containerID))
			switch {
			case p.limitCores == 0 && len(lim) != 0:
				t.Errorf("%s: CPU limit %v, want none (cpu.max is max)", p.pod, lim)
			case p.limitCores != 0 && (len(lim) != 1 || lim[0].value(t) != p.limitCores):
				t.Errorf("%s: CPU limit %v, want %v", p.pod, lim, p.limitCores)
			}
		}
	})

	t.Run("the waste rules read right", func(t *testing.T) {
		// One diagnosis per GPU holder (the pods and the Slurm job), each
		// pod in its own state: the table of the Waste row.
		var diag []promSeries
		waitFor(t, 30*time.Second, "a diagnosis for every GPU holder", func() bool {
			diag = prom.tryQuery(`gpu_holder:nvidia_gpu_diagnosis:5m == 1`)
			return len(diag) == len(dashboardPods)+1
		}, prom.proc)
		states := map[string]string{}
		for _, d := range diag {
			states[d.Metric["k8s_pod_name"]] = d.Metric["state"]
		}
		for _, p := range dashboardPods {
			if states[p.pod] != p.state {
				t.Errorf("%s: diagnosis %q, want %q", p.pod, states[p.pod], p.state)
			}
			for _, rule := range []string{"gpu_holder:nvidia_gpu_diagnosis:5m", "gpu_holder:nvidia_gpu_activity:5m",
				"gpu_holder:nvidia_gpu_cpu_of_limit:5m", "gpu_holder:nvidia_gpu_memory_headroom:5m"} {
				sel := fmt.Sprintf(`%s{hw_id=%q, k8s_node_name="e2e-node", k8s_namespace_name=%q, k8s_pod_name=%q, container_id=%q}`,
					rule, p.gpu, p.namespace, p.pod, p.containerID)
				if len(prom.tryQuery(sel)) == 0 {
					t.Errorf("%s: no %s with the holder's labels: %s", p.pod, rule, sel)
				}
			}
			near := func(what, q string, want, tol float64) {
				t.Helper()
				res := prom.tryQuery(q)
				if len(res) != 1 {
					t.Errorf("%s: %s: %d series of %s, want 1", p.pod, what, len(res), q)
					return
				}
				got := res[0].value(t)
				if got < want-tol || got > want+tol {
					t.Errorf("%s: %s %.3f, want %.2f ± %.2f (%s)", p.pod, what, got, want, tol, q)
				}
				t.Logf("%s: %s %.3f (want %.2f)", p.pod, what, got, want)
			}
			near("activity", fmt.Sprintf(`gpu_holder:nvidia_gpu_activity:5m{k8s_pod_name=%q}`, p.pod), p.smActivity, 0.05)
			near("memory headroom", fmt.Sprintf(`gpu_holder:nvidia_gpu_memory_headroom:5m{k8s_pod_name=%q}`, p.pod), 1-p.memoryUsed, 0.02)
			cpu := p.processCores // no limit: the busiest GPU process's cores
			if p.limitCores > 0 {
				cpu = p.cpuCores / p.limitCores
			}
			near("CPU of limit", fmt.Sprintf(`gpu_holder:nvidia_gpu_cpu_of_limit:5m{k8s_pod_name=%q}`, p.pod), cpu, 0.15*cpu+0.02)
			near("efficiency", fmt.Sprintf(`namespace_pod:nvidia_gpu_efficiency:1h{k8s_namespace_name=%q, k8s_pod_name=%q}`, p.namespace, p.pod), p.smActivity, 0.05)
		}

		// Idle GPU-hours and their cost: the idle notebook's namespace and
		// user only.
		idleNamespaces, idleUsers := map[string]bool{}, map[string]bool{}
		for _, p := range dashboardPods {
			if p.state == "idle" {
				idleNamespaces[p.namespace], idleUsers[p.owner()] = true, true
			}
		}
		for _, c := range []struct{ rule, label string }{
			{"namespace:nvidia_gpu_idle_hours:24h", "k8s_namespace_name"}, {"user:nvidia_gpu_idle_hours:24h", "process_owner"},
			{"namespace:nvidia_gpu_idle_cost:24h", "k8s_namespace_name"}, {"user:nvidia_gpu_idle_cost:24h", "process_owner"},
		} {
			want := idleNamespaces
			if c.label == "process_owner" {
				want = idleUsers
			}
			got := map[string]bool{}
			for _, r := range prom.tryQuery(c.rule + ` > 0`) {
				got[r.Metric[c.label]] = true
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s > 0 for %s %v, want %v", c.rule, c.label, got, want)
			}
		}
	})

	t.Run("every alert rule evaluates", func(t *testing.T) {
		var groups []promRuleGroup
		waitFor(t, 30*time.Second, "every rule evaluated once", func() bool {
			groups = prom.rules(t)
			for _, g := range groups {
				for _, r := range g.Rules {
					if r.LastEvaluation.IsZero() || r.LastEvaluation.Year() < 2000 {
						return false
					}
				}
			}
			return len(groups) > 0
		}, prom.proc)
		// Every name a rule reads must be one the collector emits (or a
		// label it sets): a rule on a name nobody emits would never fire.
		names := map[string]bool{}
		for _, api := range []string{"/api/v1/label/__name__/values", "/api/v1/labels"} {
			data, err := prom.get(api, url.Values{})
			if err != nil {
				t.Fatal(err)
			}
			var vs []string
			if err := json.Unmarshal(data, &vs); err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				names[v] = true
			}
		}
		// A level:metric:operations name a rule reads must be one a rule
		// of the file records (it may have no series yet).
		recorded := regexp.MustCompile(`\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b`)
		for _, g := range groups {
			for _, r := range g.Rules {
				if r.Type == "recording" {
					names[r.Name] = true
				}
			}
		}
		ident := regexp.MustCompile(`\b(hw|nvidia|container|k8s|process)_[a-z0-9_]+\b`)
		// hw.parent is on MIG devices only, which this scenario has none of
		// (mig_test.go has them).
		names["hw_parent"] = true
		// k8s.resourceclaim.name is on GPUs a DRA claim allocated, which
		// this scenario has none of (dra_test.go and the demo have them);
		// the diagnosis and the holder alerts name the claim.
		names["k8s_resourceclaim_name"] = true
		n := 0
		for _, g := range groups {
			for _, r := range g.Rules {
				n++
				if r.Health != "ok" || r.LastError != "" {
					t.Errorf("rule %s: health %q, error %q", r.Name, r.Health, r.LastError)
				}
				if _, err := prom.queryErr(r.Query); err != nil {
					t.Errorf("rule %s: %v", r.Name, err)
				}
				unquoted := regexp.MustCompile(`"[^"]*"`).ReplaceAllString(r.Query, `""`) // label values are not names
				ids := recorded.FindAllString(unquoted, -1)
				ids = append(ids, ident.FindAllString(recorded.ReplaceAllString(unquoted, " "), -1)...)
				for _, id := range ids {
					if !names[id] {
						t.Errorf("rule %s reads %s, which no series of the simulated GPUs has (as a name or a label) and no rule records", r.Name, id)
					}
				}
			}
		}
		if n < 10 {
			t.Fatalf("only %d rules loaded", n)
		}
		t.Logf("%d rules evaluated without error", n)
	})
}

type promRuleGroup struct {
	Name  string `json:"name"`
	Rules []struct {
		Name           string    `json:"name"`
		Type           string    `json:"type"` // alerting or recording
		Query          string    `json:"query"`
		Health         string    `json:"health"`
		LastError      string    `json:"lastError"`
		LastEvaluation time.Time `json:"lastEvaluation"`
	} `json:"rules"`
}

func (p *prometheus) get(path string, params url.Values) ([]byte, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + p.addr + path + "?" + params.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s", r.Error)
	}
	return r.Data, nil
}

// queryErr runs an instant query and returns its error instead of failing.
func (p *prometheus) queryErr(q string) ([]promSeries, error) {
	data, err := p.get("/api/v1/query", url.Values{"query": {q}})
	if err != nil {
		return nil, err
	}
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	if d.ResultType == "scalar" {
		return []promSeries{{}}, nil
	}
	var res []promSeries
	return res, json.Unmarshal(d.Result, &res)
}

func (p *prometheus) tryQuery(q string) []promSeries {
	res, _ := p.queryErr(q)
	return res
}

func (p *prometheus) labelValues(t *testing.T, label, selector string) []string {
	t.Helper()
	data, err := p.get("/api/v1/label/"+label+"/values", url.Values{"match[]": {selector}})
	if err != nil {
		t.Fatalf("label values of %s for %s: %v", label, selector, err)
	}
	var out []string
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (p *prometheus) rules(t *testing.T) []promRuleGroup {
	t.Helper()
	data, err := p.get("/api/v1/rules", url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Groups []promRuleGroup `json:"groups"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d.Groups
}

// TestContainerCPUOnRealCgroup: a process spinning in a real cgroup of this
// machine (named like a docker container, with a 1-CPU quota), reported by
// the simulated NVML as a GPU process; the collector reads the real cgroup
// through the real /proc. Skipped where root cannot create cgroups.
func TestContainerCPUOnRealCgroup(t *testing.T) {
	const id = "e2ee2ee2ee2ee2ee2ee2ee2ee2ee2ee2ee2ee2ee2ee2ee2ee2ee2ee2ee2ee2e0"
	var dirs []string
	quotaFile, quota := "", ""
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		dirs = []string{"/sys/fs/cgroup/docker-" + id + ".scope"}
		quotaFile, quota = filepath.Join(dirs[0], "cpu.max"), "100000 100000"
	} else {
		dirs = []string{"/sys/fs/cgroup/cpu/docker/" + id, "/sys/fs/cgroup/cpuacct/docker/" + id}
		quotaFile, quota = filepath.Join(dirs[0], "cpu.cfs_quota_us"), "100000"
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Skipf("cannot create a cgroup here: %v", err)
		}
		t.Cleanup(func() {
			for i := 0; i < 50 && os.Remove(d) != nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
			_ = os.Remove(filepath.Dir(d)) // docker/, when this test made it
		})
	}
	if err := os.WriteFile(quotaFile, []byte(quota), 0o644); err != nil {
		t.Skipf("cannot set a CPU quota here: %v", err)
	}
	// The "trainer": moves itself into the cgroup, then spins.
	moves := ""
	for _, d := range dirs {
		moves += "echo $$ > " + d + "/cgroup.procs; "
	}
	spin := startProcess(t, "spinner", nil, "/bin/sh", "-c", moves+"exec sh -c 'while :; do :; done'")
	waitFor(t, 10*time.Second, "the spinner in its cgroup", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", spin.cmd.Process.Pid))
		return strings.Contains(string(b), id)
	}, spin)

	uuid := "GPU-e2ec0000-0000-4000-8000-000000000000"
	s := Scenario{Comment: "e2e: a GPU process in a real cgroup", DriverVersion: driverVersion, GPUs: []GPU{{
		Name: "NVIDIA H200 (SIMULATED)", UUID: uuid, PCIBusID: "00000000:19:00.0",
		Utilization: &Utilization{GPU: &Duty{Busy: 0.3, PeriodS: 2.0 / 3}},
		Memory:      &Memory{TotalBytes: 150754820096, UsedBytes: 1e9}, TemperatureC: 50, PowerW: 300, PowerLimitW: 700,
		ClocksMHz: &Clocks{SM: 1980, Memory: 3201, Graphics: 1980, Video: 1755},
		Processes: []Process{{PID: uint32(spin.cmd.Process.Pid), Name: "python3", UsedMemoryBytes: 1 << 30, Type: "compute"}},
	}}}
	col := startCollector(t, "otelcol-nvml", s.write(t), nil, `collection_interval: 1s
processes:
  enabled: true
  proc_root: /proc
  cgroup_root: /sys/fs/cgroup`)
	series := regexp.MustCompile(`(?m)^(container_cpu_time_seconds_total|nvidia_gpu_container_cpu_limit)\{[^}]*container_id="` + id + `"[^}]*\} (\S+)`)
	read := func() (cpu, limit float64, ok bool) {
		resp, err := http.Get("http://" + col.promAddr + "/metrics")
		if err != nil {
			return 0, 0, false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		n := 0
		for _, m := range series.FindAllStringSubmatch(string(body), -1) {
			var v float64
			fmt.Sscan(m[2], &v)
			if m[1] == "nvidia_gpu_container_cpu_limit" {
				limit = v
			} else {
				cpu = v
			}
			n++
		}
		return cpu, limit, n == 2
	}
	var c0, lim float64
	waitFor(t, 30*time.Second, "the container's CPU on the collector's /metrics", func() bool {
		var ok bool
		c0, lim, ok = read()
		return ok
	}, col.proc)
	t0 := time.Now()
	time.Sleep(3 * time.Second)
	c1, _, _ := read()
	rate := (c1 - c0) / time.Since(t0).Seconds()
	if lim != 1 {
		t.Errorf("nvidia.gpu.container.cpu.limit %v, want 1 (the cgroup's quota)", lim)
	}
	// Spinning, held to its 1-CPU quota (the collector's 1 s interval blurs
	// the edges; a busy CI machine may give it less than its quota).
	if rate <= 0.05 || rate > 1.3 {
		t.Errorf("container.cpu.time grows at %.2f CPUs, want more than 0 and at most the 1-CPU quota", rate)
	}
}
