package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

const rendering = `---
# Source: otelcol-nvml/templates/prometheusrule.yaml
# The alert and recording rules
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: otelcol-nvml
  namespace: monitoring
spec:
  groups:
    - name: otelcol-nvml
      rules:
        # A comment of the template.
        - alert: GPUHolderUnderused
          expr: |-
            gpu_holder:nvidia_gpu_activity:5m
              < 0.2
          for: 5m
          annotations:
            summary: "{{ $labels.hw_id }} under 20%"
`

// TestRender: the rules file is the PrometheusRule's spec, its groups, with
// the multi-line expressions kept as they were.
func TestRender(t *testing.T) {
	out, err := render([]byte(rendering), "a.yaml b.yaml")
	require.NoError(t, err)
	text := string(out)
	assert.True(t, strings.HasPrefix(text, "# otelcol-nvml's Prometheus rules"), text)
	assert.Contains(t, text, "# with a.yaml, b.yaml\n")
	assert.Contains(t, text, "\ngroups:\n  - name: otelcol-nvml\n")
	assert.Contains(t, text, "expr: |-\n          gpu_holder:nvidia_gpu_activity:5m\n            < 0.2\n")
	assert.NotContains(t, text, "apiVersion")
	assert.NotContains(t, text, "metadata")

	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(text))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&file))
	require.Len(t, file.Groups, 1)
	r := file.Groups[0].Rules[0]
	assert.Equal(t, "GPUHolderUnderused", r.Alert)
	assert.Equal(t, "gpu_holder:nvidia_gpu_activity:5m\n  < 0.2", r.Expr)
	assert.Equal(t, "{{ $labels.hw_id }} under 20%", r.Annotations["summary"])
}

// TestRenderRefuses: what is not one PrometheusRule with groups fails with
// a line that says what is wrong.
func TestRenderRefuses(t *testing.T) {
	for name, c := range map[string]struct{ in, want string }{
		"empty":         {"", "no PrometheusRule"},
		"comments only": {"---\n# Source: x\n", "no PrometheusRule"},
		"another kind":  {"kind: ConfigMap\nspec: {groups: [{name: a}]}\n", "no PrometheusRule"},
		"no spec":       {"kind: PrometheusRule\n", "has no spec"},
		"no groups":     {"kind: PrometheusRule\nspec:\n  groups: []\n", "no rule groups"},
		"other key":     {"kind: PrometheusRule\nspec:\n  groups: [{name: a}]\n  extra: 1\n", `"extra"`},
		"unnamed group": {"kind: PrometheusRule\nspec: {groups: [{rules: []}]}\n", "has no name"},
		"odd group":     {"kind: PrometheusRule\nspec: {groups: [{[]}]}", "not rule groups"},
		"two":           {"kind: PrometheusRule\nspec: {groups: [{name: a}]}\n---\nkind: PrometheusRule\nspec: {groups: [{name: b}]}\n", "more than one"},
		"not yaml":      {"kind: [\n", "not YAML"},
	} {
		_, err := render([]byte(c.in), "")
		if assert.Error(t, err, name) {
			assert.Contains(t, err.Error(), c.want, name)
		}
	}
}

// FuzzRender: any input gives a rules file that decodes to groups, or an
// error; never a panic.
func FuzzRender(f *testing.F) {
	f.Add([]byte(rendering))
	f.Add([]byte("kind: PrometheusRule\nspec: {groups: [{name: a, rules: []}]}\n"))
	f.Add([]byte("---\n---\nkind: PrometheusRule\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := render(in, "v.yaml")
		if err != nil {
			return
		}
		var file struct {
			Groups []map[string]any `yaml:"groups"`
		}
		require.NoError(t, yaml.Unmarshal(out, &file), "%s", out)
		require.NotEmpty(t, file.Groups)
		for _, g := range file.Groups {
			require.NotEmpty(t, g["name"], "%s", out)
		}
	})
}
