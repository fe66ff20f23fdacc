//go:build cgo

package nvmlclient

import (
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
)

// Getter reads one value from get, a go-nvml method expression such as
// nvml.Device.GetPowerUsage, named after its C function
// (nvmlDeviceGetPowerUsage).
func Getter[T call.Integer](get func(nvml.Device) (T, nvml.Return)) Read {
	return Read{Name: cName(get), get: call.Getter(get)}
}

// GetterOf reads one value from get with its selector sel, whose name
// (SM for nvml.CLOCK_SM) completes the read's: nvmlDeviceGetClockInfo(SM).
func GetterOf[S any, T call.Integer](get func(nvml.Device, S) (T, nvml.Return), sel S, selName string) Read {
	return Read{Name: cName(get) + "(" + selName + ")",
		get: call.Getter(func(h nvml.Device) (T, nvml.Return) { return get(h, sel) })}
}

// Field reads field id (an nvml.FI_DEV_ constant) of the GPU's field
// batch, named by the constant's name without its prefix.
func Field(name string, id uint32) Read {
	return Read{Name: "nvmlDeviceGetFieldValues(" + name + ")", field: id}
}

// cName is the C function behind a go-nvml method expression:
// nvml.Device.GetPowerUsage is nvmlDeviceGetPowerUsage. A function of
// another kind has none: its read must be Named.
func cName(method any) string {
	full := runtime.FuncForPC(reflect.ValueOf(method).Pointer()).Name()
	parts := strings.Split(strings.TrimPrefix(full, "github.com/NVIDIA/go-nvml/pkg/"), ".")
	if len(parts) != 3 || parts[0] != "nvml" || parts[1] != "Device" {
		return ""
	}
	return strings.Join(parts, "")
}

// DecodeBER reads an NVLink BER field: mantissa × 10^-exponent, packed as
// NVML_NVLINK_ERROR_COUNTER_BER_GET unpacks them.
func DecodeBER(raw float64) float64 {
	v := uint64(raw)
	mantissa := v >> nvml.NVLINK_BER_MANTISSA_SHIFT & nvml.NVLINK_BER_MANTISSA_WIDTH
	exponent := v >> nvml.NVLINK_BER_EXP_SHIFT & nvml.NVLINK_BER_EXP_WIDTH
	return float64(mantissa) * math.Pow10(-int(exponent))
}

// readTable is the read table of reads.
func readTable(reads []Read) call.Table {
	specs := make([]call.Spec, len(reads))
	for i, r := range reads {
		if r.Name == "" {
			panic(fmt.Sprintf("nvmlclient: read %d has no name: a getter that is not a go-nvml method must be Named", i))
		}
		s := call.Spec{Name: r.Name, Reader: call.ByField, Field: r.field, Divisor: r.divisor, Costly: r.costly,
			Cumulative: r.counter, Links: call.LinkFold(r.links), Decode: r.decode, Valid: r.valid}
		if r.get != nil {
			s.Reader, s.Get = call.ByGetter, r.get.(func(nvml.Device) (float64, nvml.Return))
		}
		specs[i] = s
	}
	return call.NewTable(specs)
}
