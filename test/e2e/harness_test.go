//go:build e2e

// Package e2e runs the built otelcol-nvml on the simulated NVML library
// (test/fakenvml) end to end: cgo, dlopen and symbol lookup, versioned
// structs, the collector binary and its config, an OTLP backend (a second
// otelcol-nvml writing JSON lines) and a real Prometheus server scraping the
// collector. Run it with `make e2e`, or:
//
//	go test -tags e2e -v ./test/e2e -otelcol=/abs/otelcol-nvml \
//	    -fakenvml=/abs/libnvidia-ml.so.1 -prometheus=/usr/bin/prometheus -gonvml=/abs/go-nvml
//
// Every process the tests start listens on free 127.0.0.1 ports and is
// stopped by PID when its test ends, pass or fail; a failing test prints the
// output of every process it started.
package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

var (
	otelcolPath    = flag.String("otelcol", "", "path of the built otelcol-nvml binary")
	fakeNVMLPath   = flag.String("fakenvml", "", "path of the simulated libnvidia-ml.so.1 (make fakenvml)")
	prometheusPath = flag.String("prometheus", "/usr/bin/prometheus", "path of the Prometheus server binary")
	goNVMLDir      = flag.String("gonvml", "", "directory of the go-nvml module (go list -m -f '{{.Dir}}' github.com/NVIDIA/go-nvml); empty: asks go list")
)

const scenarioEnv = "FAKE_NVML_SCENARIO"

// process is one child the test started.
type process struct {
	name    string
	cmd     *exec.Cmd
	logs    *testutil.SyncBuffer
	started time.Time
	done    chan struct{}
	waitErr error
}

// startProcess starts bin and registers its stop (SIGTERM, then SIGKILL, by
// PID) and, when the test failed, the print of its output.
func startProcess(t *testing.T, name string, env []string, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, logs: &testutil.SyncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout = p.logs
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s (%s): %v", name, bin, err)
	}
	p.started = time.Now()
	t.Logf("started %s: pid %d", name, p.cmd.Process.Pid)
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("---- output of %s (pid %d) ----\n%s---- end of %s ----", name, p.cmd.Process.Pid, p.logs.String(), name)
		}
	})
	return p
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process by its PID: SIGTERM, then SIGKILL after 10 s.
func (p *process) stop(t *testing.T) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(10 * time.Second):
	}
	t.Logf("%s (pid %d) ignored SIGTERM for 10 s; killing it", p.name, p.cmd.Process.Pid)
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		t.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// requireAlive fails the test when the process has exited.
func (p *process) requireAlive(t *testing.T) {
	t.Helper()
	if p.exited() {
		t.Fatalf("%s (pid %d) exited: %v", p.name, p.cmd.Process.Pid, p.waitErr)
	}
}

// waitFor polls cond every 200 ms until it holds or timeout passes; what
// describes the wait in the failure message. Every process in procs must stay
// alive meanwhile.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, procs ...*process) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, p := range procs {
			p.requireAlive(t)
		}
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ---- the backend: a second otelcol-nvml, OTLP in, JSON lines out ------------------

type backend struct {
	proc     *process
	endpoint string // OTLP/gRPC, host:port
	file     string // metrics, JSON lines
	logsFile string // logs, JSON lines
}

func startBackend(t *testing.T, bin string) *backend {
	t.Helper()
	dir := t.TempDir()
	b := &backend{endpoint: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), file: filepath.Join(dir, "metrics.jsonl"),
		logsFile: filepath.Join(dir, "logs.jsonl")}
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
exporters:
  file/metrics:
    path: %s
    flush_interval: 200ms
  file/logs:
    path: %s
    flush_interval: 200ms
service:
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [file/metrics]
    logs:
      receivers: [otlp]
      exporters: [file/logs]
  telemetry:
    metrics:
      level: none
`, b.endpoint, b.file, b.logsFile)
	b.proc = startProcess(t, "backend collector", nil, bin, "--config="+writeFile(t, dir, "backend.yaml", cfg))
	waitFor(t, 30*time.Second, "the backend's OTLP port", func() bool {
		c, err := net.DialTimeout("tcp", b.endpoint, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, b.proc)
	return b
}

// point is one data point as the backend received it.
type point struct {
	UUID        string
	Resource    map[string]any
	Scope       string
	Metric      string
	Unit        string
	Type        pmetric.MetricType
	Monotonic   bool
	Temporality pmetric.AggregationTemporality
	ValueType   pmetric.NumberDataPointValueType
	Attrs       map[string]any
	Time        time.Time
	Value       float64
}

// points reads every data point the backend has written so far. A last line
// still being written is left for the next read.
func (b *backend) points(t *testing.T) []point {
	t.Helper()
	data, err := os.ReadFile(b.file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []point
	var um pmetric.JSONUnmarshaler
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		md, err := um.UnmarshalMetrics(line)
		if err != nil {
			continue // a partial last line
		}
		out = append(out, flatten(md)...)
	}
	return out
}

// logRecord is one log record as the backend received it.
type logRecord struct {
	UUID         string
	Resource     map[string]any
	Scope        string
	EventName    string
	Severity     plog.SeverityNumber
	SeverityText string
	Body         string
	Attrs        map[string]any
	Time         time.Time
}

// logs reads every log record the backend has written so far.
func (b *backend) logs(t *testing.T) []logRecord {
	t.Helper()
	data, err := os.ReadFile(b.logsFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []logRecord
	var um plog.JSONUnmarshaler
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		ld, err := um.UnmarshalLogs(sc.Bytes())
		if err != nil {
			continue // a partial last line
		}
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			rl := ld.ResourceLogs().At(i)
			res := rl.Resource().Attributes().AsRaw()
			uuid, _ := res["hw.id"].(string)
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				sl := rl.ScopeLogs().At(j)
				for k := 0; k < sl.LogRecords().Len(); k++ {
					lr := sl.LogRecords().At(k)
					out = append(out, logRecord{UUID: uuid, Resource: res, Scope: sl.Scope().Name(), EventName: lr.EventName(),
						Severity: lr.SeverityNumber(), SeverityText: lr.SeverityText(), Body: lr.Body().AsString(),
						Attrs: lr.Attributes().AsRaw(), Time: lr.Timestamp().AsTime()})
				}
			}
		}
	}
	return out
}

func flatten(md pmetric.Metrics) []point {
	var out []point
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		res := rm.Resource().Attributes().AsRaw()
		uuid, _ := res["hw.id"].(string)
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			sm := rm.ScopeMetrics().At(j)
			for k := 0; k < sm.Metrics().Len(); k++ {
				m := sm.Metrics().At(k)
				base := point{UUID: uuid, Resource: res, Scope: sm.Scope().Name(), Metric: m.Name(), Unit: m.Unit(), Type: m.Type()}
				var dps pmetric.NumberDataPointSlice
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					dps = m.Gauge().DataPoints()
				case pmetric.MetricTypeSum:
					dps = m.Sum().DataPoints()
					base.Monotonic = m.Sum().IsMonotonic()
					base.Temporality = m.Sum().AggregationTemporality()
				default:
					out = append(out, base) // a type the receiver never emits: the check reports it
					continue
				}
				for l := 0; l < dps.Len(); l++ {
					dp := dps.At(l)
					p := base
					p.Attrs = dp.Attributes().AsRaw()
					p.Time = dp.Timestamp().AsTime()
					p.ValueType = dp.ValueType()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						p.Value = float64(dp.IntValue())
					} else {
						p.Value = dp.DoubleValue()
					}
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// filter returns the points of one GPU and metric (uuid or metric empty: any)
// whose attributes include attrs.
func filter(pts []point, uuid, metric string, attrs map[string]any) []point {
	var out []point
next:
	for _, p := range pts {
		if (uuid != "" && p.UUID != uuid) || (metric != "" && p.Metric != metric) {
			continue
		}
		for k, v := range attrs {
			if p.Attrs[k] != v {
				continue next
			}
		}
		out = append(out, p)
	}
	return out
}

// ---- the collector under test ----------------------------------------------------------

type collector struct {
	proc     *process
	promAddr string // its Prometheus exporter, host:port
}

// startCollector starts otelcol-nvml on the fake library with scenario, the
// Prometheus exporter and, with a backend be, an OTLP exporter to it in a
// metrics and a logs pipeline: the receiver sits in both, as the README
// shows, so that its events arrive as log records.
func startCollector(t *testing.T, name, scenarioPath string, be *backend, nvmlExtra string) *collector {
	t.Helper()
	dir := t.TempDir()
	c := &collector{promAddr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))}
	exporters := "[prometheus]"
	otlp, logs := "", ""
	if be != nil {
		exporters = "[otlp_grpc, prometheus]"
		otlp = fmt.Sprintf(`  otlp_grpc:
    endpoint: %s
    tls:
      insecure: true
`, be.endpoint)
		logs = `    logs:
      receivers: [nvml]
      exporters: [otlp_grpc]
`
	}
	cfg := fmt.Sprintf(`receivers:
  nvml:
    library_path: %s
%s
exporters:
%s  prometheus:
    endpoint: %s
    resource_constant_labels:
      included: ["*"]
service:
  pipelines:
    metrics:
      receivers: [nvml]
      exporters: %s
%s  telemetry:
    # The log assertions count lines: zap's default sampling (10 a second
    # per message, then 1 in 100) would drop some of them.
    logs:
      sampling:
        enabled: false
    metrics:
      level: none
`, testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath), indent(nvmlExtra, "    "), otlp, c.promAddr, exporters, logs)
	c.proc = startProcess(t, name, []string{scenarioEnv + "=" + scenarioPath},
		testutil.AbsFlag(t, "otelcol", *otelcolPath), "--config="+writeFile(t, dir, "collector.yaml", cfg))
	return c
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

var clockLine = regexp.MustCompile(`fakenvml: SIMULATED NVML, not a real NVIDIA driver: .* scenario clock t=0 at unix_us=(\d+)`)

// scenarioStart waits for the fake library's init line and returns the wall
// time of its t = 0.
func (c *collector) scenarioStart(t *testing.T, timeout time.Duration) time.Time {
	t.Helper()
	var t0 time.Time
	waitFor(t, timeout, c.proc.name+": the fake library's init line", func() bool {
		m := clockLine.FindStringSubmatch(c.proc.logs.String())
		if m == nil {
			return false
		}
		us, _ := strconv.ParseInt(m[1], 10, 64)
		t0 = time.UnixMicro(us)
		return true
	}, c.proc)
	return t0
}

// logCount counts the collector's log lines that contain every one of parts.
func logCount(logs string, parts ...string) int {
	n := 0
next:
	for _, line := range strings.Split(logs, "\n") {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		n++
	}
	return n
}

// ---- Prometheus ----------------------------------------------------------------------

type prometheus struct {
	proc *process
	addr string
}

// startPrometheus starts Prometheus scraping target every second, with the
// alert rule files given (evaluated every second).
func startPrometheus(t *testing.T, target string, ruleFiles ...string) *prometheus {
	t.Helper()
	return startPrometheusScraping(t, target, "", ruleFiles...)
}

// startPrometheusScraping is startPrometheus with more scrape configs
// (YAML list items under scrape_configs, as kubeStateMetricsScrape writes).
func startPrometheusScraping(t *testing.T, target, moreScrapeConfigs string, ruleFiles ...string) *prometheus {
	t.Helper()
	bin := testutil.AbsFlag(t, "prometheus", *prometheusPath)
	dir := t.TempDir()
	p := &prometheus{addr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))}
	rules := ""
	if len(ruleFiles) > 0 {
		rules = "rule_files: [\"" + strings.Join(everySecond(t, dir, ruleFiles), "\", \"") + "\"]\n"
	}
	cfg := rules + fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: otelcol-nvml
    static_configs:
      - targets: ["%s"]
`, target) + moreScrapeConfigs
	p.proc = startProcess(t, "prometheus", nil, bin,
		"--config.file="+writeFile(t, dir, "prometheus.yml", cfg),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+p.addr,
		"--log.level=warn")
	client := &http.Client{Timeout: 2 * time.Second}
	waitFor(t, 60*time.Second, "Prometheus to be ready", func() bool {
		resp, err := client.Get("http://" + p.addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, p.proc)
	return p
}

type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s promSeries) value(t *testing.T) float64 {
	t.Helper()
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		t.Fatalf("prometheus value %v: %v", s.Value, err)
	}
	return v
}

// query runs an instant query through Prometheus's HTTP API.
func (p *prometheus) query(t *testing.T, q string) []promSeries {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatalf("prometheus query %q: %v", q, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSeries `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		t.Fatalf("prometheus query %q: HTTP %d, %s %s", q, resp.StatusCode, r.Error, body)
	}
	return r.Data.Result
}

// ---- metadata.yaml ---------------------------------------------------------------------

// metricSpec is what metadata.yaml says of one metric.
type metricSpec struct {
	Enabled   bool
	Unit      string
	Gauge     bool
	Monotonic bool
	Int       bool
}

// readMetadata reads the receiver's metadata.yaml, the source of truth for
// every metric's unit and instrument.
func readMetadata(t *testing.T) map[string]metricSpec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "receiver", "nvmlreceiver", "metadata.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := confmap.NewRetrievedFromYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := r.AsRaw()
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := raw.(map[string]any)["metrics"].(map[string]any)
	if len(metrics) == 0 {
		t.Fatal("metadata.yaml lists no metrics")
	}
	out := map[string]metricSpec{}
	for name, v := range metrics {
		m, _ := v.(map[string]any)
		spec := metricSpec{}
		spec.Enabled, _ = m["enabled"].(bool)
		spec.Unit, _ = m["unit"].(string)
		var inst map[string]any
		if g, ok := m["gauge"].(map[string]any); ok {
			spec.Gauge, inst = true, g
		} else if s, ok := m["sum"].(map[string]any); ok {
			inst = s
			spec.Monotonic, _ = s["monotonic"].(bool)
			if at, _ := s["aggregation_temporality"].(string); at != "cumulative" {
				t.Fatalf("metadata.yaml: %s: aggregation_temporality %q; the check knows only cumulative", name, at)
			}
		} else {
			t.Fatalf("metadata.yaml: %s is neither gauge nor sum", name)
		}
		vt, _ := inst["value_type"].(string)
		spec.Int = vt == "int"
		out[name] = spec
	}
	return out
}
