//go:build cgo

package nvmlreceiver

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// deviceLifetimeSeries are the series of a GPU's life: one identity each,
// whoever holds the GPU and whether it is read, stuck or lost.
var deviceLifetimeSeries = []string{
	"nvidia.gpu.xid.errors", "hw.energy", "hw.errors", "nvidia.gpu.nvlink.errors",
	"nvidia.gpu.pcie.replays", "nvidia.gpu.process.dropped", "nvidia.gpu.clock.event.time", "hw.status",
}

// seriesID is a series as a backend keys it: its metric, resource
// attributes and point attributes.
func seriesID(name string, res, point pcommon.Map) string {
	attrs := func(m pcommon.Map) string {
		var kv []string
		for k, v := range m.All() {
			kv = append(kv, k+"="+v.AsString())
		}
		sort.Strings(kv)
		return strings.Join(kv, ",")
	}
	return name + "{" + attrs(res) + "}{" + attrs(point) + "}"
}

// gpuSeries maps each series of GPU uuid's own resources (processes left
// out) to its points' start time; it fails on a series given twice.
func gpuSeries(t *testing.T, md pmetric.Metrics, uuid string) map[string]pcommon.Timestamp {
	t.Helper()
	out := map[string]pcommon.Timestamp{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		res := rm.Resource().Attributes()
		id, _ := res.Get("hw.id")
		if _, isProcess := res.Get("process.pid"); isProcess || id.Str() != uuid {
			continue
		}
		ms := rm.ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			var dps pmetric.NumberDataPointSlice
			switch m.Type() {
			case pmetric.MetricTypeSum:
				dps = m.Sum().DataPoints()
			case pmetric.MetricTypeGauge:
				dps = m.Gauge().DataPoints()
			default:
				continue
			}
			for k := 0; k < dps.Len(); k++ {
				key := seriesID(m.Name(), res, dps.At(k).Attributes())
				_, twice := out[key]
				require.False(t, twice, "series %s given twice in one scrape", key)
				out[key] = dps.At(k).StartTimestamp()
			}
		}
	}
	return out
}

// named keeps the series of the metrics names.
func named(series map[string]pcommon.Timestamp, names ...string) map[string]pcommon.Timestamp {
	out := map[string]pcommon.Timestamp{}
	for k, v := range series {
		for _, n := range names {
			if strings.HasPrefix(k, n+"{") {
				out[k] = v
			}
		}
	}
	return out
}

// Issue 23, part 1: pod A holds the GPU, then pod B, then the GPU's read is
// stuck, then it is read again, then it is lost. Its lifetime counters and
// hw.status keep one series each all along (no owner attributes, the same
// start time), while the series of its use change with the owner; a stuck
// or lost scrape emits no series a read did not (no owner-less copies).
func TestOwnerChangeKeepsTheDeviceSeries(t *testing.T) {
	t.Parallel()
	const podA, podB = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	root := cgroupProcRoot(t, map[uint32]struct{ digit, podUID string }{4242: {"1", podA}, 4343: {"2", podB}})
	m := nvmltest.NewH200GPUs(1)
	g := m.GPUs[0]
	g.FieldValues = map[uint32]uint64{nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: 2,
		nvml.FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL: 1, nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: 1,
		nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL: 1}
	g.ECCCorrected, g.ECCUncorrected = 3, 1
	var stuck, lost atomic.Bool
	hang := newStuckCall(t)
	g.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
		switch {
		case lost.Load():
			return 0, nvml.ERROR_GPU_IS_LOST
		case stuck.Load():
			hang.block()
		}
		return 40, nvml.SUCCESS
	}
	g.SetProcesses(proc(4242, 1<<30))
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.ProcRoot = root })
	ts.start(t)
	uuid := nvmltest.UUID(0)
	m.XID(0, 13)
	require.Eventually(t, func() bool { return ts.events.counts(uuid)[13] == 1 }, 5*time.Second, 5*time.Millisecond)

	type scrape struct {
		what   string
		series map[string]pcommon.Timestamp
	}
	var read, unread []scrape
	scrapeAs := func(what string, owner string) {
		t.Helper()
		ts.clock.Advance(10 * time.Second)
		md := ts.scrapeOK(t)
		require.Equal(t, owner, gpuResourceAttrs(md, uuid)["k8s.pod.uid"], what)
		read = append(read, scrape{what, gpuSeries(t, md, uuid)})
	}
	scrapeAs("pod A", podA)
	scrapeAs("pod A again", podA)
	g.SetProcesses(proc(4343, 1<<30))
	scrapeAs("pod B", podB)

	stuck.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	ts.clock.Advance(10 * time.Second)
	md, err := ts.scrape(ctx)
	require.NoError(t, err)
	v, _ := statusValue(md, uuid, "degraded")
	require.Equal(t, int64(1), v, "the stuck GPU is degraded")
	unread = append(unread, scrape{"stuck", gpuSeries(t, md, uuid)})
	ts.clock.Advance(10 * time.Second)
	unread = append(unread, scrape{"still stuck", gpuSeries(t, ts.scrapeOK(t), uuid)})
	stuck.Store(false)
	hang.release()
	require.Eventually(t, func() bool {
		ts.clock.Advance(10 * time.Second)
		md := ts.scrapeOK(t)
		if !slices.Contains(gpuMetricNames(md, uuid), "hw.power") { // still stuck
			return false
		}
		read = append(read, scrape{"pod B after the stuck read", gpuSeries(t, md, uuid)})
		return true
	}, 5*time.Second, 10*time.Millisecond)

	lost.Store(true)
	ts.clock.Advance(10 * time.Second)
	md = ts.scrapeOK(t)
	v, _ = statusValue(md, uuid, "failed")
	require.Equal(t, int64(1), v, "the lost GPU failed")
	unread = append(unread, scrape{"lost", gpuSeries(t, md, uuid)})

	first := named(read[0].series, deviceLifetimeSeries...)
	for _, name := range deviceLifetimeSeries {
		require.NotEmpty(t, named(first, name), "%s is reported", name)
	}
	for _, s := range read[1:] {
		assert.Equal(t, first, named(s.series, deviceLifetimeSeries...), "%s: the same series, the same start", s.what)
	}
	assert.NotEqual(t, named(read[0].series, "hw.power"), named(read[2].series, "hw.power"),
		"the series of the GPU's use carry its owner")

	everRead := map[string]bool{}
	for _, s := range read {
		for k := range s.series {
			everRead[k] = true
		}
	}
	for _, s := range unread {
		for k := range s.series {
			assert.True(t, everRead[k], "%s: %s is a series no read gave", s.what, k)
		}
		assert.Equal(t, named(first, "nvidia.gpu.xid.errors", "hw.status"), named(s.series, "nvidia.gpu.xid.errors", "hw.status"),
			"%s: its Xids and hw.status, as when read", s.what)
	}
	for _, s := range append(read, unread...) {
		status := named(s.series, "hw.status")
		assert.Len(t, status, len(metadata.MapAttributeHwState), "%s: one hw.status series per state: %v", s.what, keys(status))
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The lifetime counters of a GPU in MIG mode and of its MIG devices keep
// their series when a MIG device changes hands, and the MIG device's
// traffic counters are on its device resource.
func TestMIGOwnerChangeKeepsTheDeviceSeries(t *testing.T) {
	t.Parallel()
	const podA, podB = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	root := cgroupProcRoot(t, map[uint32]struct{ digit, podUID string }{4242: {"1", podA}, 4343: {"2", podB}})
	m := nvmltest.NewH200GPUs(1)
	migs := m.GPUs[0].EnableMIG(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	onMIG := func(pid uint32) nvml.ProcessInfo {
		return nvml.ProcessInfo{Pid: pid, UsedGpuMemory: 1 << 30,
			GpuInstanceId: uint32(migs[0].GPUInstanceID), ComputeInstanceId: uint32(migs[0].ComputeInstanceID)}
	}
	m.GPUs[0].SetProcesses(onMIG(4242))
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.ProcRoot = root })
	ts.start(t)
	ts.clock.Advance(10 * time.Second)
	a := ts.scrapeOK(t)
	m.GPUs[0].SetProcesses(onMIG(4343))
	ts.clock.Advance(10 * time.Second)
	b := ts.scrapeOK(t)
	require.Equal(t, podA, gpuResourceAttrs(a, migs[0].UUID)["k8s.pod.uid"])
	require.Equal(t, podB, gpuResourceAttrs(b, migs[0].UUID)["k8s.pod.uid"])
	for _, uuid := range []string{nvmltest.UUID(0), migs[0].UUID} {
		lifetime := append([]string{"hw.gpu.io", "nvidia.gpu.nvlink.io"}, deviceLifetimeSeries...)
		sa, sb := named(gpuSeries(t, a, uuid), lifetime...), named(gpuSeries(t, b, uuid), lifetime...)
		require.NotEmpty(t, sa, uuid)
		assert.Equal(t, sa, sb, uuid)
		for k := range sa {
			assert.NotContains(t, k, "k8s.pod.uid", fmt.Sprintf("%s: no owner on the device resource", uuid))
		}
	}
}
