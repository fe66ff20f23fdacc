//go:build cgo

package nvmlreceiver

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

func TestHwStatusTransitions(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	ts := newTestScraper(t, m)
	ts.start(t)
	state := func(i int) string {
		md := ts.scrapeOK(t)
		for _, s := range []string{"ok", "degraded", "failed"} {
			if v, _ := statusValue(md, nvmltest.UUID(i), s); v == 1 {
				return s
			}
		}
		return "none"
	}
	assert.Equal(t, "ok", state(0))

	m.GPUs[0].Set(func(g *nvmltest.GPU) { g.RemapPending = true })
	assert.Equal(t, "degraded", state(0), "a row remap waits for a reset")
	m.GPUs[0].Set(func(g *nvmltest.GPU) { g.RemapPending = false })
	assert.Equal(t, "ok", state(0))

	m.GPUs[0].Set(func(g *nvmltest.GPU) { g.ECCUncorrected = 1 })
	assert.Equal(t, "degraded", state(0), "an uncorrected ECC error")
	m.GPUs[0].Set(func(g *nvmltest.GPU) { g.ECCUncorrected = 0 })

	m.GPUs[0].Set(func(g *nvmltest.GPU) { g.ClockEventBits = nvml.ClocksThrottleReasonHwThermalSlowdown })
	assert.Equal(t, "degraded", state(0), "a thermal slowdown")
	m.GPUs[0].Set(func(g *nvmltest.GPU) { g.ClockEventBits = nvml.ClocksEventReasonSwPowerCap })
	assert.Equal(t, "ok", state(0), "a power cap is not a fault")

	m.GPUs[0].GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	assert.Equal(t, "failed", state(0))
	assert.Equal(t, "failed", state(0), "and stays failed")
	assert.Equal(t, "ok", state(1), "the others are unaffected")
}

func TestHealthMetrics(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.GPUs[2].Set(func(g *nvmltest.GPU) {
		g.ECCCorrected, g.ECCUncorrected = 7, 0
		g.RemappedCorr, g.RemappedUnc = 3, 1
		g.PCIeReplays = 12
		g.ClockEventBits = nvml.ClocksEventReasonSwPowerCap | nvml.ClocksEventReasonSwThermalSlowdown
	})
	ts := newTestScraper(t, m)
	ts.start(t)
	md := ts.scrapeOK(t)
	names := gpuMetricNames(md, nvmltest.UUID(2))
	for _, n := range []string{"hw.errors", "nvidia.gpu.memory.row_remap.rows", "nvidia.gpu.memory.row_remap.status",
		"nvidia.gpu.clock.event.active", "nvidia.gpu.clock.event.time",
		"nvidia.gpu.pcie.replays", "nvidia.gpu.pcie.link.generation", "nvidia.gpu.pcie.link.width"} {
		assert.Contains(t, names, n)
	}
	v, _ := metricValue(md, nvmltest.UUID(2), 0, "nvidia.gpu.pcie.replays")
	assert.Equal(t, 12.0, v)
	v, _ = metricValue(md, nvmltest.UUID(2), 0, "nvidia.gpu.pcie.link.generation")
	assert.Equal(t, 5.0, v)
}

func TestHealthCallMissingFromLibrary(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	m.LookupSymbolFunc = func(name string) error {
		if strings.HasPrefix(name, "nvmlDeviceGetCurrentClocksEventReasons") {
			return assert.AnError // an older driver
		}
		return nil
	}
	for _, g := range m.GPUs {
		g.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) {
			t.Fatal("a symbol the library lacks was called")
			return 0, 0
		}
	}
	ts := newTestScraper(t, m)
	ts.start(t)
	md := ts.scrapeOK(t)
	assert.NotContains(t, gpuMetricNames(md, nvmltest.UUID(0)), "nvidia.gpu.clock.event.active")
	assert.Contains(t, gpuMetricNames(md, nvmltest.UUID(0)), "hw.errors")
}
