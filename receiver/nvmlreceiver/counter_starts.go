package nvmlreceiver

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
)

// resetCounters holds, within one scrape, the starts of the GPUs' driver
// counters that were reset within the NVML session (a GPU reset, the
// driver resetting its counters; nvmlclient keptCounter): by hw.id. Their
// points start at the reset rather than at the session's start, which the
// builder stamps; the counters that did not reset keep it.
type resetCounters map[string]nvmlclient.CounterStarts

// add remembers smp's reset counters, if any.
func (rc resetCounters) add(uuid string, smp *nvmlclient.Sample) {
	if smp.CountersSince != nil {
		rc[uuid] = *smp.CountersSince
	}
}

// counterStart finds the start of one point in cs: which counter a point
// of each driver-counter metric is, by its attribute.
var counterStart = map[string]func(cs *nvmlclient.CounterStarts, attrs pcommon.Map) pcommon.Timestamp{
	"hw.energy": func(cs *nvmlclient.CounterStarts, _ pcommon.Map) pcommon.Timestamp { return timestampOf(cs.Energy) },
	"nvidia.gpu.pcie.replays": func(cs *nvmlclient.CounterStarts, _ pcommon.Map) pcommon.Timestamp {
		return timestampOf(cs.PCIeReplays)
	},
	"nvidia.gpu.clock.event.time": func(cs *nvmlclient.CounterStarts, attrs pcommon.Map) pcommon.Timestamp {
		v, _ := attrs.Get("nvidia.gpu.clock.event.reason")
		for _, r := range violationReasons {
			if r.attr.String() == v.Str() {
				return timestampOf(cs.Violation[r.p])
			}
		}
		return 0
	},
	"nvidia.gpu.nvlink.errors": func(cs *nvmlclient.CounterStarts, attrs pcommon.Map) pcommon.Timestamp {
		v, _ := attrs.Get("nvidia.gpu.nvlink.error.type")
		for _, e := range nvlinkErrors {
			if e.attr.String() == v.Str() {
				return timestampOf(cs.NVLink[e.e])
			}
		}
		return 0
	},
}

// timestampOf is t as a point's time; 0 for no time.
func timestampOf(t time.Time) pcommon.Timestamp {
	if t.IsZero() {
		return 0
	}
	return pcommon.NewTimestampFromTime(t)
}

// stamp gives the points of the reset counters in md their start, and
// forgets the scrape's resets. It walks only the resources of GPUs with a
// reset counter, wherever their counters sit.
func (rc resetCounters) stamp(md pmetric.Metrics) {
	if len(rc) == 0 {
		return
	}
	defer clear(rc)
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		id, ok := rm.Resource().Attributes().Get("hw.id")
		if !ok {
			continue
		}
		cs, ok := rc[id.Str()]
		if !ok {
			continue
		}
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				start, ok := counterStart[m.Name()]
				if !ok || m.Type() != pmetric.MetricTypeSum {
					continue
				}
				dps := m.Sum().DataPoints()
				for d := 0; d < dps.Len(); d++ {
					if ts := start(&cs, dps.At(d).Attributes()); ts != 0 {
						dps.At(d).SetStartTimestamp(ts)
					}
				}
			}
		}
	}
}
