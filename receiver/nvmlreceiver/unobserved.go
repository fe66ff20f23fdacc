package nvmlreceiver

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// unobserved records a scrape that could not read GPU info (stuck, lost, or
// a read that failed outright): record records what is said of the GPU
// itself, which goes on its device resource as when it is read; then the
// time since its accounts' last window is added to them as unobserved for
// reason. The GPU's GPU-time counters go on its holder resource with the
// last owner the GPU had, and each MIG device's on its own, so that they
// neither vanish nor start an owner-less copy. Their accounts are kept.
func (r *reporter) unobserved(ts pcommon.Timestamp, info nvmlclient.DeviceInfo, reason unobservedReason, record func()) {
	r.unread[info.UUID] = true
	accts := r.accounts.unobserved(info.UUID, ts.AsTime(), reason)
	newResource := func(o owner) *metadata.ResourceBuilder { return gpuResource(r.mb, info, o) }
	var o owner
	if len(accts) > 0 && accts[0].mig.UUID == "" { // the GPU's, first
		o = accts[0].owner
	}
	record()
	emitDevice(r.mb, newResource, o)
	if len(accts) > 0 && accts[0].mig.UUID == "" {
		recordDeviceAccount(r.mb, ts, accts[0], r.since)
		accts = accts[1:]
	}
	r.mb.EmitForResource(metadata.WithResource(newResource(o).Emit()))
	for _, acct := range accts {
		recordDeviceAccount(r.mb, ts, acct, r.since)
		r.mb.EmitForResource(metadata.WithResource(migResource(r.mb, info, acct.mig, acct.owner).Emit()))
	}
}

// failed records a GPU whose read failed outright, neither stuck nor lost:
// its time is unobserved, read_failed.
func (r *reporter) failed(ts pcommon.Timestamp, info nvmlclient.DeviceInfo) {
	r.unobserved(ts, info, reasonReadFailed, func() {})
}
