package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/otelcol-nvml/otelcol-nvml/test/deploy/dashboard"
)

// TestDashboardUpToDate: the committed dashboard is what the generator
// writes (make dashboard).
func TestDashboardUpToDate(t *testing.T) {
	want, err := dashboard.JSON()
	require.NoError(t, err)
	path := filepath.Join(repoRoot, "deploy", "grafana", "otelcol-nvml.json")
	got, err := os.ReadFile(path)
	require.NoError(t, err, "run `make dashboard` and commit")
	if string(got) != string(want) {
		t.Errorf("%s is out of date with test/deploy/dashboard: run `make dashboard` and commit.\n%s", path, lineDiff(string(got), string(want)))
	}
}

// dashboardPanels is the dashboard's top-level panels (rows included), as
// the JSON has them.
type dashboardPanels struct {
	Panels []struct {
		Type        string `json:"type"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Targets     []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func builtDashboard(t *testing.T) dashboardPanels {
	t.Helper()
	data, err := dashboard.JSON()
	require.NoError(t, err)
	var d dashboardPanels
	require.NoError(t, json.Unmarshal(data, &d))
	return d
}

// recordedName is a recording rule's level:metric:operations name.
var recordedName = regexp.MustCompile(`\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b`)

// TestDashboardReadsRecordedSeries: every recording rule a panel reads is
// one deploy/prometheus/rules.yaml records (a renamed rule empties the
// panel, and the e2e suite is not in every test run).
func TestDashboardReadsRecordedSeries(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "rules.yaml"))
	require.NoError(t, err)
	var spec monitoringv1.PrometheusRuleSpec
	require.NoError(t, yaml.Unmarshal(data, &spec))
	recorded := map[string]bool{}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	n := 0
	for _, p := range builtDashboard(t).Panels {
		for _, target := range p.Targets {
			for _, name := range recordedName.FindAllString(target.Expr, -1) {
				n++
				assert.True(t, recorded[name], "panel %q reads %s, which deploy/prometheus/rules.yaml does not record", p.Title, name)
			}
		}
	}
	require.NotZero(t, n, "no panel reads a recording rule")
}

// TestDashboardWasteRowFirst: the Waste row opens the dashboard, and each
// of its panels says how to read it, in one line.
func TestDashboardWasteRowFirst(t *testing.T) {
	panels := builtDashboard(t).Panels
	require.NotEmpty(t, panels)
	require.Equal(t, "row", panels[0].Type)
	require.True(t, strings.HasPrefix(panels[0].Title, "Waste"), "first row %q", panels[0].Title)
	n := 0
	for _, p := range panels[1:] {
		if p.Type == "row" {
			break
		}
		n++
		assert.NotEmpty(t, p.Description, "waste panel %q has no description", p.Title)
		assert.NotContains(t, p.Description, "\n", "waste panel %q: the description is one line", p.Title)
		for _, target := range p.Targets {
			assert.Regexp(t, recordedName, target.Expr, "waste panel %q reads raw series, not the waste rules", p.Title)
		}
	}
	assert.GreaterOrEqual(t, n, 6, "the Waste row has %d panels", n)
}
