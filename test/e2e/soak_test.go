//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// The fault soak (issue 9): the built collector on the fake library for a
// while at 200 ms, under a generated scenario (soakScenario, fixed seed)
// with 14 return codes at 25 call sites, hangs from 50 ms to 20 s, a GPU
// lost mid-run, processes coming and going and about 1,000 XID and ECC
// events per 10 minutes. make test runs it for 60 s; make soak for 10
// minutes (docs/runs/soak.md records a run).

var (
	soakDuration = flag.Duration("soak.duration", 60*time.Second, "how long TestSoak runs the collector")
	soakSeed     = flag.Uint64("soak.seed", 9, "the scenario generator's seed")
	soakReport   = flag.String("soak.report", "", "write the soak's figures to this file (markdown)")
	// With partial reads (issue 10) a failed call drops only the metrics
	// it feeds: the 95 % check counts every interval. Without them
	// (-soak.partial-reads=false, for an older build) it counts only the
	// intervals without an error window on the GPU.
	soakPartialReads = flag.Bool("soak.partial-reads", true, "expect partial reads: a failed call drops only the metrics it feeds")
	// A transient NOT_SUPPORTED or NO_PERMISSION turns its metrics off
	// until the receiver re-probes (10 s, doubling while it repeats): they
	// must be back this long after the window (0: never re-probed, as
	// before issue 10).
	soakReprobe = flag.Duration("soak.reprobe", 25*time.Second, "how long after a transient NOT_SUPPORTED/NO_PERMISSION its metrics must be back (0: never re-probed)")
)

const (
	soakInterval = 200 * time.Millisecond
	soakTimeout  = 150 * time.Millisecond
	// soakShutdownBound is the documented bound of Shutdown (5 s) plus the
	// scrape in progress and the collector's own exporters.
	soakShutdownBound = 7 * time.Second
)

// soakCodes are the 14 return codes injected.
var soakCodes = []string{"UNKNOWN", "NOT_SUPPORTED", "NO_PERMISSION", "INSUFFICIENT_SIZE", "TIMEOUT", "INVALID_ARGUMENT",
	"NOT_FOUND", "IRQ_ISSUE", "DRIVER_NOT_LOADED", "CORRUPTED_INFOROM", "RESET_REQUIRED", "OPERATING_SYSTEM", "MEMORY",
	"UNINITIALIZED"}

// soakCalls are the 25 call sites faulted, each with the metrics it feeds.
var soakCalls = []struct {
	call    string
	metrics []string
}{
	{"nvmlDeviceGetSamples", []string{"hw.gpu.utilization", "nvidia.gpu.memory.controller.utilization"}},
	{"nvmlDeviceGetUtilizationRates", []string{"hw.gpu.utilization", "nvidia.gpu.memory.controller.utilization"}},
	{"nvmlDeviceGetEncoderUtilization", []string{"hw.gpu.utilization"}},
	{"nvmlDeviceGetDecoderUtilization", []string{"hw.gpu.utilization"}},
	{"nvmlDeviceGetMemoryInfo_v2", []string{"hw.gpu.memory.usage", "hw.gpu.memory.limit", "nvidia.gpu.memory.reserved", "hw.gpu.memory.utilization"}},
	{"nvmlDeviceGetTemperature", []string{"hw.temperature"}},
	{"nvmlDeviceGetFieldValues", []string{"hw.temperature", "nvidia.gpu.clock.event.time", "nvidia.gpu.pcie.replays"}},
	{"nvmlDeviceGetPowerUsage", []string{"hw.power"}},
	{"nvmlDeviceGetEnforcedPowerLimit", []string{"nvidia.gpu.power.limit"}},
	{"nvmlDeviceGetTotalEnergyConsumption", []string{"hw.energy"}},
	{"nvmlDeviceGetFanSpeed", []string{"nvidia.gpu.fan.speed"}},
	{"nvmlDeviceGetClockInfo", []string{"nvidia.gpu.clock.frequency"}},
	{"nvmlDeviceGetPerformanceState", []string{"nvidia.gpu.performance_state"}},
	{"nvmlDeviceGetComputeRunningProcesses", soakProcessMetrics},
	{"nvmlDeviceGetGraphicsRunningProcesses", soakProcessMetrics},
	{"nvmlDeviceGetProcessUtilization", []string{"nvidia.gpu.process.utilization", "nvidia.gpu.process.memory.controller.utilization",
		"nvidia.gpu.process.held.time", "nvidia.gpu.process.busy.time", "nvidia.gpu.process.idle.time", "process.cpu.time"}},
	{"nvmlGpmSampleGet", soakGPMMetrics},
	{"nvmlGpmMetricsGet", soakGPMMetrics},
	{"nvmlDeviceGetTotalEccErrors", []string{"hw.errors", "hw.status"}},
	{"nvmlDeviceGetRemappedRows", []string{"nvidia.gpu.memory.row_remap.rows", "nvidia.gpu.memory.row_remap.status", "hw.status"}},
	{"nvmlDeviceGetCurrentClocksEventReasons", []string{"nvidia.gpu.clock.event.active", "hw.status"}},
	{"nvmlDeviceGetViolationStatus", []string{"nvidia.gpu.clock.event.time"}},
	{"nvmlDeviceGetPcieReplayCounter", []string{"nvidia.gpu.pcie.replays"}},
	{"nvmlDeviceGetCurrPcieLinkGeneration", []string{"nvidia.gpu.pcie.link.generation"}},
	{"nvmlDeviceGetCurrPcieLinkWidth", []string{"nvidia.gpu.pcie.link.width"}},
}

var soakProcessMetrics = []string{"nvidia.gpu.process.count", "nvidia.gpu.process.dropped", "nvidia.gpu.process.memory.usage",
	"nvidia.gpu.process.utilization", "nvidia.gpu.process.memory.controller.utilization",
	// The per-process counters are recorded with the list they count.
	"nvidia.gpu.process.held.time", "nvidia.gpu.process.busy.time", "nvidia.gpu.process.idle.time", "process.cpu.time"}

// GPM also gives a GPM GPU's general utilization and, when configured, its
// memory controller's.
var soakGPMMetrics = []string{"hw.gpu.utilization", "nvidia.gpu.memory.controller.utilization", "nvidia.gpu.sm.activity", "nvidia.gpu.sm.occupancy", "nvidia.gpu.graphics.activity",
	"nvidia.gpu.tensor.activity", "nvidia.gpu.tensor.pipe.activity", "nvidia.gpu.pipe.activity",
	"nvidia.gpu.memory.bandwidth.utilization", "hw.gpu.io", "nvidia.gpu.nvlink.io"}

// soakCounterCalls are read on the counters' cadence, in the background.
var soakCounterCalls = map[string]bool{"nvmlDeviceGetTotalEnergyConsumption": true, "nvmlDeviceGetViolationStatus": true,
	"nvmlDeviceGetPcieReplayCounter": true, "nvmlDeviceGetFieldValues": true}

var soakXIDs = []int{13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 74, 79, 92, 94, 95}

// soakPlan is what the scenario does, for the checks.
type soakPlan struct {
	duration float64 // seconds
	uuids    []string
	lostGPU  int
	lostAt   float64
	errors   []soakWindow
	hangs    []soakWindow
	xids     map[string]map[int]int // per GPU, per code
	events   int                    // XID and ECC events
	procs    int
	endHang  soakWindow // the hang in progress at SIGTERM
}

type soakWindow struct {
	gpu        int
	call, code string
	from, to   float64
}

// soakScenario generates the scenario for d with seed.
func soakScenario(seed uint64, d time.Duration) (Scenario, soakPlan) {
	rng := rand.New(rand.NewPCG(seed, 0x50a4))
	D := d.Seconds()
	scale := D / 600
	const ngpu = 4
	plan := soakPlan{duration: D, lostGPU: 3, lostAt: math.Round(0.6*D*10) / 10, xids: map[string]map[int]int{}}
	uniform := func(a, b float64) float64 { return math.Round((a+rng.Float64()*(b-a))*1000) / 1000 }
	s := Scenario{Comment: fmt.Sprintf("issue 9 fault soak, seed %d, %s (generated by soakScenario)", seed, d),
		Sampling: &Sampling{Hz: 6, Buffer: 120}}
	pid := uint32(fakePID)
	for i := range ngpu {
		uuid := fmt.Sprintf("GPU-50a50000-0000-4000-8000-%012d", i)
		plan.uuids = append(plan.uuids, uuid)
		plan.xids[uuid] = map[int]int{}
		var procs []Process
		for k := range 12 {
			pid++
			p := Process{PID: pid, Name: fmt.Sprintf("soak-%d-%d", i, k), UsedMemoryBytes: uint64(1+k) << 28,
				SMPercent: Sine{Mean: 40, Amplitude: 30, PeriodS: 7 + float64(k)}, MemoryPercent: 10}
			if k >= 4 { // the first four run throughout; the others come and go
				from := uniform(0, D)
				p.From, p.Until = from, ptr(math.Min(D+60, from+uniform(2, D/3)))
			}
			procs = append(procs, p)
		}
		plan.procs += len(procs)
		g := GPU{
			UUID: uuid, Name: "NVIDIA H200 (SIMULATED)",
			Utilization: &Utilization{GPU: &Duty{Busy: 0.6, PeriodS: 2}, Memory: &Duty{Busy: 0.3, PeriodS: 3},
				Encoder: &Duty{Busy: 0.1}, Decoder: &Duty{Busy: 0.05}},
			Memory:       &Memory{TotalBytes: 150754820096, ReservedBytes: 617086976, UsedBytes: Sine{Mean: 60e9, Amplitude: 30e9, PeriodS: 40}},
			TemperatureC: Sine{Mean: 55, Amplitude: 10, PeriodS: 30}, MemoryTemperatureC: 60,
			PowerW: Sine{Mean: 400, Amplitude: 200, PeriodS: 20}, PowerLimitW: 700, EnergyOffsetJ: 1e6, FanPercent: 40,
			ClocksMHz: &Clocks{SM: 1980, Memory: 3201, Graphics: 1980, Video: 1755}, PState: 0,
			Processes: procs, GPM: gpm0,
			ECCErrors:          map[string]Signal{"corrected": steps(0, 1, D/3, 2, 2*D/3, 5), "uncorrected": 0},
			RemappedRows:       map[string]Signal{"correctable": 1, "uncorrectable": 0, "pending": 0, "failure": 0},
			ClocksEventReasons: 4,
			Violation:          map[string]Signal{"power": 0.1, "thermal": 0.02},
			PCIe:               map[string]Signal{"link_generation": 5, "link_width": 16, "replays": steps(0, 0, D/2, 3)},
		}
		if i == plan.lostGPU {
			g.LostAt = ptr(plan.lostAt)
		}
		s.GPUs = append(s.GPUs, g)
	}

	// Error windows: every call site and every code at least once, then
	// random ones; none in the first 6 s (the baseline of the metrics
	// the scenario supports) nor in the last 8 s (the end check).
	nerr := max(len(soakCalls), int(200*scale))
	for k := range nerr {
		c, code := soakCalls[k%len(soakCalls)].call, soakCodes[k%len(soakCodes)]
		if k >= len(soakCalls) {
			c, code = soakCalls[rng.IntN(len(soakCalls))].call, soakCodes[rng.IntN(len(soakCodes))]
		}
		w := soakWindow{gpu: rng.IntN(ngpu), call: c, code: code}
		w.from = uniform(6, D-12)
		if code == "NOT_SUPPORTED" || code == "NO_PERMISSION" {
			// Early enough for the re-probe (10 s, doubling while it
			// repeats) to bring the metrics back before the end check.
			w.from = uniform(6, max(7, D-45))
		}
		w.to = w.from + uniform(0.3, 3)
		plan.errors = append(plan.errors, w)
		g := &s.GPUs[w.gpu]
		g.Errors = append(g.Errors, Fault{Call: w.call, Return: w.code, From: w.from, Until: ptr(w.to)})
	}
	// Hangs: many short ones, a 5 s and a 20 s one, a registration that
	// hangs 2 s at start (under the 5 s registration deadline), and one
	// still running at SIGTERM.
	addHang := func(w soakWindow) {
		plan.hangs = append(plan.hangs, w)
		g := &s.GPUs[w.gpu]
		g.Hangs = append(g.Hangs, Hang{Call: w.call, From: w.from, Seconds: math.Round((w.to-w.from)*1000) / 1000})
	}
	for range max(10, int(60*scale)) {
		w := soakWindow{gpu: rng.IntN(ngpu), call: soakCalls[rng.IntN(len(soakCalls))].call}
		w.from = uniform(6, D-12)
		w.to = w.from + uniform(0.05, 0.5)
		addHang(w)
	}
	addHang(soakWindow{gpu: 1, call: "nvmlDeviceGetPowerUsage", from: math.Round(0.3 * D), to: math.Round(0.3*D) + 5})
	addHang(soakWindow{gpu: 2, call: "nvmlDeviceGetTemperature", from: math.Round(0.35 * D), to: math.Round(0.35*D) + 20})
	addHang(soakWindow{gpu: 1, call: "nvmlDeviceRegisterEvents", from: 0, to: 2})
	plan.endHang = soakWindow{gpu: 0, call: "nvmlDeviceGetTemperature", from: D - 4, to: D + 16}
	addHang(plan.endHang)

	// XID and ECC events, from t = 5 s (after the registrations) to 5 s
	// before the end.
	nev := max(100, int(1000*scale))
	for range nev {
		i := rng.IntN(ngpu)
		ev := Event{At: uniform(5, D-5)}
		switch r := rng.Float64(); {
		case r < 0.6:
			ev.XID = soakXIDs[rng.IntN(len(soakXIDs))]
			plan.xids[plan.uuids[i]][ev.XID]++
		case r < 0.9:
			ev.Type = "single_bit_ecc"
		default:
			ev.Type = "double_bit_ecc"
		}
		s.GPUs[i].Events = append(s.GPUs[i].Events, ev)
		plan.events++
	}
	for i := range s.GPUs {
		if s.GPUs[i].Events == nil {
			s.GPUs[i].Events = []Event{}
		}
	}
	return s, plan
}

// hungAt reports whether a hang on gpu covers scenario time t (with the
// read that returns after it).
func (p soakPlan) hungAt(gpu int, t float64) bool {
	for _, h := range p.hangs {
		if h.gpu == gpu && h.call != "nvmlDeviceRegisterEvents" && t >= h.from-0.3 && t < h.to+0.5 {
			return true
		}
	}
	return false
}

// failingAt returns the error windows on gpu that cover t, with a margin
// for the read's own span.
func (p soakPlan) failingAt(gpu int, t float64) []soakWindow {
	var out []soakWindow
	for _, w := range p.errors {
		slack := 0.3
		if soakCounterCalls[w.call] {
			slack = 1 // read in the background; its failure shows in the next scrape
		}
		if w.gpu == gpu && t >= w.from-0.3 && t < w.to+slack {
			out = append(out, w)
		}
	}
	return out
}

// turnedOff returns the metrics that a transient NOT_SUPPORTED or
// NO_PERMISSION turned off on gpu by t, and not re-probed by then.
func (p soakPlan) turnedOff(gpu int, t float64) map[string]bool {
	out := map[string]bool{}
	for _, w := range p.errors {
		if w.gpu != gpu || (w.code != "NOT_SUPPORTED" && w.code != "NO_PERMISSION") || t < w.from-0.3 {
			continue
		}
		if *soakReprobe > 0 && t > w.to+soakReprobe.Seconds() {
			continue
		}
		for _, m := range callMetrics(w.call) {
			out[m] = true
		}
	}
	return out
}

func callMetrics(call string) []string {
	for _, c := range soakCalls {
		if c.call == call {
			return c.metrics
		}
	}
	return nil
}

// ---- the run ----------------------------------------------------------------------

type soakSample struct {
	at                             time.Duration
	rssKB, threads, fds, goroutine int
}

func TestSoak(t *testing.T) {
	D := *soakDuration
	scn, plan := soakScenario(*soakSeed, D)
	scnPath := scn.write(t)
	be := startBackend(t, testutil.AbsFlag(t, "otelcol", *otelcolPath))
	pprofAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	dir := t.TempDir()
	cfg := fmt.Sprintf(`receivers:
  nvml:
    library_path: %s
    collection_interval: %s
    timeout: %s
    processes:
      max_per_gpu: 64
exporters:
  otlp_grpc:
    endpoint: %s
    tls:
      insecure: true
extensions:
  pprof:
    endpoint: %s
service:
  extensions: [pprof]
  pipelines:
    metrics:
      receivers: [nvml]
      exporters: [otlp_grpc]
    logs:
      receivers: [nvml]
      exporters: [otlp_grpc]
  telemetry:
    logs:
      sampling:
        enabled: false
    metrics:
      level: none
`, testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath), soakInterval, soakTimeout, be.endpoint, pprofAddr)
	c := &collector{}
	c.proc = startProcess(t, "otelcol-nvml (soak)", []string{scenarioEnv + "=" + scnPath},
		testutil.AbsFlag(t, "otelcol", *otelcolPath), "--config="+writeFile(t, dir, "collector.yaml", cfg))
	t0 := c.scenarioStart(t, 30*time.Second)
	t.Logf("soak: %s, seed %d: %d GPUs, %d error windows, %d hangs, %d XID/ECC events, %d processes; GPU %d lost at t=%.1f s",
		D, *soakSeed, len(plan.uuids), len(plan.errors), len(plan.hangs), plan.events, plan.procs, plan.lostGPU, plan.lostAt)

	an := newSoakAnalysis(plan, t0)
	var samples []soakSample
	pid := c.proc.cmd.Process.Pid
	end := t0.Add(D)
	for time.Now().Before(end) {
		c.proc.requireAlive(t)
		smp := soakSample{at: time.Since(t0)}
		smp.rssKB, smp.threads = procStatus(pid)
		smp.fds = countFDs(pid)
		smp.goroutine = goroutines(pprofAddr)
		samples = append(samples, smp)
		an.read(t, be.file)
		time.Sleep(min(5*time.Second, time.Until(end)))
	}
	time.Sleep(time.Second) // the last exports
	an.read(t, be.file)

	// SIGTERM with a call stuck in NVML (plan.endHang).
	began := time.Now()
	mustOK(t, c.proc.cmd.Process.Signal(syscall.SIGTERM) == nil, "SIGTERM")
	select {
	case <-c.proc.done:
	case <-time.After(30 * time.Second):
	}
	exit := time.Since(began)
	logs := c.proc.logs.String()

	rep := an.report(t, samples, exit, logs)
	if *soakReport != "" {
		if err := os.WriteFile(*soakReport, []byte(rep), 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Log("\n" + rep)
}

func mustOK(t *testing.T, ok bool, what string) {
	t.Helper()
	if !ok {
		t.Fatal(what)
	}
}

func procStatus(pid int) (rssKB, threads int) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1, -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rssKB, _ = strconv.Atoi(f[1])
		case "Threads:":
			threads, _ = strconv.Atoi(f[1])
		}
	}
	return rssKB, threads
}

func countFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// goroutines reads the collector's goroutine count from its pprof
// extension ("goroutine profile: total N").
func goroutines(addr string) int {
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(io.LimitReader(resp.Body, 4096)).ReadString('\n')
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "goroutine profile: total")))
	if err != nil {
		return -1
	}
	return n
}

// ---- the analysis, streamed from the backend's file -----------------------------------

type soakCounterKey struct{ uuid, metric, series string }

type soakPoint struct {
	ms    int64 // since t0
	value float64
}

// decreases lists the counter points lower than the point before them in
// time. The backend's file holds batches in the order they arrived, which
// under load is not always the order of their scrapes, so each series is
// put in time order first.
func (a *soakAnalysis) decreases() []string {
	var out []string
	for key, pts := range a.counters {
		pts = slices.Clone(pts)
		slices.SortStableFunc(pts, func(x, y soakPoint) int { return cmp.Compare(x.ms, y.ms) })
		for i := 1; i < len(pts); i++ {
			if pts[i].value < pts[i-1].value-1e-9 {
				out = append(out, fmt.Sprintf("%s %s %s: %g after %g at t=%.1f s",
					key.uuid, key.metric, key.series, pts[i].value, pts[i-1].value, float64(pts[i].ms)/1000))
			}
		}
	}
	slices.Sort(out)
	return out
}

type soakAnalysis struct {
	plan   soakPlan
	t0     time.Time
	offset int64
	rest   []byte

	metricIdx map[string]int
	names     []string
	// per GPU: per point time (ms since t0) the metrics seen
	seen map[string]map[int64]uint64
	// per counter series: its points, in the order the backend got them
	counters map[soakCounterKey][]soakPoint
	xids     map[string]map[int]float64
}

func newSoakAnalysis(plan soakPlan, t0 time.Time) *soakAnalysis {
	a := &soakAnalysis{plan: plan, t0: t0, metricIdx: map[string]int{}, seen: map[string]map[int64]uint64{},
		counters: map[soakCounterKey][]soakPoint{}, xids: map[string]map[int]float64{}}
	for _, u := range plan.uuids {
		a.seen[u] = map[int64]uint64{}
		a.xids[u] = map[int]float64{}
	}
	return a
}

func (a *soakAnalysis) idx(name string) int {
	i, ok := a.metricIdx[name]
	if !ok {
		i = len(a.names)
		a.metricIdx[name] = i
		a.names = append(a.names, name)
	}
	return i
}

// read consumes the lines the backend wrote since the last read.
func (a *soakAnalysis) read(t *testing.T, path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	a.offset += int64(len(data))
	data = append(a.rest, data...)
	last := bytes.LastIndexByte(data, '\n')
	if last < 0 {
		a.rest = data
		return
	}
	a.rest = append([]byte(nil), data[last+1:]...)
	var um pmetric.JSONUnmarshaler
	for _, line := range bytes.Split(data[:last], []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		md, err := um.UnmarshalMetrics(line)
		if err != nil {
			t.Errorf("backend line: %v", err)
			continue
		}
		a.consume(md)
	}
}

func (a *soakAnalysis) consume(md pmetric.Metrics) {
	for _, p := range flatten(md) {
		seen, ok := a.seen[p.UUID]
		if !ok || p.Metric == "" {
			continue
		}
		ms := p.Time.Sub(a.t0).Milliseconds()
		seen[ms] |= 1 << a.idx(p.Metric)
		if p.Metric == "nvidia.gpu.xid.errors" {
			if code, ok := p.Attrs["nvidia.gpu.xid"].(int64); ok {
				a.xids[p.UUID][int(code)] = math.Max(a.xids[p.UUID][int(code)], p.Value)
			}
		}
		if p.Type == pmetric.MetricTypeSum && p.Monotonic {
			key := soakCounterKey{p.UUID, p.Metric, fmt.Sprint(p.Attrs, p.Resource["process.pid"])}
			a.counters[key] = append(a.counters[key], soakPoint{ms, p.Value})
		}
	}
}

// scrapes groups every GPU's point times into scrapes (reads of one scrape
// start within a few ms of each other) and returns each GPU's metric set
// per scrape, by scrape start (ms since t0).
func (a *soakAnalysis) scrapes() ([]int64, map[string]map[int64]uint64) {
	var all []int64
	for _, seen := range a.seen {
		for ms := range seen {
			all = append(all, ms)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	var starts []int64
	for _, ms := range all {
		if len(starts) == 0 || ms-starts[len(starts)-1] > soakInterval.Milliseconds()/2 {
			starts = append(starts, ms)
		}
	}
	out := map[string]map[int64]uint64{}
	for uuid, seen := range a.seen {
		per := map[int64]uint64{}
		for ms, bits := range seen {
			i := sort.Search(len(starts), func(i int) bool { return starts[i] > ms }) - 1
			per[starts[i]] |= bits
		}
		out[uuid] = per
	}
	return starts, out
}

func (a *soakAnalysis) bits(names map[string]bool) uint64 {
	var b uint64
	for n := range names {
		if i, ok := a.metricIdx[n]; ok {
			b |= 1 << i
		}
	}
	return b
}

func (a *soakAnalysis) namesOf(b uint64) []string {
	var out []string
	for i, n := range a.names {
		if b&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// report runs the checks and returns the figures as markdown.
func (a *soakAnalysis) report(t *testing.T, samples []soakSample, exit time.Duration, logs string) string {
	t.Helper()
	if len(a.names) > 64 {
		t.Fatalf("%d metric names: the bit sets hold 64", len(a.names))
	}
	var out strings.Builder
	fmt.Fprintf(&out, "| check | figure | bound | |\n|---|---|---|---|\n")
	row := func(ok bool, check, figure, bound string) {
		mark := "ok"
		if !ok {
			mark = "FAILED"
			t.Errorf("soak: %s: %s (bound %s)", check, figure, bound)
		}
		fmt.Fprintf(&out, "| %s | %s | %s | %s |\n", check, figure, bound, mark)
	}
	D := a.plan.duration
	starts, per := a.scrapes()

	// The metrics each GPU supports: all it reported in its first seconds,
	// before any fault.
	supported := map[string]uint64{}
	for _, uuid := range a.plan.uuids {
		for ms, b := range per[uuid] {
			if ms >= 2000 && ms < 6000 {
				supported[uuid] |= b
			}
		}
	}

	// Resources, flat after warm-up.
	warm := time.Duration(max(20, 0.2*D) * float64(time.Second))
	var after []soakSample
	for _, s := range samples {
		if s.at >= warm {
			after = append(after, s)
		}
	}
	if len(after) >= 3 {
		third := max(1, len(after)/3)
		first, last := after[:third], after[len(after)-third:]
		med := func(ss []soakSample, f func(soakSample) int) int {
			v := make([]int, len(ss))
			for i, s := range ss {
				v[i] = f(s)
			}
			sort.Ints(v)
			return v[len(v)/2]
		}
		rss := func(s soakSample) int { return s.rssKB }
		gor := func(s soakSample) int { return s.goroutine }
		thr := func(s soakSample) int { return s.threads }
		fds := func(s soakSample) int { return s.fds }
		r0, r1 := med(first, rss), med(last, rss)
		row(r1 <= r0*5/4+16<<10, "RSS after warm-up (median, first third -> last third)", fmt.Sprintf("%d -> %d MiB", r0>>10, r1>>10), "+25 % + 16 MiB")
		g0, g1 := med(first, gor), med(last, gor)
		row(g0 > 0 && g1 <= g0+25, "goroutines", fmt.Sprintf("%d -> %d", g0, g1), "+25")
		h0, h1 := med(first, thr), med(last, thr)
		row(h1 <= h0+8, "threads", fmt.Sprintf("%d -> %d", h0, h1), "+8")
		f0, f1 := med(first, fds), med(last, fds)
		row(f1 <= f0+8, "fds", fmt.Sprintf("%d -> %d", f0, f1), "+8")
		maxOf := func(f func(soakSample) int) int {
			m := 0
			for _, s := range samples {
				m = max(m, f(s))
			}
			return m
		}
		fmt.Fprintf(&out, "| peak RSS / goroutines / threads / fds | %d MiB / %d / %d / %d | | |\n",
			maxOf(rss)>>10, maxOf(gor), maxOf(thr), maxOf(fds))
	} else {
		row(false, "resource samples after warm-up", fmt.Sprint(len(after)), ">= 3")
	}

	decreases := a.decreases()
	row(len(decreases) == 0, "counters that decreased", fmt.Sprintf("%d %v", len(decreases), first(decreases, 3)), "0")

	// XIDs: equal to the scenario's.
	var xidDiff []string
	total := 0
	for _, uuid := range a.plan.uuids {
		for code, n := range a.plan.xids[uuid] {
			total += n
			if got := a.xids[uuid][code]; int(got) != n {
				xidDiff = append(xidDiff, fmt.Sprintf("%s xid %d: %g, scenario %d", uuid, code, got, n))
			}
		}
		for code, got := range a.xids[uuid] {
			if a.plan.xids[uuid][code] == 0 {
				xidDiff = append(xidDiff, fmt.Sprintf("%s xid %d: %g, scenario 0", uuid, code, got))
			}
		}
	}
	row(len(xidDiff) == 0, "XID counts equal to the scenario's", fmt.Sprintf("%d XIDs, %d differ %v", total, len(xidDiff), first(xidDiff, 3)), "0 differ")

	// Every GPU not lost or hung reported in >= 95 % of the intervals, with
	// the metrics whose calls did not fail.
	for gi, uuid := range a.plan.uuids {
		counted, complete := 0, 0
		all, reported := 0, 0 // every interval the GPU is neither lost nor hung, error windows included
		var missing map[string]int = map[string]int{}
		for _, ms := range starts {
			st := float64(ms) / 1000
			if st < 6 || st > D-1 || (gi == a.plan.lostGPU && st >= a.plan.lostAt-0.5) || a.plan.hungAt(gi, st) {
				continue
			}
			all++
			if per[uuid][ms]&(1<<a.idx("hw.status")) != 0 {
				reported++
			}
			failing := a.plan.failingAt(gi, st)
			if !*soakPartialReads && len(failing) > 0 {
				continue // one failed call drops the whole sample (no partial reads yet)
			}
			drop := a.plan.turnedOff(gi, st)
			for _, w := range failing {
				for _, m := range callMetrics(w.call) {
					drop[m] = true
				}
			}
			want := supported[uuid] &^ a.bits(drop)
			counted++
			if got := per[uuid][ms]; got&want == want {
				complete++
			} else {
				for _, m := range a.namesOf(want &^ got) {
					missing[m]++
				}
			}
		}
		frac := float64(complete) / math.Max(1, float64(counted))
		row(counted > 0 && frac >= 0.95, fmt.Sprintf("GPU %d reported with its metrics", gi),
			fmt.Sprintf("%d of %d intervals (%.1f %%)%s", complete, counted, 100*frac, topMissing(missing)), ">= 95 %")
		fmt.Fprintf(&out, "| GPU %d reported at all, error windows included (figure only) | %d of %d intervals (%.1f %%) | | |\n",
			gi, reported, all, 100*float64(reported)/math.Max(1, float64(all)))
	}
	mode := "intervals without an error window on the GPU (no partial reads yet: a failed call drops the GPU's sample)"
	if *soakPartialReads {
		mode = "every interval; the metrics of the calls failing in it are not required"
	}
	fmt.Fprintf(&out, "| counted | %s | | |\n", mode)

	// Every supported metric present at the end (the last 3 s before
	// SIGTERM) on each GPU neither lost nor hung then.
	for gi, uuid := range a.plan.uuids {
		if gi == a.plan.lostGPU || gi == a.plan.endHang.gpu {
			continue
		}
		var got uint64
		for ms, b := range per[uuid] {
			if float64(ms)/1000 >= D-3 {
				got |= b
			}
		}
		want := supported[uuid] &^ a.bits(a.plan.turnedOff(gi, D))
		off := a.namesOf(supported[uuid] & a.bits(a.plan.turnedOff(gi, D)))
		row(got&want == want, fmt.Sprintf("GPU %d: every supported metric at the end", gi),
			fmt.Sprintf("%d of %d; missing %v; off after a transient NOT_SUPPORTED/NO_PERMISSION: %v",
				len(a.namesOf(got&want)), len(a.namesOf(want)), a.namesOf(want&^got), off), "all")
	}
	lost := a.plan.uuids[a.plan.lostGPU]
	failed := 0
	for ms, b := range per[lost] {
		if float64(ms)/1000 > a.plan.lostAt+1 && b&(1<<a.idx("hw.status")) != 0 {
			failed++
		}
	}
	row(failed > 0, "the lost GPU reports hw.status after it is lost", fmt.Sprintf("%d scrapes", failed), "> 0")

	row(exit <= soakShutdownBound, "SIGTERM to exit, an NVML call stuck", exit.Round(10*time.Millisecond).String(), soakShutdownBound.String())
	row(strings.Count(logs, "Not shutting NVML down") == 1, "\"Not shutting NVML down\" log lines", fmt.Sprint(strings.Count(logs, "Not shutting NVML down")), "1")
	row(!strings.Contains(logs, "panic:"), "crash", fmt.Sprint(strings.Contains(logs, "panic:")), "none")
	fmt.Fprintf(&out, "\nRun: %s at %s, seed %d; %d scrapes; %d error windows (%d codes, %d call sites), %d hangs (50 ms to 20 s), %d XID/ECC events, %d processes, GPU %d lost at t = %.1f s.\n",
		time.Duration(D*float64(time.Second)), soakInterval, *soakSeed, len(starts), len(a.plan.errors), len(soakCodes), len(soakCalls),
		len(a.plan.hangs), a.plan.events, a.plan.procs, a.plan.lostGPU, a.plan.lostAt)
	return out.String()
}

func topMissing(m map[string]int) string {
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range m {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v || all[i].v == all[j].v && all[i].k < all[j].k })
	if len(all) == 0 {
		return ""
	}
	var parts []string
	for _, e := range all[:min(3, len(all))] {
		parts = append(parts, fmt.Sprintf("%s %d", e.k, e.v))
	}
	return "; most missed: " + strings.Join(parts, ", ")
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }
