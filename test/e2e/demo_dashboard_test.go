//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// demoEmpty lists the dashboard's queries that cannot have data under `make
// demo`, by panel title and refId, with the reason. The demo has no kubelet
// (its processes are in Docker containers, testdata/demo), so nothing has a
// pod name or namespace; a query listed here that returns data fails the
// test too, so the list stays true.
var demoEmpty = map[string]string{
	"Idle GPU-hours, last 24 h, by namespace A": "namespace:nvidia_gpu_idle_hours:24h sums the pods' idle hours (k8s_pod_name!=\"\"): no pods without a kubelet",
	"Idle cost, last 24 h, by namespace A":      "namespace:nvidia_gpu_idle_cost:24h is the namespaces' idle hours times the price: no pods without a kubelet",
	"GPU efficiency per pod, trailing hour A":   "namespace_pod:nvidia_gpu_efficiency:1h is per pod (k8s_pod_name!=\"\"): no pods without a kubelet",
	"GPU memory per pod A":                      "per pod (k8s_pod_name!=\"\"): no pods without a kubelet",
	"Which pod holds which GPU A":               "per pod (k8s_pod_name!=\"\"): no pods without a kubelet",
	"Utilization per pod A":                     "per pod (k8s_pod_name!=\"\"): no pods without a kubelet",
}

// TestDemoDashboard runs `make demo` as it ships (testdata/collector/demo.yaml
// on testdata/scenarios/demo.json, with the simulated processes of
// testdata/demo) under a real Prometheus with deploy/prometheus/rules.yaml,
// and runs every panel query of the committed dashboard with each variable
// at its match-all: each must return data, except the pod-only ones of
// demoEmpty. The host variable (instance) must have a value; the node and
// pod variables are empty outside Kubernetes.
func TestDemoDashboard(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "otelcol-nvml.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash grafanaDashboard
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join("..", "..")
	rules, err := filepath.Abs(filepath.Join(root, "deploy", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := filepath.Abs(filepath.Join(root, "testdata", "collector", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	scenario, err := filepath.Abs(filepath.Join(root, "testdata", "scenarios", "demo.json"))
	if err != nil {
		t.Fatal(err)
	}
	promAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	col := startProcess(t, "demo collector", demoEnv(t, scenario),
		testutil.AbsFlag(t, "otelcol", *otelcolPath), "--config="+cfg,
		"--set=exporters::prometheus::endpoint="+promAddr,
		fmt.Sprintf("--set=extensions::health_check::endpoint=127.0.0.1:%d", testutil.FreePort(t)),
		// Faster than the demo's 5 s, for the rate windows; the debug
		// exporter in brief.
		"--set=receivers::nvml::collection_interval=1s",
		"--set=receivers::host_metrics::collection_interval=1s",
		"--set=exporters::debug::verbosity=basic")
	prom := startPrometheus(t, promAddr, rules)

	waitFor(t, 40*time.Second, "the demo's GPUs and containers in Prometheus", func() bool {
		return len(prom.tryQuery(`hw_gpu_memory_limit_bytes`)) == 4 &&
			len(prom.tryQuery(`rate(container_cpu_time_seconds_total[10s])`)) == 3
	}, col, prom.proc)
	time.Sleep(12 * time.Second) // history for the rate windows ($__rate_interval = 10s)

	t.Run("attribution", func(t *testing.T) {
		res := prom.query(t, `nvidia_gpu_process_memory_usage_bytes{container_id!="", process_owner!="", process_pid!=""}`)
		if len(res) != 3 {
			t.Errorf("%d GPU processes with a container and an owner, want the demo's 3: %v", len(res), res)
		}
		if lim := prom.query(t, `nvidia_gpu_container_cpu_limit`); len(lim) != 2 {
			t.Errorf("%d container CPU limits, want 2 (the inference container has none): %v", len(lim), lim)
		}
	})

	allValues := map[string]string{"datasource": "prometheus"}
	for _, v := range dash.Templating.List {
		if v.Type == "query" {
			allValues[v.Name] = v.AllValue
		}
	}
	t.Run("variables", func(t *testing.T) {
		// Empty outside Kubernetes by nature; All (.*) matches there.
		noValues := map[string]string{"node": "no k8s.node.name outside Kubernetes", "pod": "no kubelet, so no pod names"}
		for _, v := range dash.Templating.List {
			if v.Type != "query" {
				continue
			}
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Fatalf("variable %s: %v", v.Name, err)
			}
			m := regexp.MustCompile(`^label_values\((.+), (\w+)\)$`).FindStringSubmatch(substitute(t, q.Query, allValues))
			if m == nil {
				t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, q.Query)
				continue
			}
			values := prom.labelValues(t, m[2], m[1])
			reason, empty := noValues[v.Name]
			switch {
			case empty && len(values) > 0:
				t.Errorf("variable %s has values %v on the demo, where %s: update the test", v.Name, values, reason)
			case !empty && len(values) == 0:
				t.Errorf("variable %s: label_values(%s, %s) has no value on the demo", v.Name, m[1], m[2])
			}
			t.Logf("variable %s: %v", v.Name, values)
		}
		if _, ok := allValues["host"]; !ok {
			t.Error("the dashboard has no host variable")
		}
	})

	t.Run("every panel query returns data", func(t *testing.T) {
		queries, withData := 0, 0
		seen := map[string]bool{}
		for _, p := range dash.Panels {
			for _, target := range p.Targets {
				queries++
				key := p.Title + " " + target.RefID
				seen[key] = true
				expr := substitute(t, target.Expr, allValues)
				res, err := prom.queryErr(expr)
				reason, empty := demoEmpty[key]
				switch {
				case err != nil:
					t.Errorf("panel %q, query %s: %s: %v", p.Title, target.RefID, expr, err)
				case empty && len(res) > 0:
					t.Errorf("panel %q, query %s has data on the demo, though listed as empty (%s): %s", p.Title, target.RefID, reason, expr)
				case empty:
					t.Logf("panel %q, query %s: empty on the demo by nature: %s", p.Title, target.RefID, reason)
				case len(res) == 0:
					t.Errorf("panel %q, query %s returns no data on the demo: %s", p.Title, target.RefID, expr)
				default:
					withData++
				}
			}
		}
		var stale []string
		for key := range demoEmpty {
			if !seen[key] {
				stale = append(stale, key)
			}
		}
		sort.Strings(stale)
		for _, key := range stale {
			t.Errorf("demoEmpty lists %q, which the dashboard does not have", key)
		}
		if queries < 20 {
			t.Fatalf("only %d panel queries found", queries)
		}
		t.Logf("%d panel queries: %d with data on the demo, %d empty by nature", queries, withData, len(demoEmpty))
	})
}
