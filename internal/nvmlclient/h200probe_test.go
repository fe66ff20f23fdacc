//go:build cgo && h200probe

package nvmlclient

// The H200 probe: raw NVML call costs on a real GPU, to explain where a
// scrape's time goes. Built with `go test -c -tags h200probe` and run on the
// GPU machine (see docs/runs/h200-runs.md); never part of `make test`.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"
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

// TestH200ProcessShares prints what nvmlDeviceGetProcessUtilization hands
// back for each process of GPU 0, every 0.5 s for 12 s, asked with
// lastSeen = 0 and with lastSeen = now - 10 s (shareHorizon): how many
// samples per PID, the newest one's age and its SM reading. It explains the
// busy split of nvidia.gpu.process.busy.time (docs/runs/h200-runs.md).
func TestH200ProcessShares(t *testing.T) {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		t.Skip("no NVML:", ret)
	}
	defer lib.Shutdown()
	h, ret := lib.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	describe := func(samples []nvml.ProcessUtilizationSample, now time.Time) string {
		type agg struct {
			n          int
			newest     uint64
			sm, smLast uint32
		}
		per := map[uint32]*agg{}
		for _, s := range samples {
			a := per[s.Pid]
			if a == nil {
				a = &agg{}
				per[s.Pid] = a
			}
			a.n++
			if s.TimeStamp >= a.newest {
				a.newest, a.smLast = s.TimeStamp, s.SmUtil
			}
			a.sm = max(a.sm, s.SmUtil)
		}
		pids := make([]uint32, 0, len(per))
		for p := range per {
			pids = append(pids, p)
		}
		slices.Sort(pids)
		out := ""
		for _, p := range pids {
			a := per[p]
			age := now.Sub(time.UnixMicro(int64(a.newest)))
			out += fmt.Sprintf("  pid %d: %d samples, newest %.2fs old sm=%d (max %d)", p, a.n, age.Seconds(), a.smLast, a.sm)
		}
		return out
	}
	procs, _ := h.GetComputeRunningProcesses()
	fmt.Printf("compute processes: %d\n", len(procs))
	for i := 0; i < 24; i++ {
		now := time.Now()
		all, r0 := h.GetProcessUtilization(0)
		recent, r1 := h.GetProcessUtilization(uint64(now.Add(-10 * time.Second).UnixMicro()))
		fmt.Printf("t=%4.1fs lastSeen=0 [%v]%s\n", float64(i)/2, r0, describe(all, now))
		fmt.Printf("t=%4.1fs lastSeen=now-10s [%v]%s\n", float64(i)/2, r1, describe(recent, now))
		time.Sleep(500 * time.Millisecond)
	}
}

// TestH200ProcessSharesRaw reads GPU 0's process utilization every 0.5 s
// for 15 s both through go-nvml and through the bounded call the receiver
// makes (raw/raw.go), with lastSeen = now - 10 s, and the receiver's own
// reading of each process (Read), to tell a difference of the call from
// one of NVML's answer.
func TestH200ProcessSharesRaw(t *testing.T) {
	c := NewSystem("", zap.NewNop(), WithProcesses(true))
	if err := c.Open(nil); err != nil {
		t.Skip("no NVML:", err)
	}
	defer c.Close(context.Background())
	c.PrimeAll()
	d := c.Devices()[0]
	show := func(samples []nvml.ProcessUtilizationSample, ret nvml.Return) string {
		out := fmt.Sprintf("[%v]", ret)
		newest := map[uint32]nvml.ProcessUtilizationSample{} // each PID's newest, as the read keeps it
		for _, s := range samples {
			if o, ok := newest[s.Pid]; !ok || s.TimeStamp >= o.TimeStamp {
				newest[s.Pid] = s
			}
		}
		for pid, s := range newest {
			out += fmt.Sprintf(" %d:sm=%d@%.2fs", pid, s.SmUtil, time.Since(time.UnixMicro(int64(s.TimeStamp))).Seconds())
		}
		return out
	}
	for i := 0; i < 30; i++ {
		since := uint64(time.Now().Add(-10 * time.Second).UnixMicro()) // the read's shareHorizon
		gs, gr := d.gpu.Handle.GetProcessUtilization(since)
		rs, rr := d.gpu.Raw.ProcessUtilization(since)
		fmt.Printf("t=%4.1fs raw=%v go-nvml %s | raw %s", float64(i)/2, d.gpu.Raw.OK(), show(gs, gr), show(rs, rr))
		if s, err := d.Read(); err == nil || s.ProcessesListed {
			for _, p := range s.Processes {
				fmt.Printf(" | read %d: util %.2f share %v", p.PID, p.SMUtil.Value, p.BusyShare)
			}
		}
		fmt.Println()
		time.Sleep(500 * time.Millisecond)
	}
}
