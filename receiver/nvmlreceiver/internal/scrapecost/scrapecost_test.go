//go:build cgo && h200probe

// Package scrapecost measures what one scrape costs on a real GPU machine:
// TestScrapeCost opens NVML through nvmlclient, with the receiver's default
// readings, and times rounds that read every GPU concurrently. It writes one
// JSON object to -out. A probe for the H200 runs, built with `go test -c
// -tags h200probe` (make h200-bundle), not a part of the receiver.
package scrapecost

import (
	"context"
	"encoding/json"
	"flag"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/record"
)

type summary struct {
	Rounds        int                `json:"rounds"`
	GPUs          int                `json:"gpus"`
	Driver        string             `json:"driver_version"`
	NVML          string             `json:"nvml_version"`
	CUDA          string             `json:"cuda_version"`
	OpenMillis    float64            `json:"open_ms"`
	RoundMillis   map[string]float64 `json:"round_ms"`
	PerGPUMillis  map[string]float64 `json:"per_gpu_read_ms"`
	Errors        int                `json:"errors"`
	FirstError    string             `json:"first_error,omitempty"`
	SampleOfGPU0  sample.Sample      `json:"sample_of_gpu0"`
	Calls         []callSummary      `json:"calls"`
	InventoryGPU0 any                `json:"inventory_gpu0"`
}

type callSummary struct {
	Call   string  `json:"call"`
	Count  int64   `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func quantiles(d []time.Duration) map[string]float64 {
	slices.Sort(d)
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	return map[string]float64{
		"p50": ms(d[len(d)/2]), "p90": ms(d[len(d)*9/10]), "p99": ms(d[len(d)*99/100]), "max": ms(d[len(d)-1]),
	}
}

var (
	rounds      = flag.Int("rounds", 100, "scrape rounds to time")
	interval    = flag.Duration("interval", 50*time.Millisecond, "pause between rounds")
	libraryPath = flag.String("library_path", "", "path to libnvidia-ml.so.1")
	outPath     = flag.String("out", "", "where to write the JSON summary (stdout when empty)")
)

func TestScrapeCost(t *testing.T) {

	// The receiver's default metrics' plain readings, as a collector reads
	// them.
	metrics := metadata.DefaultMetricsConfig()
	c := nvmlclient.NewSystem(*libraryPath, zap.NewNop(), nvmlclient.WithReads(record.Reads(record.Readings(&metrics))...))
	t0 := time.Now()
	if err := c.Open(nil); err != nil {
		t.Fatal(err)
	}
	c.PrimeAll()
	defer c.Close(context.Background())
	out := summary{Rounds: *rounds, OpenMillis: float64(time.Since(t0).Microseconds()) / 1000}
	inv := c.Inventory()
	out.Driver, out.NVML, out.CUDA, out.GPUs = inv.DriverVersion, inv.NVMLVersion, inv.CUDAVersion, len(inv.Devices)
	out.InventoryGPU0 = inv.Devices[0]

	devices := c.Devices()
	var roundTimes, readTimes []time.Duration
	var mu sync.Mutex
	for r := 0; r < *rounds; r++ {
		start := time.Now()
		var wg sync.WaitGroup
		for i, d := range devices {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rs := time.Now()
				s, err := d.Read()
				el := time.Since(rs)
				mu.Lock()
				defer mu.Unlock()
				readTimes = append(readTimes, el)
				if err != nil {
					out.Errors++
					if out.FirstError == "" {
						out.FirstError = err.Error()
					}
				} else if i == 0 {
					out.SampleOfGPU0 = s
				}
			}()
		}
		wg.Wait()
		roundTimes = append(roundTimes, time.Since(start))
		time.Sleep(*interval)
	}
	for _, st := range c.CallStats() {
		out.Calls = append(out.Calls, callSummary{Call: st.Call, Count: st.Count,
			MeanMs: float64(st.Mean.Microseconds()) / 1000, MaxMs: float64(st.Max.Microseconds()) / 1000})
	}
	out.RoundMillis = quantiles(roundTimes)
	out.PerGPUMillis = quantiles(readTimes)
	w := os.Stdout
	if *outPath != "" {
		f, err := os.Create(*outPath)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w = f
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		t.Fatal(err)
	}
}
