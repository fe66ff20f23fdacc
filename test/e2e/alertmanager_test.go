//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

var helmPath = flag.String("helm", "", "path of the helm binary (make e2e passes the pinned one), to render the rules with test values; empty: TestAlertmanager is skipped")

// notification is one webhook POST of Alertmanager (payload version 4), and
// the receiver whose URL it came to.
type notification struct {
	path     string
	Receiver string `json:"receiver"`
	Status   string `json:"status"`
	Alerts   []struct {
		Status      string            `json:"status"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"alerts"`
}

// webhook serves Alertmanager's webhook and keeps every notification.
type webhook struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []notification
}

func startWebhook(t *testing.T) *webhook {
	t.Helper()
	w := &webhook{}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var n notification
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			t.Errorf("webhook %s: %v", r.URL.Path, err)
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		n.path = r.URL.Path
		w.mu.Lock()
		w.got = append(w.got, n)
		w.mu.Unlock()
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *webhook) notifications() []notification {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]notification(nil), w.got...)
}

// shippedAlertmanagerConfig is deploy/alertmanager/alertmanager.yml with
// each receiver's notifiers replaced by one webhook to url/<receiver name>
// (send_resolved), and the routes' group_wait, group_interval and
// repeat_interval, where set, shortened to seconds (a resolved notification
// waits for the next group_interval: 5 minutes as shipped). The matchers,
// receivers' names, grouping, continue and inhibitions stay as shipped.
func shippedAlertmanagerConfig(t *testing.T, url string) []byte {
	t.Helper()
	cfg := readShippedAlertmanagerConfig(t)
	receivers, _ := cfg["receivers"].([]any)
	require.NotEmpty(t, receivers)
	for i, r := range receivers {
		name := r.(map[string]any)["name"].(string)
		receivers[i] = map[string]any{"name": name, "webhook_configs": []any{
			map[string]any{"url": url + "/" + name, "send_resolved": true},
		}}
	}
	short := map[string]string{"group_wait": "1s", "group_interval": "2s", "repeat_interval": "1h"}
	var walk func(r map[string]any)
	walk = func(r map[string]any) {
		for k, v := range short {
			if _, ok := r[k]; ok {
				r[k] = v
			}
		}
		children, _ := r["routes"].([]any)
		for _, c := range children {
			walk(c.(map[string]any))
		}
	}
	walk(cfg["route"].(map[string]any))
	out, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	return out
}

func readShippedAlertmanagerConfig(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "alertmanager", "alertmanager.yml"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(data, &cfg))
	return cfg
}

// startAlertmanager starts the Alertmanager server on config, on 127.0.0.1
// without its cluster port, and returns its address.
func startAlertmanager(t *testing.T, config []byte) (string, *process) {
	t.Helper()
	bin := testutil.AbsFlag(t, "alertmanager", *alertmanagerPath)
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	p := startProcess(t, "alertmanager", nil, bin, "--config.file="+writeFile(t, dir, "alertmanager.yml", string(config)),
		"--storage.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--cluster.listen-address=", "--log.level=debug")
	waitFor(t, 30*time.Second, "Alertmanager to be ready", func() bool {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, p)
	return addr, p
}

// renderRules renders the chart's PrometheusRule with values and writes its
// groups as a Prometheus rules file.
func renderRules(t *testing.T, values string) string {
	t.Helper()
	helm := testutil.AbsFlag(t, "helm", *helmPath)
	chart, err := filepath.Abs(filepath.Join("..", "..", "deploy", "helm", "otelcol-nvml"))
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helm, "template", "otelcol-nvml", chart, "--show-only", "templates/prometheusrule.yaml", "-f", values)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "helm template: %s", stderr.String())
	dec := yaml.NewDecoder(&stdout)
	for {
		var doc struct {
			Kind string `yaml:"kind"`
			Spec struct {
				Groups []any `yaml:"groups"`
			} `yaml:"spec"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if doc.Kind == "PrometheusRule" {
			out, err := yaml.Marshal(map[string]any{"groups": doc.Spec.Groups})
			require.NoError(t, err)
			return writeFile(t, t.TempDir(), "rules.yaml", string(out))
		}
	}
	t.Fatal("helm rendered no PrometheusRule")
	return ""
}

// TestAlertmanager: the simulated NVML (the waste scenario), a real
// Prometheus with the shipped rules (rendered by the chart with short
// durations, testdata/alertmanager/values.yaml) sending to a real
// Alertmanager with the shipped configuration, its receivers pointed at a
// webhook here. GPU 3's pod, input_bound (its container at its CPU limit),
// is notified to its namespace's team with the advice, the figures and its
// routing labels, and resolved once its CPU stops (the state clears); GPU
// 2's gpu_bound pods get nothing; GPU 4, whose pod leaves it idle, is lost
// at 30 s: its GPULost alone reaches anyone, while its holder's idle alert
// fires in Prometheus and is inhibited.
func TestAlertmanager(t *testing.T) {
	if *alertmanagerPath == "" || *helmPath == "" {
		t.Skip("-alertmanager and -helm are needed (make e2e passes both)")
	}
	t.Parallel()
	scenarioPath, gpus, procRoot, cgroupRoot, kubelet := wasteFixtures(t)
	const lostAt = 30.0
	scenario := alertmanagerScenario(t, scenarioPath, lostAt)
	rules := renderRules(t, filepath.Join("testdata", "alertmanager", "values.yaml"))

	hook := startWebhook(t)
	amAddr, am := startAlertmanager(t, shippedAlertmanagerConfig(t, hook.srv.URL))
	bin := testutil.AbsFlag(t, "otelcol", *otelcolPath)
	sock := servePodResources(t, kubelet)
	// GPU 3's container at its 1-CPU limit until stopCPU; no other CPU
	// moves (GPU 4's pod idles).
	stopCPU := growContainerCPU(t, gpus[3].procs[0].cgroupDir, wasteGrowth[3].container)
	promAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	// Appended after the scrape configs, at the top level.
	alerting := fmt.Sprintf("alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [%q]\n", amAddr)
	prom := startPrometheusScraping(t, promAddr, alerting, rules)

	cfg := wasteCollectorConfig(t, procRoot, cgroupRoot, sock, promAddr, "")
	col := startProcess(t, "otelcol-nvml", []string{scenarioEnv + "=" + scenario, "K8S_NODE_NAME=" + wasteNode},
		bin, "--config="+writeFile(t, t.TempDir(), "collector.yaml", cfg))
	c := &collector{proc: col, promAddr: promAddr}
	t0 := c.scenarioStart(t, 30*time.Second)
	procs := []*process{col, prom.proc, am}
	defer func() {
		if t.Failed() {
			for _, n := range hook.notifications() {
				b, _ := json.Marshal(n)
				t.Logf("notification to %s: %s", n.path, b)
			}
		}
	}()

	inputBound, lost, gpuBound := gpus[3], gpus[4], gpus[2]
	holderAlert := func(n notification, status string) map[string]string {
		for _, a := range n.Alerts {
			if a.Labels["alertname"] == "GPUHolderInputBound" && a.Labels["hw_id"] == inputBound.UUID && a.Status == status {
				return a.Annotations
			}
		}
		return nil
	}
	var firing notification
	waitFor(t, 120*time.Second, "the input_bound holder's notification", func() bool {
		for _, n := range hook.notifications() {
			if holderAlert(n, "firing") != nil {
				firing = n
				return true
			}
		}
		return false
	}, procs...)
	t.Logf("input_bound notified at t = %.0f s", time.Since(t0).Seconds())
	assert.Equal(t, "team-prod", firing.Receiver, "the pod's namespace routes to its team")
	assert.Equal(t, "/team-prod", firing.path)
	var labels map[string]string
	for _, a := range firing.Alerts {
		if a.Labels["hw_id"] == inputBound.UUID {
			labels = a.Labels
		}
	}
	for k, v := range map[string]string{"state": "input_bound", "severity": "warning", "k8s_namespace_name": "prod",
		"k8s_pod_name": inputBound.pod.name, "k8s_node_name": wasteNode, "hw_id": inputBound.UUID} {
		assert.Equal(t, v, labels[k], "the notification's label %s", k)
	}
	ann := holderAlert(firing, "firing")
	assert.Contains(t, ann["summary"], "prod/"+inputBound.pod.name)
	for _, w := range []string{"num_workers", "pin_memory", "persistent_workers", "CPU limit"} {
		assert.Contains(t, ann["advice"], w, "the advice")
	}
	// The figures: 20 % activity, the container at its CPU limit.
	assert.Regexp(t, `GPU activity 2\d(\.\d+)?%`, ann["description"])
	assert.Regexp(t, `the container at (9\d|1\d\d)(\.\d+)?% of its CPU limit`, ann["description"])
	assert.True(t, strings.HasSuffix(ann["runbook_url"], "runbook.md#input_bound"), "runbook_url %q", ann["runbook_url"])

	// The state clears: the container's CPU stops, the holder reads
	// underused; the alert resolves after the diagnosis's stable minute
	// and keep_firing_for (checked below, while the lost GPU plays out).
	stopCPU()
	stoppedAt := time.Now()

	// The lost GPU's holder alert fires in Prometheus after GPULost does;
	// the inhibition keeps it from the receivers.
	holderFiredOnLost := false
	waitFor(t, 150*time.Second, "the lost GPU's idle holder alert firing in Prometheus, and GPULost notified", func() bool {
		if len(prom.tryQuery(fmt.Sprintf(`ALERTS{alertname=~"GPUHolder.+", hw_id=%q, alertstate="firing"}`, lost.UUID))) > 0 {
			holderFiredOnLost = true
		}
		lostNotified := false
		for _, n := range hook.notifications() {
			for _, a := range n.Alerts {
				lostNotified = lostNotified || a.Labels["alertname"] == "GPULost" && a.Labels["hw_id"] == lost.UUID
			}
		}
		return holderFiredOnLost && lostNotified
	}, procs...)
	t.Logf("the lost GPU's holder alert fired in Prometheus at t = %.0f s", time.Since(t0).Seconds())
	// Past a few group intervals: had the inhibition failed, it would be sent by now.
	time.Sleep(6 * time.Second)

	waitFor(t, 240*time.Second, "the input_bound holder's resolved notification", func() bool {
		for _, n := range hook.notifications() {
			if holderAlert(n, "resolved") != nil {
				assert.Equal(t, "team-prod", n.Receiver)
				return true
			}
		}
		return false
	}, procs...)
	t.Logf("resolved %.0f s after the CPU stopped", time.Since(stoppedAt).Seconds())

	lostAlerts := map[string]int{}
	for _, n := range hook.notifications() {
		for _, a := range n.Alerts {
			switch a.Labels["hw_id"] {
			case gpuBound.UUID:
				t.Errorf("the gpu_bound GPU's holders got a notification: %s %v to %s", a.Labels["alertname"], a.Labels, n.Receiver)
			case lost.UUID:
				lostAlerts[a.Labels["alertname"]]++
				if a.Labels["alertname"] == "GPULost" {
					assert.Equal(t, "gpu-platform", n.Receiver, "GPULost goes to the platform team")
				}
			}
		}
	}
	assert.Equal(t, []string{"GPULost"}, keys(lostAlerts), "the lost GPU's notifications: its GPU alert alone, no holder alert")
	assert.Equal(t, 1, lostAlerts["GPULost"], "one GPULost notification")
	for _, p := range procs {
		p.requireAlive(t)
	}
}

// alertmanagerScenario is the waste scenario with GPU 4's pod idle (its GPU
// at 0 %) and GPU 4 lost at lostAt seconds.
func alertmanagerScenario(t *testing.T, path string, lostAt float64) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var s map[string]any
	require.NoError(t, json.Unmarshal(raw, &s))
	g := s["gpus"].([]any)[4].(map[string]any)
	g["utilization"].(map[string]any)["gpu"] = map[string]any{"busy": 0}
	g["gpm"] = map[string]any{"SM_UTIL": 0, "SM_OCCUPANCY": 0}
	for _, p := range g["processes"].([]any) {
		p.(map[string]any)["sm_percent"] = 0
	}
	g["lost_at"] = lostAt
	out, err := json.Marshal(s)
	require.NoError(t, err)
	return writeFile(t, t.TempDir(), "alertmanager.json", string(out))
}

// growContainerCPU adds cores of CPU to the cpu.stat of a container's
// cgroup directory every 100 ms until the returned stop is called (or the
// test ends).
func growContainerCPU(t *testing.T, cgroupDir string, cores float64) (stop func()) {
	t.Helper()
	path := filepath.Join(cgroupDir, "cpu.stat")
	base := readCPUStatUsage(t, path)
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			u := base + int64(time.Since(start).Seconds()*cores*1e6)
			stat := fmt.Sprintf("usage_usec %d\nuser_usec %d\nsystem_usec %d\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n", u, u*9/10, u-u*9/10)
			if err := replaceFile(path, stat); err != nil {
				t.Errorf("rewriting %s: %v", path, err)
				return
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}
