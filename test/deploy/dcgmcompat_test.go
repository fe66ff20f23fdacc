package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

const dcgmCompatGroup = "otelcol-nvml-dcgm-compat"

// dcgmCompatFile is deploy/prometheus/dcgm-compat.yaml, decoded strictly.
func dcgmCompatFile(t *testing.T) monitoringv1.PrometheusRuleSpec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "dcgm-compat.yaml"))
	require.NoError(t, err)
	var file monitoringv1.PrometheusRuleSpec
	require.NoError(t, yaml.UnmarshalStrict(data, &file), "dcgm-compat.yaml does not decode strictly as a PrometheusRule spec")
	require.Len(t, file.Groups, 1)
	require.Equal(t, dcgmCompatGroup, file.Groups[0].Name)
	return file
}

// renderPrometheusRule renders templates/prometheusrule.yaml with helm
// args; nil when the chart renders no PrometheusRule.
func renderPrometheusRule(t *testing.T, args ...string) *monitoringv1.PrometheusRuleSpec {
	t.Helper()
	args = append([]string{"--show-only", "templates/prometheusrule.yaml"}, args...)
	helm := binFlag(t, "helm", *helmPath)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helm, append([]string{"template", "otelcol-nvml", chartDir, "--namespace", "monitoring", "--kube-version", kubeVersion}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// helm fails --show-only on a template that renders nothing.
		require.Contains(t, stderr.String(), "could not find template", "helm template %v: %v", args, err)
		return nil
	}
	out := stdout.Bytes()
	rules := only[monitoringv1.PrometheusRule](t, decodeAll(t, out))
	if len(rules) == 0 {
		return nil
	}
	require.Len(t, rules, 1)
	return &rules[0].Spec
}

// TestDCGMCompatMatchesChart: with dcgmCompat.enabled the chart's
// PrometheusRule has exactly the rules of deploy/prometheus/dcgm-compat.yaml
// as one more group (alone when prometheusRule.enabled is off), and without
// it none of them.
func TestDCGMCompatMatchesChart(t *testing.T) {
	file := dcgmCompatFile(t)

	alone := renderPrometheusRule(t, "--set", "dcgmCompat.enabled=true")
	require.NotNil(t, alone, "dcgmCompat.enabled alone renders no PrometheusRule")
	require.Len(t, alone.Groups, 1, "dcgmCompat.enabled alone: one group")
	got, want := alone.Groups[0].Rules, file.Groups[0].Rules
	for i := 0; i < len(got) && i < len(want); i++ {
		assert.Equal(t, want[i], got[i], "rule %d (%s): deploy/prometheus/dcgm-compat.yaml and the chart's PrometheusRule with dcgmCompat.enabled differ", i, want[i].Record)
	}
	assert.Equal(t, len(want), len(got), "rules in dcgm-compat.yaml and in the chart's group")
	assert.Equal(t, file, *alone, "deploy/prometheus/dcgm-compat.yaml and the chart's PrometheusRule with dcgmCompat.enabled (prometheusRule.enabled off) differ")

	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "rules.yaml"))
	require.NoError(t, err)
	var base monitoringv1.PrometheusRuleSpec
	require.NoError(t, yaml.UnmarshalStrict(data, &base))
	both := renderPrometheusRule(t, "--set", "prometheusRule.enabled=true", "--set", "dcgmCompat.enabled=true")
	require.NotNil(t, both)
	groups := append(append([]monitoringv1.RuleGroup(nil), base.Groups...), file.Groups...)
	assert.Equal(t, groups, both.Groups, "with prometheusRule and dcgmCompat on: rules.yaml's groups, then dcgm-compat.yaml's")

	without := renderPrometheusRule(t, "--set", "prometheusRule.enabled=true")
	require.NotNil(t, without)
	for _, g := range without.Groups {
		assert.NotEqual(t, dcgmCompatGroup, g.Name, "dcgmCompat is off by default")
	}
	assert.Nil(t, renderPrometheusRule(t), "the defaults render no PrometheusRule")
}

// TestDCGMCompatRules: every rule of dcgm-compat.yaml records a dcgm-exporter
// field name with dcgm-exporter's labels, and each name once.
func TestDCGMCompatRules(t *testing.T) {
	file := dcgmCompatFile(t)
	seen := map[string]bool{}
	for _, r := range file.Groups[0].Rules {
		require.NotEmpty(t, r.Record, "alert %s: dcgm-compat.yaml holds recording rules only", r.Alert)
		assert.Regexp(t, `^DCGM_FI_(DEV|PROF)_[A-Z0-9_]+$`, r.Record)
		assert.False(t, seen[r.Record], "%s recorded twice", r.Record)
		seen[r.Record] = true
		expr := r.Expr.String()
		for _, l := range []string{"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION", "GPU_I_PROFILE", "GPU_I_ID", "pod", "namespace", "container"} {
			assert.Contains(t, expr, `"`+l+`", "`, "%s does not set %s", r.Record, l)
		}
	}
	for _, name := range []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP",
		"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_XID_ERRORS",
		"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE"} {
		assert.True(t, seen[name], "dcgm-compat.yaml does not record %s", name)
	}
}
