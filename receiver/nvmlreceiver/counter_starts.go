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

// counterStart finds the start of one point of a plain metric in cs: the
// point of its row whose attribute value it has; 0 for none.
func counterStart(cs *nvmlclient.CounterStarts, name string, attrs pcommon.Map) pcommon.Timestamp {
	for i := range plainMetrics {
		pm := &plainMetrics[i]
		if pm.name != name {
			continue
		}
		for _, p := range pm.points {
			if p.attr == "" || hasValue(attrs, p.attr) {
				return timestampOf(cs[p.fig])
			}
		}
	}
	return 0
}

// hasValue reports whether one of attrs has the value v.
func hasValue(attrs pcommon.Map, v string) bool {
	found := false
	attrs.Range(func(_ string, a pcommon.Value) bool {
		found = a.Str() == v
		return !found
	})
	return found
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
				if m.Type() != pmetric.MetricTypeSum {
					continue
				}
				dps := m.Sum().DataPoints()
				for d := 0; d < dps.Len(); d++ {
					if ts := counterStart(&cs, m.Name(), dps.At(d).Attributes()); ts != 0 {
						dps.At(d).SetStartTimestamp(ts)
					}
				}
			}
		}
	}
}
