package holders

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// Kept processes of which none had a share split the busy time evenly.
func TestShareAmongWithoutShares(t *testing.T) {
	t.Parallel()
	kept := []sample.Process{{PID: 1, BusyShare: sample.Opt[float64]{OK: true}}, {PID: 2, BusyShare: sample.Opt[float64]{OK: true}}}
	shareAmong(kept)
	assert.False(t, kept[0].BusyShare.OK || kept[1].BusyShare.OK)
	kept[0].BusyShare, kept[1].BusyShare = sample.Opt[float64]{Value: 0.1, OK: true}, sample.Opt[float64]{Value: 0.3, OK: true}
	shareAmong(kept)
	assert.InDelta(t, 0.25, kept[0].BusyShare.Value, 1e-12)
	assert.InDelta(t, 0.75, kept[1].BusyShare.Value, 1e-12)
}

// A process left out is counted once while it is listed, and forgotten
// once it is not: the memory is bounded by the GPUs' process lists.
func TestLeftOutForgetsTheProcessesGone(t *testing.T) {
	t.Parallel()
	l := &leftOut{seen: map[string]map[uint32]time.Time{}}
	started := func(int) time.Time { return time.Time{} }
	a, b := sample.Process{PID: 1}, sample.Process{PID: 2}
	assert.Equal(t, 1, l.add("g", []sample.Process{a, b}, []sample.Process{b}, started))
	assert.Equal(t, 0, l.add("g", []sample.Process{a, b}, []sample.Process{b}, started), "counted once")
	assert.Equal(t, 0, l.add("g", []sample.Process{a}, nil, started))
	assert.Empty(t, l.seen["g"], "the processes gone are forgotten")
}
