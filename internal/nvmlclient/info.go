package nvmlclient

import (
	"fmt"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// Inventory is what never changes while NVML stays open: the software
// versions and each watched device's identity. It is taken at every Open.
type Inventory struct {
	DriverVersion string
	NVMLVersion   string
	CUDAVersion   string // e.g. "13.0"; empty when unknown
	Devices       []DeviceInfo
	MIGDevices    []sample.MIGInfo
}

// DeviceInfo is the static identity of one GPU.
type DeviceInfo struct {
	Index             int
	UUID              string
	Name              string
	Serial            string // empty where the board has none
	PCIBusID          string // as NVML prints it: 00000000:19:00.0
	MinorNumber       int
	Architecture      string // e.g. "hopper"; empty when unknown
	ComputeCapability string // e.g. "9.0"; empty when unknown
	DriverVersion     string
}

// SelectorError names a devices entry that matches no GPU.
type SelectorError struct{ Selector string }

func (e *SelectorError) Error() string {
	return fmt.Sprintf("devices: entry %q matches no GPU (give a GPU UUID or an index from nvidia-smi -L)", e.Selector)
}
