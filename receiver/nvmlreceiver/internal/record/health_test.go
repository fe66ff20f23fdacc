package record

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// thermalAlertReasons returns the clock-event reasons of the shipped
// GPUThermalSlowdown alert.
func thermalAlertReasons(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "deploy", "prometheus", "rules.yaml"))
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	reason := regexp.MustCompile(`nvidia_gpu_clock_event_reason=~?"([^"]*)"`)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "GPUThermalSlowdown" {
				continue
			}
			m := reason.FindAllStringSubmatch(r.Expr, -1)
			require.Len(t, m, 1, r.Expr)
			out := map[string]bool{}
			for _, v := range strings.Split(m[0][1], "|") {
				out[v] = true
			}
			return out
		}
	}
	t.Fatal("no GPUThermalSlowdown in rules.yaml")
	return nil
}

// One definition of a slowdown that needs care: a clock-event reason
// makes hw.status degraded exactly when the GPUThermalSlowdown alert
// watches it.
func TestHWStateAgreesWithTheSlowdownAlert(t *testing.T) {
	t.Parallel()
	alerted := thermalAlertReasons(t)
	for _, c := range clockEventReasons {
		var h sample.Health
		h.ClockEvents[c.r] = sample.Opt[bool]{Value: true, OK: true}
		degraded := hwState(gpuRead, &h) == metadata.AttributeHwStateDegraded
		assert.Equal(t, alerted[c.attr.String()], degraded, "%s: in the alert, and degrading hw.status", c.attr)
		delete(alerted, c.attr.String())
	}
	assert.Empty(t, alerted, "the alert watches reasons the receiver does not report")
}
