package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The recording rules of the waste accounting that other parts read (the
// dashboard's Waste row, the e2e suite, docs/design/waste.md): a rename breaks
// them, so the names are pinned here.
func wasteRuleNames() []string {
	var names []string
	for _, r := range []string{"1h", "24h"} {
		for _, m := range []string{"held", "busy", "active", "idle"} {
			for _, level := range []string{"namespace_pod", "namespace", "node", "model"} {
				names = append(names, level+":nvidia_gpu_"+m+"_hours:"+r)
			}
			if m != "active" { // GPM has no per-process figure
				names = append(names, "user:nvidia_gpu_"+m+"_hours:"+r)
			}
		}
		for _, level := range []string{"namespace_pod", "namespace", "user"} {
			names = append(names, level+":nvidia_gpu_efficiency:"+r)
		}
	}
	for _, level := range []string{"namespace_pod", "namespace", "user"} {
		names = append(names, level+":nvidia_gpu_idle_cost:24h")
	}
	return append(names, "nvidia_gpu_price_per_hour",
		"gpu_holder:nvidia_gpu_diagnosis:5m", "gpu_holder:nvidia_gpu_activity:5m",
		"gpu_holder:nvidia_gpu_cpu_of_limit:5m", "gpu_holder:nvidia_gpu_process_cpu:5m",
		"gpu_holder:nvidia_gpu_memory_headroom:5m", "gpu_holder:nvidia_gpu_diagnosis_candidate:5m")
}

// renderRules renders the chart's PrometheusRule with extra helm args.
func renderRules(t *testing.T, args ...string) monitoringv1.PrometheusRuleSpec {
	t.Helper()
	args = append([]string{"--set", "prometheusRule.enabled=true", "--show-only", "templates/prometheusrule.yaml"}, args...)
	rules := only[monitoringv1.PrometheusRule](t, decodeAll(t, helmTemplate(t, args...)))
	require.Len(t, rules, 1)
	return rules[0].Spec
}

// rulesNamed returns the rules recording name, or the alert of that name.
func rulesNamed(spec monitoringv1.PrometheusRuleSpec, name string) []monitoringv1.Rule {
	var out []monitoringv1.Rule
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Record == name || r.Alert == name {
				out = append(out, r)
			}
		}
	}
	return out
}

func oneRule(t *testing.T, spec monitoringv1.PrometheusRuleSpec, name string) monitoringv1.Rule {
	t.Helper()
	rs := rulesNamed(spec, name)
	require.Len(t, rs, 1, name)
	return rs[0]
}

// TestWasteRuleNames: rules.yaml records every name of the spec, and each
// diagnosis state once.
func TestWasteRuleNames(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "rules.yaml"))
	require.NoError(t, err)
	var spec monitoringv1.PrometheusRuleSpec
	require.NoError(t, yaml.UnmarshalStrict(data, &spec))
	for _, name := range wasteRuleNames() {
		assert.NotEmpty(t, rulesNamed(spec, name), "rules.yaml does not record %s", name)
	}
	var states []string
	for _, r := range rulesNamed(spec, "gpu_holder:nvidia_gpu_diagnosis:5m") {
		states = append(states, r.Labels["state"])
	}
	assert.Equal(t, []string{"memory_pressure", "idle", "input_bound", "gpu_bound", "underused"}, states,
		"one diagnosis series per state, in the order of their codes (1 to 5)")
	for _, name := range []string{"GPUHolderIdle", "GPUHolderInputBound", "GPUHolderMemoryPressure"} {
		assert.NotEmpty(t, rulesNamed(spec, name))
	}
	assert.Empty(t, rulesNamed(spec, "GPUHolderUnderused"), "off by default (underused-rules.yaml has it)")
	assert.Empty(t, rulesNamed(spec, "GPUPodIdle"), "replaced by GPUHolderIdle")
	assert.Empty(t, rulesNamed(spec, "GPUHeldButIdle"), "replaced by GPUHolderIdle where the diagnosis is on")
	assert.NotEmpty(t, rulesNamed(spec, "NamespaceIdleGPUHours"))
	assert.NotEmpty(t, rulesNamed(spec, "NodeGPUTimeUnobserved"))
}

// TestWasteRulesFollowValues: the prices and thresholds of
// prometheusRule.waste reach the rules, the default price covers exactly
// the models the list does not name (the names are regex-quoted), and
// waste.enabled=false leaves only the alert group.
func TestWasteRulesFollowValues(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(`prometheusRule:
  waste:
    idleActivity: 0.1
    inputBound: {activity: 0.4, cpuOfLimit: 0.8, processCores: 0.7, busy: 0.3}
    gpuBound: {activity: 0.6}
    memoryPressure: {usage: 0.9, trendMinutes: 15, trendMinSpanMinutes: 10, predictMinutes: 60}
    stableMinutes: 7
    alerts:
      runbookURL: https://wiki.example.com/gpu-runbook
      idle: {enabled: true, for: 1h, advice: Ask in the GPU channel.}
      memoryPressure: {enabled: false, for: 2m, advice: x}
    namespaceIdle: {gpuHours: 24, for: 30m}
    unobserved: {ratio: 0.25, for: 1h}
    pricePerHour:
      "NVIDIA H200": 9.5
      "Tesla V100-SXM2-16GB (x.y)": 0.25
      "NVIDIA A100-SXM4-80GB": null
    defaultPricePerHour: 0.75
`), 0o600))
	spec := renderRules(t, "-f", values)

	prices := map[string]string{}
	var defaultExpr string
	for _, r := range rulesNamed(spec, "nvidia_gpu_price_per_hour") {
		if m, ok := r.Labels["hw_model"]; ok {
			prices[m] = r.Expr.String()
		} else {
			require.Empty(t, defaultExpr, "one default price rule")
			defaultExpr = r.Expr.String()
		}
	}
	assert.Equal(t, map[string]string{
		"NVIDIA H200":                "vector(9.5)",
		"NVIDIA H100 80GB HBM3":      "vector(3)", // a default the values file leaves
		"Tesla V100-SXM2-16GB (x.y)": "vector(0.25)",
	}, prices, "the values' list, merged with the defaults, null dropping one")
	require.True(t, strings.HasPrefix(defaultExpr, "0.75 * "), defaultExpr)
	m := regexp.MustCompile("hw_model!~`([^`]*)`").FindStringSubmatch(defaultExpr)
	require.Len(t, m, 2, defaultExpr)
	listed := regexp.MustCompile("^(?:" + m[1] + ")$") // Prometheus anchors label regexes
	for model := range prices {
		assert.True(t, listed.MatchString(model), "the default price would also cover the listed %q", model)
	}
	for _, model := range []string{"NVIDIA H200 (SIMULATED)", "Tesla V100-SXM2-16GB (xxy)", "NVIDIA A100-SXM4-80GB", "NVIDIA L4"} {
		assert.False(t, listed.MatchString(model), "%q gets no price", model)
	}

	candidateRule := oneRule(t, spec, "gpu_holder:nvidia_gpu_diagnosis_candidate:5m")
	candidate := candidateRule.Expr.String()
	for _, want := range []string{
		">= 0.9\n", // memory used of the limit
		"predict_linear(hw_gpu_memory_usage_bytes[15m], 3600)",
		"and hw_gpu_memory_usage_bytes offset 10m\n",
		"gpu_holder:nvidia_gpu_activity:5m < 0.1)",
		"gpu_holder:nvidia_gpu_activity:5m < 0.4\n",
		"gpu_holder:nvidia_gpu_cpu_of_limit:5m >= 0.8\n",
		"gpu_holder:nvidia_gpu_process_cpu:5m >= 0.7\n",
		">= 0.3\n", // the GPU's busy fraction
		"gpu_holder:nvidia_gpu_activity:5m >= 0.6)",
	} {
		assert.Contains(t, candidate, want)
	}
	codeRule := oneRule(t, spec, "gpu_holder:nvidia_gpu_diagnosis_code:5m")
	code := codeRule.Expr.String()
	assert.Contains(t, code, "changes(gpu_holder:nvidia_gpu_diagnosis_candidate:5m[7m])")
	idle := oneRule(t, spec, "GPUHolderIdle")
	require.NotNil(t, idle.For)
	assert.Equal(t, monitoringv1.Duration("1h"), *idle.For)
	require.NotNil(t, idle.KeepFiringFor)
	assert.Equal(t, monitoringv1.NonEmptyDuration("7m"), *idle.KeepFiringFor, "an alert keeps firing for the diagnosis's hold")
	assert.Equal(t, "Ask in the GPU channel.", idle.Annotations["advice"])
	assert.Equal(t, "https://wiki.example.com/gpu-runbook#idle", idle.Annotations["runbook_url"])
	assert.Contains(t, idle.Annotations["summary"], "(activity under 10%)")
	assert.Empty(t, rulesNamed(spec, "GPUHolderMemoryPressure"), "alerts.memoryPressure.enabled false")
	assert.NotEmpty(t, rulesNamed(spec, "GPUHolderInputBound"), "the defaults the values file leaves")
	nsIdle := oneRule(t, spec, "NamespaceIdleGPUHours")
	assert.Equal(t, "namespace:nvidia_gpu_idle_hours:24h > 24", nsIdle.Expr.String())
	require.NotNil(t, nsIdle.For)
	assert.Equal(t, monitoringv1.Duration("30m"), *nsIdle.For)
	unobserved := oneRule(t, spec, "NodeGPUTimeUnobserved")
	assert.True(t, strings.HasSuffix(unobserved.Expr.String(), "> 0.25"), unobserved.Expr.String())
	require.NotNil(t, unobserved.For)
	assert.Equal(t, monitoringv1.Duration("1h"), *unobserved.For)
	assert.Contains(t, unobserved.Annotations["summary"], "(more than 25%)")

	off := renderRules(t, "--set", "prometheusRule.waste.enabled=false")
	require.Len(t, off.Groups, 1)
	assert.Equal(t, "otelcol-nvml", off.Groups[0].Name)
	// Without the diagnosis, the per-GPU idle alerts stand in for GPUHolderIdle.
	assert.NotEmpty(t, rulesNamed(off, "GPUHeldButIdle"))
	assert.NotEmpty(t, rulesNamed(off, "GPUHeldButSMIdle"))
}

// TestWasteTrendSpanWithinRange: a minimum span of the memory trend longer
// than the trend's range could never be met; the chart refuses it, naming
// both values.
func TestWasteTrendSpanWithinRange(t *testing.T) {
	out, ok := helmResult(t, "template", "otelcol-nvml", chartDir, "--set", "prometheusRule.enabled=true",
		"--set", "prometheusRule.waste.memoryPressure.trendMinSpanMinutes=31")
	require.False(t, ok, "a span of 31 minutes in a 30-minute trend rendered:\n%.500s", out)
	assert.Contains(t, out, "prometheusRule.waste.memoryPressure.trendMinSpanMinutes (31) is more than trendMinutes (30)")
	_, ok = helmResult(t, "template", "otelcol-nvml", chartDir, "--set", "prometheusRule.enabled=true",
		"--set", "prometheusRule.waste.memoryPressure.trendMinSpanMinutes=30")
	assert.True(t, ok, "a span equal to the trend's range is refused")
}

// TestHolderAlertsRunbook: each holder alert of rules.yaml links to the
// runbook's section of its state (docs/operations/runbook.md, "## <state>"
// gives the anchor #<state>), under the chart's default base URL, and
// carries its state, severity and advice.
func TestHolderAlertsRunbook(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "rules.yaml"))
	require.NoError(t, err)
	var spec, underused monitoringv1.PrometheusRuleSpec
	require.NoError(t, yaml.UnmarshalStrict(data, &spec))
	data, err = os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "underused-rules.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(data, &underused))
	spec.Groups = append(spec.Groups, underused.Groups...)
	runbook, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations", "runbook.md"))
	require.NoError(t, err)
	const base = "https://github.com/otelcol-nvml/otelcol-nvml/blob/main/docs/operations/runbook.md#"
	for name, want := range map[string]struct{ state, severity string }{
		"GPUHolderIdle":           {"idle", "warning"},
		"GPUHolderInputBound":     {"input_bound", "warning"},
		"GPUHolderMemoryPressure": {"memory_pressure", "warning"},
		"GPUHolderUnderused":      {"underused", "info"},
	} {
		r := oneRule(t, spec, name)
		assert.Equal(t, want.state, r.Labels["state"], name)
		assert.Equal(t, want.severity, r.Labels["severity"], name)
		assert.Equal(t, base+want.state, r.Annotations["runbook_url"], name)
		assert.Contains(t, string(runbook), "\n## "+want.state+"\n", "runbook.md has no section %q for %s", want.state, name)
		assert.NotEmpty(t, r.Annotations["advice"], name)
		for _, figure := range []string{"gpu_holder:nvidia_gpu_activity:5m", "gpu_holder:nvidia_gpu_process_cpu:5m", "gpu_holder:nvidia_gpu_memory_headroom:5m", "deriv(hw_gpu_memory_usage_bytes"} {
			assert.Contains(t, r.Annotations["description"], figure, "%s's description reads %s", name, figure)
		}
	}
}

// TestUnderusedRuleFile: deploy/prometheus/underused-rules.yaml, which
// underused_test.yaml loads beside rules.yaml, is GPUHolderUnderused as the
// chart renders it with prometheusRule.waste.alerts.underused.enabled (off
// by default, so rules.yaml lacks it); -update rewrites it.
func TestUnderusedRuleFile(t *testing.T) {
	spec := renderRules(t, "--set", "prometheusRule.waste.alerts.underused.enabled=true")
	file := monitoringv1.PrometheusRuleSpec{Groups: []monitoringv1.RuleGroup{
		{Name: "otelcol-nvml-underused", Rules: []monitoringv1.Rule{oneRule(t, spec, "GPUHolderUnderused")}},
	}}
	data, err := yaml.Marshal(file)
	require.NoError(t, err)
	header := "# GPUHolderUnderused as the chart renders it with\n" +
		"# prometheusRule.waste.alerts.underused.enabled=true (off by default, so\n" +
		"# rules.yaml lacks it), for underused_test.yaml. Do not edit: `make\n" +
		"# deploy-generate` rewrites it and make test checks it.\n"
	checkRendering(t, filepath.Join(repoRoot, "deploy", "prometheus", "underused-rules.yaml"), append([]byte(header), data...))
}
