//go:build cgo

package nvmlreceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// everyMetric turns on every metric, resource attribute and event that
// metadata.yaml declares: mdatagen's all_set, which follows metadata.yaml.
func everyMetric(t *testing.T) func(*Config) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("internal", "metadata", "testdata", "config.yaml"))
	require.NoError(t, err)
	allSet, err := cm.Sub("all_set")
	require.NoError(t, err)
	return func(cfg *Config) { require.NoError(t, allSet.Unmarshal(cfg)) }
}

// TestScrapeGoldenEveryMetric records every metric and resource attribute
// over two H200s, so that each one is in a golden file short enough to
// review:
//   - GPU 0, whole: a pod's process (its names from the kubelet, which
//     gave it the GPU) and a host process; an Xid; fans;
//   - GPU 1, in MIG mode: a Slurm job's process on one instance, which
//     Slurm's prolog allocated to that job (uid 0: user.name root), the
//     other instance idle and allocated to a pod.
func TestScrapeGoldenEveryMetric(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200GPUs(2)
	m.GPUs[0].FanSupported, m.GPUs[0].FanPercent = true, 35
	// NVLink errors on GPU 0; GPU 1 answers NOT_SUPPORTED, as a GPU without NVLink.
	m.GPUs[0].FieldValues = map[uint32]uint64{nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: 12,
		nvml.FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL: 3, nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: 7,
		nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL: 1}
	m.GPUs[0].SetProcesses(proc(4242, 8<<30), proc(4343, 1<<30))
	migs := m.GPUs[1].EnableMIG(nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	m.GPUs[1].SetProcesses(nvml.ProcessInfo{Pid: 5555, UsedGpuMemory: 2 << 30,
		GpuInstanceId: uint32(migs[0].GPUInstanceID), ComputeInstanceId: uint32(migs[0].ComputeInstanceID)})
	resp := allocated(map[string][3]string{migs[1].UUID: {"serve", "llm-0", "server"}})
	// GPU 0 is allocated through a DRA claim, matched by its minor number
	// (the ResourceSlices are off).
	resp.PodResources = append(resp.PodResources,
		claimedGPU(map[string][4]string{"gpu-0": {"ml", "trainer-0", "trainer", "trainer-gpu"}}).PodResources...)
	socket := serveKubelet(t, resp)
	slurm := gpuStatDir(t, map[string]string{migs[0].UUID: "4711 0"}) // 5555's job (testdata/proc)
	ts := newTestScraper(t, m, everyMetric(t), func(cfg *Config) {
		cfg.Slurm.GPUStatDir = slurm
		cfg.Kubernetes.Enabled = true
		cfg.Kubernetes.PodResourcesSocket = socket
		cfg.Kubernetes.DRA.ResourceSlices.Enabled = false
		cfg.MemoryControllerOnGPM = true // its metric too, on these GPUs with GPM
	})
	ts.start(t)
	require.Eventually(t, func() bool {
		_, o := ts.reporter.owners.Attribute(nvmltest.UUID(0), nil)
		return o.PodName != ""
	}, 5*time.Second, 5*time.Millisecond, "the kubelet's allocation is listed")
	m.XID(0, 79)
	require.Eventually(t, func() bool { return ts.events.counts(nvmltest.UUID(0))[79] == 1 }, 5*time.Second, 5*time.Millisecond)

	ts.clock.Advance(10 * time.Second)
	m.GPUs[0].AddProcessSamples(
		nvml.ProcessUtilizationSample{Pid: 4242, TimeStamp: ts.micros(time.Second), SmUtil: 70, MemUtil: 20, EncUtil: 3, DecUtil: 1},
		nvml.ProcessUtilizationSample{Pid: 4343, TimeStamp: ts.micros(time.Second), SmUtil: 5, MemUtil: 1})
	g := m.GPUs[0]
	g.AddSamples(nvml.GPU_UTILIZATION_SAMPLES, []uint64{100, 200}, []uint32{60, 80})
	g.AddSamples(nvml.MEMORY_UTILIZATION_SAMPLES, []uint64{100, 200}, []uint32{20, 30})
	g.AddSamples(nvml.ENC_UTILIZATION_SAMPLES, []uint64{100}, []uint32{3})
	g.AddSamples(nvml.DEC_UTILIZATION_SAMPLES, []uint64{100, 200}, []uint32{2, 0})

	md := ts.scrapeOK(t)
	compareGolden(t, filepath.Join("testdata", "scraper", "h200x2_every_metric_expected.yaml"), md)

	// Nothing metadata.yaml declares is missing from it.
	metrics, attributes := map[string]bool{}, map[string]bool{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		for k := range rm.Resource().Attributes().All() {
			attributes[k] = true
		}
		ms := rm.ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			metrics[ms.At(j).Name()] = true
		}
	}
	declared := readMetadataFile(t)
	for name := range declared.Metrics {
		assert.True(t, metrics[name], "metric %s is not in the golden scrape", name)
	}
	for name := range declared.ResourceAttributes {
		if mpsAttributes[name] {
			continue // in the MPS golden scrape (TestScrapeGoldenMPS)
		}
		assert.True(t, attributes[name], "resource attribute %s is not in the golden scrape", name)
	}
}
