//go:build cgo

package nvmltest

import (
	"math"
	"reflect"
	"sort"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

func TestGetterTable(t *testing.T) {
	m := NewH200GPUs(2)
	g0, g1 := m.GPUs[0], m.GPUs[1]

	// A default of getters.json, on every GPU, by selector too.
	for _, g := range m.GPUs {
		if v, ret := g.GetMaxClockInfo(nvml.CLOCK_SM); ret != nvml.SUCCESS || v != 1980 {
			t.Errorf("GetMaxClockInfo(SM) = %d, %v; want the default 1980", v, ret)
		}
		if v, ret := g.GetMaxClockInfo(nvml.CLOCK_MEM); ret != nvml.SUCCESS || v != 3201 {
			t.Errorf("GetMaxClockInfo(MEM) = %d, %v; want the default 3201", v, ret)
		}
		if v, ret := g.GetMaxPcieLinkGeneration(); ret != nvml.SUCCESS || v != 5 {
			t.Errorf("GetMaxPcieLinkGeneration = %d, %v; want the default 5", v, ret)
		}
		if v, ret := g.GetMaxPcieLinkWidth(); ret != nvml.SUCCESS || v != 16 {
			t.Errorf("GetMaxPcieLinkWidth = %d, %v; want the default 16", v, ret)
		}
	}

	// A GPU's Getters override the default, on that GPU only; NaN makes it NOT_SUPPORTED.
	g0.Set(func(g *GPU) {
		g.Getters["nvmlDeviceGetMaxClockInfo(SM)"] = 2100
		g.Getters["nvmlDeviceGetMaxPcieLinkWidth"] = math.NaN()
	})
	if v, ret := g0.GetMaxClockInfo(nvml.CLOCK_SM); ret != nvml.SUCCESS || v != 2100 {
		t.Errorf("overridden GetMaxClockInfo(SM) = %d, %v; want 2100", v, ret)
	}
	if v, ret := g1.GetMaxClockInfo(nvml.CLOCK_SM); ret != nvml.SUCCESS || v != 1980 {
		t.Errorf("GPU 1's GetMaxClockInfo(SM) = %d, %v; want the default 1980", v, ret)
	}
	if _, ret := g0.GetMaxPcieLinkWidth(); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetMaxPcieLinkWidth set to NaN answers %v; want NOT_SUPPORTED", ret)
	}

	// The selector names of nvml.h's constants, and a struct of one value.
	if v, ret := g1.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES); ret != nvml.SUCCESS || v != 2000 {
		t.Errorf("GetPcieThroughput(RX_BYTES) = %d, %v; want 2000", v, ret)
	}
	if v, ret := g1.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES); ret != nvml.SUCCESS || v != 1000 {
		t.Errorf("GetPcieThroughput(TX_BYTES) = %d, %v; want 1000", v, ret)
	}
	if v, ret := g1.GetMarginTemperature(); ret != nvml.SUCCESS || v.MarginTemperature != 39 {
		t.Errorf("GetMarginTemperature = %+v, %v; want 39", v, ret)
	}

	// No value: NOT_SUPPORTED; an unknown selector: INVALID_ARGUMENT.
	if _, ret := g0.GetMaxClockInfo(nvml.CLOCK_VIDEO); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetMaxClockInfo(VIDEO) without a value answers %v; want NOT_SUPPORTED", ret)
	}
	if _, ret := g0.GetMaxCustomerBoostClock(nvml.CLOCK_SM); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GetMaxCustomerBoostClock(SM) without a value answers %v; want NOT_SUPPORTED", ret)
	}
	if _, ret := g0.GetMaxClockInfo(nvml.ClockType(99)); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("GetMaxClockInfo(99) answers %v; want INVALID_ARGUMENT", ret)
	}

	// The getters set by hand keep their own values.
	if v, ret := g1.GetClockInfo(nvml.CLOCK_VIDEO); ret != nvml.SUCCESS || v != 1545 {
		t.Errorf("GetClockInfo(VIDEO) = %d, %v; want ClockMHz's 1545", v, ret)
	}
}

// Every default names a key of the table, and the table covers nvml.h's
// simple getters that go-nvml's mock has, but for those set by hand.
func TestGetterTableKeys(t *testing.T) {
	keys := getterKeys()
	for k := range DefaultGetters {
		if !keys[k] {
			t.Errorf("getters.json: %q is not a key of the getter table", k)
		}
	}
	for _, k := range []string{"nvmlDeviceGetMaxClockInfo(SM)", "nvmlDeviceGetMaxClockInfo(MEM)",
		"nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth", "nvmlDeviceGetMarginTemperature",
		"nvmlDeviceGetPcieThroughput(TX_BYTES)", "nvmlDeviceGetPcieThroughput(RX_BYTES)",
		"nvmlDeviceGetTemperatureThreshold(SLOWDOWN)"} {
		if !keys[k] {
			t.Errorf("the getter table lacks %q", k)
		}
	}
	wiredNames := map[string]bool{}
	for _, w := range wiredGetters() {
		wiredNames[w.name] = true
	}
	dt := reflect.TypeFor[server.Device]()
	var missed []string
	for name := range simpleGetters {
		if _, ok := dt.FieldByName(name[len("nvmlDevice"):] + "Func"); ok && !wiredNames[name] {
			missed = append(missed, name)
		}
	}
	sort.Strings(missed)
	if len(missed) > 0 {
		t.Errorf("getters of nvml.h whose mock field has another shape (fix wiredGetters or the generator): %v", missed)
	}
	t.Logf("%d getters, %d keys", len(wiredNames), len(keys))
}
