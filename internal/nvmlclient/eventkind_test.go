package nvmlclient

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEventKindString(t *testing.T) {
	assert.Equal(t, "xid", EventXID.String())
	assert.Equal(t, "ecc.single_bit", EventSingleBitECC.String())
	assert.Equal(t, "ecc.double_bit", EventDoubleBitECC.String())
	assert.Equal(t, "EventKind(7)", EventKind(7).String(), "an unknown kind is not taken for a double-bit error")
}
