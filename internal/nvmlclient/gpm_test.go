//go:build cgo

package nvmlclient

import (
	"context"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/guard"
	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

func openGPM(t *testing.T, m *nvmltest.Machine) (*Client, *nvmltest.Clock, *observer.ObservedLogs) {
	t.Helper()
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	core, logs := observer.New(zapcore.InfoLevel)
	c := New(m, zap.New(core), WithClock(clock.Now))
	require.NoError(t, c.Open(nil))
	c.PrimeAll()
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c, clock, logs
}

func TestGPMWindow(t *testing.T) {
	m := nvmltest.NewH200()
	c, clock, _ := openGPM(t, m)
	d := c.Devices()[2]

	clock.Advance(10 * time.Second)
	s, err := d.Read()
	require.NoError(t, err)
	require.NotNil(t, s.GPM, "Open took the first sample: the first read has a window")
	assert.Equal(t, some(0.10), s.GPM.Activity[sample.GPMSMActivity])
	assert.Equal(t, some(0.12), s.GPM.Activity[sample.GPMGraphicsActivity])
	assert.Equal(t, some(0.06), s.GPM.Activity[sample.GPMDRAMBandwidth])
	assert.Equal(t, some(int64(10*(1<<20)*10)), s.GPM.TrafficBytes[sample.GPMPCIeTX], "10 MiB/s for 10 s")
	assert.Equal(t, some(int64(200*(1<<20)*10)), s.GPM.TrafficBytes[sample.GPMNVLinkRX])

	clock.Advance(5 * time.Second)
	s, err = d.Read()
	require.NoError(t, err)
	assert.Equal(t, some(int64(10*(1<<20)*15)), s.GPM.TrafficBytes[sample.GPMPCIeTX], "a counter: it adds up")
}

func TestGPMShortWindowIsSkipped(t *testing.T) {
	m := nvmltest.NewH200()
	c, clock, _ := openGPM(t, m)
	d := c.Devices()[0]
	clock.Advance(50 * time.Millisecond)
	s, err := d.Read()
	require.NoError(t, err)
	assert.Nil(t, s.GPM)
	clock.Advance(60 * time.Millisecond)
	s, err = d.Read()
	require.NoError(t, err)
	require.NotNil(t, s.GPM)
	assert.Equal(t, some(int64(math.Round(10*(1<<20)*0.110))), s.GPM.TrafficBytes[sample.GPMPCIeTX],
		"10 MiB/s over 110 ms: the short window was folded into the next")
}

func TestGPMFirstSampleFailedSkipsOneRead(t *testing.T) {
	m := nvmltest.NewH200()
	fail := true
	get := m.GPUs[1].GpmSampleGetFunc
	m.GPUs[1].GpmSampleGetFunc = func(s nvml.GpmSample) nvml.Return {
		if fail {
			return nvml.ERROR_UNKNOWN
		}
		return get(s)
	}
	c, clock, _ := openGPM(t, m)
	fail = false
	clock.Advance(time.Second)
	s, err := c.Devices()[1].Read()
	require.NoError(t, err)
	assert.Nil(t, s.GPM, "no previous sample: this read only starts the window")
	clock.Advance(time.Second)
	s, err = c.Devices()[1].Read()
	require.NoError(t, err)
	assert.NotNil(t, s.GPM)
}

func TestGPMPerMetricError(t *testing.T) {
	m := nvmltest.NewH200()
	m.GPUs[0].GPMErrors[nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC] = nvml.ERROR_NOT_SUPPORTED
	c, clock, logs := openGPM(t, m)
	for range 3 {
		clock.Advance(time.Second)
		s, err := c.Devices()[0].Read()
		require.NoError(t, err)
		assert.False(t, s.GPM.TrafficBytes[sample.GPMNVLinkTX].OK)
		assert.True(t, s.GPM.TrafficBytes[sample.GPMNVLinkRX].OK)
		assert.True(t, s.GPM.Activity[sample.GPMSMActivity].OK)
	}
	assert.Equal(t, 1, logs.FilterMessageSnippet("GPM metric not available").Len())
}

func TestGPMUnsupportedDevice(t *testing.T) {
	m := nvmltest.NewH200()
	m.GPUs[5].GPMOff = true
	c, clock, logs := openGPM(t, m)
	clock.Advance(time.Second)
	for range 2 {
		s, err := c.Devices()[5].Read()
		require.NoError(t, err)
		assert.Nil(t, s.GPM)
	}
	s, err := c.Devices()[4].Read()
	require.NoError(t, err)
	assert.NotNil(t, s.GPM, "the other GPUs keep GPM")
	assert.Equal(t, 1, logs.FilterMessageSnippet("GPU has no GPM").Len())
}

func TestGPMNotInLibrary(t *testing.T) {
	m := nvmltest.NewH200()
	m.LookupSymbolFunc = func(name string) error {
		if name == "nvmlGpmMetricsGet" {
			return assert.AnError
		}
		return nil
	}
	m.GPUs[0].GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		t.Fatal("GPM called on a library without it")
		return nvml.GpmSupport{}, 0
	}
	c, clock, _ := openGPM(t, m)
	clock.Advance(time.Second)
	s, err := c.Devices()[0].Read()
	require.NoError(t, err)
	assert.Nil(t, s.GPM)
}

// Concurrent GPM calls on two GPUs crashed NVML on an H200 (SIGSEGV in
// nvmlGpmMetricsGet while another GPU was in nvmlGpmSampleGet): the reads of
// a session's GPUs never overlap in GPM, however they are scheduled.
func TestGPMCallsNeverOverlapAcrossGPUs(t *testing.T) {
	m := nvmltest.NewH200GPUs(4)
	var calls overlapCounter
	metricsGet := m.GpmMetricsGetFunc
	m.GpmMetricsGetFunc = func(mg *nvml.GpmMetricsGetType) nvml.Return { calls.call(); return metricsGet(mg) }
	for _, g := range m.GPUs {
		sampleGet := g.GpmSampleGetFunc
		g.GpmSampleGetFunc = func(s nvml.GpmSample) nvml.Return { calls.call(); return sampleGet(s) }
	}
	c, clock, _ := openGPM(t, m)
	readEveryGPUAtOnce(t, c, clock, 5, func(s sample.Sample, err error) {
		assert.NoError(t, err)
		assert.NotNil(t, s.GPM)
	})
	assert.Zero(t, calls.overlaps.Load(), "GPM calls of two GPUs ran at once")
}

// One GPU hung inside a GPM call delays the other GPUs' reads by the
// gate's allowance once; later scrapes leave their GPM out at once, and the
// rest of their readings arrive.
func TestHungGPMCallDelaysTheOtherGPUsOnce(t *testing.T) {
	m := nvmltest.NewH200GPUs(3)
	c, clock, _ := openGPM(t, m)
	hung, entered := make(chan struct{}), make(chan struct{})
	get := m.GPUs[0].GpmSampleGetFunc
	m.GPUs[0].GpmSampleGetFunc = func(s nvml.GpmSample) nvml.Return { close(entered); <-hung; return get(s) }
	clock.Advance(time.Second)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = c.Devices()[0].Read() }()
	<-entered
	defer func() { close(hung); <-done }()
	for scrape, limit := range []time.Duration{guard.LaneMaxHold + 4*guard.GPMGateWait, guard.GPMGateWait} {
		clock.Advance(time.Second)
		start := time.Now()
		var wg sync.WaitGroup
		for _, d := range c.Devices()[1:] {
			wg.Go(func() {
				s, _ := d.Read()
				assert.True(t, s.Values[FigPower].OK, "the other readings arrive")
			})
		}
		wg.Wait()
		assert.Less(t, time.Since(start), limit, "scrape %d of the healthy GPUs", scrape)
	}
}

// Issue 17, defect 3: a GPU that primes while another holds the GPM gate
// past its allowance starts GPM at a later read, rather than going without
// it for the whole session. So do the GPU instances of a MIG GPU.
func TestGPMStartsAfterATransientGateStall(t *testing.T) {
	m := nvmltest.NewH100()
	m.GPUs[0].EnableMIG(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(m, zap.NewNop(), WithClock(clock.Now))
	require.NoError(t, c.Open(nil))
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	stalled := c.Devices()[0].gpu.Session.GPM.Enter()
	require.NotNil(t, stalled, "another GPU's GPM call, stalled")
	c.PrimeAll()
	stalled.Leave()
	for _, i := range []int{0, 1} {
		d := c.Devices()[i]
		clock.Advance(time.Second)
		_, err := d.Read() // starts the window
		require.NoError(t, err)
		clock.Advance(time.Second)
		s, err := d.Read()
		require.NoError(t, err)
		require.NotNil(t, s.GPM, "GPU %d has GPM once the stall is over", i)
		if i == 0 {
			require.Len(t, s.MIG, 1)
			assert.NotNil(t, s.MIG[0].GPM, "and so does its GPU instance")
		}
	}
}
