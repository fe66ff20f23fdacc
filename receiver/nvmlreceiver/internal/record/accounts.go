package record

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/accounting"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// unobservedReasons are the reasons and their attribute values, in the
// order recorded.
var unobservedReasons = [...]struct {
	reason accounting.Reason
	attr   metadata.AttributeNvidiaGpuUnobservedReason
}{
	{accounting.ReadFailed, metadata.AttributeNvidiaGpuUnobservedReasonReadFailed},
	{accounting.Stuck, metadata.AttributeNvidiaGpuUnobservedReasonStuck},
	{accounting.Lost, metadata.AttributeNvidiaGpuUnobservedReasonLost},
	{accounting.Gap, metadata.AttributeNvidiaGpuUnobservedReasonGap},
	{accounting.Restart, metadata.AttributeNvidiaGpuUnobservedReasonRestart},
}

// recordDeviceAccount records a device's counters, from their account's
// start; base is the builder's.
func recordDeviceAccount(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, acct *accounting.Device, base pcommon.Timestamp) {
	if acct == nil {
		return
	}
	startingAt(mb, acct.Start, base, func() {
		if acct.Holding {
			mb.RecordNvidiaGpuHeldTimeDataPoint(ts, acct.Held)
			mb.RecordNvidiaGpuFreeTimeDataPoint(ts, acct.Free)
			for _, r := range unobservedReasons {
				mb.RecordNvidiaGpuUnobservedTimeDataPoint(ts, acct.Unobserved[r.reason], r.attr)
			}
		}
		if acct.BusyOK {
			mb.RecordNvidiaGpuBusyTimeDataPoint(ts, acct.Busy)
		}
		if acct.ActiveOK {
			mb.RecordNvidiaGpuActiveTimeDataPoint(ts, acct.Active)
		}
		if acct.IdleOK {
			mb.RecordNvidiaGpuIdleTimeDataPoint(ts, acct.Idle)
		}
	})
}

// recordProcessAccount records a process's counters, from their
// account's start; base is the builder's.
func recordProcessAccount(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, pa *accounting.Process, base pcommon.Timestamp) {
	if pa == nil {
		return
	}
	startingAt(mb, pa.Start, base, func() {
		mb.RecordNvidiaGpuProcessHeldTimeDataPoint(ts, pa.Held)
		if pa.BusyOK {
			mb.RecordNvidiaGpuProcessBusyTimeDataPoint(ts, pa.Busy)
		}
		if pa.IdleOK {
			mb.RecordNvidiaGpuProcessIdleTimeDataPoint(ts, pa.Idle)
		}
	})
}
