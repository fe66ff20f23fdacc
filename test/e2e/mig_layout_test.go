//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// The MIG layout test's devices: one that stays, one destroyed at
// layoutChange and one created then, without a driver reload.
const (
	layoutParent = "GPU-e2e33333-0000-4000-8000-000000000000"
	migStays     = "MIG-e2e33333-0000-4000-8000-00000000000a"
	migDestroyed = "MIG-e2e33333-0000-4000-8000-00000000000b"
	migCreated   = "MIG-e2e33333-0000-4000-8000-00000000000c"
	layoutChange = 5.0
)

func migLayoutScenario() Scenario {
	gi := func(id, profileID int, memMiB uint64) GPUInstance {
		return GPUInstance{ID: id, ProfileID: profileID, Memory: &Memory{TotalBytes: memMiB << 20, UsedBytes: 1 << 30},
			GPM: map[string]Signal{"SM_UTIL": 30, "SM_OCCUPANCY": 10}}
	}
	return Scenario{
		Comment:       "e2e: a MIG layout that changes mid-run, without a driver reload",
		DriverVersion: driverVersion,
		GPUs: []GPU{{
			Name: "NVIDIA H200 (SIMULATED)", UUID: layoutParent, Serial: "SIMULATED-MIG-2", PCIBusID: "00000000:19:00.0",
			Memory:       &Memory{TotalBytes: 150754820096, ReservedBytes: 617086976, UsedBytes: 10 << 30},
			TemperatureC: 40, PowerW: 200, PowerLimitW: 700,
			Processes: []Process{},
			GPM:       map[string]Signal{"SM_UTIL": 30, "SM_OCCUPANCY": 10},
			MIG: &MIG{MaxDevices: 7, Profiles: h200Profiles,
				GPUInstances: []GPUInstance{gi(2, 9, 72704), gi(9, 19, 18432), gi(10, 19, 18432)},
				Devices: []MIGDevice{
					{UUID: migStays, GPUInstanceID: 2, ComputeInstanceID: 0},
					{UUID: migDestroyed, GPUInstanceID: 9, ComputeInstanceID: 0, Until: ptr(layoutChange)},
					{UUID: migCreated, GPUInstanceID: 10, ComputeInstanceID: 0, From: layoutChange},
				}},
		}},
	}
}

// TestMIGLayoutChange: a MIG device destroyed and another created at
// t = 5 s, as nvidia-smi mig -dci / -cci do, with no driver reload. The
// destroyed device's calls answer INVALID_ARGUMENT: the receiver reads the
// layout again at once, so the new device appears within a scrape or two,
// the destroyed one's series end there (no series outlives its MIG device),
// and the one that stays goes on. The layout is also read every minute
// (internal/nvmlclient/collect/mig.go; its mock test covers that schedule).
func TestMIGLayoutChange(t *testing.T) {
	t.Parallel()
	const runUntil = layoutChange + 5
	bin := testutil.AbsFlag(t, "otelcol", *otelcolPath)
	be := startBackend(t, bin)
	col := startCollector(t, "collector on a changing MIG layout", migLayoutScenario().write(t), be, receiverSettings)
	t0 := col.scenarioStart(t, 30*time.Second)

	var pts []point
	waitFor(t, 60*time.Second, fmt.Sprintf("MIG data points up to t = %.0f s", runUntil), func() bool {
		pts = be.points(t)
		last := times(filter(pts, migStays, "hw.gpu.memory.usage", nil), t0)
		return len(last) > 0 && last[len(last)-1] >= runUntil
	}, col.proc, be.proc)
	logs := col.proc.logs.String()

	at := func(uuid string) []float64 { return times(filter(pts, uuid, "hw.gpu.memory.usage", nil), t0) }
	stays, destroyed, created := at(migStays), at(migDestroyed), at(migCreated)
	require.NotEmpty(t, destroyed, "the destroyed device before its end")
	require.NotEmpty(t, created, "the created device appears without a driver reload")
	assert.Less(t, destroyed[len(destroyed)-1], layoutChange, "no point of the destroyed device after it was destroyed")
	for _, p := range filter(pts, migDestroyed, "", nil) {
		assert.Less(t, rel(p, t0), layoutChange, "%s after the device was destroyed", p.Metric)
	}
	assert.GreaterOrEqual(t, created[0], layoutChange, "no point of the created device before it existed")
	assert.Less(t, created[0], layoutChange+2.5, "the created device appears within two scrapes (the destroyed one's failure rereads the layout)")
	assert.Greater(t, stays[len(stays)-1], created[0], "the device that stays goes on")
	assert.Less(t, stays[0], layoutChange)
	for _, p := range filter(pts, migCreated, "", nil) {
		assert.Equal(t, layoutParent, p.Resource["hw.parent"])
		assert.Equal(t, int64(10), p.Resource["nvidia.gpu.mig.gpu_instance_id"])
	}
	assert.Zero(t, logCount(logs, "NVML call failed"), "a destroyed MIG device is no failed call")
	assert.Zero(t, logCount(logs, "degraded"), "nor a degraded GPU")
}
