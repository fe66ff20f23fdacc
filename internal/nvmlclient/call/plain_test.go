//go:build cgo

package call

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// An NVLink BER field packs a mantissa and an exponent: 3 << 8 | 12 is 3e-12.
func TestDecodeBER(t *testing.T) {
	assert.InDelta(t, 3e-12, decodeBER(3<<8|12), 1e-24)
	assert.Equal(t, 0.0, decodeBER(0))
}
