//go:build cgo && h200probe

package nvmlreceiver

// The receiver's cost on a real GPU machine: the default configuration's
// scrape, exactly as the collector runs it (reads, attribution, pdata),
// timed in wall and process CPU per scrape. Built with
// `go test -c -tags h200probe ./receiver/nvmlreceiver/` and run there by
// tools/h200/cost.py; never part of `make test`.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"golang.org/x/sys/unix"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

func processCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func quantile(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
}

func TestH200ScrapeCost(t *testing.T) {
	scrapes := envInt("COST_SCRAPES", 40)
	interval := time.Duration(envInt("COST_INTERVAL_MS", 500)) * time.Millisecond
	cfg := createDefaultConfig().(*Config)
	cfg.CollectionInterval = interval
	set := receivertest.NewNopSettings(metadata.Type)
	client := nvmlclient.NewSystem("", set.Logger, append(clientOptions(cfg), systemTiming.clientOptions()...)...)
	s := newScraper(cfg, set, client, systemTiming)
	ctx := context.Background()
	if err := s.start(ctx, componenttest.NewNopHost()); err != nil {
		t.Skip("no NVML:", err)
	}
	defer func() { _ = s.shutdown(ctx) }()
	if _, err := s.scrape(ctx); err != nil { // the first scrape opens every window
		t.Log("first scrape:", err)
	}
	time.Sleep(interval)

	var walls, cpus []time.Duration
	errs, points := 0, 0
	cpuStart, wallStart := processCPU(), time.Now()
	for range scrapes {
		w0, c0 := time.Now(), processCPU()
		md, err := s.scrape(ctx)
		wall, cpu := time.Since(w0), processCPU()-c0
		walls, cpus = append(walls, wall), append(cpus, cpu)
		if err != nil {
			errs++
		}
		points = md.DataPointCount()
		time.Sleep(interval - wall)
	}
	total := processCPU() - cpuStart
	out := map[string]any{
		"scrapes": scrapes, "interval_ms": interval.Milliseconds(), "gpus": len(client.Devices()),
		"wall_ms_p50": quantile(walls, 0.5), "wall_ms_p99": quantile(walls, 0.99),
		"cpu_ms_p50": quantile(cpus, 0.5), "cpu_ms_p99": quantile(cpus, 0.99),
		// Everything the process spent, background energy reads and GC
		// included, per scrape.
		"cpu_ms_per_scrape_all": float64(total.Microseconds()) / 1000 / float64(scrapes),
		"seconds":               time.Since(wallStart).Seconds(),
		"errors":                errs, "data_points": points,
		"calls": client.CallStats(),
	}
	b, _ := json.Marshal(out)
	fmt.Println("COST " + string(b))
}
