//go:build cgo

package record

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// notRead are the metrics that need no NVML reading.
// (nvidia.gpu.allocation comes from the kubelet.)
var notRead = map[string]bool{"nvidia.gpu.xid.errors": true, "nvidia.gpu.allocation": true}

// Every metric of metadata.yaml is read once: by the readings of one
// metricNeeds row, or by plain readings (or it needs no NVML figure), and
// with only that metric enabled, only its row or readings are enabled.
func TestMetricNeedsCoverMetadata(t *testing.T) {
	t.Parallel()
	rows := map[string]bool{}
	for _, mf := range metricNeeds {
		require.False(t, rows[mf.name], mf.name)
		require.NotEmpty(t, metricFields().byName[mf.name], "%s is not a metric of metadata.yaml", mf.name)
		assert.NotZero(t, mf.readings, mf.name)
		rows[mf.name] = true
	}
	plain := map[string]bool{}
	for _, p := range plainReadings {
		name := metricFields().byField[p.metric.field]
		require.NotEmpty(t, name, "%s is not a metric of metadata.yaml", p.metric.field)
		require.False(t, rows[name], "%s is both plain and read by its own code", name)
		plain[name] = true
	}
	typ := reflect.TypeOf(metadata.MetricsConfig{})
	for i := 0; i < typ.NumField(); i++ {
		name := typ.Field(i).Tag.Get("mapstructure")
		var only metadata.MetricsConfig
		reflect.ValueOf(&only).Elem().Field(i).FieldByName("Enabled").SetBool(true)
		if notRead[name] {
			assert.False(t, rows[name] || plain[name], "%s needs no reading", name)
			continue
		}
		require.True(t, rows[name] || plain[name], "%s is in neither metricNeeds nor plainReadings", name)
		for _, mf := range metricNeeds {
			assert.Equal(t, mf.name == name, mf.enabled(&only), "with only %s enabled, the row of %s", name, mf.name)
		}
		for _, p := range Readings(&only) {
			assert.Equal(t, name, metricFields().byField[p.metric.field], "with only %s enabled, a reading of another metric", name)
		}
		assert.Equal(t, plain[name], len(Readings(&only)) > 0, name)
	}
}

// A reading's metric is named by its Record method; a function that is
// not one is refused when the table is built.
func TestRecorderFieldFromRecordMethod(t *testing.T) {
	assert.Equal(t, "HwPower", f64((*builder).RecordHwPowerDataPoint).field)
	assert.Equal(t, "NvidiaGpuClockFrequency",
		i64a((*builder).RecordNvidiaGpuClockFrequencyDataPoint, metadata.AttributeNvidiaGpuClockTypeSm).field)
	assert.Panics(t, func() { f64(func(*builder, pcommon.Timestamp, float64) {}) })
}

// The failed readings of one metric count it once.
func TestLeftOutReadingsCountMetrics(t *testing.T) {
	var m metadata.MetricsConfig
	m.NvidiaGpuClockFrequency.Enabled, m.HwPower.Enabled = true, true
	readings := Readings(&m)
	require.Len(t, readings, 5, "four clocks and the power")
	assert.Equal(t, 1, LeftOut(&metadata.MetricsConfig{}, readings, 0, []int{1, 2, 3}))
	assert.Equal(t, 2, LeftOut(&metadata.MetricsConfig{}, readings, 0, []int{0, 1, 2, 3, 4}))
}

func TestNeededFiguresFollowEnabledMetrics(t *testing.T) {
	t.Parallel()
	var m metadata.MetricsConfig
	assert.Zero(t, Needs(&m, &metadata.ResourceAttributesConfig{}))
	m.NvidiaGpuIdleTime.Enabled = true // a derived counter asks for what it is derived from
	want := sample.Of(sample.Utilization, sample.SMActivity, sample.Processes)
	assert.Equal(t, want, Needs(&m, &metadata.ResourceAttributesConfig{}))
	assert.Zero(t, LeftOut(&m, nil, want, nil), "a derived counter's point is not left out")
	m.HwStatus.Enabled, m.HwErrors.Enabled = true, true
	assert.Equal(t, 2, LeftOut(&m, nil, sample.Of(sample.ECCUncorrected), nil))
	assert.Equal(t, 1, LeftOut(&m, nil, sample.Of(sample.ECCCorrected), nil))
}

// The hw.status policy: the graver state wins.
func TestHWState(t *testing.T) {
	t.Parallel()
	yes := sample.Opt[bool]{Value: true, OK: true}
	var h sample.Health
	assert.Equal(t, metadata.AttributeHwStateOk, hwState(gpuRead, &h))
	h.ClockEvents[sample.ReasonHWThermalSlowdown] = yes
	assert.Equal(t, metadata.AttributeHwStateDegraded, hwState(gpuRead, &h))
	h = sample.Health{ECCUncorrected: sample.Opt[uint64]{Value: 1, OK: true}}
	assert.Equal(t, metadata.AttributeHwStateDegraded, hwState(gpuRead, &h))
	h.RemapFailed = yes
	assert.Equal(t, metadata.AttributeHwStatePredictedFailure, hwState(gpuRead, &h))
	assert.Equal(t, metadata.AttributeHwStateDegraded, hwState(gpuStuck, nil))
	assert.Equal(t, metadata.AttributeHwStateFailed, hwState(gpuLost, nil))
}
