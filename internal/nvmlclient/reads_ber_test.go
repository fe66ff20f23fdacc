//go:build cgo

package nvmlclient

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
)

// An NVLink BER field packs a mantissa and an exponent: 3 << 8 | 12 is 3e-12.
func TestDecodeBER(t *testing.T) {
	assert.InDelta(t, 3e-12, DecodeBER(3<<8|12), 1e-24)
	assert.Equal(t, 0.0, DecodeBER(0))
}

// A read is named after the C function of its go-nvml method, with its
// selector; a closure has no such name and must be named.
func TestReadNames(t *testing.T) {
	assert.Equal(t, "nvmlDeviceGetPowerUsage", Getter(nvml.Device.GetPowerUsage).Name)
	assert.Equal(t, "nvmlDeviceGetMaxClockInfo(SM)", GetterOf(nvml.Device.GetMaxClockInfo, nvml.CLOCK_SM, "SM").Name)
	assert.Equal(t, "nvmlDeviceGetFieldValues(MEMORY_TEMP)", Field("MEMORY_TEMP", nvml.FI_DEV_MEMORY_TEMP).Name)
	closure := Getter(func(nvml.Device) (uint32, nvml.Return) { return 0, nvml.SUCCESS })
	assert.Empty(t, closure.Name)
	assert.Panics(t, func() { readTable([]Read{closure}) }, "an unnamed read")
}
