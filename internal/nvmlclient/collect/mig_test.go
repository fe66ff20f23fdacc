//go:build cgo

package collect

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMIGProfileName(t *testing.T) {
	for _, tt := range []struct {
		slices uint32
		mib    uint64
		want   string
	}{
		{1, 4864, "1g.5gb"}, {3, 19968, "3g.20gb"}, {7, 40192, "7g.40gb"},
		{1, 10240, "1g.10gb"}, {7, 81920, "7g.80gb"}, {1, 18432, "1g.18gb"}, {7, 144384, "7g.141gb"},
	} {
		assert.Equal(t, tt.want, migProfileName(tt.slices, tt.mib))
	}
}
