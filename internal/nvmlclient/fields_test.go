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
	g.GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return {
		for _, f := range v {
			if f.FieldId == nvml.FI_DEV_MEMORY_TEMP {
				calls++
			}
		}
		return get(v)
	}
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
	m, c, _ := openH200(t)
	g := m.GPUs[0]
	get := g.GetFieldValuesFunc
	for _, tc := range []struct {
		name string
		vt   nvml.ValueType
		put  func(b []byte)
		want Opt[float64]
	}{
		{"uint", nvml.VALUE_TYPE_UNSIGNED_INT, func(b []byte) { binary.LittleEndian.PutUint32(b, 52) }, some(52.0)},
		{"double", nvml.VALUE_TYPE_DOUBLE, func(b []byte) { binary.LittleEndian.PutUint64(b, math.Float64bits(52.5)) }, some(52.5)},
		{"unknown type", nvml.ValueType(99), func([]byte) {}, Opt[float64]{}},
	} {
		g.GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return {
			get(v)
			for i := range v {
				if v[i].FieldId == nvml.FI_DEV_MEMORY_TEMP {
					v[i].NvmlReturn, v[i].ValueType = uint32(nvml.SUCCESS), uint32(tc.vt)
					tc.put(v[i].Value[:])
				}
			}
			return nvml.SUCCESS
		}
		s, err := c.Devices()[0].Read()
		require.NoError(t, err)
		assert.Equal(t, tc.want, s.MemoryTemperatureCelsius, tc.name)
	}
	m2, c2, _ := openH200(t)
	m2.GPUs[0].GetFieldValuesFunc = func([]nvml.FieldValue) nvml.Return { return nvml.ERROR_GPU_IS_LOST }
	_, err := c2.Devices()[0].Read()
	assert.ErrorIs(t, err, ErrGPULost, "the call's own error counts first")
}
