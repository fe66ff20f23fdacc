//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// Issue 9, defect 12 (the receiver's side): a receiver whose GPU read is
// stuck reports a recoverable error in its component status, and the
// health_check extension, behind its extension.healthcheck.useComponentStatus
// gate, answers 500 until the read returns. The README documents the gate.
func TestHealthCheckSeesAStuckReceiver(t *testing.T) {
	t.Parallel()
	s := Scenario{GPUs: []GPU{
		{UUID: "GPU-4ea17000-0000-4000-8000-000000000000", TemperatureC: 40, PowerW: 100},
		{UUID: "GPU-4ea17000-0000-4000-8000-000000000001", TemperatureC: 41, PowerW: 100,
			Hangs: []Hang{{Call: "nvmlDeviceGetTemperature", From: 6, Seconds: 8}}},
	}}
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	dir := t.TempDir()
	cfg := fmt.Sprintf(`receivers:
  nvml:
    library_path: %s
    collection_interval: 500ms
    timeout: 300ms
exporters:
  debug:
    verbosity: basic
extensions:
  health_check:
    http:
      endpoint: %s
      status:
        enabled: true
        path: /status
    component_health:
      include_permanent_errors: true
      include_recoverable_errors: true
      recovery_duration: 1s
service:
  extensions: [health_check]
  pipelines:
    metrics:
      receivers: [nvml]
      exporters: [debug]
  telemetry:
    metrics:
      level: none
`, testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath), addr)
	p := startProcess(t, "otelcol-nvml (health)", []string{scenarioEnv + "=" + s.write(t)},
		testutil.AbsFlag(t, "otelcol", *otelcolPath), "--feature-gates=extension.healthcheck.useComponentStatus",
		"--config="+writeFile(t, dir, "collector.yaml", cfg))
	status := func() int {
		resp, err := http.Get("http://" + addr + "/status")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor(t, 30*time.Second, "a healthy status before the hang", func() bool { return status() == http.StatusOK }, p)
	waitFor(t, 15*time.Second, "an error status (5xx) while GPU 1's read is stuck", func() bool { return status() >= 500 }, p)
	waitFor(t, 20*time.Second, "healthy again once the read returns", func() bool { return status() == http.StatusOK }, p)
}
