//go:build e2e

package e2e

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeMetric is one row of the README's metric table.
type readmeMetric struct {
	otlp, prom, kind, unit string
}

var backticked = regexp.MustCompile("^`([^`]+)`$")

// readREADMEMetrics parses the table between the metrics-table markers of
// docs/reference/metrics.md (the README's metric table, which it links to).
func readREADMEMetrics(t *testing.T) []readmeMetric {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "reference", "metrics.md"))
	require.NoError(t, err)
	text := string(raw)
	start := strings.Index(text, "<!-- metrics-table:start -->")
	end := strings.Index(text, "<!-- metrics-table:end -->")
	require.True(t, start >= 0 && end > start, "README.md has the metrics-table markers")
	var out []readmeMetric
	for _, line := range strings.Split(text[start:end], "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 4 {
			continue
		}
		otlp := backticked.FindStringSubmatch(strings.TrimSpace(cells[0]))
		prom := backticked.FindStringSubmatch(strings.TrimSpace(cells[1]))
		if otlp == nil || prom == nil {
			continue // the header and its rule
		}
		out = append(out, readmeMetric{otlp: otlp[1], prom: prom[1], kind: strings.TrimSpace(cells[2]), unit: strings.TrimSpace(cells[3])})
	}
	require.NotEmpty(t, out, "README.md metric rows")
	return out
}

// promFamilies reads the metric families (name -> TYPE) a Prometheus
// endpoint serves.
func promFamilies(t *testing.T, addr string) map[string]string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = f[3]
		}
	}
	return out
}

// checkREADMEMetrics: the README's table lists exactly metadata.yaml's
// metrics with their instruments and units; a real Prometheus scraping the
// collector has a series for every Prometheus name in it; and the
// collector's endpoint serves no family the README does not list, and no
// _ratio that is not a ratio.
func checkREADMEMetrics(t *testing.T, md map[string]metricSpec, prom *prometheus, col *collector) {
	rows := readREADMEMetrics(t)
	byOTLP := map[string]readmeMetric{}
	byProm := map[string]readmeMetric{}
	for _, r := range rows {
		assert.NotContains(t, byOTLP, r.otlp, "README lists %s twice", r.otlp)
		byOTLP[r.otlp], byProm[r.prom] = r, r
	}

	t.Run("the README lists every metric of metadata.yaml as it is", func(t *testing.T) {
		for name, spec := range md {
			r, ok := byOTLP[name]
			if !assert.True(t, ok, "README.md does not list %s", name) {
				continue
			}
			kind := "gauge"
			if !spec.Gauge {
				kind = map[bool]string{true: "counter", false: "updown"}[spec.Monotonic]
			}
			assert.Equal(t, kind, r.kind, "README.md: the type of %s", name)
			assert.Equal(t, spec.Unit, r.unit, "README.md: the unit of %s", name)
		}
		for name := range byOTLP {
			assert.Contains(t, md, name, "README.md lists %s, which metadata.yaml does not have", name)
		}
	})

	t.Run("Prometheus has every Prometheus name of the README", func(t *testing.T) {
		missing := func() []string {
			var out []string
			for _, r := range rows {
				if _, ok := checkedElsewhere[r.otlp]; ok {
					continue // not in this scenario; its test queries Prometheus for it
				}
				if len(prom.query(t, `{__name__="`+r.prom+`", job="otelcol-nvml"}`)) == 0 {
					out = append(out, r.prom)
				}
			}
			return out
		}
		var left []string
		deadline := time.Now().Add(20 * time.Second)
		for left = missing(); len(left) > 0 && time.Now().Before(deadline); left = missing() {
			time.Sleep(time.Second)
		}
		assert.Empty(t, left, "README.md names that Prometheus does not have")
	})

	t.Run("the collector's endpoint: every family in the README, _ratio only on ratios", func(t *testing.T) {
		families := promFamilies(t, col.promAddr)
		var ours int
		for name := range families {
			if !strings.HasPrefix(name, "hw_") && !strings.HasPrefix(name, "nvidia_") {
				continue // target_info, the exporter's own
			}
			ours++
			r, listed := byProm[name]
			assert.True(t, listed, "%s is served but not in README.md's table", name)
			if strings.HasSuffix(name, "_ratio") {
				assert.True(t, listed && r.unit == "1" && r.kind == "gauge",
					"%s ends in _ratio but is not a ratio (README: unit %q, %s)", name, r.unit, r.kind)
			}
		}
		assert.Equal(t, len(rows)-len(checkedElsewhere), ours, "one family per README row (but those checked elsewhere)")
	})
}
