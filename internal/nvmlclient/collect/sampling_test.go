//go:build cgo

package collect

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"

	"github.com/stretchr/testify/require"
)

func uintSample(ts uint64, v uint32) nvml.Sample {
	s := nvml.Sample{TimeStamp: ts}
	binary.LittleEndian.PutUint32(s.SampleValue[:4], v)
	return s
}

func TestWindowAverage(t *testing.T) {
	tests := []struct {
		name     string
		lastSeen uint64
		samples  []nvml.Sample
		wantMean float64
		wantOK   bool
		wantLast uint64
	}{
		{
			name:     "in order",
			samples:  []nvml.Sample{uintSample(10, 20), uintSample(20, 40), uintSample(30, 60)},
			wantMean: 40, wantOK: true, wantLast: 30,
		},
		{
			name:     "out of order",
			samples:  []nvml.Sample{uintSample(30, 60), uintSample(10, 20), uintSample(20, 40)},
			wantMean: 40, wantOK: true, wantLast: 30,
		},
		{
			name:     "samples older than the last seen are not counted again",
			lastSeen: 20,
			samples:  []nvml.Sample{uintSample(10, 100), uintSample(20, 100), uintSample(30, 10), uintSample(40, 30)},
			wantMean: 20, wantOK: true, wantLast: 40,
		},
		{
			name:     "empty window",
			lastSeen: 50,
			samples:  nil,
			wantOK:   false, wantLast: 50,
		},
		{
			name:     "only old samples",
			lastSeen: 50,
			samples:  []nvml.Sample{uintSample(40, 90), uintSample(50, 90)},
			wantOK:   false, wantLast: 50,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := window{lastSeen: tt.lastSeen}
			mean, ok := w.average(nvml.VALUE_TYPE_UNSIGNED_INT, tt.samples, 0)
			assert.Equal(t, tt.wantOK, ok)
			if tt.wantOK {
				assert.InDelta(t, tt.wantMean, mean, 1e-9)
			}
			assert.Equal(t, tt.wantLast, w.lastSeen)
		})
	}
}

func TestDecodeSampleValue(t *testing.T) {
	put := func(f func(b []byte)) [8]byte {
		var raw [8]byte
		f(raw[:])
		return raw
	}
	tests := []struct {
		vt   nvml.ValueType
		raw  [8]byte
		want float64
		ok   bool
	}{
		{nvml.VALUE_TYPE_DOUBLE, put(func(b []byte) { binary.LittleEndian.PutUint64(b, math.Float64bits(42.5)) }), 42.5, true},
		{nvml.VALUE_TYPE_DOUBLE, put(func(b []byte) { binary.LittleEndian.PutUint64(b, math.Float64bits(math.NaN())) }), 0, false},
		{nvml.VALUE_TYPE_UNSIGNED_INT, put(func(b []byte) { binary.LittleEndian.PutUint32(b, 77); b[4] = 0xff }), 77, true},
		{nvml.VALUE_TYPE_UNSIGNED_LONG, put(func(b []byte) { binary.LittleEndian.PutUint64(b, 1<<40) }), 1 << 40, true},
		{nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, put(func(b []byte) { binary.LittleEndian.PutUint64(b, 5) }), 5, true},
		{nvml.VALUE_TYPE_SIGNED_LONG_LONG, put(func(b []byte) { binary.LittleEndian.PutUint64(b, uint64(math.MaxUint64)) }), -1, true},
		{nvml.VALUE_TYPE_SIGNED_INT, put(func(b []byte) { binary.LittleEndian.PutUint32(b, uint32(math.MaxUint32-1)) }), -2, true},
		{nvml.VALUE_TYPE_UNSIGNED_SHORT, put(func(b []byte) { binary.LittleEndian.PutUint16(b, 65535); b[2] = 1 }), 65535, true},
		{nvml.VALUE_TYPE_COUNT, [8]byte{1}, 0, false},
	}
	for _, tt := range tests {
		got, ok := decodeSampleValue(tt.vt, tt.raw)
		require.Equal(t, tt.ok, ok, "value type %d", tt.vt)
		assert.Equal(t, tt.want, got, "value type %d", tt.vt)
	}
}

// FuzzWindowAverage feeds arbitrary sample buffers to the window: it never
// panics, never moves backwards, and its mean lies within the samples' range.
func FuzzWindowAverage(f *testing.F) {
	f.Add(uint8(nvml.VALUE_TYPE_UNSIGNED_INT), uint64(0), []byte{1, 0, 0, 0, 0, 0, 0, 0, 50, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(nvml.VALUE_TYPE_DOUBLE), uint64(7), []byte{9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f})
	f.Fuzz(func(t *testing.T, vt uint8, lastSeen uint64, data []byte) {
		var samples []nvml.Sample
		for len(data) >= 16 {
			var s nvml.Sample
			s.TimeStamp = binary.LittleEndian.Uint64(data[:8])
			copy(s.SampleValue[:], data[8:16])
			samples = append(samples, s)
			data = data[16:]
		}
		w := window{lastSeen: lastSeen}
		mean, ok := w.average(nvml.ValueType(vt), samples, 0)
		if w.lastSeen < lastSeen {
			t.Fatalf("window moved backwards: %d < %d", w.lastSeen, lastSeen)
		}
		if !ok {
			return
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range samples {
			if s.TimeStamp <= lastSeen {
				continue
			}
			if v, valid := decodeSampleValue(nvml.ValueType(vt), s.SampleValue); valid {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		if math.IsNaN(mean) || math.IsInf(mean, 0) || mean < lo-1e-6*math.Abs(lo) || mean > hi+1e-6*math.Abs(hi) {
			t.Fatalf("mean %v outside [%v, %v]", mean, lo, hi)
		}
	})
}

func TestPercentToFraction(t *testing.T) {
	assert.Equal(t, 0.5, percentToFraction(50))
	assert.Equal(t, 1.0, percentToFraction(250))
	assert.Equal(t, 0.0, percentToFraction(-3))
}
