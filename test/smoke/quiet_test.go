//go:build smoke

package smoke

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

const (
	// quietInterval replaces the config's collection intervals, so that a
	// line per batch would show many times within quietWindow.
	quietInterval = "1s"
	quietWindow   = 10 * time.Second
	// quietSettle: the start's lines (and NVML's one warning without a
	// GPU) are written by then.
	quietSettle = 3 * time.Second
	// maxQuietLines: a cause logged once may land in the window; a line
	// per batch gives ten or more.
	maxQuietLines = 2
)

// TestDefaultConfigIsQuiet: a running collector with the config (`make run`'s
// deploy/config.yaml) writes at most a couple of lines over quietWindow, with
// both receivers collecting every second: no line per batch (the debug
// exporter's basic verbosity wrote one, about 12 a minute at the config's
// 10 s intervals).
func TestDefaultConfigIsQuiet(t *testing.T) {
	bin := testutil.AbsFlag(t, "otelcol", *otelcolPath)
	cfg := testutil.AbsFlag(t, "config", *configPath)

	promAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	healthAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	args := []string{
		"--config=" + cfg,
		"--set=exporters::prometheus::endpoint=" + promAddr,
		"--set=extensions::health_check::endpoint=" + healthAddr,
		fmt.Sprintf("--set=service::telemetry::metrics::readers=[{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]", testutil.FreePort(t)),
		"--set=receivers::nvml::collection_interval=" + quietInterval,
		"--set=receivers::host_metrics::collection_interval=" + quietInterval,
	}
	logs := &testutil.SyncBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("collector output:\n%s", logs.String())
		}
	})

	client := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(readyTimeout); ; {
		if code, _, err := get(client, "http://"+healthAddr+"/"); err == nil && code == http.StatusOK {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("collector exited before it was healthy: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("health_check not 200 within %s", readyTimeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(quietSettle)
	before := len(logs.String())
	time.Sleep(quietWindow)
	// Metrics were flowing meanwhile: the quiet is not a stalled pipeline.
	if code, body, err := get(client, "http://"+promAddr+"/metrics"); err != nil || code != http.StatusOK || !strings.Contains(body, *expectMetric) {
		t.Fatalf("prometheus exporter at %s: code %d, err %v, want %q", promAddr, code, err, *expectMetric)
	}
	window := strings.TrimSpace(logs.String()[before:])
	var lines []string
	if window != "" {
		lines = strings.Split(window, "\n")
	}
	if len(lines) > maxQuietLines {
		t.Errorf("%d log lines in %s with the config's collection intervals at %s (at most %d): a line per batch?\n%s",
			len(lines), quietWindow, quietInterval, maxQuietLines, window)
	} else {
		t.Logf("%d log lines in %s with both receivers collecting every %s", len(lines), quietWindow, quietInterval)
	}
}
