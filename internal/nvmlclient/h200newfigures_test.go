//go:build cgo && h200probe

package nvmlclient

// The new readings' probe: what each reading of driver 580 / go-nvml 0.13
// answers on a real GPU, raw and through the client, and which answer
// NOT_SUPPORTED. Run on the GPU machine by tools/h200/new-readings.sh; it
// writes new-readings.txt under $OUT (or prints only, without OUT).

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
)

func TestH200NewFigures(t *testing.T) {
	var w io.Writer = os.Stdout
	if dir := os.Getenv("OUT"); dir != "" {
		f, err := os.Create(filepath.Join(dir, "new-readings.txt"))
		require.NoError(t, err)
		defer f.Close()
		w = io.MultiWriter(os.Stdout, f)
	}
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		t.Skip("no NVML:", ret)
	}
	v, _ := lib.SystemGetDriverVersion()
	fmt.Fprintf(w, "driver %s\n", v)
	n, ret := lib.DeviceGetCount()
	require.Equal(t, nvml.SUCCESS, ret)
	for i := range n {
		h, ret := lib.DeviceGetHandleByIndex(i)
		require.Equal(t, nvml.SUCCESS, ret)
		name, _ := h.GetName()
		fmt.Fprintf(w, "\n== GPU %d: %s\n", i, name)
		// A symbol the library lacks kills the process: look each up first.
		has := func(name string) bool {
			if call.HasAnyVersion(lib.Extensions(), name) {
				return true
			}
			fmt.Fprintf(w, "%s: not in this library\n", name)
			return false
		}
		if has("nvmlDeviceGetMarginTemperature") {
			m, ret := h.GetMarginTemperature()
			fmt.Fprintf(w, "nvmlDeviceGetMarginTemperature: %v, margin %d C (version %#x)\n", ret, m.MarginTemperature, m.Version)
			var ds []time.Duration
			for range 30 {
				t0 := time.Now()
				h.GetMarginTemperature()
				ds = append(ds, time.Since(t0))
			}
			fmt.Fprintf(w, "nvmlDeviceGetMarginTemperature x30: %s\n", p50max(ds))
		}
		if has("nvmlDeviceGetPlatformInfo") {
			p, ret := h.GetPlatformInfo()
			// go-nvml asks version 1: the driver fills the v1 layout, so the
			// v2 names below hold the v1 fields (see docs/design/architecture.md).
			fmt.Fprintf(w, "nvmlDeviceGetPlatformInfo (go-nvml, version 1): %v, raw v2-named: ibGuid %x chassisSerial %x slot %d tray %d host %d peer %d module %d\n",
				ret, p.IbGuid, p.ChassisSerialNumber, p.SlotNumber, p.TrayIndex, p.HostId, p.PeerType, p.ModuleId)
		}
		for _, c := range []struct {
			name string
			c    nvml.PcieUtilCounter
		}{{"TX_BYTES", nvml.PCIE_UTIL_TX_BYTES}, {"RX_BYTES", nvml.PCIE_UTIL_RX_BYTES}} {
			t0 := time.Now()
			kib, ret := h.GetPcieThroughput(c.c)
			fmt.Fprintf(w, "nvmlDeviceGetPcieThroughput(%s): %v, %d KiB/s, took %v\n", c.name, ret, kib, time.Since(t0).Round(time.Microsecond))
		}
		// What the per-link rows cost when the GPU has no NVLink: both
		// fields over every link scope, in one batch.
		var batch []nvml.FieldValue
		for _, id := range []uint32{nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, nvml.FI_DEV_NVLINK_COUNT_EFFECTIVE_BER} {
			for l := range uint32(nvml.NVLINK_MAX_LINKS) {
				batch = append(batch, nvml.FieldValue{FieldId: id, ScopeId: l})
			}
		}
		var bs []time.Duration
		for range 30 {
			t0 := time.Now()
			h.GetFieldValues(batch)
			bs = append(bs, time.Since(t0))
		}
		fmt.Fprintf(w, "GetFieldValues(%d NVLink scopes) x30: %s\n", len(batch), p50max(bs))
		count := []nvml.FieldValue{{FieldId: nvml.FI_DEV_NVLINK_LINK_COUNT}}
		ret = h.GetFieldValues(count)
		fmt.Fprintf(w, "FI_DEV_NVLINK_LINK_COUNT: %v/%v, %v\n", ret, nvml.Return(count[0].NvmlReturn), fieldNumber(count[0]))
		for _, f := range []struct {
			name string
			id   uint32
		}{{"NVLINK_COUNT_SYMBOL_ERRORS", nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS}, {"NVLINK_COUNT_EFFECTIVE_BER", nvml.FI_DEV_NVLINK_COUNT_EFFECTIVE_BER}} {
			vals := make([]nvml.FieldValue, nvml.NVLINK_MAX_LINKS)
			for l := range vals {
				vals[l] = nvml.FieldValue{FieldId: f.id, ScopeId: uint32(l)}
			}
			t0 := time.Now()
			ret := h.GetFieldValues(vals)
			took := time.Since(t0)
			var links []string
			for l, fv := range vals {
				x := fieldNumber(fv)
				s := fmt.Sprintf("%d:%v", l, nvml.Return(fv.NvmlReturn))
				if nvml.Return(fv.NvmlReturn) == nvml.SUCCESS {
					s = fmt.Sprintf("%d:%g", l, x)
					if f.id == nvml.FI_DEV_NVLINK_COUNT_EFFECTIVE_BER {
						s += fmt.Sprintf("(=%g)", DecodeBER(x))
					}
				}
				links = append(links, s)
			}
			fmt.Fprintf(w, "%s over %d links: %v in %v\n  %s\n", f.name, len(vals), ret, took.Round(time.Microsecond), strings.Join(links, " "))
		}
	}
	lib.Shutdown()

	// The same readings through the client, as the receiver reads them.
	c := NewSystem("", zap.NewNop())
	require.NoError(t, c.Open(nil))
	defer c.Close(t.Context())
	for _, d := range c.Devices() {
		s, err := d.Read()
		fmt.Fprintf(w, "\nclient, GPU %d (err %v):\n", d.Info.Index, err)
		for _, f := range []struct {
			name string
			fig  int
		}{{"margin", FigMarginTemperature}, {"nvlink symbol errors", FigNVLinkSymbolErrors},
			{"nvlink effective BER", FigNVLinkEffectiveBER}, {"pcie tx B/s", FigPCIeThroughputTX}, {"pcie rx B/s", FigPCIeThroughputRX}} {
			fmt.Fprintf(w, "  %-22s %v\n", f.name, s.Values[f.fig])
		}
	}
}

// fieldNumber is a field's value as its type says (collect's probe reads it
// with that package's own decoder, which this package cannot reach).
func fieldNumber(f nvml.FieldValue) float64 {
	raw := f.Value[:]
	switch nvml.ValueType(f.ValueType) {
	case nvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.LittleEndian.Uint64(raw))
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.LittleEndian.Uint32(raw))
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.LittleEndian.Uint32(raw)))
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.LittleEndian.Uint64(raw)))
	default:
		return float64(binary.LittleEndian.Uint64(raw))
	}
}
