//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// TestDemoDashboard runs `make demo` as it ships (testdata/collector/demo.yaml
// on testdata/scenarios/demo.json, with the simulated processes of
// testdata/demo and the simulated kubelet, tools/demokubelet, on
// testdata/demo/pods.json, started as make demo starts it) under a real
// Prometheus with deploy/prometheus/rules.yaml, and runs every panel query
// of the committed dashboard with each variable at its match-all: every one
// must return data. Every variable must have a value but the node's: the
// demo sets no k8s.node.name.
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
	prom := startPrometheusScraping(t, promAddr, kubeStateMetricsScrape(t), rules)

	waitFor(t, 40*time.Second, "the demo's GPUs, containers and pods in Prometheus", func() bool {
		return len(prom.tryQuery(`hw_gpu_memory_limit_bytes`)) == 6 &&
			len(prom.tryQuery(`rate(container_cpu_time_seconds_total[10s])`)) == 5 &&
			len(prom.tryQuery(`hw_gpu_memory_limit_bytes{k8s_pod_name!=""}`)) == 4
	}, col, prom.proc)
	time.Sleep(12 * time.Second) // history for the rate windows ($__rate_interval = 10s)

	t.Run("attribution", func(t *testing.T) {
		res := prom.query(t, `nvidia_gpu_process_memory_usage_bytes{container_id!="", process_owner!="", process_pid!=""}`)
		if len(res) != 5 {
			t.Errorf("%d GPU processes with a container and an owner, want the demo's 5: %v", len(res), res)
		}
		if lim := prom.query(t, `nvidia_gpu_container_cpu_limit`); len(lim) != 4 {
			t.Errorf("%d container CPU limits, want 4 (the inference container has none): %v", len(lim), lim)
		}
		// testdata/demo/pods.json: GPU 0, 2 and 5 are allocated to pods
		// whose containers run their processes, GPU 4 through a DRA claim
		// (gpu-4, by the gpu-<minor> fallback); GPU 1's processes run in a
		// Docker container outside Kubernetes and in a Slurm job, GPU 3 has
		// no pod.
		want := map[string]string{
			"GPU-5151a7ed-de30-4000-8000-000000000000": "ml-training/resnet-train-0/trainer",
			"GPU-5151a7ed-de30-4000-8000-000000000002": "research/notebook-alice/jupyter",
			"GPU-5151a7ed-de30-4000-8000-000000000004": "vision/yolo-train-0/trainer",
			"GPU-5151a7ed-de30-4000-8000-000000000005": "ml-training/llm-finetune-0/trainer",
		}
		for _, expr := range []string{
			`max by (hw_id, k8s_namespace_name, k8s_pod_name, k8s_container_name) (hw_gpu_utilization_ratio{hw_gpu_task="general", k8s_pod_name!=""})`,
			`max by (hw_id, k8s_namespace_name, k8s_pod_name, k8s_container_name) (nvidia_gpu_process_memory_usage_bytes{k8s_pod_name!=""})`,
		} {
			got := map[string]string{}
			for _, r := range prom.query(t, expr) {
				got[r.Metric["hw_id"]] = r.Metric["k8s_namespace_name"] + "/" + r.Metric["k8s_pod_name"] + "/" + r.Metric["k8s_container_name"]
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %v, want the pods of testdata/demo/pods.json: %v", expr, got, want)
			}
		}
	})

	allValues := dash.allValues()
	t.Run("variables", func(t *testing.T) {
		// Empty on the demo by nature; All (.*) matches there.
		noValues := map[string]string{"node": "the demo sets no k8s.node.name"}
		for _, a := range variableValues(t, prom, &dash, allValues) {
			reason, empty := noValues[a.name]
			switch {
			case empty && len(a.values) > 0:
				t.Errorf("variable %s has values %v on the demo, where %s: update the test", a.name, a.values, reason)
			case !empty && len(a.values) == 0:
				t.Errorf("variable %s: label_values(%s, %s) has no value on the demo", a.name, a.selector, a.label)
			}
		}
		if _, ok := allValues["host"]; !ok {
			t.Error("the dashboard has no host variable")
		}
	})

	t.Run("every panel query returns data", func(t *testing.T) {
		checkPanelQueries(t, prom, &dash, allValues, "on the demo")
	})
}
