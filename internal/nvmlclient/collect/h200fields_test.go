//go:build cgo && h200probe

package collect

// The fields probe: what the cheap-field batch (nvmlDeviceGetFieldValues)
// and GPM's utilization metrics read, beside the getters they replace, on a
// real GPU. Run on the GPU machine with -test.run TestH200Fields.

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"golang.org/x/sys/unix"
)

// fieldNumber is a field's value as its type says: the decoder the
// samples use (sampling.go), with 0 for a type it does not know.
func fieldNumber(f nvml.FieldValue) float64 {
	v, _ := decodeSampleValue(nvml.ValueType(f.ValueType), f.Value)
	return v
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// costOf times f 30 times on one locked thread: wall and thread CPU.
func costOf(name string, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var walls, cpus []time.Duration
	for k := 0; k < 30; k++ {
		w0, c0 := time.Now(), threadCPU()
		f()
		walls, cpus = append(walls, time.Since(w0)), append(cpus, threadCPU()-c0)
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("  %-44s wall %s; cpu %s\n", name, p50max(walls), p50max(cpus))
}

func batch(h nvml.Device, ids ...uint32) func() {
	fv := make([]nvml.FieldValue, len(ids))
	return func() {
		for j, id := range ids {
			fv[j] = nvml.FieldValue{FieldId: id}
		}
		h.GetFieldValues(fv)
	}
}

func TestH200Fields(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		t.Skip("no NVML:", ret)
	}
	defer lib.Shutdown()
	n, _ := lib.DeviceGetCount()
	for i := 0; i < n; i++ {
		h, _ := lib.DeviceGetHandleByIndex(i)
		fmt.Printf("== GPU %d\n", i)
		ids := []uint32{74, 75, 76, 77, 78, 79, 3, 4, 142, 143, 144, 145, 94, 82, 185, 186, 190, 192, 83}
		fv := make([]nvml.FieldValue, len(ids))
		for k, id := range ids {
			fv[k].FieldId = id
		}
		ret := h.GetFieldValues(fv)
		fmt.Printf("GetFieldValues: %v\n", ret)
		for _, f := range fv {
			fmt.Printf("  field %3d ret %-20v type %d value %.6g ts %d latency %d\n", f.FieldId, nvml.Return(f.NvmlReturn), f.ValueType, fieldNumber(f), f.Timestamp, f.LatencyUsec)
		}
		for p := nvml.PERF_POLICY_POWER; p <= nvml.PERF_POLICY_RELIABILITY; p++ {
			v, ret := h.GetViolationStatus(p)
			fmt.Printf("  GetViolationStatus(%d) %v ref %d violation %d\n", p, ret, v.ReferenceTime, v.ViolationTime)
		}
		c, r1 := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
		u, r2 := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		fmt.Printf("  ECC getter %d %v / %d %v\n", c, r1, u, r2)
		a, b, pe, fa, r3 := h.GetRemappedRows()
		fmt.Printf("  remapped getter %d %d %v %v %v\n", a, b, pe, fa, r3)
		rp, r4 := h.GetPcieReplayCounter()
		pw, r5 := h.GetPowerUsage()
		lim, r6 := h.GetEnforcedPowerLimit()
		tmp, r7 := h.GetTemperature(nvml.TEMPERATURE_GPU)
		fmt.Printf("  replay %d %v power %d %v enforced limit %d %v temp %d %v\n", rp, r4, pw, r5, lim, r6, tmp, r7)
		eu, _, r8 := h.GetEncoderUtilization()
		du, _, r9 := h.GetDecoderUtilization()
		fmt.Printf("  encoder %d %v decoder %d %v\n", eu, r8, du, r9)

		costOf("fields: 6 violation counters", batch(h, 74, 75, 76, 77, 78, 79))
		costOf("fields: 6 violations + replays + memory temp", batch(h, 74, 75, 76, 77, 78, 79, 94, 82))
		costOf("fields: the above + ECC 2 + remapped 4", batch(h, 74, 75, 76, 77, 78, 79, 94, 82, 3, 4, 142, 143, 144, 145))
		costOf("fields: ECC SBE + DBE volatile", batch(h, 3, 4))
		costOf("fields: remapped rows 4", batch(h, 142, 143, 144, 145))
		costOf("fields: replays", batch(h, 94))
		costOf("fields: memory temp", batch(h, 82))
		costOf("getters: ECC corrected + uncorrected", func() {
			h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
			h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		})
		costOf("getter: remapped rows", func() { h.GetRemappedRows() })
		costOf("getter: PCIe replays", func() { h.GetPcieReplayCounter() })
		costOf("getters: 6 x GetViolationStatus", func() {
			for p := nvml.PERF_POLICY_POWER; p <= nvml.PERF_POLICY_RELIABILITY; p++ {
				h.GetViolationStatus(p)
			}
		})
		costOf("getters: temp, power, limit, clocks x4, pstate", func() {
			h.GetTemperature(nvml.TEMPERATURE_GPU)
			h.GetPowerUsage()
			h.GetEnforcedPowerLimit()
			for _, c := range []nvml.ClockType{nvml.CLOCK_SM, nvml.CLOCK_MEM, nvml.CLOCK_GRAPHICS, nvml.CLOCK_VIDEO} {
				h.GetClockInfo(c)
			}
			h.GetPerformanceState()
		})
		costOf("getters: encoder + decoder instant", func() { h.GetEncoderUtilization(); h.GetDecoderUtilization() })
		costOf("GetComputeRunningProcesses", func() { h.GetComputeRunningProcesses() })

		// GPM: which utilization metrics answer, over a 1 s window, beside
		// the GPU samples of the same second.
		s1, _ := lib.GpmSampleAlloc()
		s2, _ := lib.GpmSampleAlloc()
		_, smp, _ := h.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, 0)
		var last uint64
		for _, x := range smp {
			last = max(last, x.TimeStamp)
		}
		for w := 0; w < 3; w++ {
			h.GpmSampleGet(s1)
			time.Sleep(time.Second)
			h.GpmSampleGet(s2)
			vt, smp, _ := h.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, last)
			var win window
			win.lastSeen = last
			mean, _ := win.average(vt, smp, 0)
			last = win.lastSeen
			ids := []nvml.GpmMetricId{nvml.GPM_METRIC_GRAPHICS_UTIL, nvml.GPM_METRIC_SM_UTIL, nvml.GPM_METRIC_DRAM_BW_UTIL}
			for d := nvml.GPM_METRIC_NVDEC_0_UTIL; d <= nvml.GPM_METRIC_NVDEC_7_UTIL; d++ {
				ids = append(ids, d)
			}
			for e := nvml.GpmMetricId(166); e < 170; e++ {
				ids = append(ids, e)
			}
			mg := &nvml.GpmMetricsGetType{Sample1: s1, Sample2: s2}
			for _, id := range ids {
				mg.Metrics[mg.NumMetrics].MetricId = uint32(id)
				mg.NumMetrics++
			}
			w0, c0 := time.Now(), threadCPU()
			ret := lib.GpmMetricsGet(mg)
			fmt.Printf("  window %d: GetSamples mean %.2f; GpmMetricsGet(%d) %v wall %v cpu %v\n", w, mean, mg.NumMetrics, ret, time.Since(w0), threadCPU()-c0)
			for _, m := range mg.Metrics[:mg.NumMetrics] {
				fmt.Printf("    gpm %3d ret %-20v %.3f\n", m.MetricId, nvml.Return(m.NvmlReturn), m.Value)
			}
		}
		s1.Free()
		s2.Free()
	}
}

// p50max gives the median and the maximum of ds.
func p50max(ds []time.Duration) string {
	slices.Sort(ds)
	return fmt.Sprintf("p50 %7.3f ms  max %7.3f ms", float64(ds[len(ds)/2].Microseconds())/1000, float64(ds[len(ds)-1].Microseconds())/1000)
}
