//go:build cgo

package call

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
)

// GPM's part of the read table: which metric answers which reading, and
// what each window of a device asks of nvmlGpmMetricsGet. The windows
// themselves are the activity and MIG collectors' (collect/gpm.go).

// GPMMetric is one GPM metric and the readings it answers. Only the metrics
// whose readings are asked for are asked of nvmlGpmMetricsGet.
type GPMMetric struct {
	ID       nvml.GpmMetricId
	Readings sample.Readings
}

// GPMActivityMetrics are the activities, each a fraction 0..1.
var GPMActivityMetrics = [sample.GPMActivityCount]GPMMetric{
	sample.GPMSMActivity:  {nvml.GPM_METRIC_SM_UTIL, sample.Of(sample.SMActivity)},
	sample.GPMSMOccupancy: {nvml.GPM_METRIC_SM_OCCUPANCY, sample.Of(sample.SMOccupancy)},
	// Graphics utilization is also the general utilization of a GPU with
	// GPM: the fraction of the window some engine was busy, exact over the
	// window (48.0-49.1 against 47.4-49.0 from GetSamples on a 50 %-duty
	// H200), with no 14 s ring-buffer limit.
	sample.GPMGraphicsActivity: {nvml.GPM_METRIC_GRAPHICS_UTIL, sample.Of(sample.GraphicsActivity, sample.Utilization)},
	sample.GPMTensorActivity:   {nvml.GPM_METRIC_ANY_TENSOR_UTIL, sample.Of(sample.TensorActivity)},
	sample.GPMTensorHMMA:       {nvml.GPM_METRIC_HMMA_TENSOR_UTIL, sample.Of(sample.TensorPipes)},
	sample.GPMTensorIMMA:       {nvml.GPM_METRIC_IMMA_TENSOR_UTIL, sample.Of(sample.TensorPipes)},
	sample.GPMTensorDMMA:       {nvml.GPM_METRIC_DMMA_TENSOR_UTIL, sample.Of(sample.TensorPipes)},
	sample.GPMTensorDFMA:       {nvml.GPM_METRIC_DFMA_TENSOR_UTIL, sample.Of(sample.TensorPipes)},
	sample.GPMFP64:             {nvml.GPM_METRIC_FP64_UTIL, sample.Of(sample.Pipes)},
	sample.GPMFP32:             {nvml.GPM_METRIC_FP32_UTIL, sample.Of(sample.Pipes)},
	sample.GPMFP16:             {nvml.GPM_METRIC_FP16_UTIL, sample.Of(sample.Pipes)},
	sample.GPMInteger:          {nvml.GPM_METRIC_INTEGER_UTIL, sample.Of(sample.Pipes)},
	sample.GPMDRAMBandwidth:    {nvml.GPM_METRIC_DRAM_BW_UTIL, sample.Of(sample.DRAMBandwidth)},
}

// GPMTrafficMetrics are the traffic metrics: rates in MiB/s over the window.
var GPMTrafficMetrics = [sample.GPMTrafficCount]GPMMetric{
	sample.GPMPCIeTX:   {nvml.GPM_METRIC_PCIE_TX_PER_SEC, sample.Of(sample.PCIeTraffic)},
	sample.GPMPCIeRX:   {nvml.GPM_METRIC_PCIE_RX_PER_SEC, sample.Of(sample.PCIeTraffic)},
	sample.GPMNVLinkTX: {nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, sample.Of(sample.NVLinkTraffic)},
	sample.GPMNVLinkRX: {nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, sample.Of(sample.NVLinkTraffic)},
}

// GPMRequest is one metric asked of nvmlGpmMetricsGet and where its value
// goes: an activity, or a traffic counter when traffic is set.
type GPMRequest struct {
	ID      nvml.GpmMetricId
	Index   int
	Traffic bool
}

// GPMPlan is what every GPM window of a device asks for, decided once
// (configure, and hasGPM with the baselines) and only read afterwards: by the
// activity collector for the GPU and by the MIG collector for its GPU
// instances.
type GPMPlan struct {
	// Requests are the GPM metrics asked of each window: only those that
	// feed an enabled metric; Readings, the asked-for readings they answer.
	Requests []GPMRequest
	Readings sample.Readings
	// HasGPM says the GPU has GPM and a GPM reading is asked for: probed
	// once, when the device takes its baselines, before its collectors do.
	HasGPM bool
}

// planGPM lists the GPM metrics that answer one of wanted.
func planGPM(wanted sample.Readings) GPMPlan {
	var p GPMPlan
	add := func(gm GPMMetric, index int, traffic bool) {
		if on := gm.Readings & wanted; on != 0 {
			p.Readings |= on
			p.Requests = append(p.Requests, GPMRequest{ID: gm.ID, Index: index, Traffic: traffic})
		}
	}
	for a, gm := range GPMActivityMetrics {
		add(gm, a, false)
	}
	for t, gm := range GPMTrafficMetrics {
		add(gm, t, true)
	}
	return p
}

// ProbeGPM says whether d's GPU has GPM, when a GPM reading is asked for. A
// GPU without is logged once and carries on without GPM.
func (d *GPU) ProbeGPM() (has bool) {
	if !d.Plan.Wanted[GPMSampleGet] {
		return false
	}
	defer func() {
		if p := recover(); p != nil {
			d.Logger.Warn("GPM setup failed; GPM metrics are absent for this GPU", zap.Any("panic", p))
			has = false
		}
	}()
	if !d.Symbols.GPM {
		d.Logger.Info("This NVML has no GPM; SM activity and the other GPM metrics are absent (needs a driver of R520 or newer)")
		return false
	}
	support, ret := d.Handle.GpmQueryDeviceSupport()
	if ret != nvml.SUCCESS || support.IsSupportedDevice == 0 {
		d.Logger.Info("GPU has no GPM (Hopper and newer have it); SM activity and the other GPM metrics are absent",
			zap.String("nvml.return", ret.Error()))
		return false
	}
	return true
}
