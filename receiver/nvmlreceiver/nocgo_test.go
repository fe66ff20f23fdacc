//go:build !cgo

package nvmlreceiver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// Built without cgo, the receiver starts, reports NVML as unavailable in
// one warning that says why, and scrapes nothing.
func TestWithoutCgoNVMLIsUnavailable(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	cfg := createDefaultConfig().(*Config)
	s := newScraper(cfg, set, nvmlclient.NewSystem(cfg.LibraryPath, set.Logger, append(clientOptions(cfg), systemTiming.clientOptions()...)...), systemTiming)
	require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()))
	for range 3 {
		md, err := s.scrape(context.Background())
		require.NoError(t, err)
		assert.Zero(t, md.ResourceMetrics().Len())
	}
	warns := logs.FilterMessageSnippet("NVML is unavailable").All()
	require.Len(t, warns, 1, "one warning for the cause")
	assert.Contains(t, warns[0].ContextMap()["error"], "cgo")
	require.NoError(t, s.shutdown(context.Background()))
}
