//go:build cgo

package nvmlreceiver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// The MPS model (docs/design/waste.md, "MPS") through the scraper. GPU 2 of
// the mock: general utilization 12 %, SM activity 10 %. As on the H200, the
// compute list holds the server and the clients, the MPS list the clients,
// and process utilization samples only the server.

const (
	mpsServerPID = 5000
	mpsPodA      = 4242
	mpsPodB      = 4343
	mpsPlain     = 4444
)

// mpsProcRoot puts the server in the device plugin's MPS daemon pod, and
// each other PID in a pod of its own; the server is named as it is.
func mpsProcRoot(t *testing.T) string {
	root := cgroupProcRoot(t, map[uint32]struct{ digit, podUID string }{
		mpsServerPID: {"9", "99999999-9999-4999-8999-999999999999"},
		mpsPodA:      {"1", "11111111-1111-4111-8111-111111111111"},
		mpsPodB:      {"2", "22222222-2222-4222-8222-222222222222"},
		mpsPlain:     {"3", "33333333-3333-4333-8333-333333333333"},
	})
	require.NoError(t, os.WriteFile(filepath.Join(root, "5000", "comm"), []byte("nvidia-cuda-mps-server\n"), 0o644))
	return root
}

// resourceAttrs is the attributes of pid's resource on uuid (pid 0: the
// GPU's own, its holder resource where it has an owner).
func resourceAttrs(md pmetric.Metrics, uuid string, pid int64) map[string]any {
	if pid == 0 {
		return gpuResourceAttrs(md, uuid)
	}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		attrs := md.ResourceMetrics().At(i).Resource().Attributes()
		id, _ := attrs.Get("hw.id")
		if p, ok := attrs.Get("process.pid"); ok && p.Int() == pid && id.Str() == uuid {
			return attrs.AsRaw()
		}
	}
	return nil
}

// runMPS scrapes 4 windows of 10 s with the server's sample at serverSM
// and the plain process's (where listed) at plainSM.
func runMPS(t *testing.T, set func(g *nvmltest.GPU), serverSM, plainSM uint32) pmetric.Metrics {
	m := nvmltest.NewH200()
	g := m.GPUs[2]
	set(g)
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.ProcRoot = mpsProcRoot(t) })
	ts.start(t)
	ts.scrapeOK(t)
	var md pmetric.Metrics
	for range 4 {
		ts.clock.Advance(10 * time.Second)
		g.AddProcessSamples(nvml.ProcessUtilizationSample{Pid: mpsServerPID, TimeStamp: ts.micros(0), SmUtil: serverSM})
		if plainSM > 0 {
			g.AddProcessSamples(nvml.ProcessUtilizationSample{Pid: mpsPlain, TimeStamp: ts.micros(0), SmUtil: plainSM})
		}
		md = ts.scrapeOK(t)
	}
	return md
}

// assertServerHoldsNothing: the server's memory is its own, marked as the
// server's, and it has no GPU-time counter.
func assertServerHoldsNothing(t *testing.T, md pmetric.Metrics, uuid string) {
	t.Helper()
	attrs := resourceAttrs(md, uuid, mpsServerPID)
	require.NotNil(t, attrs, "the server's process series stays")
	assert.Equal(t, "server", attrs["nvidia.gpu.process.mps"])
	mem, ok := metricValue(md, uuid, mpsServerPID, "nvidia.gpu.process.memory.usage")
	assert.True(t, ok)
	assert.InDelta(t, 66<<20, mem, 0)
	for _, name := range []string{"nvidia.gpu.process.held.time", "nvidia.gpu.process.busy.time", "nvidia.gpu.process.idle.time"} {
		_, ok := metricValue(md, uuid, mpsServerPID, name)
		assert.False(t, ok, "the server holds nothing: no %s", name)
	}
}

// Two client pods and the device plugin's MPS daemon pod on one GPU.
func TestMPSTwoClientPodsAndTheDaemon(t *testing.T) {
	t.Parallel()
	md := runMPS(t, func(g *nvmltest.GPU) {
		g.SetMPS(proc(mpsServerPID, 66<<20), proc(mpsPodA, 1128<<20), proc(mpsPodB, 516<<20))
	}, 97, 0)
	uuid := nvmltest.UUID(2)
	gpu := gpuResourceAttrs(md, uuid)
	assert.Equal(t, "mps", gpu["nvidia.gpu.sharing"])
	assert.Nil(t, gpu["k8s.pod.uid"], "two client pods: no single owner")
	busy := sumPoint(t, md, uuid, 0, "nvidia.gpu.busy.time").DoubleValue()
	assert.InDelta(t, 40*0.12, busy, 1e-9)
	assert.InDelta(t, 40, sumPoint(t, md, uuid, 0, "nvidia.gpu.held.time").DoubleValue(), 1e-9)
	assertServerHoldsNothing(t, md, uuid)
	var sum float64
	for _, pid := range []int64{mpsPodA, mpsPodB} {
		attrs := resourceAttrs(md, uuid, pid)
		assert.Equal(t, "client", attrs["nvidia.gpu.process.mps"])
		assert.Equal(t, "mps", attrs["nvidia.gpu.sharing"])
		b := sumPoint(t, md, uuid, pid, "nvidia.gpu.process.busy.time").DoubleValue()
		assert.InDelta(t, busy/2, b, 1e-9, "pid %d: an even part of the GPU's busy time, never a measured 0", pid)
		sum += b
		assert.InDelta(t, 40, sumPoint(t, md, uuid, pid, "nvidia.gpu.process.held.time").DoubleValue(), 1e-9)
		_, ok := metricValue(md, uuid, pid, "nvidia.gpu.process.utilization")
		assert.False(t, ok, "a client's utilization is not observable: absent")
	}
	assert.InDelta(t, busy, sum, 1e-9, "the clients' parts add up to the GPU's busy time")
}

// One client alone on the GPU: its pod owns the GPU (the daemon pod does
// not make it shared) and has all of its busy time.
func TestMPSOneClientAlone(t *testing.T) {
	t.Parallel()
	md := runMPS(t, func(g *nvmltest.GPU) { g.SetMPS(proc(mpsServerPID, 66<<20), proc(mpsPodA, 1<<30)) }, 97, 0)
	uuid := nvmltest.UUID(2)
	gpu := gpuResourceAttrs(md, uuid)
	assert.Equal(t, "11111111-1111-4111-8111-111111111111", gpu["k8s.pod.uid"], "the client's pod owns the GPU")
	assert.Equal(t, "mps", gpu["nvidia.gpu.sharing"])
	busy := sumPoint(t, md, uuid, 0, "nvidia.gpu.busy.time").DoubleValue()
	assert.InDelta(t, busy, sumPoint(t, md, uuid, mpsPodA, "nvidia.gpu.process.busy.time").DoubleValue(), 1e-9)
	assertServerHoldsNothing(t, md, uuid)
}

// MPS beside a plain process: the lists cannot tell the server from the
// plain process, its name does; the plain process keeps its measured part
// (40 of 100), the client has the server's (60).
func TestMPSBesideAPlainProcess(t *testing.T) {
	t.Parallel()
	md := runMPS(t, func(g *nvmltest.GPU) {
		g.SetMPS(proc(mpsServerPID, 66<<20), proc(mpsPodA, 1<<30))
		g.ComputeProcs = append(g.ComputeProcs, proc(mpsPlain, 2<<30))
	}, 60, 40)
	uuid := nvmltest.UUID(2)
	assertServerHoldsNothing(t, md, uuid)
	busy := sumPoint(t, md, uuid, 0, "nvidia.gpu.busy.time").DoubleValue()
	client := sumPoint(t, md, uuid, mpsPodA, "nvidia.gpu.process.busy.time").DoubleValue()
	plain := sumPoint(t, md, uuid, mpsPlain, "nvidia.gpu.process.busy.time").DoubleValue()
	assert.InDelta(t, 40*0.12*0.4, plain, 1e-9)
	assert.InDelta(t, 40*0.12*0.6, client, 1e-9)
	assert.InDelta(t, busy, client+plain, 1e-9)
	assert.Nil(t, resourceAttrs(md, uuid, mpsPlain)["nvidia.gpu.process.mps"])
	u, ok := metricValue(md, uuid, mpsPlain, "nvidia.gpu.process.utilization")
	assert.True(t, ok)
	assert.InDelta(t, 0.4, u, 1e-9)
}

// An MPS server with no client does not hold the GPU: it is free.
func TestMPSIdleServerHoldsNothing(t *testing.T) {
	t.Parallel()
	md := runMPS(t, func(g *nvmltest.GPU) { g.SetMPS(proc(mpsServerPID, 66<<20)) }, 0, 0)
	uuid := nvmltest.UUID(2)
	assert.Zero(t, sumPoint(t, md, uuid, 0, "nvidia.gpu.held.time").DoubleValue())
	assert.InDelta(t, 40, sumPoint(t, md, uuid, 0, "nvidia.gpu.free.time").DoubleValue(), 1e-9)
	assert.Nil(t, gpuResourceAttrs(md, uuid)["k8s.pod.uid"], "the daemon pod does not own the GPU")
	assertServerHoldsNothing(t, md, uuid)
}

// mpsAttributes are the resource attributes of MPS alone, recorded in the
// MPS golden scrape rather than the every-metric one.
var mpsAttributes = map[string]bool{"nvidia.gpu.sharing": true, "nvidia.gpu.process.mps": true}

// TestScrapeGoldenMPS records one GPU shared through MPS by two
// client pods, with the device plugin's MPS daemon pod running the server
// (TestMPSTwoClientPodsAndTheDaemon's scenario), every metric on.
func TestScrapeGoldenMPS(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200GPUs(1)
	g := m.GPUs[0]
	g.GPMValues[nvml.GPM_METRIC_GRAPHICS_UTIL], g.GPMValues[nvml.GPM_METRIC_SM_UTIL] = 60, 30 // busy 0.6, active 0.3
	g.SetMPS(proc(mpsServerPID, 66<<20), proc(mpsPodA, 1128<<20), proc(mpsPodB, 516<<20))
	ts := newTestScraper(t, m, everyMetric(t), func(cfg *Config) { cfg.Processes.ProcRoot = mpsProcRoot(t) })
	ts.start(t)
	ts.scrapeOK(t)
	ts.clock.Advance(10 * time.Second)
	g.AddProcessSamples(nvml.ProcessUtilizationSample{Pid: mpsServerPID, TimeStamp: ts.micros(0), SmUtil: 97})
	g.AddSamples(nvml.GPU_UTILIZATION_SAMPLES, []uint64{100, 200}, []uint32{60, 80})
	md := ts.scrapeOK(t)
	compareGolden(t, filepath.Join("testdata", "scraper", "h200_mps_expected.yaml"), md)
	seen := map[string]bool{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		for k := range md.ResourceMetrics().At(i).Resource().Attributes().All() {
			seen[k] = true
		}
	}
	for name := range mpsAttributes {
		assert.True(t, seen[name], "resource attribute %s is not in the MPS golden scrape", name)
	}
}

// MPS within a MIG device: the MIG device's own MPS list marks the client,
// the server holds nothing there either, and the client's pod owns the
// MIG device.
func TestMPSOnAMIGDevice(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	g := m.GPUs[2]
	migs := g.EnableMIG(nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	on := func(pid uint32, mem uint64) nvml.ProcessInfo {
		return nvml.ProcessInfo{Pid: pid, UsedGpuMemory: mem,
			GpuInstanceId: uint32(migs[0].GPUInstanceID), ComputeInstanceId: uint32(migs[0].ComputeInstanceID)}
	}
	g.SetMPS(on(mpsServerPID, 66<<20), on(mpsPodA, 1<<30))
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.ProcRoot = mpsProcRoot(t) })
	ts.start(t)
	ts.scrapeOK(t)
	ts.clock.Advance(10 * time.Second)
	md := ts.scrapeOK(t)
	mig := migs[0].UUID
	res := migResources(md)[mig]
	assert.Equal(t, "mps", res["nvidia.gpu.sharing"])
	assert.Equal(t, "11111111-1111-4111-8111-111111111111", res["k8s.pod.uid"], "the client's pod owns the MIG device")
	assertServerHoldsNothing(t, md, mig)
	assert.Equal(t, "client", resourceAttrs(md, mig, mpsPodA)["nvidia.gpu.process.mps"])
	assert.InDelta(t, 10, sumPoint(t, md, mig, mpsPodA, "nvidia.gpu.process.held.time").DoubleValue(), 1e-9)
	assert.InDelta(t, 10, sumPoint(t, md, mig, 0, "nvidia.gpu.held.time").DoubleValue(), 1e-9)
}
