//go:build smoke

// Package smoke starts a built otelcol-nvml binary with a real config and
// checks that it comes up, serves, keeps running without a GPU and stops
// cleanly on SIGTERM. Run it with `make smoke`, or:
//
//	go test -tags smoke -v ./test/smoke -otelcol=/abs/path/otelcol-nvml -config=/abs/path/config.yaml
//
// Relative paths are taken from this package's directory (go test's working
// directory). Every listening port of the config that the test knows about is
// moved to a free 127.0.0.1 port with --set, so the test does not clash with a
// collector already running on the machine.
package smoke

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

var (
	otelcolPath  = flag.String("otelcol", "", "path of the otelcol-nvml binary to start")
	configPath   = flag.String("config", "", "path of the collector config to start it with")
	expectMetric = flag.String("expect-metric", "system_memory", "substring that must appear on the Prometheus endpoint (hostmetrics); empty skips the check")
)

const (
	readyTimeout = 30 * time.Second // collector start until health_check answers 200
	stayUpFor    = 5 * time.Second  // how long it must keep running after that
	stopTimeout  = 15 * time.Second // SIGTERM until exit
)

// get fetches url and returns the status code and body.
func get(client *http.Client, url string) (int, string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, string(body), err
}

func TestCollectorStartsServesAndStops(t *testing.T) {
	bin := testutil.AbsFlag(t, "otelcol", *otelcolPath)
	cfg := testutil.AbsFlag(t, "config", *configPath)

	promPort, healthPort, telemetryPort := testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t)
	promAddr := fmt.Sprintf("127.0.0.1:%d", promPort)
	healthAddr := fmt.Sprintf("127.0.0.1:%d", healthPort)
	args := []string{
		"--config=" + cfg,
		"--set=exporters::prometheus::endpoint=" + promAddr,
		"--set=extensions::health_check::endpoint=" + healthAddr,
		// The collector's own metrics: one pull reader on a free loopback port
		// instead of the config's fixed one.
		fmt.Sprintf("--set=service::telemetry::metrics::readers=[{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]", telemetryPort),
	}

	logs := &testutil.SyncBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logs
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	t.Logf("started %s (pid %d), prometheus on %s, health_check on %s, telemetry on 127.0.0.1:%d",
		filepath.Base(bin), cmd.Process.Pid, promAddr, healthAddr, telemetryPort)

	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	exited := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	t.Cleanup(func() {
		if !exited() {
			t.Logf("collector (pid %d) still running at cleanup; killing it", cmd.Process.Pid)
			_ = cmd.Process.Kill()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Errorf("collector (pid %d) did not exit after SIGKILL", cmd.Process.Pid)
			}
		}
		if t.Failed() {
			t.Logf("collector output:\n%s", logs.String())
		}
	})

	client := &http.Client{Timeout: 2 * time.Second}

	// 1. health_check answers 200.
	healthURL := "http://" + healthAddr + "/"
	deadline := time.Now().Add(readyTimeout)
	var lastHealth string
	for {
		if exited() {
			t.Fatalf("collector exited before it was healthy: %v", waitErr)
		}
		code, body, err := get(client, healthURL)
		if err == nil && code == http.StatusOK {
			t.Logf("health_check: 200 %s", strings.TrimSpace(body))
			break
		}
		if err != nil {
			lastHealth = err.Error()
		} else {
			lastHealth = fmt.Sprintf("HTTP %d: %s", code, strings.TrimSpace(body))
		}
		if time.Now().After(deadline) {
			t.Fatalf("health_check at %s not 200 within %s; last: %s", healthURL, readyTimeout, lastHealth)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// 2. the Prometheus exporter serves /metrics (and, once hostmetrics has
	// scraped, carries its series); 3. the process stays up meanwhile.
	metricsURL := "http://" + promAddr + "/metrics"
	stayUntil := time.Now().Add(stayUpFor)
	metricsDeadline := time.Now().Add(readyTimeout)
	served, sawMetric := false, *expectMetric == ""
	var lastMetrics string
	for !(served && sawMetric && time.Now().After(stayUntil)) {
		if exited() {
			t.Fatalf("collector exited while running: %v", waitErr)
		}
		if !(served && sawMetric) {
			code, body, err := get(client, metricsURL)
			switch {
			case err != nil:
				lastMetrics = err.Error()
			case code != http.StatusOK:
				lastMetrics = fmt.Sprintf("HTTP %d", code)
			default:
				served = true
				lastMetrics = fmt.Sprintf("HTTP 200 without %q (%d bytes)", *expectMetric, len(body))
				if !sawMetric && strings.Contains(body, *expectMetric) {
					sawMetric = true
					t.Logf("prometheus: 200, %d bytes, has %q", len(body), *expectMetric)
				}
			}
			if !(served && sawMetric) && time.Now().After(metricsDeadline) {
				t.Fatalf("prometheus exporter at %s: want 200 with %q within %s; last: %s",
					metricsURL, *expectMetric, readyTimeout, lastMetrics)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	if code, _, err := get(client, healthURL); err != nil || code != http.StatusOK {
		t.Errorf("health_check after %s: code %d, err %v", stayUpFor, code, err)
	}

	// 4. without a GPU the receiver must say so and keep going.
	out := logs.String()
	switch {
	case strings.Contains(out, "NVML initialized"):
		t.Log("NVML initialized: a GPU is present; skipping the no-GPU log check")
	case strings.Contains(out, "NVML is unavailable"):
		t.Log(`log has "NVML is unavailable" (no GPU), and the collector kept running`)
	default:
		t.Errorf(`log has neither "NVML is unavailable" nor "NVML initialized"`)
	}

	// 5. SIGTERM stops it cleanly, by PID.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to pid %d: %v", cmd.Process.Pid, err)
	}
	select {
	case <-done:
	case <-time.After(stopTimeout):
		t.Fatalf("collector (pid %d) did not exit within %s of SIGTERM", cmd.Process.Pid, stopTimeout)
	}
	if waitErr != nil {
		t.Errorf("collector exit after SIGTERM: %v (want status 0)", waitErr)
	}
	if strings.Contains(logs.String(), "panic:") {
		t.Errorf("collector output contains a panic")
	}
}
