//go:build cgo

package call

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"

	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
)

func newSupportCache(t Table) *supportCache {
	return &supportCache{once: logonce.New(maxLoggedOnce), table: t, state: make([]supportState, len(t))}
}

func TestBackoffIsCapped(t *testing.T) {
	sc := newSupportCache(NewTable(nil))
	now := time.Unix(0, 0)
	for range 20 {
		sc.unsupported(ECCCorrected, nvml.ERROR_NOT_SUPPORTED, now)
	}
	assert.Equal(t, reprobeMax, sc.state[ECCCorrected].backoff)
	assert.False(t, sc.usable(ECCCorrected, now.Add(reprobeMax-time.Second)))
	assert.True(t, sc.usable(ECCCorrected, now.Add(reprobeMax)))
}

func TestMissingSymbolIsNeverAsked(t *testing.T) {
	sc := newSupportCache(NewTable(nil))
	sc.markMissing(RemappedRows)
	assert.False(t, sc.usable(RemappedRows, time.Now().Add(time.Hour)))
}
