//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-nvml/otelcol-nvml/internal/testutil"
)

// The GPU-holding containers of the dashboard scenario: a pod's container
// per GPU, each with a process on its GPU, a cgroup and a kubelet allocation.
type dashboardPod struct {
	namespace, pod, container string
	podUID, containerID       string
	pid                       uint32
	gpu                       string
	cpuCores                  float64 // the rate its cgroup's usage grows at
	limitCores                float64
}

var dashboardPods = []dashboardPod{
	{"ml", "trainer-0", "trainer", "5f0c7a1e-2b3c-4d5e-8f90-a1b2c3d4e5f6",
		"aa11bb22cc33dd44ee55ff6600112233445566778899aabbccddeeff00112233", 710001,
		"GPU-da5b0a2d-0000-4000-8000-000000000000", 1.5, 2},
	{"ml", "infer-0", "server", "6a1d8b2f-3c4d-4e5f-9a01-b2c3d4e5f6a7",
		"bb22cc33dd44ee55ff6600112233445566778899aabbccddeeff0011223344aa", 710002,
		"GPU-da5b0a2d-0000-4000-8000-000000000001", 0.25, 4},
}

func dashboardScenario() Scenario {
	s := Scenario{Comment: "e2e: every dashboard panel has data", DriverVersion: driverVersion, Sampling: &Sampling{Hz: 6, Buffer: 120}}
	for i, p := range dashboardPods {
		g := GPU{
			Name: "NVIDIA H200 (SIMULATED)", UUID: p.gpu, Serial: fmt.Sprintf("SIMULATED-DASH-%d", i),
			PCIBusID:    fmt.Sprintf("00000000:%02X:00.0", 0x19+i),
			Utilization: &Utilization{GPU: &Duty{Busy: 0.9 - 0.6*float64(i), PeriodS: 2.0 / 3}, Memory: &Duty{Busy: 0.4, PeriodS: 1.0 / 3}},
			// Memory climbs: the OOM curve.
			Memory:        &Memory{TotalBytes: 150754820096, ReservedBytes: 617086976, UsedBytes: Sine{Mean: 60e9, Amplitude: 20e9, PeriodS: 120}},
			TemperatureC:  55 + 10*i,
			PowerW:        Sine{Mean: 500, Amplitude: 100, PeriodS: 10},
			PowerLimitW:   700,
			EnergyOffsetJ: 1e6,
			ClocksMHz:     &Clocks{SM: 1980, Memory: 3201, Graphics: 1980, Video: 1755},
			PState:        0,
			GPM:           gpm0,
			Processes: []Process{{PID: p.pid, Name: "python3", UsedMemoryBytes: 40 << 30, Type: "compute",
				SMPercent: 70, MemoryPercent: 30}},
			ECCErrors:          map[string]Signal{"corrected": steps(0, 0, 3, 4), "uncorrected": 0},
			RemappedRows:       map[string]Signal{"correctable": 1, "uncorrectable": 0, "pending": 0, "failure": 0},
			ClocksEventReasons: clockEventBits["sw_power_cap"],
			Violation:          map[string]Signal{"power": 0.25, "thermal": 0, "sync_boost": 0, "board_limit": 0, "low_utilization": 0, "reliability": 0},
			PCIe:               map[string]Signal{"link_generation": 5, "link_width": 16, "replays": 0},
			Events:             []Event{{At: 1, XID: 13}},
		}
		s.GPUs = append(s.GPUs, g)
	}
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

func serveKubelet(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kubelet")
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
	podresourcesv1.RegisterPodResourcesListerServer(srv, dashboardKubelet{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return sock
}

// cgroupFixture writes each pod's /proc/<pid>/cgroup under a proc root and
// its container's cgroup v2 files under a cgroup root, and keeps each
// container's CPU usage growing at its rate until the test ends.
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
	write(filepath.Join(cgroupRoot, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	dirs := make([]string, len(dashboardPods))
	for i, p := range dashboardPods {
		rel := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(p.podUID, "-", "_") +
			".slice/cri-containerd-" + p.containerID + ".scope"
		write(filepath.Join(procRoot, fmt.Sprint(p.pid), "cgroup"), "0::"+rel+"\n")
		dirs[i] = filepath.Join(cgroupRoot, rel)
		write(filepath.Join(dirs[i], "cpu.max"), fmt.Sprintf("%d 100000\n", int(p.limitCores*100000)))
		write(filepath.Join(dirs[i], "cpu.stat"), "usage_usec 0\n")
	}
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

// substitute replaces every $variable with its match-all (and Grafana's
// built-ins with short windows); a variable left over fails.
func substitute(t *testing.T, expr string, allValues map[string]string) string {
	t.Helper()
	for k, v := range builtins {
		expr = strings.ReplaceAll(expr, k, v)
	}
	expr = regexp.MustCompile(`\$\{?(\w+)\}?`).ReplaceAllStringFunc(expr, func(m string) string {
		name := strings.Trim(m, "${}")
		v, ok := allValues[name]
		if !ok {
			t.Errorf("%q uses $%s, which the dashboard does not define", expr, name)
		}
		return v
	})
	return expr
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
	sock := serveKubelet(t)
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
	prom := startPrometheus(t, promAddr, rules)

	// Enough history for the rate windows ($__rate_interval = 10s).
	waitFor(t, 60*time.Second, "GPU and container series in Prometheus", func() bool {
		return len(prom.tryQuery(`hw_gpu_utilization_ratio{k8s_pod_name="trainer-0"}`)) > 0 &&
			len(prom.tryQuery(`rate(container_cpu_time_seconds_total[10s])`)) == len(dashboardPods)
	}, col, prom.proc)
	time.Sleep(12 * time.Second)

	allValues := map[string]string{"datasource": "prometheus"}
	for _, v := range dash.Templating.List {
		if v.Type == "query" {
			allValues[v.Name] = v.AllValue
		}
	}

	t.Run("variables", func(t *testing.T) {
		n := 0
		for _, v := range dash.Templating.List {
			if v.Type != "query" {
				continue
			}
			n++
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
			values := prom.labelValues(t, m[2], m[1])
			if len(values) == 0 {
				t.Errorf("variable %s: label_values(%s, %s) has no value", v.Name, m[1], m[2])
			}
			t.Logf("variable %s: %v", v.Name, values)
		}
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
					t.Errorf("panel %q, query %s returns no data on the simulated GPUs: %s", p.Title, target.RefID, expr)
				}
			}
		}
		if queries < 20 {
			t.Fatalf("only %d panel queries found", queries)
		}
		t.Logf("%d panel queries, each with data", queries)
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
			if len(lim) != 1 || lim[0].value(t) != p.limitCores {
				t.Errorf("%s: CPU limit %v, want %v", p.pod, lim, p.limitCores)
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
		ident := regexp.MustCompile(`\b(hw|nvidia|container|k8s)_[a-z0-9_]+\b`)
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
				for _, id := range ident.FindAllString(unquoted, -1) {
					if !names[id] {
						t.Errorf("rule %s reads %s, which no series of the simulated GPUs has (as a name or a label)", r.Name, id)
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
