//go:build cgo

package nvmlreceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// migResources maps MIG UUID to its resource attributes (processes left out).
func migResources(md pmetric.Metrics) map[string]map[string]any {
	out := map[string]map[string]any{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		attrs := md.ResourceMetrics().At(i).Resource().Attributes()
		_, isProcess := attrs.Get("process.pid")
		if _, isMIG := attrs.Get("hw.parent"); !isMIG || isProcess {
			continue
		}
		id, _ := attrs.Get("hw.id")
		out[id.Str()] = attrs.AsRaw()
	}
	return out
}

func TestMIGDevicesAreTheirOwnResources(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH100()
	migs := m.GPUs[2].EnableMIG(nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	m.GPUs[2].SetProcesses(nvml.ProcessInfo{Pid: 4242, UsedGpuMemory: 3 << 30,
		GpuInstanceId: uint32(migs[1].GPUInstanceID), ComputeInstanceId: uint32(migs[1].ComputeInstanceID)})
	ts := newTestScraper(t, m)
	ts.start(t)
	ts.clock.Advance(10 * time.Second)
	md := ts.scrapeOK(t)

	res := migResources(md)
	require.Len(t, res, 2)
	a := res[migs[1].UUID]
	assert.Equal(t, nvmltest.UUID(2), a["hw.parent"])
	assert.Equal(t, "1g.10gb", a["nvidia.gpu.mig.profile"])
	assert.Equal(t, int64(migs[1].GPUInstanceID), a["nvidia.gpu.mig.gpu_instance_id"])
	assert.Equal(t, "0d3e0c8a-1111-4222-8333-944455556666", a["k8s.pod.uid"], "the one process's pod, on the MIG resource")
	assert.Equal(t, "3g.40gb", res[migs[0].UUID]["nvidia.gpu.mig.profile"])

	v, ok := metricValue(md, migs[1].UUID, 0, "hw.gpu.memory.usage")
	require.True(t, ok)
	assert.Equal(t, float64(migs[1].Memory.Used), v)
	_, ok = metricValue(md, migs[1].UUID, 0, "nvidia.gpu.sm.activity")
	assert.True(t, ok, "GPM per GPU instance")

	procs := processResources(md, migs[1].UUID)
	require.Len(t, procs, 1, "the process lands on its MIG device")
	assert.Equal(t, nvmltest.UUID(2), procs[4242]["hw.parent"])
	assert.Empty(t, processResources(md, nvmltest.UUID(2)), "and not on the parent")

	names := gpuMetricNames(md, nvmltest.UUID(2))
	assert.Contains(t, names, "hw.temperature", "the parent keeps its device-level metrics")
	assert.NotContains(t, names, "nvidia.gpu.memory.controller.utilization", "not supported in MIG mode")
}

func TestMIGInstanceMemoryCountedOnce(t *testing.T) {
	t.Parallel()
	// A 3g GPU instance hosts two compute instances: two MIG devices that
	// NVML both answers with the instance's memory.
	m := nvmltest.NewH100()
	migs := m.GPUs[0].EnableMIGInstances(
		nvmltest.MIGInstance{Profile: nvml.GPU_INSTANCE_PROFILE_3_SLICE, ComputeInstances: 2},
		nvmltest.MIGInstance{Profile: nvml.GPU_INSTANCE_PROFILE_1_SLICE, ComputeInstances: 1},
	)
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Devices = []string{"0"} })
	ts.start(t)
	ts.clock.Advance(10 * time.Second)
	md := ts.scrapeOK(t)
	require.Len(t, migResources(md), 3, "every MIG device is a resource")

	gi := migs[0].GPUInstanceID
	var usage, limit float64
	var withMemory int
	for _, d := range migs {
		if d.GPUInstanceID != gi {
			continue
		}
		if v, ok := metricValue(md, d.UUID, 0, "hw.gpu.memory.usage"); ok {
			usage += v
			withMemory++
		}
		if v, ok := metricValue(md, d.UUID, 0, "hw.gpu.memory.limit"); ok {
			limit += v
		}
	}
	assert.Equal(t, 1, withMemory, "the GPU instance's memory on one of its MIG devices")
	assert.Equal(t, float64(migs[0].Memory.Used), usage, "sum over the instance's MIG devices = the instance's memory")
	assert.Equal(t, float64(migs[0].Memory.Total), limit)
	_, ok := metricValue(md, migs[0].UUID, 0, "hw.gpu.memory.usage")
	assert.True(t, ok, "on the first compute instance's device")
	_, ok = metricValue(md, migs[1].UUID, 0, "nvidia.gpu.sm.activity")
	assert.False(t, ok, "GPM per GPU instance, also once")
	v, ok := metricValue(md, migs[2].UUID, 0, "hw.gpu.memory.usage")
	assert.True(t, ok)
	assert.Equal(t, float64(migs[2].Memory.Used), v, "a GPU instance of one compute instance")
}

func TestScrapeGoldenMIG(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewA100()
	migs := m.GPUs[0].EnableMIG(nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_2_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	m.GPUs[0].SetProcesses(nvml.ProcessInfo{Pid: 4343, UsedGpuMemory: 1 << 30,
		GpuInstanceId: uint32(migs[0].GPUInstanceID), ComputeInstanceId: uint32(migs[0].ComputeInstanceID)})
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Devices = []string{"0"} })
	ts.start(t)
	ts.clock.Advance(10 * time.Second)
	actual := ts.scrapeOK(t)

	compareGolden(t, filepath.Join("testdata", "scraper", "a100_mig_expected.yaml"), actual)
}
