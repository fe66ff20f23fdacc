//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// TestNoStaleSeries: a GPU that is lost and a process that exits leave the
// Prometheus endpoint within 3 collection intervals (the exporter's
// metric_expiration, as every shipped config and the chart set it) and
// Prometheus's instant queries at its next scrape (the staleness marker of a
// series that vanished from its target), while the GPU that stays and the
// process that runs on stay; over OTLP, nothing expires, so no point of a lost

// lostGPUKeeps are the series a lost GPU keeps: hw.status (failed), its Xid
// counts, and its GPU-time counters, whose unobserved time grows (reason
// lost) while its held time stands still, so that its time still adds up.
var lostGPUKeeps = regexp.MustCompile(`^(hw_status|nvidia_gpu_xid_errors_total|nvidia_gpu_(held|busy|active|idle|free|unobserved)_time_seconds_total).*`)

// GPU's figures but hw.status is sent after the loss.
func TestNoStaleSeries(t *testing.T) {
	const (
		interval   = time.Second
		expiration = 3 * interval
		lostAt     = 6.0 // scenario seconds
		margin     = 1500 * time.Millisecond
	)
	const (
		keptUUID = "GPU-57a1e000-0000-4000-8000-000000000000"
		lostUUID = "GPU-57a1e000-0000-4000-8000-000000000001"
		runsPID  = 4100 // on the kept GPU, all along
		exitsPID = 4101 // on the kept GPU, exits at lostAt
		lostPID  = 4200 // on the lost GPU
	)
	gpu := func(uuid, serial, pci string, procs []Process) GPU {
		return GPU{
			UUID: uuid, Name: "NVIDIA H100 80GB HBM3 (SIMULATED)", Serial: serial, PCIBusID: pci,
			Utilization:  &Utilization{GPU: &Duty{Busy: 0.6}, Memory: &Duty{Busy: 0.3}},
			Memory:       &Memory{TotalBytes: 80 << 30, UsedBytes: 20 << 30},
			TemperatureC: 55, PowerW: 300, PowerLimitW: 700,
			Processes: procs,
		}
	}
	s := Scenario{Comment: "TestNoStaleSeries", GPUs: []GPU{
		gpu(keptUUID, "SIM-STALE-0", "00000000:11:00.0", []Process{
			{PID: runsPID, Name: "python3 serve.py", UsedMemoryBytes: 8 << 30, SMPercent: 40},
			{PID: exitsPID, Name: "python3 train.py", UsedMemoryBytes: 4 << 30, SMPercent: 20, Until: ptr(lostAt)},
		}),
		gpu(lostUUID, "SIM-STALE-1", "00000000:12:00.0", []Process{
			{PID: lostPID, Name: "python3 eval.py", UsedMemoryBytes: 2 << 30, SMPercent: 10},
		}),
	}}
	s.GPUs[1].LostAt = ptr(lostAt)

	be := startBackend(t, testutil.AbsFlag(t, "otelcol", *otelcolPath))
	col := startStaleCollector(t, s.write(t), be, interval, expiration)
	prom := startPrometheus(t, col.promAddr)
	t0 := col.scenarioStart(t, 30*time.Second)
	lost := t0.Add(time.Duration(lostAt * float64(time.Second)))

	// Series on the endpoint, by what they belong to.
	type census struct {
		keptGPU, lostGPU, lostStatus, runs, exits, lostProc []string
	}
	read := func() (census, error) {
		var c census
		body, err := scrapeEndpoint(col.promAddr)
		if err != nil {
			return c, err
		}
		for _, line := range strings.Split(body, "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			name := line[:strings.IndexAny(line, "{ ")]
			if name == "target_info" {
				continue
			}
			has := func(label, value string) bool { return strings.Contains(line, label+`="`+value+`"`) }
			switch {
			case has("process_pid", fmt.Sprint(runsPID)):
				c.runs = append(c.runs, name)
			case has("process_pid", fmt.Sprint(exitsPID)):
				c.exits = append(c.exits, name)
			case has("process_pid", fmt.Sprint(lostPID)):
				c.lostProc = append(c.lostProc, name)
			case has("hw_id", lostUUID) && lostGPUKeeps.MatchString(name):
				c.lostStatus = append(c.lostStatus, line)
			case has("hw_id", lostUUID):
				c.lostGPU = append(c.lostGPU, name)
			case has("hw_id", keptUUID):
				c.keptGPU = append(c.keptGPU, name)
			}
		}
		return c, nil
	}

	// Before the loss: every series there, on the endpoint and in Prometheus.
	var before census
	waitFor(t, 20*time.Second, "both GPUs' and the three processes' series on the endpoint", func() bool {
		c, err := read()
		before = c
		return err == nil && len(c.keptGPU) > 0 && len(c.lostGPU) > 0 && len(c.runs) > 0 && len(c.exits) > 0 && len(c.lostProc) > 0
	}, col.proc, be.proc)
	require.True(t, time.Now().Before(lost.Add(-time.Second)),
		"the series took until %.1f s of the scenario to show; the loss at t = %.0f s comes too soon", time.Since(t0).Seconds(), lostAt)
	lostSel := fmt.Sprintf(`{hw_id=%q, process_pid="", __name__!~"%s|target_info"}`, lostUUID, lostGPUKeeps.String()[1:])
	exitsSel := fmt.Sprintf(`{process_pid="%d", __name__!="target_info"}`, exitsPID)
	keptSel := fmt.Sprintf(`{hw_id=%q, process_pid="", __name__!~"hw_status.*|target_info"}`, keptUUID)
	runsSel := fmt.Sprintf(`{process_pid="%d", __name__!="target_info"}`, runsPID)
	waitFor(t, time.Until(lost), "Prometheus to hold the series of both GPUs and processes", func() bool {
		for _, q := range []string{lostSel, exitsSel, keptSel, runsSel} {
			if len(prom.tryQuery(q)) == 0 {
				return false
			}
		}
		return true
	}, col.proc, prom.proc)

	// After the loss: the lost GPU's figures, its process and the exited
	// process leave the endpoint within 3 intervals; the rest stays.
	deadline := lost.Add(expiration + margin)
	var gone time.Time
	for {
		col.proc.requireAlive(t)
		c, err := read()
		require.NoError(t, err)
		if time.Now().After(lost) {
			require.NotEmpty(t, c.keptGPU, "the kept GPU's series at t = %.1f s", time.Since(t0).Seconds())
			require.NotEmpty(t, c.runs, "the running process's series at t = %.1f s", time.Since(t0).Seconds())
		}
		if len(c.lostGPU) == 0 && len(c.exits) == 0 && len(c.lostProc) == 0 {
			gone = time.Now()
			assert.NotEmpty(t, c.lostStatus, "the lost GPU's hw.status and GPU-time counters stay")
			for _, l := range c.lostStatus {
				if strings.Contains(l, `hw_state="failed"`) {
					assert.True(t, strings.HasSuffix(l, " 1"), "the lost GPU's hw.status is failed: %s", l)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("at t = %.1f s (lost at %.0f s, metric_expiration %s) the endpoint still serves: lost GPU %v, its process %v, the exited process %v",
				time.Since(t0).Seconds(), lostAt, expiration, uniq(c.lostGPU), uniq(c.lostProc), uniq(c.exits))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("lost at t = %.0f s; gone from the endpoint at t = %.2f s (metric_expiration %s); before: lost GPU %v, the exited process %v",
		lostAt, gone.Sub(t0).Seconds(), expiration, uniq(before.lostGPU), uniq(before.exits))

	// Prometheus: gone from instant queries after its next scrape (every
	// second), by the staleness marker, not 5 minutes of lookback later.
	lostProcSel := fmt.Sprintf(`{process_pid="%d", __name__!="target_info"}`, lostPID)
	promDeadline := gone.Add(interval + margin)
	for {
		prom.proc.requireAlive(t)
		left := map[string][]promSeries{}
		for _, q := range []string{lostSel, exitsSel, lostProcSel} {
			if r := prom.tryQuery(q); len(r) > 0 {
				left[q] = r
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(promDeadline) {
			t.Fatalf("%.1f s after the series left the endpoint Prometheus still answers: %v", time.Since(gone).Seconds(), left)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("gone from Prometheus's instant queries %.2f s after the endpoint", time.Since(gone).Seconds())
	assert.NotEmpty(t, prom.tryQuery(keptSel), "Prometheus: the kept GPU's series")
	assert.NotEmpty(t, prom.tryQuery(runsSel), "Prometheus: the running process's series")
	assert.NotEmpty(t, prom.tryQuery(fmt.Sprintf(`hw_status{hw_id=%q, hw_state="failed"} == 1`, lostUUID)), "Prometheus: the lost GPU's hw.status failed")

	// OTLP: nothing to expire; no point of the lost GPU's figures (but
	// lostGPUKeeps) after the loss. Wait for hw.status points well after it,
	// so that every scrape since the loss has arrived.
	var pts []point
	waitFor(t, 10*time.Second, "the lost GPU's hw.status points 3 intervals after the loss", func() bool {
		pts = be.points(t)
		for _, p := range filter(pts, lostUUID, "hw.status", nil) {
			if p.Time.After(lost.Add(expiration)) {
				return true
			}
		}
		return false
	}, col.proc, be.proc)
	// A scrape that began just before the loss may stamp its points a few
	// milliseconds after it.
	const slack = 200 * time.Millisecond
	late := map[string]int{}
	var lastBefore time.Time
	for _, p := range filter(pts, lostUUID, "", nil) {
		if lostGPUKeeps.MatchString(promName(p.Metric)) {
			continue
		}
		if p.Time.After(lost.Add(slack)) {
			late[p.Metric]++
		} else if p.Time.After(lastBefore) {
			lastBefore = p.Time
		}
	}
	assert.Empty(t, late, "OTLP: points of the lost GPU after the loss (t = %.0f s), by metric", lostAt)
	assert.False(t, lastBefore.IsZero(), "OTLP: the lost GPU's figures before the loss")
	for _, p := range pts {
		if p.Resource["process.pid"] == int64(lostPID) && p.Time.After(lost.Add(slack)) {
			late[p.Metric]++
		}
	}
	assert.Empty(t, late, "OTLP: points of the lost GPU's process after the loss, by metric")
	kept := 0
	for _, p := range filter(pts, keptUUID, "", nil) {
		if p.Time.After(lost.Add(expiration)) {
			kept++
		}
	}
	assert.Positive(t, kept, "OTLP: the kept GPU's points after the loss")
}

// startStaleCollector starts otelcol-nvml on the fake library with scenario,
// an OTLP exporter to be and a Prometheus exporter whose metric_expiration is
// expiration.
func startStaleCollector(t *testing.T, scenarioPath string, be *backend, interval, expiration time.Duration) *collector {
	t.Helper()
	dir := t.TempDir()
	c := &collector{promAddr: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))}
	cfg := fmt.Sprintf(`receivers:
  nvml:
    library_path: %s
    collection_interval: %s
    initial_delay: 200ms
    timeout: 500ms
exporters:
  otlp_grpc:
    endpoint: %s
    tls:
      insecure: true
  prometheus:
    endpoint: %s
    metric_expiration: %s
    resource_constant_labels:
      included: ["*"]
service:
  pipelines:
    metrics:
      receivers: [nvml]
      exporters: [otlp_grpc, prometheus]
  telemetry:
    metrics:
      level: none
`, testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath), interval, be.endpoint, c.promAddr, expiration)
	c.proc = startProcess(t, "collector", []string{scenarioEnv + "=" + scenarioPath},
		testutil.AbsFlag(t, "otelcol", *otelcolPath), "--config="+writeFile(t, filepath.Clean(dir), "collector.yaml", cfg))
	return c
}

// scrapeEndpoint reads a Prometheus exporter's /metrics.
func scrapeEndpoint(addr string) (string, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: HTTP %d: %s", resp.StatusCode, body)
	}
	return string(body), nil
}

func uniq(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// promName is the Prometheus name of an OTLP metric as the exporter names
// the ones lostGPUKeeps lists (dots to underscores, a counter of seconds
// with its unit and _total).
func promName(metric string) string {
	n := strings.ReplaceAll(metric, ".", "_")
	if strings.HasSuffix(n, "_time") {
		n += "_seconds_total"
	}
	if n == "nvidia_gpu_xid_errors" {
		n += "_total"
	}
	return n
}
