//go:build cgo

package nvmltest

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// value answers a getter from GPU.Getters by its name: its value, or
// NOT_SUPPORTED where the GPU has none.
type value func(name string) (float64, nvml.Return)

// getterTable wires the getters that answer one value to GPU.Getters, by
// NVML name (with its argument, where one function answers several): a
// getter new to the mock is one line here.
var getterTable = []func(d *server.Device, v value){
	func(d *server.Device, v value) {
		d.GetMarginTemperatureFunc = func() (nvml.MarginTemperature, nvml.Return) {
			x, r := v("nvmlDeviceGetMarginTemperature")
			return nvml.MarginTemperature{MarginTemperature: int32(x)}, r
		}
	},
	func(d *server.Device, v value) {
		d.GetPcieThroughputFunc = func(c nvml.PcieUtilCounter) (uint32, nvml.Return) {
			x, r := v(map[nvml.PcieUtilCounter]string{
				nvml.PCIE_UTIL_TX_BYTES: "nvmlDeviceGetPcieThroughput(TX)", nvml.PCIE_UTIL_RX_BYTES: "nvmlDeviceGetPcieThroughput(RX)",
			}[c])
			return uint32(x), r
		}
	},
}

// setGetters wires the getter table to g.Getters.
func (g *GPU) setGetters(d *server.Device) {
	v := func(name string) (float64, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		x, ok := g.Getters[name]
		if !ok {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return x, nvml.SUCCESS
	}
	for _, set := range getterTable {
		set(d, v)
	}
}
