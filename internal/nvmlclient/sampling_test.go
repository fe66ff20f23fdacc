//go:build cgo

package nvmlclient

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// Issue 17, defect 6: a codec's window spans the interval since the
// previous read by the device clock (WithClock), as GPM's window and the
// counters do, not by the wall clock: with the device clock 10 s on, a
// sample 5 s before the newest is this interval's, one 60 s before is not.
func TestCodecWindowSpansTheDeviceClock(t *testing.T) {
	m := nvmltest.NewH200()
	c, clock, _ := openGPM(t, m)
	g, d := m.GPUs[0], c.Devices()[0]
	clock.Advance(10 * time.Second)
	_, err := d.Read()
	require.NoError(t, err)
	g.Set(func(g *nvmltest.GPU) { g.EncoderUtil = 40 })
	now := uint64(time.Now().UnixMicro())
	g.AddSamples(nvml.ENC_UTILIZATION_SAMPLES, []uint64{now - 60_000_000, now - 5_000_000, now}, []uint32{0, 20, 60})
	clock.Advance(10 * time.Second)
	s, err := d.Read()
	require.NoError(t, err)
	assert.InDelta(t, 0.40, s.Utilization[sample.EngineEncoder].Value, 1e-9, "the two samples of the 10 s interval")
}
