package nvmlreceiver

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/accounting"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// TestIdleThresholdMatchesTheRules: the receiver counts nvidia.gpu.idle.time
// under accounting::idle_threshold, and the rules classify a holder as idle
// under the chart's prometheusRule.waste.idleActivity (rendered into
// deploy/prometheus/rules.yaml). Defaults that disagree would make a holder
// idle by one and not by the other: change both together, or this fails.
func TestIdleThresholdMatchesTheRules(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..", "deploy")
	raw, err := os.ReadFile(filepath.Join(root, "helm", "otelcol-nvml", "values.yaml"))
	require.NoError(t, err)
	var values struct {
		PrometheusRule struct {
			Waste struct {
				IdleActivity *float64 `yaml:"idleActivity"`
			} `yaml:"waste"`
		} `yaml:"prometheusRule"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &values))
	chart := values.PrometheusRule.Waste.IdleActivity
	require.NotNil(t, chart, "prometheusRule.waste.idleActivity in the chart's values.yaml")
	assert.Equal(t, accounting.DefaultIdleThreshold, *chart,
		"the chart's prometheusRule.waste.idleActivity and the receiver's accounting::idle_threshold default disagree")
	assert.Equal(t, accounting.DefaultIdleThreshold, createDefaultConfig().(*Config).Accounting.IdleThreshold)

	// The shipped rules, as rendered from the chart (TestRulesMatchChart in
	// test/deploy holds the whole file to the chart): the idle state and the
	// active-GPU count use the same figure.
	rules, err := os.ReadFile(filepath.Join(root, "prometheus", "rules.yaml"))
	require.NoError(t, err)
	want := strconv.FormatFloat(accounting.DefaultIdleThreshold, 'g', -1, 64)
	for _, expr := range []string{
		"(gpu_holder:nvidia_gpu_activity:5m < " + want + ")",
		">= " + want + "\n",
	} {
		assert.True(t, strings.Contains(string(rules), expr),
			"deploy/prometheus/rules.yaml lacks %q: the rules' idle threshold is not the receiver's %v", expr, accounting.DefaultIdleThreshold)
	}
}
