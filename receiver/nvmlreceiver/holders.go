package nvmlreceiver

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// recordHolders records nvidia.gpu.allocation for each container the
// kubelet allocated the device to (a device-plugin allocation, or a DRA
// claim, one claim shared by several pods listing each), on a resource of
// the device and that holder: 1 / the number of holders, the holder's even
// share of the device's held time. The held time itself is counted once,
// on the device (docs/design/waste.md says how to split it).
func recordHolders(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, holders []owner, newResource func(owner) *metadata.ResourceBuilder) {
	if len(holders) == 0 {
		return
	}
	share := 1 / float64(len(holders))
	for _, h := range holders {
		mb.RecordNvidiaGpuAllocationDataPoint(ts, share)
		mb.EmitForResource(metadata.WithResource(newResource(h).Emit()))
	}
}
