package nvmlreceiver

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// notRead are the metrics that need no NVML figure.
// (nvidia.gpu.allocation comes from the kubelet.)
var notRead = map[string]bool{"nvidia.gpu.xid.errors": true, "nvidia.gpu.allocation": true}

// Every metric of metadata.yaml is in one of the figure tables once (or
// needs no figure), under its own name, and its enabled func reads its own
// flag: with only that metric enabled, only its row says so.
func TestMetricFiguresCoverMetadata(t *testing.T) {
	t.Parallel()
	rows := map[string]metricFigure{}
	for _, mf := range metricFigures {
		_, dup := rows[mf.name]
		require.False(t, dup, mf.name)
		rows[mf.name] = mf
	}
	for _, pm := range plainMetrics {
		_, dup := rows[pm.name]
		require.False(t, dup, pm.name)
		rows[pm.name] = metricFigure{name: pm.name, enabled: pm.enabled, figures: pm.figures()}
	}
	every := make([]metricFigure, 0, len(rows))
	for _, mf := range rows {
		every = append(every, mf)
	}
	typ := reflect.TypeOf(metadata.MetricsConfig{})
	for i := 0; i < typ.NumField(); i++ {
		name := typ.Field(i).Tag.Get("mapstructure")
		var only metadata.MetricsConfig
		reflect.ValueOf(&only).Elem().Field(i).FieldByName("Enabled").SetBool(true)
		mf, listed := rows[name]
		if notRead[name] {
			assert.False(t, listed, "%s needs no figure", name)
			continue
		}
		require.True(t, listed, "%s is missing from metricFigures", name)
		assert.NotZero(t, mf.figures, name)
		for _, other := range every {
			assert.Equal(t, other.name == name, other.enabled(&only), "with only %s enabled, the row of %s", name, other.name)
		}
		delete(rows, name)
	}
	assert.Empty(t, rows, "rows for metrics metadata.yaml lacks")
}

func TestNeededFiguresFollowEnabledMetrics(t *testing.T) {
	t.Parallel()
	var m metadata.MetricsConfig
	assert.Zero(t, neededFigures(&m))
	m.NvidiaGpuIdleTime.Enabled = true // a derived counter asks for what it is derived from
	want := nvmlclient.FiguresOf(nvmlclient.FigUtilization, nvmlclient.FigSMActivity, nvmlclient.FigProcesses)
	assert.Equal(t, want, neededFigures(&m))
	assert.Zero(t, leftOutMetrics(&m, want), "a derived counter's point is not left out")
	m.HwStatus.Enabled, m.HwErrors.Enabled = true, true
	assert.Equal(t, 2, leftOutMetrics(&m, nvmlclient.FiguresOf(nvmlclient.FigECCUncorrected)))
	assert.Equal(t, 1, leftOutMetrics(&m, nvmlclient.FiguresOf(nvmlclient.FigECCCorrected)))
}

// The hw.status policy: the graver state wins.
func TestHWState(t *testing.T) {
	t.Parallel()
	yes := nvmlclient.Opt[bool]{Value: true, OK: true}
	var h nvmlclient.Health
	assert.Equal(t, metadata.AttributeHwStateOk, hwState(gpuRead, &h))
	h.ClockEvents[nvmlclient.ReasonHWThermalSlowdown] = yes
	assert.Equal(t, metadata.AttributeHwStateDegraded, hwState(gpuRead, &h))
	h = nvmlclient.Health{ECCUncorrected: nvmlclient.Opt[uint64]{Value: 1, OK: true}}
	assert.Equal(t, metadata.AttributeHwStateDegraded, hwState(gpuRead, &h))
	h.RemapFailed = yes
	assert.Equal(t, metadata.AttributeHwStatePredictedFailure, hwState(gpuRead, &h))
	assert.Equal(t, metadata.AttributeHwStateDegraded, hwState(gpuStuck, nil))
	assert.Equal(t, metadata.AttributeHwStateFailed, hwState(gpuLost, nil))
}
