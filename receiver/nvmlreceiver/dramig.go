package nvmlreceiver

import (
	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
)

// setMIGPlacements tells the attributor where each MIG device of the GPU
// parent sits: NVIDIA's DRA driver names a MIG device by its parent's minor
// number, its GPU instance's profile id and placement start, and never
// publishes the uuid of one it makes on demand. The placement was read
// once per MIG device, when it was listed; one without (an unprivileged
// collector) is not matched by name, which is said once where claims name
// MIG devices.
func setMIGPlacements(a *attribution.Attributor, parent nvmlclient.DeviceInfo, migs []nvmlclient.MIGSample) {
	for i := range migs {
		mi := &migs[i].Info
		if mi.PlacementOK && parent.MinorNumber >= 0 {
			a.SetMIG(mi.UUID, attribution.MIGPlacement{ParentMinor: parent.MinorNumber, ProfileID: int(mi.GIProfileID), Start: int(mi.PlacementStart)})
		} else {
			a.MIGPlacementUnknown(mi.UUID)
		}
	}
}
