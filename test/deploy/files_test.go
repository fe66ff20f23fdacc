package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// TestRulesMatchChart: deploy/prometheus/rules.yaml (what promtool tests)
// is the chart's PrometheusRule with the default knobs, rule for rule.
func TestRulesMatchChart(t *testing.T) {
	objs := decodeAll(t, helmTemplate(t, "--set", "prometheusRule.enabled=true", "--show-only", "templates/prometheusrule.yaml"))
	rules := only[monitoringv1.PrometheusRule](t, objs)
	require.Len(t, rules, 1)

	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "rules.yaml"))
	require.NoError(t, err)
	var file monitoringv1.PrometheusRuleSpec
	require.NoError(t, yaml.UnmarshalStrict(data, &file), "rules.yaml does not decode strictly as a PrometheusRule spec")
	assert.Equal(t, file, rules[0].Spec, "deploy/prometheus/rules.yaml and the chart's PrometheusRule (default values) differ")
}

// TestKubernetesManifests: deploy/kubernetes/otelcol-nvml.yaml is the
// chart rendered with its defaults (for kubectl apply without helm).
func TestKubernetesManifests(t *testing.T) {
	rendered := helmTemplate(t)
	path := filepath.Join(repoRoot, "deploy", "kubernetes", "otelcol-nvml.yaml")
	header := []byte("# Rendered from deploy/helm/otelcol-nvml with the default values:\n" +
		"#   helm template otelcol-nvml deploy/helm/otelcol-nvml --namespace monitoring\n" +
		"# Do not edit: `make deploy-generate` rewrites it and make test checks it.\n" +
		"# Apply with: kubectl apply -n monitoring -f otelcol-nvml.yaml\n")
	checkRendering(t, path, append(header, rendered...))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	decodeAll(t, data)
}

// TestPromtoolFilesOrderEveryGroup: promtool evaluates the groups of a rule
// file in no set order at each evaluation time unless the test file gives
// group_eval_order, and the groups read each other's records (the 24h
// figures read the resampled counters, the holders the 1h figures). Every
// promtool test file of rules.yaml lists every group of it, each after the
// groups it reads, so that a new group cannot make a test pass or fail by
// chance.
func TestPromtoolFilesOrderEveryGroup(t *testing.T) {
	type ruleFile struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Record string `json:"record"`
				Expr   string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "rules.yaml"))
	require.NoError(t, err)
	var rules ruleFile
	require.NoError(t, yaml.Unmarshal(data, &rules))
	var names []string
	recordedIn := map[string]string{}
	for _, g := range rules.Groups {
		names = append(names, g.Name)
		for _, r := range g.Rules {
			if r.Record != "" {
				recordedIn[r.Record] = g.Name
			}
		}
	}
	tests, err := filepath.Glob(filepath.Join(repoRoot, "deploy", "prometheus", "*_test.yaml"))
	require.NoError(t, err)
	checked := 0
	for _, path := range tests {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		var file struct {
			RuleFiles      []string `json:"rule_files"`
			GroupEvalOrder []string `json:"group_eval_order"`
		}
		require.NoError(t, yaml.Unmarshal(data, &file), path)
		if len(file.RuleFiles) != 1 || file.RuleFiles[0] != "rules.yaml" {
			continue
		}
		checked++
		name := filepath.Base(path)
		assert.ElementsMatch(t, names, file.GroupEvalOrder, "%s: group_eval_order lists every group of rules.yaml", name)
		rank := map[string]int{}
		for i, g := range file.GroupEvalOrder {
			rank[g] = i
		}
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				for rec, from := range recordedIn {
					if from != g.Name && strings.Contains(r.Expr, rec) {
						assert.Less(t, rank[from], rank[g.Name], "%s: group %s reads %s of group %s, so comes after it", name, g.Name, rec, from)
					}
				}
			}
		}
	}
	assert.Equal(t, 6, checked, "the promtool test files of rules.yaml")
}

// TestGroupIntervalsStayUnderTheLookback: a record that dashboards and
// other rules read as an instant vector must be rewritten within
// Prometheus's 5-minute lookback, else a query between two evaluations
// finds nothing. Only a group whose records are read over ranges alone
// (the resampled counters, series:*) and that holds no alert may run
// less often.
func TestGroupIntervalsStayUnderTheLookback(t *testing.T) {
	var rules struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval"`
			Rules    []struct {
				Record string `json:"record"`
				Alert  string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "rules.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &rules))
	slow := 0
	for _, g := range rules.Groups {
		if g.Interval == "" {
			continue
		}
		d, err := time.ParseDuration(g.Interval)
		require.NoError(t, err, g.Name)
		if d < 5*time.Minute {
			continue
		}
		slow++
		for _, r := range g.Rules {
			assert.Empty(t, r.Alert, "group %s (every %s) holds an alert", g.Name, d)
			assert.True(t, strings.HasPrefix(r.Record, "series:"), "group %s (every %s, over the lookback) records %s, which instant queries read", g.Name, d, r.Record)
		}
	}
	assert.Equal(t, 1, slow, "groups over the lookback: only otelcol-nvml-counters-5m")
}
