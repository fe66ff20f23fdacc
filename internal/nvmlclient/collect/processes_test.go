//go:build cgo

package collect

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"math"
)

func TestNewestSampleOfEachProcess(t *testing.T) {
	got := newestByPID([]nvml.ProcessUtilizationSample{
		{Pid: 7, TimeStamp: 300, SmUtil: 60},
		{Pid: 7, TimeStamp: 90, SmUtil: 100},
		{Pid: 7, TimeStamp: 200, SmUtil: 40}, // out of order
		{Pid: 9, TimeStamp: 250, SmUtil: 10, MemUtil: 4, EncUtil: 2, DecUtil: 1},
	})
	assert.Equal(t, uint32(60), got[7].SmUtil)
	assert.Equal(t, uint32(10), got[9].SmUtil)
	assert.Empty(t, newestByPID(nil))
}

func TestProcessSharesAverageOverSamples(t *testing.T) {
	var ps processShares
	at := time.Now()
	samples := func(a, b uint32) map[uint32]nvml.ProcessUtilizationSample {
		return map[uint32]nvml.ProcessUtilizationSample{1: {Pid: 1, SmUtil: a}, 2: {Pid: 2, SmUtil: b}}
	}
	ps.add(samples(20, 80), at)
	ps.add(samples(40, 40), at) // 0.5 / 0.5
	ps.add(samples(0, 0), at)   // nobody busy: adds nothing
	listed := map[uint32]*sample.Process{1: {PID: 1}, 2: {PID: 2}}
	shares, ok := ps.take(listed)
	require.True(t, ok)
	assert.InDelta(t, 0.35, shares[1], 1e-9)
	assert.InDelta(t, 0.65, shares[2], 1e-9)
	_, ok = ps.take(listed)
	assert.False(t, ok, "take starts over")

	// A PID no longer listed is left out, and the rest renormalized.
	ps.add(samples(50, 50), at)
	shares, ok = ps.take(map[uint32]*sample.Process{2: {PID: 2}})
	require.True(t, ok)
	assert.Equal(t, map[uint32]float64{2: 1}, shares)
}

func FuzzProcessShares(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 50, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var samples []nvml.ProcessUtilizationSample
		for len(data) >= 16 {
			samples = append(samples, nvml.ProcessUtilizationSample{
				Pid:       uint32(data[0] % 4),
				TimeStamp: uint64(data[4]) | uint64(data[5])<<8 | uint64(data[6])<<16,
				SmUtil:    uint32(data[12]), MemUtil: uint32(data[13]),
			})
			data = data[16:]
		}
		var ps processShares
		ps.add(newestByPID(samples), time.Now())
		listed := map[uint32]*sample.Process{0: {}, 1: {}, 2: {}, 3: {}}
		shares, ok := ps.take(listed)
		if !ok {
			return
		}
		var sum float64
		for _, v := range shares {
			if v < 0 || v > 1 || math.IsNaN(v) {
				t.Fatalf("bad share %v", v)
			}
			sum += v
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("shares sum to %v", sum)
		}
	})
}
