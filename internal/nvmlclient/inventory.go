//go:build cgo

package nvmlclient

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
)

func takeInventory(lib nvml.Interface, logger *zap.Logger, selectors []string, opts options) (Inventory, []*Device, error) {
	var inv Inventory
	// The versions are informative: a failure here must not stop collection.
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		inv.DriverVersion = v
	}
	if v, ret := lib.SystemGetNVMLVersion(); ret == nvml.SUCCESS {
		inv.NVMLVersion = v
	}
	if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS && v > 0 {
		inv.CUDAVersion = fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
	}

	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return inv, nil, &UnavailableError{Cause: "nvmlDeviceGetCount failed: " + ret.Error(),
			Fix: "check that nvidia-smi works where the collector runs", Err: ret}
	}
	if count == 0 {
		return inv, nil, &UnavailableError{Cause: "NVML sees no GPU",
			Fix: "is a GPU assigned to this container (NVIDIA_VISIBLE_DEVICES, a nvidia.com/gpu request, or runtimeClassName: nvidia)?"}
	}

	table := readTable(opts.reads)
	symbols := call.LookupSymbols(lib, table)
	var devices []*Device
	for i := 0; i < count; i++ {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			// One broken GPU must not hide the others.
			logger.Warn("Cannot get a handle for GPU; skipping it",
				zap.Int("nvidia.gpu.index", i), zap.String("error", ret.Error()))
			continue
		}
		info, err := deviceInfo(h, i)
		if err != nil {
			logger.Warn("Cannot identify GPU; skipping it", zap.Int("nvidia.gpu.index", i), zap.Error(err))
			continue
		}
		info.DriverVersion = inv.DriverVersion
		devices = append(devices, newDevice(lib, h, table, info, symbols, logger))
	}

	selected, err := selectDevices(devices, selectors)
	if err != nil {
		return inv, nil, err
	}
	if len(selected) == 0 {
		return inv, nil, &UnavailableError{Cause: "no GPU could be identified",
			Fix: "check that nvidia-smi -L lists the GPUs"}
	}
	for _, d := range selected {
		d.configure(opts) // only the calls that answer an asked-for reading
		inv.Devices = append(inv.Devices, d.Info)
	}
	return inv, selected, nil
}

// deviceInfo reads the identity of one GPU. Only the UUID is required; the
// rest is best effort, as older boards lack some of it.
func deviceInfo(h nvml.Device, index int) (DeviceInfo, error) {
	info := DeviceInfo{Index: index, MinorNumber: -1}
	uuid, ret := h.GetUUID()
	if ret != nvml.SUCCESS {
		return info, fmt.Errorf("nvmlDeviceGetUUID: %w", ret)
	}
	info.UUID = uuid
	if v, ret := h.GetIndex(); ret == nvml.SUCCESS {
		info.Index = v
	}
	if v, ret := h.GetName(); ret == nvml.SUCCESS {
		info.Name = v
	}
	if v, ret := h.GetSerial(); ret == nvml.SUCCESS {
		info.Serial = v
	}
	if p, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
		info.PCIBusID = pciBusID(p)
	}
	if v, ret := h.GetMinorNumber(); ret == nvml.SUCCESS {
		info.MinorNumber = v
	}
	if v, ret := h.GetArchitecture(); ret == nvml.SUCCESS {
		info.Architecture = architectureName(v)
	}
	if major, minor, ret := h.GetCudaComputeCapability(); ret == nvml.SUCCESS {
		info.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	}
	return info, nil
}

// pciBusID turns NVML's C string into Go, keeping NVML's own form
// (00000000:19:00.0), which is what nvidia-smi and dcgm-exporter print.
func pciBusID(p nvml.PciInfo) string {
	var b strings.Builder
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

func architectureName(a nvml.DeviceArchitecture) string {
	switch a {
	case nvml.DEVICE_ARCH_KEPLER:
		return "kepler"
	case nvml.DEVICE_ARCH_MAXWELL:
		return "maxwell"
	case nvml.DEVICE_ARCH_PASCAL:
		return "pascal"
	case nvml.DEVICE_ARCH_VOLTA:
		return "volta"
	case nvml.DEVICE_ARCH_TURING:
		return "turing"
	case nvml.DEVICE_ARCH_AMPERE:
		return "ampere"
	case nvml.DEVICE_ARCH_ADA:
		return "ada"
	case nvml.DEVICE_ARCH_HOPPER:
		return "hopper"
	case nvml.DEVICE_ARCH_BLACKWELL:
		return "blackwell"
	default:
		return ""
	}
}

// selectDevices keeps the devices named by selectors, each a UUID or an
// index. Every selector must match a device.
func selectDevices(devices []*Device, selectors []string) ([]*Device, error) {
	if len(selectors) == 0 {
		return devices, nil
	}
	keep := make(map[*Device]bool, len(devices))
	for _, sel := range selectors {
		found := false
		for _, d := range devices {
			if matches(d.Info, sel) {
				keep[d], found = true, true
			}
		}
		if !found {
			return nil, &SelectorError{Selector: sel}
		}
	}
	var out []*Device
	for _, d := range devices {
		if keep[d] {
			out = append(out, d)
		}
	}
	return out, nil
}

func matches(info DeviceInfo, sel string) bool {
	if idx, err := strconv.Atoi(sel); err == nil {
		return idx == info.Index
	}
	return strings.EqualFold(sel, info.UUID)
}
