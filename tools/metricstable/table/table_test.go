package table

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPrometheusName: the exporter's rule, on the table's kinds of names
// (fixture names: the real ones are named in metadata.yaml only).
func TestPrometheusName(t *testing.T) {
	for _, c := range []struct {
		m    Metric
		want string
	}{
		{Metric{Name: "fixture.hw.gpu.utilization", Unit: "1", Kind: "gauge"}, "fixture_hw_gpu_utilization_ratio"},
		{Metric{Name: "fixture.hw.status", Unit: "1", Kind: "updown"}, "fixture_hw_status"},
		{Metric{Name: "fixture.hw.energy", Unit: "J", Kind: "counter"}, "fixture_hw_energy_joules_total"},
		{Metric{Name: "fixture.hw.gpu.memory.usage", Unit: "By", Kind: "updown"}, "fixture_hw_gpu_memory_usage_bytes"},
		{Metric{Name: "fixture.nvidia.gpu.pcie.throughput", Unit: "By/s", Kind: "gauge"}, "fixture_nvidia_gpu_pcie_throughput_bytes_per_second"},
		{Metric{Name: "fixture.nvidia.gpu.clock.max_frequency", Unit: "Hz", Kind: "gauge"}, "fixture_nvidia_gpu_clock_max_frequency_hertz"},
		{Metric{Name: "fixture.nvidia.gpu.pcie.link.max_width", Unit: "{lane}", Kind: "gauge"}, "fixture_nvidia_gpu_pcie_link_max_width"},
		{Metric{Name: "fixture.nvidia.gpu.xid.errors", Unit: "{error}", Kind: "counter"}, "fixture_nvidia_gpu_xid_errors_total"},
		{Metric{Name: "fixture.hw.temperature", Unit: "Cel", Kind: "gauge"}, "fixture_hw_temperature_celsius"},
		{Metric{Name: "x.seconds", Unit: "s", Kind: "gauge"}, "x_seconds"},
	} {
		got, err := PrometheusName(c.m)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, c.m.Name)
	}
	_, err := PrometheusName(Metric{Name: "x", Unit: "furlong", Kind: "gauge"})
	assert.ErrorContains(t, err, "unitWords")
}

// TestWhat: the description to its first stop, without parentheticals,
// with the attributes and the default.
func TestWhat(t *testing.T) {
	assert.Equal(t, "Time the GPU's SMs were busy, from GPM",
		What(Metric{Description: "Time the GPU's SMs were busy, from GPM: the integral. More.", Enabled: true}))
	assert.Equal(t, "Fraction of the window a pipe was busy, from GPM (`nvidia.gpu.tensor.pipe`); off by default",
		What(Metric{Description: "Fraction of the window a pipe was busy, from GPM (Hopper and newer).", Attributes: []string{"nvidia.gpu.tensor.pipe"}}))
	assert.Equal(t, `a \| b`, What(Metric{Description: "a | b", Enabled: true}))
}

// TestRewrite: only the block between the markers changes, and a second
// run changes nothing.
func TestRewrite(t *testing.T) {
	md := []byte("metrics:\n  b.y:\n    enabled: true\n    description: B.\n    unit: s\n    sum:\n      monotonic: true\n" +
		"  a.x:\n    enabled: true\n    description: A.\n    unit: By\n    gauge:\n      value_type: int\n")
	doc := "intro\n" + StartMarker + "\nold\n" + EndMarker + "\noutro\n"
	got, err := Rewrite(doc, md)
	require.NoError(t, err)
	assert.Equal(t, "intro\n"+StartMarker+"\n| OTLP name | Prometheus name | type | unit | what |\n|---|---|---|---|---|\n"+
		"| `b.y` | `b_y_seconds_total` | counter | s | B |\n| `a.x` | `a_x_bytes` | gauge | By | A |\n"+EndMarker+"\noutro\n", got)
	again, err := Rewrite(got, md)
	require.NoError(t, err)
	assert.Equal(t, got, again)
	_, err = Rewrite("no markers", md)
	assert.Error(t, err)
	assert.True(t, strings.HasPrefix(got, "intro\n"))
}
