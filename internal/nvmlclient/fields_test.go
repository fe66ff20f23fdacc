package nvmlclient

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMemoryTemperatureUnsupportedIsAskedOnce(t *testing.T) {
	m, c, logs := openH200(t)
	g := m.GPUs[3]
	g.MemoryTemperatureC = 0 // the field reports NOT_SUPPORTED
	calls := 0
	get := g.GetFieldValuesFunc
	g.GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return { calls++; return get(v) }
	for range 3 {
		s, err := c.Devices()[3].Read()
		require.NoError(t, err, "an unsupported field is no error")
		assert.False(t, s.MemoryTemperatureCelsius.OK)
		assert.True(t, s.TemperatureCelsius.OK, "the die's temperature is still read")
	}
	assert.Equal(t, 1, calls, "not asked again once unsupported")
	assert.Equal(t, 1, logs.FilterMessageSnippet("not supported").Len())
}

func TestFieldValueDecodesByType(t *testing.T) {
	m, _, _ := openH200(t)
	g := m.GPUs[0]
	for _, tc := range []struct {
		name string
		vt   nvml.ValueType
		put  func(b []byte)
		want float64
		ret  nvml.Return
	}{
		{"uint", nvml.VALUE_TYPE_UNSIGNED_INT, func(b []byte) { binary.LittleEndian.PutUint32(b, 52) }, 52, nvml.SUCCESS},
		{"double", nvml.VALUE_TYPE_DOUBLE, func(b []byte) { binary.LittleEndian.PutUint64(b, math.Float64bits(52.5)) }, 52.5, nvml.SUCCESS},
		{"unknown type", nvml.ValueType(99), func([]byte) {}, 0, nvml.ERROR_NOT_SUPPORTED},
	} {
		g.GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return {
			v[0].ValueType = uint32(tc.vt)
			tc.put(v[0].Value[:])
			return nvml.SUCCESS
		}
		v, ret := fieldValue(g, nvml.FI_DEV_MEMORY_TEMP)
		assert.Equal(t, tc.ret, ret, tc.name)
		assert.Equal(t, tc.want, v, tc.name)
	}
	g.GetFieldValuesFunc = func([]nvml.FieldValue) nvml.Return { return nvml.ERROR_GPU_IS_LOST }
	_, ret := fieldValue(g, nvml.FI_DEV_MEMORY_TEMP)
	assert.Equal(t, nvml.ERROR_GPU_IS_LOST, ret, "the call's own error counts first")
}
