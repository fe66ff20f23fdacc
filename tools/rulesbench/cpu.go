package main

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// The evaluation times of /api/v1/rules are wall-clock: on a machine of
// few cores, groups evaluated at once and the Go runtime's collector
// share the cores, and each group's time grows with the others'. The
// cost that a fleet's Prometheus pays is its CPU: the bench reads the
// server's own process_cpu_seconds_total around the evaluations and
// takes off what the same server spends without rules.

// cpuSeconds reads Prometheus's process_cpu_seconds_total from its
// /metrics.
func cpuSeconds(addr string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				log.Fatalf("process_cpu_seconds_total %q: %v", v, err)
			}
			return f
		}
	}
	log.Fatal("prometheus /metrics: no process_cpu_seconds_total")
	return 0
}

// cpuRate is the server's CPU in seconds per second over d.
func cpuRate(addr string, d time.Duration) float64 {
	c0, t0 := cpuSeconds(addr), time.Now()
	time.Sleep(d)
	return (cpuSeconds(addr) - c0) / time.Since(t0).Seconds()
}

// cpuShares splits the rules' CPU over the window between the groups,
// each in proportion to its wall-clock evaluation time times the
// evaluations it ran in the window, and returns each group's CPU per
// evaluation in seconds. The split is an estimate; the total is measured.
func cpuShares(groups []group, evals map[string]int, cpu float64) map[string]float64 {
	var weighed float64
	for _, g := range groups {
		weighed += g.EvaluationTime * float64(evals[g.Name])
	}
	out := map[string]float64{}
	for _, g := range groups {
		if weighed > 0 {
			out[g.Name] = cpu * g.EvaluationTime / weighed
		}
	}
	return out
}

// startProfile writes the server's CPU profile over the next d to path
// (none: ""); the channel closes when it is written.
func startProfile(addr, path string, d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	if path == "" {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())))
		if err != nil {
			log.Printf("profile: %v", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			log.Printf("profile: %v", err)
			return
		}
		defer f.Close()
		if _, err := io.Copy(f, resp.Body); err != nil {
			log.Printf("profile: %v", err)
		}
	}()
	return done
}
