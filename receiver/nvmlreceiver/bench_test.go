//go:build cgo

package nvmlreceiver

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/record"
	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// perGPU reports ns/op and allocs/op divided by the GPUs of one op.
func perGPU(b *testing.B, gpus int, allocs func() float64) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(gpus), "ns/gpu")
	b.ReportMetric(allocs()/float64(gpus), "allocs/gpu")
}

// BenchmarkScrape measures one full scrape of the 8-GPU dgxh200 mock, two
// processes per GPU: every getter answers at once, so this is the
// receiver's own cost per scrape (reads, attribution, pdata).
func BenchmarkScrape(b *testing.B) {
	m := nvmltest.NewH200()
	for _, g := range m.GPUs {
		g.SetProcesses(proc(4242, 8<<30), proc(4343, 1<<30))
	}
	ts := newTestScraper(b, m)
	ts.logs = nil
	ts.start(b)
	ctx := context.Background()
	b.ReportAllocs()
	var ms runtimeAllocs
	ms.start()
	for b.Loop() {
		ts.clock.Advance(time.Second)
		if _, err := ts.scrape(ctx); err != nil {
			b.Fatal(err)
		}
	}
	perGPU(b, len(m.GPUs), func() float64 { return ms.perOp(b.N) })
}

// BenchmarkPdata measures building pdata from samples already read: the
// GPU's resource with every default metric.
func BenchmarkPdata(b *testing.B) { benchmarkPdata(b, 0) }

// BenchmarkPdataProcesses adds two process resources per GPU.
func BenchmarkPdataProcesses(b *testing.B) { benchmarkPdata(b, 2) }

func benchmarkPdata(b *testing.B, procs int) {
	m := nvmltest.NewH200()
	for _, g := range m.GPUs {
		g.SetProcesses([]nvml.ProcessInfo{proc(4242, 8<<30), proc(4343, 1<<30)}[:procs]...)
	}
	ts := newTestScraper(b, m)
	ts.logs = nil
	ts.start(b)
	ts.clock.Advance(time.Second)
	devices := ts.session.client.Devices()
	reports := make([]record.GPU, len(devices))
	for i, d := range devices {
		ts.clock.Advance(time.Second)
		s, err := d.Read()
		if err != nil {
			b.Fatal(err)
		}
		r := ts.reporter
		reports[i] = record.GPU{Info: d.Info, Sample: &s, Holders: r.holders.GPU(d.Info, &s), Readings: r.readings, Start: r.since}
		reports[i].Accounts = r.accounts.GPU(d.Info, &s, &reports[i].Holders, r.owners.Allocated)
	}
	b.ReportAllocs()
	var ms runtimeAllocs
	ms.start()
	for b.Loop() {
		for i := range reports {
			reports[i].Record(ts.reporter.mb)
		}
		_ = ts.reporter.mb.Emit()
	}
	perGPU(b, len(devices), func() float64 { return ms.perOp(b.N) })
}

// BenchmarkRead measures one GPU's read on the mock: the client's own cost
// around NVML (the mock answers at once).
func BenchmarkRead(b *testing.B) {
	m := nvmltest.NewH200()
	m.GPUs[0].SetProcesses(proc(4242, 8<<30))
	clock := nvmltest.NewClock(time.Unix(1_800_000_000, 0))
	c := nvmlclient.New(m, zap.NewNop(), nvmlclient.WithProcesses(true), nvmlclient.WithClock(clock.Now))
	if err := c.Open(nil); err != nil {
		b.Fatal(err)
	}
	c.PrimeAll()
	defer c.Close(context.Background())
	d := c.Devices()[0]
	b.ReportAllocs()
	var ms runtimeAllocs
	ms.start()
	for b.Loop() {
		clock.Advance(time.Second)
		if _, err := d.Read(); err != nil {
			b.Fatal(err)
		}
	}
	perGPU(b, 1, func() float64 { return ms.perOp(b.N) })
}

// runtimeAllocs counts heap allocations since start.
type runtimeAllocs struct{ mallocs uint64 }

func (r *runtimeAllocs) start() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.mallocs = ms.Mallocs
}

func (r *runtimeAllocs) perOp(n int) float64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.Mallocs-r.mallocs) / float64(n)
}
