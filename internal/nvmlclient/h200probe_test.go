//go:build cgo && h200probe

package nvmlclient

// The H200 probe: raw NVML call costs on a real GPU, to explain where a
// scrape's time goes. Built with `go test -c -tags h200probe` and run on the
// GPU machine (see docs/h200-runs.md); never part of `make test`.

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func p50max(ds []time.Duration) string {
	slices.Sort(ds)
	return fmt.Sprintf("p50 %7.3f ms  max %7.3f ms", float64(ds[len(ds)/2].Microseconds())/1000, float64(ds[len(ds)-1].Microseconds())/1000)
}

func TestH200Probe(t *testing.T) {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		t.Skip("no NVML:", ret)
	}
	defer lib.Shutdown()
	h, ret := lib.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	const n = 30
	types := []nvml.SamplingType{nvml.GPU_UTILIZATION_SAMPLES, nvml.MEMORY_UTILIZATION_SAMPLES, nvml.ENC_UTILIZATION_SAMPLES, nvml.DEC_UTILIZATION_SAMPLES}
	last := map[nvml.SamplingType]uint64{}
	for _, st := range types {
		_, s, _ := h.GetSamples(st, 0)
		fmt.Printf("type %d: %d samples in the buffer", st, len(s))
		if len(s) > 1 {
			fmt.Printf(", spaced %d us", s[len(s)-1].TimeStamp-s[len(s)-2].TimeStamp)
			for _, x := range s {
				last[st] = max(last[st], x.TimeStamp)
			}
		}
		fmt.Println()
	}
	timeIt := func(name string, f func()) {
		var ds []time.Duration
		for i := 0; i < n; i++ {
			t0 := time.Now()
			f()
			ds = append(ds, time.Since(t0))
			time.Sleep(20 * time.Millisecond)
		}
		fmt.Printf("%-58s %s\n", name, p50max(ds))
	}
	for _, st := range types {
		timeIt(fmt.Sprintf("GetSamples(type %d, lastSeen=0)", st), func() { h.GetSamples(st, 0) })
		timeIt(fmt.Sprintf("GetSamples(type %d, lastSeen=newest)", st), func() {
			_, s, _ := h.GetSamples(st, last[st])
			for _, x := range s {
				last[st] = max(last[st], x.TimeStamp)
			}
		})
	}
	timeIt("4 x GetSamples serial", func() {
		for _, st := range types {
			h.GetSamples(st, last[st])
		}
	})
	timeIt("4 x GetSamples concurrent", func() {
		var wg sync.WaitGroup
		for _, st := range types {
			wg.Add(1)
			go func() { defer wg.Done(); h.GetSamples(st, last[st]) }()
		}
		wg.Wait()
	})
	timeIt("GetTotalEnergyConsumption", func() { h.GetTotalEnergyConsumption() })
	timeIt("GetTotalEnergyConsumption beside GetSamples(GPU)", func() {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); h.GetTotalEnergyConsumption() }()
		go func() {
			defer wg.Done()
			h.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, last[nvml.GPU_UTILIZATION_SAMPLES])
		}()
		wg.Wait()
	})
	timeIt("GetUtilizationRates", func() { h.GetUtilizationRates() })
	timeIt("GetMemoryInfo_v2", func() { h.GetMemoryInfo_v2() })
	timeIt("GetEncoderUtilization", func() { h.GetEncoderUtilization() })
	timeIt("GetProcessUtilization(lastSeen=newest GPU sample)", func() { h.GetProcessUtilization(last[nvml.GPU_UTILIZATION_SAMPLES]) })
	if h1, ret := lib.DeviceGetHandleByIndex(1); ret == nvml.SUCCESS {
		timeIt("GetSamples(GPU) on GPU0 and GPU1 concurrently", func() {
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				h.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, last[nvml.GPU_UTILIZATION_SAMPLES])
			}()
			go func() {
				defer wg.Done()
				h1.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, last[nvml.GPU_UTILIZATION_SAMPLES])
			}()
			wg.Wait()
		})
	}
}
