package deploy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/internal/deploy/dashboard"
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
		t.Errorf("%s is out of date with internal/deploy/dashboard: run `make dashboard` and commit.\n%s", path, lineDiff(string(got), string(want)))
	}
}
