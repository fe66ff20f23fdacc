//go:build cgo

package nvmlclient

import (
	"sync/atomic"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Check is what a receiver with only the event watcher pays per interval:
// one cheap call, not a read of every reading. It still sees the GPU lost.
func TestCheckAsksOneQuestionAndSeesTheGPULost(t *testing.T) {
	m, c, _ := openH200(t)
	g := m.GPUs[0]
	var reads, temps atomic.Int32
	memory, samples := g.GetMemoryInfo_v2Func, g.GetSamplesFunc
	g.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { reads.Add(1); return memory() }
	g.GetSamplesFunc = func(st nvml.SamplingType, ts uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
		reads.Add(1)
		return samples(st, ts)
	}
	var lost atomic.Bool
	g.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
		temps.Add(1)
		if lost.Load() {
			return 0, nvml.ERROR_GPU_IS_LOST
		}
		return 40, nvml.SUCCESS
	}
	d := c.Devices()[0]

	require.NoError(t, d.Check())
	assert.EqualValues(t, 1, temps.Load(), "one call")
	assert.Zero(t, reads.Load(), "no reading is read")
	assert.False(t, d.Lost())

	lost.Store(true)
	assert.ErrorIs(t, d.Check(), ErrGPULost)
	assert.True(t, d.Lost())
	_, err := d.Read()
	assert.ErrorIs(t, err, ErrGPULost, "a lost GPU stays lost for the reads")
}
