//go:build e2e

package e2e

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

var prometheus3Path = flag.String("prometheus3", "", "path of a Prometheus 3 server binary (make e2e builds one into _build); empty: TestPrometheus3OTLP is skipped")

// prom3Doc is the document whose config blocks the test runs.
var prom3Doc = filepath.Join("..", "..", "docs", "operations", "prometheus-otlp.md")

// docBlock returns the fenced YAML between <!-- name:start --> and
// <!-- name:end --> of docs/operations/prometheus-otlp.md.
func docBlock(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(prom3Doc)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- " + regexp.QuoteMeta(name) + ":start -->\\s*```yaml\n(.*?)```\\s*<!-- " +
		regexp.QuoteMeta(name) + ":end -->").FindSubmatch(raw)
	if m == nil {
		t.Fatalf("%s: no ```yaml block between the %s markers", prom3Doc, name)
	}
	return string(m[1])
}

// resourceAttributeNames are the receiver's resource attributes, from
// metadata.yaml.
func resourceAttributeNames(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "receiver", "nvmlreceiver", "metadata.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		ResourceAttributes map[string]any `yaml:"resource_attributes"`
	}
	if err := yaml.Unmarshal(raw, &md); err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range md.ResourceAttributes {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatal("metadata.yaml has no resource attributes")
	}
	return out
}

// startPrometheus3 starts Prometheus 3 with its OTLP receiver, the otlp
// block given, no scrape and the rule files given (evaluated every second).
func startPrometheus3(t *testing.T, otlpBlock string, ruleFiles ...string) *prometheus {
	t.Helper()
	bin := testutil.AbsFlag(t, "prometheus3", *prometheus3Path)
	dir := t.TempDir()
	p := &prometheus{addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))}
	cfg := "global:\n  evaluation_interval: 1s\n" + otlpBlock
	if len(ruleFiles) > 0 {
		cfg += "rule_files: [\"" + strings.Join(everySecond(t, dir, ruleFiles), "\", \"") + "\"]\n"
	}
	p.proc = startProcess(t, "prometheus 3", nil, bin,
		"--web.enable-otlp-receiver",
		"--config.file="+writeFile(t, dir, "prometheus.yml", cfg),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+p.addr,
		"--log.level=warn")
	client := &http.Client{Timeout: 2 * time.Second}
	waitFor(t, 60*time.Second, "Prometheus 3 to be ready", func() bool {
		resp, err := client.Get("http://" + p.addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, p.proc)
	return p
}

// expositionSeries reads every sample line of a Prometheus text endpoint:
// its name and labels.
func expositionSeries(t *testing.T, addr string) []map[string]string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		s, ok := parseSampleLabels(line)
		if !ok {
			t.Fatalf("cannot parse the exposition line %q", line)
		}
		out = append(out, s)
	}
	return out
}

// parseSampleLabels parses `name{a="x",b="y"} value` into its labels, the
// name as __name__.
func parseSampleLabels(line string) (map[string]string, bool) {
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return nil, false
	}
	out := map[string]string{"__name__": line[:i]}
	if line[i] == ' ' {
		return out, true
	}
	rest := line[i+1:]
	for {
		rest = strings.TrimLeft(rest, ", ")
		if strings.HasPrefix(rest, "}") {
			return out, true
		}
		eq := strings.Index(rest, `="`)
		if eq <= 0 {
			return nil, false
		}
		name := rest[:eq]
		rest = rest[eq+2:]
		var v strings.Builder
		for {
			if rest == "" {
				return nil, false
			}
			c := rest[0]
			rest = rest[1:]
			if c == '"' {
				break
			}
			if c == '\\' && rest != "" {
				switch rest[0] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(rest[0])
				}
				rest = rest[1:]
				continue
			}
			v.WriteByte(c)
		}
		out[name] = v.String()
	}
}

// seriesKey is a series' identity for the comparison of the two paths:
// its labels but those only one path has (the scrape's job and instance,
// which OTLP takes from service.name and service.instance.id; the
// exporter's scope labels, which Prometheus promotes only with
// promote_scope_metadata).
func seriesKey(labels map[string]string) string {
	var parts []string
	for k, v := range labels {
		if k == "job" || k == "instance" || strings.HasPrefix(k, "otel_scope_") || strings.HasPrefix(k, "service_") {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%q", k, v))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ", ") + "}"
}

// otlpRecorder passes the collector's OTLP requests on to Prometheus 3 and
// keeps the answers that refused one (Prometheus refuses a whole request
// for one sample it cannot append, and says why only in the answer).
type otlpRecorder struct {
	mu       sync.Mutex
	requests int
	refused  []string
}

func (r *otlpRecorder) serve(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = func(resp *http.Response) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.requests++
		if resp.StatusCode/100 != 2 {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			resp.Body = io.NopCloser(strings.NewReader(string(body)))
			r.refused = append(r.refused, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body))))
		}
		return nil
	}
	srv := &http.Server{Handler: proxy}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Close() })
	return lis.Addr().String()
}

func (r *otlpRecorder) counts() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, append([]string(nil), r.refused...)
}

// TestPrometheus3OTLP: otelcol-nvml on the dashboard's simulated GPUs,
// pods and cgroups (dashboard_test.go) pushes OTLP with otlp_http to a real
// Prometheus 3, configured with docs/operations/prometheus-otlp.md's blocks (read from
// the document), with deploy/prometheus/rules.yaml loaded. The same
// collector serves its prometheus exporter, the scraped path the rest of
// the suite checks: every series it serves must be in Prometheus 3 with the
// same name and labels, every README name it serves too, every dashboard
// variable and query must have data, and every recording rule.
func TestPrometheus3OTLP(t *testing.T) {
	if *prometheus3Path == "" {
		t.Skip("no -prometheus3 (a Prometheus 3 binary; make e2e builds one and passes it)")
	}
	promBlock, colBlock := docBlock(t, "prometheus3-otlp"), docBlock(t, "prometheus3-collector")

	// The document promotes every resource attribute of the receiver and
	// every one its collector block (and the dashboard's k8s.node.name)
	// adds.
	var pc struct {
		OTLP struct {
			Promote             []string `yaml:"promote_resource_attributes"`
			TranslationStrategy string   `yaml:"translation_strategy"`
		} `yaml:"otlp"`
	}
	if err := yaml.Unmarshal([]byte(promBlock), &pc); err != nil {
		t.Fatalf("%s: the Prometheus block: %v", prom3Doc, err)
	}
	promoted := map[string]bool{}
	for _, a := range pc.OTLP.Promote {
		promoted[a] = true
	}
	for _, a := range append(resourceAttributeNames(t), "host.name", "k8s.node.name") {
		if !promoted[a] {
			t.Errorf("%s: promote_resource_attributes lacks %s", prom3Doc, a)
		}
	}
	if pc.OTLP.TranslationStrategy != "UnderscoreEscapingWithSuffixes" {
		t.Errorf("%s: translation_strategy %q, want UnderscoreEscapingWithSuffixes (the prometheus exporter's names)", prom3Doc, pc.OTLP.TranslationStrategy)
	}

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
	prom := startPrometheus3(t, promBlock+"scrape_configs:\n"+kubeStateMetricsScrape(t), rules)

	procRoot, cgroupRoot := cgroupFixture(t)
	sock := serveKubelet(t, dashboardKubelet{})
	scenario := dashboardScenario().write(t)
	refAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	// After the document's block (a later --config wins where both set a
	// list): the receivers of the dashboard test, k8s.node.name as the
	// chart inserts it, and the prometheus exporter as the reference.
	cfg := fmt.Sprintf(`receivers:
  nvml:
    library_path: %s
    collection_interval: 1s
    # Over OTLP a costly counter has one sample per reading (the scrape
    # path stores one per scrape): 2s gives the dashboard's 10s rate windows
    # (its $__rate_interval here) readings to rate, as docs/operations/prometheus-otlp.md
    # tells teams to size theirs against the default 10s.
    counter_interval: 2s
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
  resource/node:
    attributes:
      - {key: k8s.node.name, value: "${env:K8S_NODE_NAME}", action: insert}
exporters:
  prometheus:
    endpoint: %s
    metric_expiration: 3s
    resource_constant_labels:
      included: ["*"]
service:
  pipelines:
    metrics:
      receivers: [nvml, host_metrics]
      processors: [resource, resource/node]
      exporters: [otlp_http, prometheus]
  telemetry:
    metrics:
      level: none
`, testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath), procRoot, cgroupRoot, sock, refAddr)
	dir := t.TempDir()
	rec := &otlpRecorder{}
	otlpAddr := rec.serve(t, prom.addr)
	col := startProcess(t, "otelcol-nvml", []string{scenarioEnv + "=" + scenario, "K8S_NODE_NAME=e2e-node", "HOST_NAME=e2e-host",
		"PROMETHEUS_OTLP_ENDPOINT=http://" + otlpAddr + "/api/v1/otlp"},
		testutil.AbsFlag(t, "otelcol", *otelcolPath),
		"--config="+writeFile(t, dir, "doc.yaml", colBlock), "--config="+writeFile(t, dir, "collector.yaml", cfg))

	// Enough history for the rate windows ($__rate_interval = 10s).
	waitFor(t, 60*time.Second, "GPU and container series in Prometheus 3", func() bool {
		return len(prom.tryQuery(`hw_gpu_utilization_ratio{k8s_pod_name="trainer-0"}`)) > 0 &&
			len(prom.tryQuery(`rate(container_cpu_time_seconds_total[10s])`)) == len(dashboardPods)
	}, col, prom.proc)
	time.Sleep(12 * time.Second)

	t.Run("Prometheus 3 takes every request", func(t *testing.T) {
		n, refused := rec.counts()
		if len(refused) > 0 {
			t.Errorf("Prometheus 3 refused %d of %d OTLP requests; the first: %s", len(refused), n, refused[0])
		}
		if n < 10 {
			t.Errorf("only %d OTLP requests", n)
		}
		t.Logf("%d OTLP requests, none refused", n)
	})

	t.Run("every series of the prometheus exporter, with its labels", func(t *testing.T) {
		// Prometheus 3 may hold more (a series of an earlier label set
		// lives there until the lookback ends); it must hold every one the
		// exporter serves now.
		missing := func() (n int, out []string) {
			want := expositionSeries(t, refAddr) // first: the push may trail the exporter by a moment
			have := map[string]bool{}
			for _, s := range prom.query(t, `{__name__=~".+", job="otelcol-nvml", instance="e2e-host"}`) {
				have[seriesKey(s.Metric)] = true
			}
			for _, s := range want {
				if s["__name__"] == "target_info" {
					continue // Prometheus 3 writes its own from the resource
				}
				n++
				if !have[seriesKey(s)] {
					out = append(out, seriesKey(s))
				}
			}
			return n, out
		}
		n, left := missing()
		for deadline := time.Now().Add(10 * time.Second); len(left) > 0 && time.Now().Before(deadline); n, left = missing() {
			time.Sleep(time.Second)
		}
		for _, s := range left {
			t.Errorf("Prometheus 3 has no %s (the prometheus exporter serves it)", s)
		}
		if n < 100 {
			t.Fatalf("the prometheus exporter serves only %d series", n)
		}
		t.Logf("%d series, each in Prometheus 3 with the same name and labels", n)
	})

	t.Run("every README name the scenario gives", func(t *testing.T) {
		served := promFamilies(t, refAddr)
		var absent []string
		n := 0
		for _, r := range readREADMEMetrics(t) {
			if _, ok := served[r.prom]; !ok {
				absent = append(absent, r.prom)
				if _, ok := checkedElsewhere[r.otlp]; ok {
					t.Errorf("%s: the pipeline test leaves it to the dashboard scenario (checkedElsewhere), which does not give it", r.otlp)
				}
				continue
			}
			n++
			q := `{__name__="` + r.prom + `", job="otelcol-nvml"}`
			for deadline := time.Now().Add(5 * time.Second); len(prom.tryQuery(q)) == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Second)
			}
			if len(prom.query(t, q)) == 0 {
				t.Errorf("README.md names %s (%s); the scenario gives it, Prometheus 3 does not have it", r.prom, r.otlp)
			}
		}
		if n < 30 {
			t.Errorf("only %d README names in this scenario", n)
		}
		t.Logf("%d README names in Prometheus 3; not in this scenario (TestPipeline checks them on the scraped path): %v", n, absent)
	})

	allValues := dash.allValues()
	t.Run("every dashboard variable and query has data", func(t *testing.T) {
		for _, a := range variableValues(t, prom, &dash, allValues) {
			if len(a.values) == 0 {
				t.Errorf("variable %s: label_values(%s, %s) has no value", a.name, a.selector, a.label)
			}
		}
		checkPanelQueries(t, prom, &dash, allValues, "over OTLP")
	})

	t.Run("every rule evaluates, every recording rule has data", func(t *testing.T) {
		var groups []promRuleGroup
		waitFor(t, 30*time.Second, "every rule evaluated once", func() bool {
			groups = prom.rules(t)
			for _, g := range groups {
				for _, r := range g.Rules {
					if r.LastEvaluation.Year() < 2000 {
						return false
					}
				}
			}
			return len(groups) > 0
		}, prom.proc)
		for _, g := range groups {
			for _, r := range g.Rules {
				if r.Health != "ok" || r.LastError != "" {
					t.Errorf("rule %s: health %q, error %q", r.Name, r.Health, r.LastError)
				}
			}
		}
		names := recordNames(t, rules)
		withData := 0
		for _, n := range names {
			res := prom.tryQuery(n)
			why, noData := wasteNoData[n]
			// The dashboard scenario has the Slurm job and the quota the
			// waste one lacks; only MIG is in neither.
			noData = noData && why == wasteNoMIG
			switch {
			case noData && len(res) > 0:
				t.Errorf("%s has data, though wasteNoData says it cannot: %s", n, why)
			case !noData && len(res) == 0:
				t.Errorf("recording rule %s has no data over OTLP", n)
			case !noData:
				withData++
				for _, s := range res {
					if v := s.value(t); math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
						t.Errorf("%s%v = %v", n, s.Metric, v)
					}
				}
			}
		}
		if len(names) < 10 {
			t.Fatalf("only %d recording rules in rules.yaml", len(names))
		}
		// The diagnosis, the rules' end product, as the scraped path has it.
		var diag []promSeries
		waitFor(t, 30*time.Second, "a diagnosis for every GPU holder", func() bool {
			diag = prom.tryQuery(`gpu_holder:nvidia_gpu_diagnosis:5m == 1`)
			return len(diag) == len(dashboardPods)+1 // and the Slurm job
		}, prom.proc)
		states := map[string]string{}
		for _, d := range diag {
			states[d.Metric["k8s_pod_name"]] = d.Metric["state"]
		}
		for _, p := range dashboardPods {
			if states[p.pod] != p.state {
				t.Errorf("%s: diagnosis %q over OTLP, want %q", p.pod, states[p.pod], p.state)
			}
		}
		t.Logf("%d recording rules, %d with data, %d without (wasteNoData: no MIG)", len(names), withData, len(wasteNoData))
	})
}
