package nvmlclient

import (
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"
)

// GPM (GPU Performance Monitoring, Hopper and newer) gives profiling-grade
// activity through NVML itself: NVML's "GPU utilization" only says some
// kernel ran, while GPM's SM activity says how much of the GPU it used (one
// spinning block reads 100 % utilization but 0.8 % SM activity on an H200).
// Each metric is computed between two samples, so the device keeps the
// previous sample from one read to the next.

// minGPMWindow is the shortest window worth computing: GPM counters are
// updated about every 100 ms, so a shorter window is mostly noise.
const minGPMWindow = 100 * time.Millisecond

// GPMActivity names the GPM activity metrics, each a fraction 0..1.
type GPMActivity int

const (
	GPMSMActivity GPMActivity = iota
	GPMSMOccupancy
	GPMGraphicsActivity
	GPMTensorActivity
	GPMTensorHMMA
	GPMTensorIMMA
	GPMTensorDMMA
	GPMTensorDFMA
	GPMFP64
	GPMFP32
	GPMFP16
	GPMInteger
	GPMDRAMBandwidth
	gpmActivityCount
)

// GPMTraffic names the GPM byte counters.
type GPMTraffic int

const (
	GPMPCIeTX GPMTraffic = iota
	GPMPCIeRX
	GPMNVLinkTX
	GPMNVLinkRX
	gpmTrafficCount
)

var gpmActivityIDs = [gpmActivityCount]nvml.GpmMetricId{
	GPMSMActivity:       nvml.GPM_METRIC_SM_UTIL,
	GPMSMOccupancy:      nvml.GPM_METRIC_SM_OCCUPANCY,
	GPMGraphicsActivity: nvml.GPM_METRIC_GRAPHICS_UTIL,
	GPMTensorActivity:   nvml.GPM_METRIC_ANY_TENSOR_UTIL,
	GPMTensorHMMA:       nvml.GPM_METRIC_HMMA_TENSOR_UTIL,
	GPMTensorIMMA:       nvml.GPM_METRIC_IMMA_TENSOR_UTIL,
	GPMTensorDMMA:       nvml.GPM_METRIC_DMMA_TENSOR_UTIL,
	GPMTensorDFMA:       nvml.GPM_METRIC_DFMA_TENSOR_UTIL,
	GPMFP64:             nvml.GPM_METRIC_FP64_UTIL,
	GPMFP32:             nvml.GPM_METRIC_FP32_UTIL,
	GPMFP16:             nvml.GPM_METRIC_FP16_UTIL,
	GPMInteger:          nvml.GPM_METRIC_INTEGER_UTIL,
	GPMDRAMBandwidth:    nvml.GPM_METRIC_DRAM_BW_UTIL,
}

// The traffic metrics are rates in MiB/s over the window.
var gpmTrafficIDs = [gpmTrafficCount]nvml.GpmMetricId{
	GPMPCIeTX:   nvml.GPM_METRIC_PCIE_TX_PER_SEC,
	GPMPCIeRX:   nvml.GPM_METRIC_PCIE_RX_PER_SEC,
	GPMNVLinkTX: nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
	GPMNVLinkRX: nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
}

// GPMReading is what GPM measured over one window.
type GPMReading struct {
	Window   time.Duration
	Activity [gpmActivityCount]Opt[float64]
	// TrafficBytes are cumulative since Open: each window's rate times its
	// length, added up, so that backends derive rates from a counter. The
	// sum is kept in float64 (exact to 8 PiB) and handed out in whole bytes.
	TrafficBytes [gpmTrafficCount]Opt[int64]
}

// gpmState is one device's GPM state, touched only under the device's busy
// flag.
type gpmState struct {
	supported  bool
	prev, cur  nvml.GpmSample
	prevTime   time.Time
	havePrev   bool
	totals     [gpmTrafficCount]float64
	seenTotals [gpmTrafficCount]bool
	failed     map[nvml.GpmMetricId]bool // per-metric errors already logged
}

// initGPM checks GPM support and allocates the two samples, then takes the
// first one, so that the first read already has a window. Unsupported
// devices are logged once and carry on without GPM.
func (d *Device) initGPM(lib nvml.Interface, sym symbols) {
	defer func() {
		if p := recover(); p != nil {
			d.logger.Warn("GPM setup failed; GPM metrics are absent for this GPU", zap.Any("panic", p))
			d.gpm.supported = false
		}
	}()
	if !sym.gpm {
		d.logger.Info("This NVML has no GPM; SM activity and the other GPM metrics are absent (needs a driver of R520 or newer)")
		return
	}
	support, ret := d.handle.GpmQueryDeviceSupport()
	if ret != nvml.SUCCESS || support.IsSupportedDevice == 0 {
		d.logger.Info("GPU has no GPM (Hopper and newer have it); SM activity and the other GPM metrics are absent",
			zap.String("nvml.return", ret.Error()))
		return
	}
	if ret := d.gpm.start(lib, d.handle.GpmSampleGet, d.now); ret != nvml.SUCCESS {
		d.logger.Warn("nvmlGpmSampleAlloc failed; GPM metrics are absent for this GPU", zap.String("nvml.return", ret.Error()))
	}
}

// start allocates g's two samples and takes the first with take, so that
// the first read already has a window. On a failed allocation g stays
// unsupported.
func (g *gpmState) start(lib nvml.Interface, take func(nvml.GpmSample) nvml.Return, now func() time.Time) nvml.Return {
	for _, s := range []*nvml.GpmSample{&g.prev, &g.cur} {
		smp, ret := lib.GpmSampleAlloc()
		if ret != nvml.SUCCESS {
			g.free()
			return ret
		}
		*s = smp
	}
	g.supported = true
	g.failed = map[nvml.GpmMetricId]bool{}
	if take(g.prev) == nvml.SUCCESS {
		g.prevTime, g.havePrev = now(), true
	}
	return nvml.SUCCESS
}

// free releases g's samples.
func (g *gpmState) free() {
	for _, s := range []*nvml.GpmSample{&g.prev, &g.cur} {
		if *s != nil {
			(*s).Free()
			*s = nil
		}
	}
	g.supported = false
}

// readGPM takes the device's GPM sample and computes the window.
func (r *reading) readGPM(s *Sample) {
	if !r.d.gpm.supported || r.lost || r.err != nil {
		return
	}
	s.GPM = r.gpmWindow(&r.d.gpm, r.d.handle.GpmSampleGet)
}

// gpmWindow takes a sample with take and computes every metric over the
// window since g's previous one. It returns nil for a window too short, a
// failed sample, or the read that only starts a window.
func (r *reading) gpmWindow(g *gpmState, take func(nvml.GpmSample) nvml.Return) *GPMReading {
	r.mark = time.Now()
	now := r.d.now()
	if g.havePrev && now.Sub(g.prevTime) < minGPMWindow {
		return nil // too short to mean anything; keep the older sample
	}
	if !r.ok(callGPMSampleGet, take(g.cur)) {
		g.havePrev = false
		return nil
	}
	if !g.havePrev {
		g.prev, g.cur = g.cur, g.prev
		g.prevTime, g.havePrev = now, true
		return nil
	}
	window := now.Sub(g.prevTime)

	mg := &nvml.GpmMetricsGetType{Sample1: g.prev, Sample2: g.cur}
	for _, id := range gpmActivityIDs {
		mg.Metrics[mg.NumMetrics].MetricId = uint32(id)
		mg.NumMetrics++
	}
	for _, id := range gpmTrafficIDs {
		mg.Metrics[mg.NumMetrics].MetricId = uint32(id)
		mg.NumMetrics++
	}
	ret := r.d.lib.GpmMetricsGet(mg)
	// The new sample is the next window's start, whatever happens below.
	g.prev, g.cur = g.cur, g.prev
	g.prevTime = now
	if !r.ok(callGPMMetricsGet, ret) {
		return nil
	}

	byID := make(map[uint32]nvml.GpmMetric, mg.NumMetrics)
	for _, m := range mg.Metrics[:mg.NumMetrics] {
		byID[m.MetricId] = m
	}
	value := func(id nvml.GpmMetricId) (float64, bool) {
		m, ok := byID[uint32(id)]
		if !ok {
			return 0, false
		}
		if m.NvmlReturn != uint32(nvml.SUCCESS) {
			if !g.failed[id] {
				g.failed[id] = true
				r.d.logger.Info("GPM metric not available on this GPU; it is left out",
					zap.Uint32("gpm.metric_id", uint32(id)), zap.String("nvml.return", nvml.Return(m.NvmlReturn).Error()))
			}
			return 0, false
		}
		return m.Value, true
	}
	out := &GPMReading{Window: window}
	for a, id := range gpmActivityIDs {
		if v, ok := value(id); ok {
			out.Activity[a] = some(percentToFraction(v))
		}
	}
	for t, id := range gpmTrafficIDs {
		if v, ok := value(id); ok && v >= 0 {
			g.totals[t] += v * (1 << 20) * window.Seconds()
			g.seenTotals[t] = true
		}
		if g.seenTotals[t] {
			out.TrafficBytes[t] = some(int64(math.Round(g.totals[t])))
		}
	}
	return out
}
