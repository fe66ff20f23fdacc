//go:build cgo

package collect

import (
	"fmt"
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/call"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
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

// gpmState is one device's GPM state, touched only under the device's busy
// flag.
type gpmState struct {
	supported bool
	// pending says the start is yet to be made: another GPU held the GPM
	// gate past its allowance when this one took its baselines. Each read tries again,
	// so that a transient stall costs a read's GPM, not the session's.
	pending    bool
	prev, cur  nvml.GpmSample
	prevTime   time.Time
	havePrev   bool
	totals     [sample.GPMTrafficCount]float64
	seenTotals [sample.GPMTrafficCount]bool
	// mig names the MIG device whose GPU instance this samples (empty:
	// the GPU), for the log.
	mig string
}

// startGated starts g's samples of d's GPU (or of its MIG device mig's GPU
// instance, when mig is not empty) under the session's GPM gate. Where the
// gate stays held past its allowance, g stays pending and the next read
// tries again.
func (g *gpmState) startGated(d *call.GPU, take func(nvml.GpmSample) nvml.Return, mig string) {
	gate := d.Session.GPM.Enter()
	if gate == nil {
		d.LogOnce("gpm-deferred/"+mig, func(l *zap.Logger) {
			l.Info("Another GPU's GPM call.ID is still running; GPM starts at a later read of this GPU (logged once)",
				zap.String("mig.uuid", mig))
		})
		return
	}
	defer gate.Leave() // also when the driver's call panics
	g.pending, g.mig = false, mig
	if ret := g.start(d.Lib, take, d.Plan.Now); ret != nvml.SUCCESS {
		d.Logger.Warn("nvmlGpmSampleAlloc failed; GPM metrics are absent for this GPU", zap.String("nvml.return", ret.Error()),
			zap.String("mig.uuid", mig))
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
	g.supported, g.pending = false, false
}

// gpmWindow takes a sample with take and computes the requested metrics over
// the window since g's previous one: one nvmlGpmMetricsGet per window. It
// returns nil for a window too short, a failed sample or metrics call (the
// two are all or nothing), or the read that only starts a window.
func (r *reading) gpmWindow(g *gpmState, requests []call.GPMRequest, take func(nvml.GpmSample) nvml.Return) *sample.GPMReading {
	now := r.GPU.Plan.Now()
	if g.havePrev && now.Sub(g.prevTime) < minGPMWindow {
		return nil // too short to mean anything; keep the older sample
	}
	gate := r.GPU.Session.GPM.Enter()
	if gate == nil {
		r.Fail(call.GPMSampleGet, nvml.ERROR_TIMEOUT, "another GPU's GPM call.ID is still running")
		return nil
	}
	defer gate.Leave()
	if !r.Do(call.GPMSampleGet, func() nvml.Return { return take(g.cur) }) {
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
	for _, rq := range requests {
		mg.Metrics[mg.NumMetrics].MetricId = uint32(rq.ID)
		mg.NumMetrics++
	}
	ok := r.Do(call.GPMMetricsGet, func() nvml.Return { return r.GPU.Lib.GpmMetricsGet(mg) })
	// The new sample is the next window's start, whatever happens below.
	g.prev, g.cur = g.cur, g.prev
	g.prevTime = now
	if !ok {
		return nil
	}
	out := &sample.GPMReading{}
	for i, rq := range requests {
		m := mg.Metrics[i]
		if m.MetricId != uint32(rq.ID) {
			continue
		}
		if m.NvmlReturn != uint32(nvml.SUCCESS) {
			ret := nvml.Return(m.NvmlReturn)
			r.GPU.LogOnce(fmt.Sprintf("gpm/%s/%d", g.mig, rq.ID), func(l *zap.Logger) {
				l.Info("GPM metric not available on this GPU; it is left out", zap.String("mig.uuid", g.mig),
					zap.Uint32("gpm.metric_id", uint32(rq.ID)), zap.String("nvml.return", ret.Error()))
			})
			continue
		}
		if !rq.Traffic {
			out.Activity[rq.Index] = sample.Some(percentToFraction(m.Value))
		} else if m.Value >= 0 {
			g.totals[rq.Index] += m.Value * (1 << 20) * window.Seconds()
			g.seenTotals[rq.Index] = true
		}
	}
	for t := range out.TrafficBytes {
		if g.seenTotals[t] {
			out.TrafficBytes[t] = sample.Some(int64(math.Round(g.totals[t])))
		}
	}
	return out
}
