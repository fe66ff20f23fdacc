//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// TestUnobservedTimeAddsUp runs the fault soak's scenario (soakScenario:
// failing calls, hangs up to 20 s, a GPU lost mid-run) through the
// collector into a real Prometheus, and checks issue 23's identity there:
// for every GPU and every 10 s window, the increase of held + free +
// unobserved time is the window's wall-clock length, to within one
// collection interval (and Prometheus's own sampling of the exporter).
func TestUnobservedTimeAddsUp(t *testing.T) {
	t.Parallel()
	const D = 45 * time.Second
	scn, plan := soakScenario(*soakSeed, D)
	bin := testutil.AbsFlag(t, "otelcol", *otelcolPath)
	promAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	prom := startPrometheus(t, promAddr)
	cfg := fmt.Sprintf(`receivers:
  nvml:
    library_path: %s
    collection_interval: %s
    timeout: %s
    initial_delay: 500ms
    processes:
      max_per_gpu: 64
exporters:
  prometheus:
    endpoint: %s
    resource_constant_labels:
      included: ["*"]
service:
  pipelines:
    metrics:
      receivers: [nvml]
      exporters: [prometheus]
  telemetry:
    metrics:
      level: none
`, testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath), soakInterval, soakTimeout, promAddr)
	col := startProcess(t, "otelcol-nvml (unobserved)", []string{scenarioEnv + "=" + scn.write(t)},
		bin, "--config="+writeFile(t, t.TempDir(), "collector.yaml", cfg))
	c := &collector{proc: col, promAddr: promAddr}
	t0 := c.scenarioStart(t, 30*time.Second)
	end := t0.Add(D)
	for time.Now().Before(end.Add(2 * time.Second)) {
		col.requireAlive(t)
		prom.proc.requireAlive(t)
		time.Sleep(time.Second)
	}

	// Each window's figure is the difference of the sums at its ends:
	// increase() would extrapolate each series to the window's start at its
	// own rate, except a counter at 0 there (a reason that starts within the
	// window), which it clamps, and so reads up to one Prometheus scrape
	// interval short of the truth where a stuck or lost span begins.
	const window = 10 * time.Second
	sum := func(metric string) string { return fmt.Sprintf(`sum by (hw_id) (%s{hw_parent=""})`, metric) }
	q := sum("nvidia_gpu_held_time_seconds_total") + " + " + sum("nvidia_gpu_free_time_seconds_total") + " + " +
		sum("nvidia_gpu_unobserved_time_seconds_total")
	totalAt := func(at time.Time) map[string]float64 {
		out := map[string]float64{}
		for _, s := range queryAt(t, prom, q, at) {
			out[s.Metric["hw_id"]] = s.value(t)
		}
		return out
	}
	tolerance := soakInterval.Seconds() + 0.25 // one collection interval; the exporter's values are up to one old when scraped
	worst, windows := 0.0, 0
	// From 8 s (after Prometheus's first scrapes) to the end of the scenario.
	for at := t0.Add(8*time.Second + window); !at.After(end); at = at.Add(window / 2) {
		before, got := totalAt(at.Add(-window)), totalAt(at)
		for _, uuid := range plan.uuids {
			v, ok := got[uuid]
			v -= before[uuid]
			if _, had := before[uuid]; !ok || !had {
				t.Errorf("t = %.0f s: no held + free + unobserved for %s", at.Sub(t0).Seconds(), uuid)
				continue
			}
			windows++
			worst = math.Max(worst, math.Abs(v-window.Seconds()))
			if math.Abs(v-window.Seconds()) > tolerance {
				t.Errorf("t = %.0f s, %s: held + free + unobserved = %.3f s over a %s window (tolerance %.2f s)",
					at.Sub(t0).Seconds(), uuid, v, window, tolerance)
			}
		}
	}
	t.Logf("%d GPU windows of %s: the largest difference from wall-clock time is %.3f s", windows, window, worst)

	// The scenario's faults reach their reasons: failed process lists,
	// hangs, the lost GPU, and the receiver's start.
	totals := map[string]float64{}
	for _, s := range queryAt(t, prom, `sum by (nvidia_gpu_unobserved_reason) (max_over_time(nvidia_gpu_unobserved_time_seconds_total[10m]))`, end) {
		totals[s.Metric["nvidia_gpu_unobserved_reason"]] = s.value(t)
	}
	t.Logf("unobserved seconds by reason: %v", totals)
	for _, r := range []string{"read_failed", "stuck", "lost", "restart"} {
		if totals[r] <= 0 {
			t.Errorf("no unobserved time for %s: %v", r, totals)
		}
	}
	// The lost GPU's time after its loss is lost time.
	lostUUID := plan.uuids[plan.lostGPU]
	after := end.Sub(t0.Add(time.Duration(plan.lostAt * float64(time.Second))))
	res := queryAt(t, prom, fmt.Sprintf(`sum(increase(nvidia_gpu_unobserved_time_seconds_total{hw_id=%q,nvidia_gpu_unobserved_reason="lost"}[%s]))`,
		lostUUID, (after-2*time.Second).Round(time.Second)), end)
	if len(res) != 1 || math.Abs(res[0].value(t)-(after-2*time.Second).Round(time.Second).Seconds()) > 1 {
		t.Errorf("the lost GPU's lost time over its last %s: %s", (after - 2*time.Second).Round(time.Second), seriesString(res))
	}
}

// queryAt runs an instant query at time at.
func queryAt(t *testing.T, p *prometheus, q string, at time.Time) []promSeries {
	t.Helper()
	data, err := p.get("/api/v1/query", url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}})
	if err != nil {
		t.Fatalf("prometheus query %q at %s: %v", q, at, err)
	}
	var d struct {
		Result []promSeries `json:"result"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("prometheus query %q: %v", q, strings.TrimSpace(string(data)))
	}
	return d.Result
}
