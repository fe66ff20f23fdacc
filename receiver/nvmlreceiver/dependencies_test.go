//go:build cgo

package nvmlreceiver

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/record"
	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// onlyMetrics turns every metric off but names, and every owner
// attribute off unless owners is set.
func onlyMetrics(owners bool, names ...string) func(*Config) {
	return func(cfg *Config) {
		metrics := reflect.ValueOf(&cfg.Metrics).Elem()
		for i := 0; i < metrics.NumField(); i++ {
			name := metrics.Type().Field(i).Tag.Get("mapstructure")
			on := false
			for _, n := range names {
				on = on || n == name
			}
			metrics.Field(i).FieldByName("Enabled").SetBool(on)
		}
		ra := &cfg.ResourceAttributes
		for _, a := range []*metadata.ResourceAttributeConfig{&ra.ContainerID, &ra.K8sPodUID, &ra.K8sPodName, &ra.K8sNamespaceName, &ra.K8sContainerName} {
			a.Enabled = owners
		}
	}
}

// points counts the points of metric name anywhere in md.
func points(md pmetric.Metrics, name string) int {
	n := 0
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		ms := md.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if m := ms.At(j); m.Name() == name {
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					n += m.Gauge().DataPoints().Len()
				case pmetric.MetricTypeSum:
					n += m.Sum().DataPoints().Len()
				}
			}
		}
	}
	return n
}

// The metrics made from the process list (and the GPU's owner, found
// through it) ask for it themselves: with every per-process NVML metric
// off, each alone still gives its points.
func TestProcessListReadForWhatNeedsIt(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"container.cpu.time", "nvidia.gpu.container.cpu.limit", "process.cpu.time", "nvidia.gpu.process.dropped"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := nvmltest.NewH200()
			// 4242 is in the fixture's container, with a CPU limit.
			m.GPUs[0].SetProcesses(proc(4242, 8<<30), proc(4343, 1<<30))
			ts := newTestScraper(t, m, onlyMetrics(false, name), func(cfg *Config) { cfg.Processes.MaxPerGPU = 1 })
			ts.start(t)
			assert.NotZero(t, points(ts.scrapeOK(t), name))
		})
	}
	t.Run("the GPU's owner", func(t *testing.T) {
		t.Parallel()
		m := nvmltest.NewH200()
		m.GPUs[0].SetProcesses(proc(4242, 8<<30))
		ts := newTestScraper(t, m, onlyMetrics(true, "hw.power"))
		ts.start(t)
		attrs := gpuResourceAttrs(ts.scrapeOK(t), nvmltest.UUID(0))
		require.NotNil(t, attrs)
		assert.Equal(t, fixtureContainer, attrs["container.id"])
	})
	t.Run("nothing needs it", func(t *testing.T) {
		t.Parallel()
		var cfg Config
		onlyMetrics(false, "hw.power")(&cfg)
		assert.False(t, record.Needs(&cfg.Metrics, &cfg.ResourceAttributes).Has(sample.Processes))
	})
}
