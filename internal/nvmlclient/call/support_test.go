//go:build cgo

package call

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"

	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/figure"
)

func TestBackoffIsCapped(t *testing.T) {
	sc := supportCache{once: logonce.New(maxLoggedOnce)}
	now := time.Unix(0, 0)
	for range 20 {
		sc.unsupported(Of(figure.FanSpeed), nvml.ERROR_NOT_SUPPORTED, now)
	}
	assert.Equal(t, reprobeMax, sc.state[Of(figure.FanSpeed)].backoff)
	assert.False(t, sc.usable(Of(figure.FanSpeed), now.Add(reprobeMax-time.Second)))
	assert.True(t, sc.usable(Of(figure.FanSpeed), now.Add(reprobeMax)))
}

func TestMissingSymbolIsNeverAsked(t *testing.T) {
	sc := supportCache{once: logonce.New(maxLoggedOnce)}
	sc.markMissing(RemappedRows)
	assert.False(t, sc.usable(RemappedRows, time.Now().Add(time.Hour)))
}
