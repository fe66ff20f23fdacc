//go:build cgo

package nvmlclient

import (
	"context"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// A transient NOT_SUPPORTED or NO_PERMISSION must not turn a reading off
// until restart: the cache expires with a backoff, and the reading's return
// is logged once.
func TestUnsupportedAnswerExpiresWithBackoff(t *testing.T) {
	m := nvmltest.NewH200()
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	core, logs := observer.New(zapcore.InfoLevel)
	c := New(m, zap.New(core), WithClock(clock.Now))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	g := m.GPUs[0]
	asked := 0
	answer := nvml.ERROR_NO_PERMISSION
	g.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
		asked++
		return 55, answer
	}
	d := c.Devices()[0]
	read := func() sample.Sample {
		s, err := d.Read()
		require.NoError(t, err)
		return s
	}
	assert.False(t, read().Values[FigTemperature].OK)
	clock.Advance(5 * time.Second)
	assert.False(t, read().Values[FigTemperature].OK)
	assert.Equal(t, 1, asked, "cached: not asked again before the first re-probe")

	clock.Advance(5 * time.Second)
	read()
	assert.Equal(t, 2, asked, "re-probed after 10 s")
	clock.Advance(15 * time.Second)
	read()
	assert.Equal(t, 2, asked, "then after 20 s: the backoff doubles")
	clock.Advance(5 * time.Second)
	read()
	assert.Equal(t, 3, asked)

	answer = nvml.SUCCESS
	clock.Advance(40 * time.Second)
	assert.Equal(t, some(55.0), read().Values[FigTemperature], "the metric is back")
	assert.Equal(t, some(55.0), read().Values[FigTemperature])
	assert.Equal(t, 5, asked, "asked at every read again")
	assert.Equal(t, 1, nvmltest.UnsupportedLogs(logs, "nvmlDeviceGetTemperature"), "the loss logged once")
	assert.Equal(t, 1, logs.FilterMessageSnippet("answer again").Len(), "the return logged once")

	// Lost again and back again: neither is logged a second time.
	answer = nvml.ERROR_NOT_SUPPORTED
	read()
	answer = nvml.SUCCESS
	clock.Advance(10 * time.Second) // the first re-probe
	assert.True(t, read().Values[FigTemperature].OK)
	assert.Equal(t, 1, nvmltest.UnsupportedLogs(logs, "nvmlDeviceGetTemperature"))
	assert.Equal(t, 1, logs.FilterMessageSnippet("answer again").Len())
}

func TestEnergyOnItsOwnCadence(t *testing.T) {
	m := nvmltest.NewH200()
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(m, zap.NewNop(), WithClock(clock.Now), WithCounterInterval(10*time.Second))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	g := m.GPUs[0]
	reads := make(chan struct{}, 10)
	energy := g.GetTotalEnergyConsumptionFunc
	g.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) {
		reads <- struct{}{}
		return energy()
	}
	violations := 0
	fields := g.GetFieldValuesFunc
	g.GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return {
		for _, f := range v {
			if f.FieldId == nvml.FI_DEV_PERF_POLICY_POWER {
				violations++
			}
		}
		return fields(v)
	}
	d := c.Devices()[0]
	before := time.Now()
	s, err := d.Read()
	require.NoError(t, err)
	assert.Equal(t, some(1000.0), s.Values[FigEnergy], "the first read waits for the counter")
	assert.True(t, s.Values[FigViolationPower].OK, "the violation counters are read with it")
	first := s.CountersTime
	assert.False(t, first.Before(before), "stamped with the time it was read")
	assert.Len(t, reads, 1)

	g.SetEnergy(5_000_000)
	for range 4 {
		clock.Advance(2 * time.Second)
		s, err = d.Read()
		require.NoError(t, err)
		assert.Equal(t, some(1000.0), s.Values[FigEnergy], "not due: the last reading, with its own time")
		assert.Equal(t, first, s.CountersTime)
	}
	assert.Len(t, reads, 1)
	assert.Equal(t, 1, violations, "the violation counters too: once per interval")

	clock.Advance(2 * time.Second)
	_, err = d.Read() // due: started in the background
	require.NoError(t, err)
	<-reads
	<-reads
	require.True(t, d.waitBackground(time.Second))
	s, err = d.Read()
	require.NoError(t, err)
	assert.Equal(t, some(5000.0), s.Values[FigEnergy])
	assert.True(t, s.CountersTime.After(first))

	// A counter that reads lower is in doubt (a bad read or a reset,
	// counters_test.go): it is left out, never reported lower.
	g.SetEnergy(10)
	clock.Advance(10 * time.Second)
	_, _ = d.Read()
	require.True(t, d.waitBackground(time.Second))
	s, err = d.Read()
	require.NoError(t, err)
	assert.False(t, s.Values[FigEnergy].OK, "never lower: left out")
}

func TestEnergyReadOffTheScrapePath(t *testing.T) {
	m := nvmltest.NewH200()
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(m, zap.NewNop(), WithClock(clock.Now), WithCounterInterval(time.Second))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	g := m.GPUs[0]
	d := c.Devices()[0]
	_, err := d.Read()
	require.NoError(t, err)
	release := make(chan struct{})
	g.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { <-release; return 1, nvml.SUCCESS }
	clock.Advance(time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 3 {
			_, err := d.Read()
			assert.NoError(t, err)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a slow energy counter held up the reads")
	}
	close(release)
	require.True(t, d.waitBackground(time.Second))
	require.NoError(t, c.Close(context.Background()))
}

func TestGPMAsksOnlyEnabledMetrics(t *testing.T) {
	m := nvmltest.NewH200()
	var asked []uint32
	calls := 0
	get := m.GpmMetricsGetFunc
	m.GpmMetricsGetFunc = func(mg *nvml.GpmMetricsGetType) nvml.Return {
		calls++
		asked = asked[:0]
		for _, x := range mg.Metrics[:mg.NumMetrics] {
			asked = append(asked, x.MetricId)
		}
		return get(mg)
	}
	on := sample.Of(sample.SMActivity, sample.Utilization)
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(m, zap.NewNop(), WithClock(clock.Now), WithReadings(on), WithReads(testReads[FigPower]))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	defer c.Close(context.Background())
	clock.Advance(time.Second)
	s, err := c.Devices()[1].Read()
	require.NoError(t, err)
	assert.Equal(t, 1, calls, "one GpmMetricsGet per GPU per read")
	assert.ElementsMatch(t, []uint32{uint32(nvml.GPM_METRIC_SM_UTIL), uint32(nvml.GPM_METRIC_GRAPHICS_UTIL)}, asked)
	assert.Equal(t, some(0.06), s.Utilization[sample.EngineGeneral])
	assert.Len(t, s.Values, 1, "only the power is read: a disabled metric's call is not made")
	assert.True(t, s.Values[0].OK)
	assert.Equal(t, 0, m.GPUs[1].FieldCalls, "no enabled metric needs a field")
}

func TestProcessUtilizationOnlyWithProcesses(t *testing.T) {
	m, c := openWithProcesses(t)
	g := m.GPUs[4]
	asked := 0
	g.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		asked++
		return nil, nvml.ERROR_NOT_FOUND
	}
	s, err := c.Devices()[4].Read()
	require.NoError(t, err)
	assert.True(t, s.ProcessesListed)
	assert.Equal(t, 0, asked, "no process: not asked")
	g.SetProcesses(nvml.ProcessInfo{Pid: 9, UsedGpuMemory: 1})
	_, err = c.Devices()[4].Read()
	require.NoError(t, err)
	assert.Equal(t, 1, asked)
}

// The process list and its utilization must agree: a failed call leaves all
// of it out, and only it.
func TestProcessesAllOrNothing(t *testing.T) {
	m, c := openWithProcesses(t)
	g := m.GPUs[5]
	g.SetProcesses(nvml.ProcessInfo{Pid: 9, UsedGpuMemory: 1})
	g.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		return nil, nvml.ERROR_UNKNOWN
	}
	s, err := c.Devices()[5].Read()
	var readErr *ReadError
	require.ErrorAs(t, err, &readErr)
	assert.False(t, s.ProcessesListed)
	assert.Empty(t, s.Processes)
	assert.True(t, s.Values[FigPower].OK)
}

// A counter the newest background reading did not read (not supported now,
// or failed) is left out, rather than reported frozen at the newer reading's
// time, which rate() would take for a stop.
func TestACounterNotReadIsLeftOutNotFrozen(t *testing.T) {
	m := nvmltest.NewH200GPUs(1)
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(m, zap.NewNop(), WithClock(clock.Now), WithCounterInterval(time.Second))
	require.NoError(t, c.Open(nil))
	defer c.Close(context.Background())
	d := c.Devices()[0]
	s1, err := d.Read()
	require.NoError(t, err)
	require.True(t, s1.Values[FigViolationLowUtilization].OK)
	m.GPUs[0].Set(func(g *nvmltest.GPU) {
		g.FieldErrors[nvml.FI_DEV_PERF_POLICY_LOW_UTILIZATION] = nvml.ERROR_NOT_SUPPORTED
		g.EnergyMilliJ += 5_000_000
	})
	clock.Advance(2 * time.Second)
	_, _ = d.Read() // starts the background read
	require.True(t, d.waitBackground(time.Second))
	s3, _ := d.Read()
	require.True(t, s3.CountersTime.After(s1.CountersTime), "energy was read anew")
	assert.True(t, s3.Values[FigEnergy].OK)
	assert.False(t, s3.Values[FigViolationLowUtilization].OK,
		"not read at %v: not reported with that time", s3.CountersTime)
	assert.True(t, s3.Values[FigViolationPower].OK, "the others were read")
}
