package nvmlreceiver

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"gopkg.in/yaml.v3"

	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// Issue 33, part 6: a misspelled key reported `'nvmlreceiver.plain' has
// invalid keys: colection_interval`, naming an internal type and
// suggesting nothing, and a Prometheus-style metric name under metrics:
// got the same error.
func TestUnknownKeysAreNamedWithASuggestion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want []string
	}{
		{"misspelled", []string{"nvml receiver: unknown key colection_interval: did you mean collection_interval?"}},
		{"misspelled_nested", []string{
			"nvml receiver: unknown key processes::proc_rot: did you mean processes::proc_root?",
			"nvml receiver: unknown key kubernetes::dra::resource_slice: did you mean kubernetes::dra::resource_slices?",
		}},
		{"prometheus_metric_names", []string{
			"nvml receiver: unknown key metrics::hw_gpu_utilization_ratio: metrics: takes the OpenTelemetry metric names, not the Prometheus ones; did you mean hw.gpu.utilization?",
			"nvml receiver: unknown key metrics::nvidia_gpu_held_time_seconds_total: metrics: takes the OpenTelemetry metric names, not the Prometheus ones; did you mean nvidia.gpu.held.time?",
			"nvml receiver: unknown key metrics::DCGM_FI_DEV_GPU_UTIL: metrics: takes the OpenTelemetry metric names, not the Prometheus ones; did you mean hw.gpu.utilization?",
			"nvml receiver: unknown key metrics::hw.gpu.utilisation: did you mean metrics::hw.gpu.utilization?",
			"nvml receiver: unknown key metrics::hw.gpu.utilization::enable: did you mean metrics::hw.gpu.utilization::enabled?",
		}},
		{"unknown_far", []string{
			"nvml receiver: unknown key scrape_everything (valid keys here: accounting, collection_interval,",
			"nvml receiver: unknown key resource_attributes::k8s.pod.name::metrics_include[0]::regex: did you mean resource_attributes::k8s.pod.name::metrics_include[0]::regexp?",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := unmarshalConfig(t, tt.name)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
			assert.NotContains(t, err.Error(), "plain", "no internal type")
		})
	}
}

// unmarshalConfig reads the receiver's configuration name of
// testdata/config.yaml, and returns the error.
func unmarshalConfig(t *testing.T, name string) error {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	return sub.Unmarshal(NewFactory().CreateDefaultConfig())
}

func TestNoSuggestionForAFarKey(t *testing.T) {
	t.Parallel()
	err := unknownKeysError(map[string]any{"metrics": map[string]any{"gpu_temp_fahrenheit": map[string]any{}}})
	require.Error(t, err)
	assert.Equal(t, "nvml receiver: unknown key metrics::gpu_temp_fahrenheit (the names are listed in the receiver's documentation.md)", err.Error())
}

// Every metric's Prometheus name, as the shipped rules read it
// (<name with underscores>[_<unit>][_total]), reads back as the metric.
func TestOTLPNameOfEveryPrometheusName(t *testing.T) {
	t.Parallel()
	md := readMetadataFile(t)
	units := map[string]string{"1": "_ratio", "s": "_seconds", "By": "_bytes", "J": "_joules", "W": "_watts", "Cel": "_celsius", "Hz": "_hertz", "%": "_percent"}
	for name, m := range md.Metrics {
		prom := strings.ReplaceAll(name, ".", "_") + units[m.Unit]
		if m.Sum != nil && m.Sum.Monotonic {
			prom += "_total"
		}
		got, ok := otlpName(prom)
		assert.True(t, ok, prom)
		assert.Equal(t, name, got, prom)
	}
}

// dcgmNames follows deploy/prometheus/dcgm-compat.yaml: each record there
// is in it, and reads the metric it names.
func TestDCGMNames(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "prometheus", "dcgm-compat.yaml"))
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(b, &rules))
	seen := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if !strings.HasPrefix(r.Record, "DCGM_") {
				continue
			}
			seen[r.Record] = true
			name, ok := dcgmNames[r.Record]
			if !assert.True(t, ok, "%s is missing from dcgmNames", r.Record) {
				continue
			}
			prom := regexp.MustCompile(`\b` + regexp.QuoteMeta(strings.ReplaceAll(name, ".", "_")) + `(_[a-z]+)?(_total)?\b`)
			assert.Regexp(t, prom, r.Expr, "%s is computed from %s", r.Record, name)
		}
	}
	for k := range dcgmNames {
		assert.True(t, seen[k], "%s is not a record of dcgm-compat.yaml", k)
	}
}
