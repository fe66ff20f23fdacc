//go:build cgo

package collect

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
)

// fieldOf is a field value as NVML answers it: an unsigned long long.
func fieldOf(scope uint32, ret nvml.Return, v uint64) nvml.FieldValue {
	f := nvml.FieldValue{ScopeId: scope, NvmlReturn: uint32(ret), ValueType: uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)}
	for b := range 8 {
		f.Value[b] = byte(v >> (8 * b))
	}
	return f
}

// A per-link row folds the links that answered: their sum or the worst;
// it fails only where no link answered, with the first link's error.
func TestPerLinkFieldsFold(t *testing.T) {
	links := []nvml.FieldValue{
		fieldOf(0, nvml.SUCCESS, 2), fieldOf(1, nvml.SUCCESS, 5), fieldOf(2, nvml.ERROR_INVALID_ARGUMENT, 0), fieldOf(3, nvml.SUCCESS, 1),
	}
	v, ret, n := fold(&call.Spec{Links: call.LinksSum}, links)
	assert.Equal(t, [3]any{8.0, nvml.SUCCESS, uint32(4)}, [3]any{v, ret, n})
	v, ret, _ = fold(&call.Spec{Links: call.LinksMax}, links)
	assert.Equal(t, [2]any{5.0, nvml.SUCCESS}, [2]any{v, ret})
	v, ret, _ = fold(&call.Spec{Links: call.LinksMax, Decode: func(x float64) float64 { return -x }}, links)
	assert.Equal(t, [2]any{-1.0, nvml.SUCCESS}, [2]any{v, ret}, "decoded before folding")
	_, ret, n = fold(&call.Spec{Links: call.LinksSum}, []nvml.FieldValue{fieldOf(0, nvml.ERROR_NOT_SUPPORTED, 0), fieldOf(1, nvml.ERROR_INVALID_ARGUMENT, 0)})
	assert.Equal(t, [2]any{nvml.ERROR_NOT_SUPPORTED, uint32(0)}, [2]any{ret, n})
	v, ret, n = fold(&call.Spec{}, links[1:2])
	assert.Equal(t, [3]any{5.0, nvml.SUCCESS, uint32(0)}, [3]any{v, ret, n}, "a plain field is its one value")
}
