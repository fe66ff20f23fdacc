//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// The generic getters (test/fakenvml/getters_gen.c, from nvml.h) answer the
// GPU's getters block over the defaults compiled in from
// test/nvmltest/getters.json, the values the Go mock answers too.
func TestLibraryGetters(t *testing.T) {
	t.Parallel()
	s := Scenario{GPUs: []GPU{{
		Name: "NVIDIA H200 (SIMULATED)", UUID: "GPU-6e7e0000-0000-4000-8000-000000000000",
		Serial: "SIMULATED-GETTERS-0", PCIBusID: "00000000:19:00.0",
		Memory:    &Memory{TotalBytes: 150754820096},
		ClocksMHz: &Clocks{SM: 1755},
		Getters: map[string]Signal{
			"nvmlDeviceGetMaxClockInfo(SM)":               2100,
			"nvmlDeviceGetMaxPcieLinkWidth":               nil, // NOT_SUPPORTED over its default
			"nvmlDeviceGetMaxClockInfo(VIDEO)":            Steps{Steps: [][2]float64{{0, 1500}, {1e6, 1600}}},
			"nvmlDeviceGetTemperatureThreshold(SLOWDOWN)": 90,
		},
		MarginTemperatureC: -5,
		PCIeTxKiBs:         1000,
		Errors:             []Fault{{Call: "nvmlDeviceGetMaxPcieLinkGeneration", Return: "GPU_IS_LOST"}},
	}, {
		Name: "NVIDIA H200 (SIMULATED)", UUID: "GPU-6e7e0000-0000-4000-8000-000000000001",
		Serial: "SIMULATED-GETTERS-1", PCIBusID: "00000000:2a:00.0",
		Memory: &Memory{TotalBytes: 150754820096},
	}}}
	lib := openLib(t, s)
	d0, d1 := device(t, lib, 0), device(t, lib, 1)

	u32 := func(want uint32, wantRet nvml.Return) func(uint32, nvml.Return) {
		return func(v uint32, ret nvml.Return) {
			t.Helper()
			assert.Equal(t, wantRet, ret)
			if wantRet == nvml.SUCCESS {
				assert.Equal(t, want, v)
			}
		}
	}
	intv := func(want int, wantRet nvml.Return) func(int, nvml.Return) {
		return func(v int, ret nvml.Return) {
			t.Helper()
			assert.Equal(t, wantRet, ret)
			if wantRet == nvml.SUCCESS {
				assert.Equal(t, want, v)
			}
		}
	}

	// GPU 1: the defaults alone.
	u32(1980, nvml.SUCCESS)(d1.GetMaxClockInfo(nvml.CLOCK_SM))
	u32(3201, nvml.SUCCESS)(d1.GetMaxClockInfo(nvml.CLOCK_MEM))
	intv(5, nvml.SUCCESS)(d1.GetMaxPcieLinkGeneration())
	intv(16, nvml.SUCCESS)(d1.GetMaxPcieLinkWidth())
	u32(0, nvml.ERROR_NOT_SUPPORTED)(d1.GetMaxClockInfo(nvml.CLOCK_VIDEO))
	u32(0, nvml.ERROR_NOT_SUPPORTED)(d1.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES))
	_, ret := d1.GetMarginTemperature()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret, "no margin temperature on GPU 1")

	// GPU 0: its getters block over the defaults.
	u32(2100, nvml.SUCCESS)(d0.GetMaxClockInfo(nvml.CLOCK_SM))
	u32(3201, nvml.SUCCESS)(d0.GetMaxClockInfo(nvml.CLOCK_MEM))
	u32(1500, nvml.SUCCESS)(d0.GetMaxClockInfo(nvml.CLOCK_VIDEO))
	intv(0, nvml.ERROR_NOT_SUPPORTED)(d0.GetMaxPcieLinkWidth())
	u32(90, nvml.SUCCESS)(d0.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN))
	u32(1000, nvml.SUCCESS)(d0.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES))
	u32(0, nvml.ERROR_NOT_SUPPORTED)(d0.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES))
	m, ret := d0.GetMarginTemperature()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, int32(-5), m.MarginTemperature)
	// A fault names a generic getter like any call; an unknown selector is
	// INVALID_ARGUMENT.
	intv(0, nvml.ERROR_GPU_IS_LOST)(d0.GetMaxPcieLinkGeneration())
	u32(0, nvml.ERROR_INVALID_ARGUMENT)(d0.GetMaxClockInfo(nvml.ClockType(99)))
	// A getter written by hand keeps its own scenario keys.
	u32(1755, nvml.SUCCESS)(d0.GetClockInfo(nvml.CLOCK_SM))
}

// A bad getter key fails nvmlInit with a line that names it (stderr, seen
// from a child process: the library writes to the process's own).
func TestLibraryGettersBadKey(t *testing.T) {
	t.Parallel()
	lib := testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath)
	for key, want := range map[string]string{
		"nvmlDeviceGetNoSuchThing":          `gpus[0].getters: unknown getter key "nvmlDeviceGetNoSuchThing"`,
		"nvmlDeviceGetMaxClockInfo(SHADER)": `gpus[0].getters: unknown getter key "nvmlDeviceGetMaxClockInfo(SHADER)"`,
		"nvmlDeviceGetClockInfo(SM)":        `getter key "nvmlDeviceGetClockInfo(SM)": nvmlDeviceGetClockInfo is written by hand`,
	} {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(t.TempDir(), "scenario.json")
			require.NoError(t, os.WriteFile(p, []byte(`{"gpus": [{"getters": {"`+key+`": 1}}]}`), 0o600))
			cmd := exec.Command(os.Args[0], "-test.run=^TestLibraryGettersChild$", "-fakenvml="+lib)
			cmd.Env = append(os.Environ(), scenarioEnv+"="+p, "FAKENVML_GETTERS_CHILD=1")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.Contains(t, string(out), want)
			assert.Contains(t, string(out), fmt.Sprintf("child: nvmlInit: %d\n", int(nvml.ERROR_UNKNOWN)))
		})
	}
}

// TestLibraryGettersChild is TestLibraryGettersBadKey's child process.
func TestLibraryGettersChild(t *testing.T) {
	if os.Getenv("FAKENVML_GETTERS_CHILD") != "1" {
		t.Skip("the child of TestLibraryGettersBadKey")
	}
	// No other NVML call: after a failed nvmlInit one would end the process.
	fmt.Fprintf(os.Stderr, "child: nvmlInit: %d\n", int(newLib(t).Init()))
}
