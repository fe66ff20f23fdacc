//go:build cgo

package nvmlclient

import (
	"encoding/binary"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
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
		assert.False(t, s.Values[FigMemoryTemperature].OK)
		assert.True(t, s.Values[FigTemperature].OK, "the die's temperature is still read")
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
		want sample.Opt[float64]
	}{
		{"uint", nvml.VALUE_TYPE_UNSIGNED_INT, func(b []byte) { binary.LittleEndian.PutUint32(b, 52) }, some(52.0)},
		{"double", nvml.VALUE_TYPE_DOUBLE, func(b []byte) { binary.LittleEndian.PutUint64(b, math.Float64bits(52.5)) }, some(52.5)},
		{"unknown type", nvml.ValueType(99), func([]byte) {}, sample.Opt[float64]{}},
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
		assert.Equal(t, tc.want, s.Values[FigMemoryTemperature], tc.name)
	}
	m2, c2, _ := openH200(t)
	m2.GPUs[0].GetFieldValuesFunc = func([]nvml.FieldValue) nvml.Return { return nvml.ERROR_GPU_IS_LOST }
	_, err := c2.Devices()[0].Read()
	assert.ErrorIs(t, err, ErrGPULost, "the call's own error counts first")
}

// The NVLink error counters: four fields read in the counters' one batch,
// with the violation counters, stamped with the counters' time; absent on
// a GPU whose fields answer NOT_SUPPORTED (no NVLink).
func TestNVLinkErrorsInTheCountersBatch(t *testing.T) {
	m, c, _ := openH200(t)
	m.GPUs[0].FieldValues = map[uint32]uint64{nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: 12,
		nvml.FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL: 3, nvml.FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: 7,
		nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL: 1}
	var batches [][]uint32
	get := m.GPUs[0].GetFieldValuesFunc
	m.GPUs[0].GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return {
		var ids []uint32
		for _, f := range v {
			ids = append(ids, f.FieldId)
		}
		batches = append(batches, ids)
		return get(v)
	}
	s, err := c.Devices()[0].Read()
	require.NoError(t, err)
	assert.Equal(t, [4]sample.Opt[float64]{some[float64](12), some[float64](3), some[float64](7), some[float64](1)}, nvlinkErrors(&s))
	assert.False(t, s.CountersTime.IsZero())
	inOne := 0
	for _, b := range batches {
		has := map[uint32]bool{}
		for _, id := range b {
			has[id] = true
		}
		if has[nvml.FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL] {
			inOne++
			assert.True(t, has[nvml.FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL] && has[nvml.FI_DEV_PERF_POLICY_POWER],
				"one batch with the other counters: %v", b)
		}
	}
	assert.Equal(t, 1, inOne, "one batch: %v", batches)

	s, err = c.Devices()[1].Read()
	require.NoError(t, err, "NOT_SUPPORTED is no error")
	assert.Equal(t, [4]sample.Opt[float64]{}, nvlinkErrors(&s), "absent without NVLink")
	assert.True(t, s.Values[FigViolationPower].OK, "the rest of the batch stands")
}

// nvlinkErrors are the four NVLink error counters of s.
func nvlinkErrors(s *sample.Sample) [4]sample.Opt[float64] {
	return [4]sample.Opt[float64]{s.Values[FigNVLinkCRCFlit], s.Values[FigNVLinkCRCData], s.Values[FigNVLinkReplay], s.Values[FigNVLinkRecovery]}
}
