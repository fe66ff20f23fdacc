package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"gopkg.in/yaml.v3"

	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver"
	"github.com/otelcol-nvml/otelcol-nvml/tools/metricstable/table"
)

// maxREADME is the front door's budget (issue 17): 10 KB.
const maxREADME = 10240

func readFile(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, rel))
	require.NoError(t, err)
	return string(data)
}

// TestREADMESize: the README stays a front door; the rest goes to docs/.
func TestREADMESize(t *testing.T) {
	n := len(readFile(t, "README.md"))
	assert.LessOrEqual(t, n, maxREADME, "README.md is %d bytes; move detail to docs/", n)
	t.Logf("README.md: %d of %d bytes", n, maxREADME)
}

// section returns the text of the "## title" section of a Markdown file.
func section(t *testing.T, text, title string) string {
	t.Helper()
	start := strings.Index(text, "\n## "+title+"\n")
	require.GreaterOrEqual(t, start, 0, "no section %q", title)
	rest := text[start+1:]
	if end := strings.Index(rest[3:], "\n## "); end >= 0 {
		rest = rest[:end+4]
	}
	return rest
}

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)\n```")

// yamlBlocks returns every ```yaml block of text.
func yamlBlocks(text string) []string {
	var out []string
	for _, m := range yamlBlock.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// nvmlSettings parses a collector config and returns its receivers::nvml.
func nvmlSettings(t *testing.T, block string) *confmap.Conf {
	t.Helper()
	var raw map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(block), &raw))
	conf := confmap.NewFromStringMap(raw)
	require.True(t, conf.IsSet("receivers::nvml"), "the block configures receivers::nvml")
	sub, err := conf.Sub("receivers::nvml")
	require.NoError(t, err)
	return sub
}

func defaultConfig() *nvmlreceiver.Config {
	return nvmlreceiver.NewFactory().CreateDefaultConfig().(*nvmlreceiver.Config)
}

// toggles are the sections where the receiver README's block shows one
// example each, not every entry.
var toggles = []string{"metrics", "resource_attributes", "events"}

func isToggle(key string) bool {
	for _, p := range toggles {
		if key == p || strings.HasPrefix(key, p+"::") {
			return true
		}
	}
	return false
}

// settingKeys are the leaf keys of conf, toggles left out.
func settingKeys(conf *confmap.Conf) []string {
	var out []string
	for _, k := range conf.AllKeys() {
		if !isToggle(k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// TestConfigBlocks: the README's minimal config and the receiver README's
// full one are valid receiver configs; the full one lists every setting
// with its default value, and its field table every setting; the README
// does not repeat it.
func TestConfigBlocks(t *testing.T) {
	readme := yamlBlocks(section(t, readFile(t, "README.md"), "Configuration"))
	require.Len(t, readme, 1, "README.md's Configuration has one yaml block")
	component := section(t, readFile(t, filepath.Join("receiver", "nvmlreceiver", "README.md")), "Configuration")
	full := yamlBlocks(component)
	require.Len(t, full, 1, "the receiver README's Configuration has one yaml block")

	for name, block := range map[string]string{"README.md": readme[0], "receiver/nvmlreceiver/README.md": full[0]} {
		cfg := defaultConfig()
		require.NoError(t, nvmlSettings(t, block).Unmarshal(cfg), name)
		assert.NoError(t, confmap.Validate(cfg), "%s: the config validates", name)
	}

	// The full block: every setting, each at its default.
	settings := nvmlSettings(t, full[0])
	defaults := confmap.New()
	require.NoError(t, defaults.Marshal(defaultConfig()))
	assert.Equal(t, settingKeys(defaults), settingKeys(settings), "the receiver README's block lists every setting")
	withoutToggles := map[string]any{}
	for k, v := range settings.ToStringMap() {
		if !isToggle(k) {
			withoutToggles[k] = v
		}
	}
	got := defaultConfig()
	require.NoError(t, confmap.NewFromStringMap(withoutToggles).Unmarshal(got))
	if len(got.Devices) == 0 {
		got.Devices = nil // `devices: []` is the default, all GPUs
	}
	shown := confmap.New()
	require.NoError(t, shown.Marshal(got))
	for _, k := range settingKeys(defaults) {
		assert.Equal(t, defaults.Get(k), shown.Get(k), "the receiver README's block shows %s at its default", k)
	}
	for _, p := range toggles {
		assert.True(t, settings.IsSet(p), "the block shows how to set %s", p)
	}

	// The field table: one row per setting, as `a::b`.
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_:]+)`").FindAllStringSubmatch(component, -1) {
		rows[m[1]] = true
	}
	for _, k := range settingKeys(defaults) {
		assert.True(t, rows[k], "the receiver README's field table has no row for `%s`", k)
	}

	// Not repeated: the README's block is a minimal one.
	assert.NotEqual(t, strings.TrimSpace(full[0]), strings.TrimSpace(readme[0]))
	assert.LessOrEqual(t, len(settingKeys(nvmlSettings(t, readme[0]))), 3,
		"README.md's config is minimal; the settings belong in the receiver's README")
}

var backticked = regexp.MustCompile("^`([^`]+)`$")

// metricTable is the file of the metric table (the README links to it).
var metricTable = filepath.Join("docs", "reference", "metrics.md")

// TestMetricTable: the metric table is what tools/metricstable generates
// from metadata.yaml (make generate), and lists exactly metadata.yaml's
// metrics, with their instruments and units, and a Prometheus name built
// from each OTLP name. (The e2e suite checks the Prometheus names against
// a real Prometheus.)
func TestMetricTable(t *testing.T) {
	text := readFile(t, metricTable)
	generated, err := table.Rewrite(text, []byte(readFile(t, filepath.Join("receiver", "nvmlreceiver", "metadata.yaml"))))
	require.NoError(t, err)
	assert.Equal(t, generated, text, "%s's table is stale: run make generate", metricTable)
	start := strings.Index(text, "<!-- metrics-table:start -->")
	end := strings.Index(text, "<!-- metrics-table:end -->")
	require.True(t, start >= 0 && end > start, "%s has the metrics-table markers", metricTable)
	type row struct{ prom, kind, unit string }
	rows := map[string]row{}
	for _, line := range strings.Split(text[start:end], "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 4 {
			continue
		}
		otlp := backticked.FindStringSubmatch(strings.TrimSpace(cells[0]))
		prom := backticked.FindStringSubmatch(strings.TrimSpace(cells[1]))
		if otlp == nil || prom == nil {
			continue
		}
		assert.NotContains(t, rows, otlp[1], "the metric table lists %s twice", otlp[1])
		rows[otlp[1]] = row{prom[1], strings.TrimSpace(cells[2]), strings.TrimSpace(cells[3])}
	}

	var md struct {
		Metrics map[string]struct {
			Unit  string         `yaml:"unit"`
			Gauge map[string]any `yaml:"gauge"`
			Sum   *struct {
				Monotonic bool `yaml:"monotonic"`
			} `yaml:"sum"`
		} `yaml:"metrics"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(readFile(t, filepath.Join("receiver", "nvmlreceiver", "metadata.yaml"))), &md))
	require.NotEmpty(t, md.Metrics)
	for name, m := range md.Metrics {
		r, ok := rows[name]
		if !assert.True(t, ok, "%s does not list %s", metricTable, name) {
			continue
		}
		kind := "gauge"
		if m.Sum != nil {
			kind = map[bool]string{true: "counter", false: "updown"}[m.Sum.Monotonic]
		}
		assert.Equal(t, kind, r.kind, "the metric table: the type of %s", name)
		assert.Equal(t, m.Unit, r.unit, "the metric table: the unit of %s", name)
		assert.True(t, strings.HasPrefix(r.prom, strings.ReplaceAll(name, ".", "_")), "the metric table: %s's Prometheus name %s", name, r.prom)
		assert.Equal(t, kind == "counter", strings.HasSuffix(r.prom, "_total"), "the metric table: %s: _total on counters only", r.prom)
	}
	for name := range rows {
		assert.Contains(t, md.Metrics, name, "%s lists %s, which metadata.yaml does not have", metricTable, name)
	}
}
