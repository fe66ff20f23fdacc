//go:build cgo

package nvmlreceiver

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// nvlinkPoint returns GPU uuid's nvidia.gpu.nvlink.errors point of type
// typ, on whichever of its resources it sits; false when there is none.
func nvlinkPoint(md pmetric.Metrics, uuid, typ string) (pmetric.NumberDataPoint, bool) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		if id, _ := rm.Resource().Attributes().Get("hw.id"); id.Str() != uuid {
			continue
		}
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				if ms.At(k).Name() != "nvidia.gpu.nvlink.errors" {
					continue
				}
				dps := ms.At(k).Sum().DataPoints()
				for d := 0; d < dps.Len(); d++ {
					if v, _ := dps.At(d).Attributes().Get("nvidia.gpu.nvlink.error.type"); v.Str() == typ {
						return dps.At(d), true
					}
				}
			}
		}
	}
	return pmetric.NumberDataPoint{}, false
}

// Issue 23, part 5: an NVLink error counter that the driver resets reads
// on from its new count, and its points start again at the reset (its
// last reading before the drop); the other counters keep the session's
// start. Before, the counter stayed frozen at its old maximum.
func TestResetCounterStartsAgain(t *testing.T) {
	t.Parallel()
	m := nvmltest.NewH200()
	g, uuid := m.GPUs[0], nvmltest.UUID(0)
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.CounterInterval = time.Second })
	ts.start(t)
	set := func(replays uint64) {
		g.Set(func(g *nvmltest.GPU) {
			g.FieldValues = map[uint32]uint64{nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: replays, nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: 9}
		})
	}
	// next lets the counters' background read take the mock's counters,
	// and returns the first scrape that reports that reading (want: the
	// replay point is there).
	next := func(replays uint64, want bool) pmetric.Metrics {
		t.Helper()
		set(replays)
		ts.clock.Advance(time.Second)
		read := ts.clock.Now()
		ts.scrapeOK(t) // due: the background read starts
		var md pmetric.Metrics
		require.Eventually(t, func() bool {
			md = ts.scrapeOK(t)
			p, ok := nvlinkPoint(md, uuid, "crc_flit")
			return ok && p.Timestamp().AsTime().Equal(read)
		}, 5*time.Second, time.Millisecond)
		_, ok := nvlinkPoint(md, uuid, "replay")
		require.Equal(t, want, ok, "replays %d", replays)
		return md
	}
	set(40)
	first := ts.scrapeOK(t)
	p, ok := nvlinkPoint(first, uuid, "replay")
	require.True(t, ok)
	sessionStart := p.StartTimestamp()
	md := next(40, true)
	p, _ = nvlinkPoint(md, uuid, "replay")
	before := p.Timestamp()
	next(2, false) // in doubt: left out
	md = next(3, true)
	p, _ = nvlinkPoint(md, uuid, "replay")
	assert.Equal(t, int64(3), p.IntValue(), "counts on from its new count")
	assert.Equal(t, before, p.StartTimestamp(), "starts again at its last reading before the reset")
	flit, _ := nvlinkPoint(md, uuid, "crc_flit")
	assert.Equal(t, sessionStart, flit.StartTimestamp(), "a counter that did not reset keeps the session's start")
	energy := gpuMetric(md, uuid, "hw.energy")
	require.NotNil(t, energy)
	assert.Equal(t, sessionStart, energy.Sum().DataPoints().At(0).StartTimestamp())
}
