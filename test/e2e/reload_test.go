//go:build e2e

package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// Issue 9, defect 1: with an NVML call stuck, a config reload (SIGHUP)
// waited for ever in the old receiver's shutdown, and the collector
// exported nothing after it. Now the old receiver gives up within its bound
// (leaving NVML initialized, in one log line) and the new one reports.
func TestReloadWithAStuckCall(t *testing.T) {
	t.Parallel()
	s := Scenario{GPUs: []GPU{
		{UUID: "GPU-4e10ad00-0000-4000-8000-000000000000", TemperatureC: 40, PowerW: 100},
		{UUID: "GPU-4e10ad00-0000-4000-8000-000000000001", TemperatureC: 41, PowerW: 100,
			Hangs: []Hang{{Call: "nvmlDeviceGetTemperature", From: 2, Seconds: 120}}},
	}}
	be := startBackend(t, testutil.AbsFlag(t, "otelcol", *otelcolPath))
	col := startCollector(t, "collector reloaded", s.write(t), be, "collection_interval: 500ms\ntimeout: 300ms\n")
	t0 := col.scenarioStart(t, 30*time.Second)
	healthy := s.GPUs[0].UUID
	waitFor(t, 20*time.Second, "GPU 1's read stuck", func() bool {
		return strings.Contains(col.proc.logs.String(), "did not finish before the scrape timeout")
	}, col.proc)

	if err := col.proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	reloaded := time.Now()
	waitFor(t, 15*time.Second, "the old receiver's shutdown to give up on the stuck call", func() bool {
		return strings.Contains(col.proc.logs.String(), "Not shutting NVML down")
	}, col.proc)
	waitFor(t, 20*time.Second, "the new receiver to report GPU 0", func() bool {
		for _, p := range filter(be.points(t), healthy, "hw.power", nil) {
			if p.Time.After(reloaded.Add(time.Second)) {
				return true
			}
		}
		return false
	}, col.proc)
	if n := strings.Count(col.proc.logs.String(), "Everything is ready"); n < 2 {
		t.Errorf("the collector started %d time(s); want the reload's start too", n)
	}
	t.Logf("reload at t=%.1f s; the new receiver reported within %v", reloaded.Sub(t0).Seconds(), time.Since(reloaded).Round(100*time.Millisecond))
}
