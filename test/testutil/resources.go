package testutil

import "go.opentelemetry.io/collector/pdata/pmetric"

// ContainerResources returns, per container.id, the attributes and metric
// values of the resources that carry no hw.id (the containers').
func ContainerResources(md pmetric.Metrics) map[string]map[string]any {
	out := map[string]map[string]any{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		attrs := rm.Resource().Attributes()
		if _, isGPU := attrs.Get("hw.id"); isGPU {
			continue
		}
		id, _ := attrs.Get("container.id")
		entry := attrs.AsRaw()
		ms := rm.ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			entry[m.Name()] = m.Sum().DataPoints().At(0).DoubleValue()
			entry[m.Name()+"/monotonic"] = m.Sum().IsMonotonic()
		}
		out[id.Str()] = entry
	}
	return out
}
