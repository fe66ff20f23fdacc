package deploy

import (
	"os"
	"path/filepath"
	"testing"

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
