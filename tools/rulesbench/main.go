// Command rulesbench measures what the shipped Prometheus rules cost to
// evaluate at fleet scale (make rules-bench; docs/operations/deploy.md "At scale"):
// it writes N GPUs x 24 h of the receiver's series (a scrape of the demo,
// copied per simulated node with its own GPUs, pods and processes, the
// holders replaced every few hours), backfills all but the last hours
// with promtool and writes those into Prometheus's head by remote write,
// backfills the resampled counters the 24h figures read, starts
// Prometheus on that TSDB with the rules on loopback, and prints each
// group's and each rule's evaluation time and the server's CPU per 1,000
// GPUs.
//
// The data ends -ahead of the run's start, and the measurement waits for the
// clock to pass it: Prometheus evaluates its rules at the current time.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

type config struct {
	gpus        int
	perNode     int
	hours       int
	step        time.Duration
	historyStep time.Duration
	recent      time.Duration
	holderLife  time.Duration
	end         int64
}

func (c config) nodes() int          { return (c.gpus + c.perNode - 1) / c.perNode }
func (c config) stepS() int64        { return int64(c.step.Seconds()) }
func (c config) historyStepS() int64 { return int64(c.historyStep.Seconds()) }

func main() {
	var (
		cfg        config
		template   = flag.String("template", "tools/rulesbench/testdata/demo.prom", "a scrape of one node's collector (the demo's)")
		rules      = flag.String("rules", "deploy/prometheus/rules.yaml", "the rule file to measure")
		backfill   = flag.String("backfill-records", `^series:`, "regexp of the recording rules whose history is backfilled before the measurement, each at its group's interval (the 24h figures read the resampled counters)")
		prometheus = flag.String("prometheus", "/usr/bin/prometheus", "Prometheus server binary")
		promtool   = flag.String("promtool", "/usr/bin/promtool", "promtool binary")
		dir        = flag.String("dir", "", "work directory (default: a temporary one, removed)")
		evals      = flag.Int("evals", 5, "evaluations of every group to measure; the median is reported")
		reuse      = flag.Bool("reuse", false, "measure on the TSDB a previous run left in -dir (same -gpus), without writing it again: to compare two rule files on the same data, minutes apart (the data then ends that long before the evaluations)")
		ahead      = flag.Duration("ahead", 10*time.Minute, "how far past the start of the run the data ends: the evaluations start once the clock passes it, after the backfill, on windows the data fills (400 GPUs take some 10 minutes to write here)")
		baseline   = flag.Duration("baseline", 30*time.Second, "how long the server's CPU is read without rules, to take off the rules' CPU")
		profile    = flag.String("cpuprofile", "", "write Prometheus's CPU profile over the measured evaluations to this file (go tool pprof reads it)")
		drop       = flag.String("drop-labels", "", "comma-separated labels to leave off every series but the GPU's "+keptOn+" (to measure what keeping a GPU's constants off its series saves)")
	)
	flag.IntVar(&cfg.gpus, "gpus", 50, "simulated GPUs")
	flag.IntVar(&cfg.hours, "hours", 24, "hours of history")
	flag.DurationVar(&cfg.step, "step", 10*time.Second, "scrape interval of the recent window")
	flag.DurationVar(&cfg.historyStep, "history-step", 60*time.Second, "sample interval of the accounting counters before the recent window")
	flag.DurationVar(&cfg.recent, "recent", time.Hour, "window in which every series is written at -step (before it, only the accounting counters)")
	flag.DurationVar(&cfg.holderLife, "holder-life", 6*time.Hour, "how long a pod and its processes hold their GPU before the next ones")
	flag.Parse()
	log.SetFlags(0)
	for _, l := range strings.Split(*drop, ",") {
		if l != "" {
			dropped[l] = true
		}
	}

	tmpl, err := readTemplate(*template)
	if err != nil {
		log.Fatal(err)
	}
	cfg.perNode = countGPUs(tmpl)
	if *reuse && *dir == "" {
		log.Fatal("-reuse needs -dir")
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "rulesbench")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		*dir = d
	} else if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Fatal(err)
	}
	data := filepath.Join(*dir, "data")
	cfg.end = time.Now().Add(*ahead).Unix() / cfg.stepS() * cfg.stepS()
	start := cfg.end - int64(cfg.hours)*3600

	var rawBytes int64
	var compacted blockStats
	addr := freeAddr()
	if *reuse {
		if _, err := os.Stat(data); err != nil {
			log.Fatal(err)
		}
		compacted = readBlocks(data)
	} else {
		rawBytes, compacted = build(cfg, tmpl, *dir, data, addr, start, *prometheus, *promtool, *rules, *backfill)
		writeDataEnd(*dir, cfg.end)
	}
	measured := filepath.Join(*dir, "rules.yaml")
	intervals := groupIntervals(*rules, measured)
	// The server starts without rules a baseline before the data's end,
	// to measure what it spends idle; the rules load once the clock has
	// passed the data's end (Prometheus appends its records only after
	// the newest block), on windows that the data fills.
	end := readDataEnd(*dir)
	if wait := time.Until(end) - *baseline - 10*time.Second; wait > 0 {
		log.Printf("waiting %s for the data's end", (wait + *baseline + 10*time.Second).Round(time.Second))
		time.Sleep(wait)
	}
	srv := serve(*prometheus, data, addr, filepath.Join(*dir, "prometheus.yaml"), "")
	defer srv.stop()
	idle := cpuRate(addr, *baseline)
	if wait := time.Until(end) + time.Second; wait > 0 {
		time.Sleep(wait)
	}
	srv.load(measured)
	blocks, _ := filepath.Glob(filepath.Join(data, "*", "meta.json"))
	log.Printf("measuring on %d blocks; the server idle: %.1f ms of CPU a second", len(blocks), idle*1000)
	if late := time.Since(end); late > 30*time.Second {
		log.Printf("WARNING: the data ended %s before the evaluations: their 5m and 1h windows hold less than the fleet's (raise -ahead)", late.Round(time.Second))
	}
	// The first evaluation of each group reads its chunks from disk into
	// the page cache, which a live server has done long before: it is left
	// out of the window.
	warm, _ := waitEvaluations(addr, 1, nil)
	after := map[string]time.Time{}
	for _, g := range warm {
		after[g.Name] = g.LastEvaluation
	}
	c0, t0 := cpuSeconds(addr), time.Now()
	profiled := startProfile(addr, *profile, time.Duration(*evals)*evalInterval)
	groups, evaluated := waitEvaluations(addr, *evals, after)
	<-profiled
	cpu := cpuSeconds(addr) - c0 - idle*time.Since(t0).Seconds()
	heads := readHead(addr)
	report(os.Stdout, cfg, groups, intervals, cpuShares(groups, evaluated, cpu), heads, rawBytes, compacted)
}

// build writes the simulated fleet's 24 h into a TSDB in data, lets
// Prometheus compact it and backfills the records named by backfill; it
// returns the raw blocks' bytes and the compacted blocks' stats.
func build(cfg config, tmpl []series, dir, data, addr string, start int64, prometheus, promtool, rules, backfill string) (int64, blockStats) {
	t0 := time.Now()
	const slice = 2 * 3600
	headFrom := cfg.end - headSpan
	for from := start - start%slice; from < headFrom; from += slice {
		om := filepath.Join(dir, "slice.om")
		f, err := os.Create(om)
		if err != nil {
			log.Fatal(err)
		}
		if err := writeSlice(f, tmpl, cfg, from, min(from+slice, headFrom)); err != nil {
			log.Fatal(err)
		}
		f.Close()
		run(promtool, "tsdb", "create-blocks-from", "openmetrics", om, data)
		os.Remove(om)
	}
	log.Printf("backfilled %d GPUs on %d nodes, %d h, in %s", cfg.gpus, cfg.nodes(), cfg.hours, time.Since(t0).Round(time.Second))
	rawBytes := dirBytes(data)

	// The raw blocks are 2h ones; let Prometheus compact them as it would
	// have compacted 24 h of its own, then write the last headSpan into
	// its head.
	srv := serve(prometheus, data, addr, filepath.Join(dir, "empty.yaml"), "")
	waitCompacted(data, 6)
	compacted := readBlocks(data)
	t1 := time.Now()
	pushHead(addr, tmpl, cfg, headFrom, cfg.end)
	log.Printf("wrote the last %s into the head in %s", time.Duration(headSpan)*time.Second, time.Since(t1).Round(time.Second))
	// Backfill the records the 24h figures read.
	if backfill != "" {
		recs := filepath.Join(dir, "records.yaml")
		if names := selectRecords(rules, backfill, recs); len(names) > 0 {
			t1 := time.Now()
			out := run(promtool, "tsdb", "create-blocks-from", "rules",
				"--start", fmt.Sprint(start+60), "--end", fmt.Sprint(cfg.end),
				"--eval-interval", "5m", "--url", "http://"+addr, "--output-dir", data, recs)
			srv.stop()
			// promtool writes one block per rule and range: let Prometheus
			// merge the overlapping blocks first (a live ruler's records are
			// in the head and compacted blocks, never overlapping ones).
			srv = serve(prometheus, data, addr, filepath.Join(dir, "empty.yaml"), "")
			waitCompacted(data, 6)
			// promtool exits 0 when its queries fail, having written
			// nothing: the 24h figures would then read no history and
			// cost a fraction of what they do.
			if missing := recordsMissing(addr, names, start+3600, cfg.end-headSpan-3600); len(missing) > 0 {
				log.Fatalf("the backfilled records are not in the TSDB: %s\npromtool said:\n%s", strings.Join(missing, ", "), out)
			}
			log.Printf("backfilled %d records (%s) in %s", len(names), backfill, time.Since(t1).Round(time.Second))
		}
	}
	srv.stop()
	return rawBytes, compacted
}

// waitCompacted waits until the TSDB has at most n blocks (24 h of a live
// Prometheus: the head and a few compacted blocks, 2h ones merged into 6h
// and 18h ones), at most 4 minutes.
func waitCompacted(data string, n int) {
	for i := 0; i < 48; i++ {
		blocks, _ := filepath.Glob(filepath.Join(data, "*", "meta.json"))
		if len(blocks) <= n {
			return
		}
		time.Sleep(5 * time.Second)
	}
	blocks, _ := filepath.Glob(filepath.Join(data, "*", "meta.json"))
	log.Printf("%d blocks after 4 minutes of compaction", len(blocks))
}

func countGPUs(tmpl []series) int {
	ids := map[string]bool{}
	for _, s := range tmpl {
		if id := s.get("hw_id"); id != "" && s.get("hw_parent") == "" {
			ids[id] = true
		}
	}
	if len(ids) == 0 {
		log.Fatal("template: no GPU series (hw_id)")
	}
	return len(ids)
}

func run(name string, args ...string) []byte {
	cmd := exec.Command(name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		log.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// evalInterval: how often the groups without their own interval run; an
// evaluation costs the same at any interval, and a short one gives the
// median its samples sooner.
const evalInterval = 15 * time.Second

// server is a Prometheus the bench started.
type server struct {
	cmd     *exec.Cmd
	cfgPath string
}

func writeConfig(cfgPath, rules string) {
	conf := "global:\n  evaluation_interval: " + evalInterval.String() + "\n"
	if rules != "" {
		abs, _ := filepath.Abs(rules)
		conf += fmt.Sprintf("rule_files: [%q]\n", abs)
	}
	if err := os.WriteFile(cfgPath, []byte(conf), 0o644); err != nil {
		log.Fatal(err)
	}
}

// serve starts Prometheus on the TSDB with the rule file (none: "") and
// waits until it answers.
func serve(bin, data, addr, cfgPath, rules string) *server {
	writeConfig(cfgPath, rules)
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+data,
		"--storage.tsdb.retention.time=30d", "--web.listen-address="+addr, "--log.level=warn",
		"--web.enable-remote-write-receiver")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	srv := &server{cmd: cmd, cfgPath: cfgPath}
	for i := 0; i < 600; i++ {
		if resp, err := http.Get("http://" + addr + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return srv
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	srv.stop()
	log.Fatal("prometheus did not get ready")
	return nil
}

func (s *server) stop() { s.cmd.Process.Signal(os.Interrupt); s.cmd.Wait() }

// load gives the running server the rule file: a new config and SIGHUP,
// Prometheus's reload.
func (s *server) load(rules string) {
	writeConfig(s.cfgPath, rules)
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		log.Fatal(err)
	}
}

type rule struct {
	Name           string  `json:"name"`
	EvaluationTime float64 `json:"evaluationTime"`
	Health         string  `json:"health"`
	LastError      string  `json:"lastError"`
}

type group struct {
	Name           string    `json:"name"`
	Interval       float64   `json:"interval"`
	EvaluationTime float64   `json:"evaluationTime"`
	LastEvaluation time.Time `json:"lastEvaluation"`
	Rules          []rule    `json:"rules"`
}

// recordsMissing says which of the records named have no sample in the
// TSDB behind addr at one of the times given (Unix seconds).
func recordsMissing(addr string, names []string, times ...int64) []string {
	var missing []string
	for _, name := range names {
		for _, t := range times {
			var resp struct {
				Data struct {
					Result []json.RawMessage `json:"result"`
				} `json:"data"`
			}
			q := url.Values{"query": {"count(" + name + ")"}, "time": {fmt.Sprint(t)}}
			getJSON("http://"+addr+"/api/v1/query?"+q.Encode(), &resp)
			if len(resp.Data.Result) == 0 {
				missing = append(missing, fmt.Sprintf("%s at %s", name, time.Unix(t, 0).UTC().Format(time.RFC3339)))
			}
		}
	}
	return missing
}

func getJSON(url string, v any) {
	resp, err := http.Get(url)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		log.Fatal(err)
	}
}

// waitEvaluations returns the groups once every one has been evaluated n
// times after its time in after (none: since the start), each group's and
// each rule's evaluation time the median of those n (the machine is
// shared; one evaluation is noisy), and how many evaluations of each
// group it saw.
func waitEvaluations(addr string, n int, after map[string]time.Time) ([]group, map[string]int) {
	seen := map[string][]group{}
	for {
		var r struct {
			Data struct {
				Groups []group `json:"groups"`
			} `json:"data"`
		}
		getJSON("http://"+addr+"/api/v1/rules", &r)
		done := len(r.Data.Groups) > 0
		for _, g := range r.Data.Groups {
			hist := seen[g.Name]
			fresh := !g.LastEvaluation.IsZero() && g.LastEvaluation.After(after[g.Name])
			if fresh && (len(hist) == 0 || !hist[len(hist)-1].LastEvaluation.Equal(g.LastEvaluation)) {
				seen[g.Name] = append(hist, g)
			}
			if len(seen[g.Name]) < n {
				done = false
			}
		}
		if done {
			out := make([]group, 0, len(r.Data.Groups))
			counts := map[string]int{}
			for _, g := range r.Data.Groups {
				out = append(out, medianGroup(seen[g.Name]))
				counts[g.Name] = len(seen[g.Name])
			}
			return out, counts
		}
		time.Sleep(2 * time.Second)
	}
}

func median(xs []float64) float64 {
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

func medianGroup(hist []group) group {
	g := hist[len(hist)-1]
	var ts []float64
	for _, h := range hist {
		ts = append(ts, h.EvaluationTime)
	}
	g.EvaluationTime = median(ts)
	g.Rules = append([]rule(nil), g.Rules...)
	for i := range g.Rules {
		var rs []float64
		for _, h := range hist {
			rs = append(rs, h.Rules[i].EvaluationTime)
		}
		g.Rules[i].EvaluationTime = median(rs)
	}
	return g
}

type nameValue struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

type headStats struct {
	series float64
	// labelBytes: the head's memory for each label name's values (the
	// top 10 Prometheus lists).
	labelBytes []nameValue
}

func readHead(addr string) headStats {
	var r struct {
		Data struct {
			HeadStats struct {
				NumSeries float64 `json:"numSeries"`
			} `json:"headStats"`
			MemoryInBytesByLabelName []nameValue `json:"memoryInBytesByLabelName"`
		} `json:"data"`
	}
	getJSON("http://"+addr+"/api/v1/status/tsdb", &r)
	return headStats{series: r.Data.HeadStats.NumSeries, labelBytes: r.Data.MemoryInBytesByLabelName}
}

func report(w io.Writer, cfg config, groups []group, intervals map[string]time.Duration, cpu map[string]float64, head headStats, rawBytes int64, blocks blockStats) {
	heads := head.series
	per := 1000 / float64(cfg.gpus)
	fmt.Fprintf(w, "%d GPUs (%d nodes of %d), %d h at %s (accounting counters before the last %s at %s), holders every %s\n",
		cfg.gpus, cfg.nodes(), cfg.perNode, cfg.hours, cfg.step, cfg.recent, cfg.historyStep, cfg.holderLife)
	fmt.Fprintf(w, "raw TSDB: %.1f MiB; series in the head: %.0f (%.1f per GPU)\n", float64(rawBytes)/(1<<20), heads, heads/float64(cfg.gpus))
	fmt.Fprintf(w, "head memory by label name:")
	for _, l := range head.labelBytes {
		fmt.Fprintf(w, " %s %.0f kB,", l.Name, l.Value/1000)
	}
	fmt.Fprintln(w)
	// A GPU-day at defaults: every series of the head's share of one GPU
	// scraped at -step for 24 h, at the compacted blocks' bytes per sample.
	samplesPerGPUDay := heads / float64(cfg.gpus) * 86400 / cfg.step.Seconds()
	fmt.Fprintf(w, "compacted blocks: %d, %.1f MiB, %d samples, %.2f bytes per sample; a GPU-day at -step: %.0f samples, %.2f MiB\n",
		blocks.blocks, float64(blocks.bytes)/(1<<20), blocks.samples, blocks.bytesPerSample(),
		samplesPerGPUDay, samplesPerGPUDay*blocks.bytesPerSample()/(1<<20))
	// Per evaluation: what one evaluation of every group costs. Per
	// minute: each group's cost times its evaluations a minute (a group
	// with interval 5m runs a fifth as often as a 1m one). Wall: the
	// server's evaluation times; CPU: its CPU, split between the groups
	// as their wall times are.
	var wall, wallPerMinute, cpuTotal, cpuPerMinute float64
	for _, g := range groups {
		often := float64(time.Minute) / float64(intervals[g.Name])
		wall += g.EvaluationTime
		wallPerMinute += g.EvaluationTime * often
		cpuTotal += cpu[g.Name]
		cpuPerMinute += cpu[g.Name] * often
	}
	fmt.Fprintf(w, "\n%-60s %10s %14s %10s %14s\n", "group / rule", "wall ms", "per 1k GPUs", "CPU ms", "per 1k GPUs")
	line := func(name string, wall, cpu float64) {
		fmt.Fprintf(w, "%-60s %10.1f %14.1f %10.1f %14.1f\n", name, wall*1000, wall*1000*per, cpu*1000, cpu*1000*per)
	}
	line("ALL GROUPS, one evaluation each", wall, cpuTotal)
	line("ALL GROUPS, average per minute", wallPerMinute, cpuPerMinute)
	for _, g := range groups {
		line(g.Name+fmt.Sprintf(" (every %s)", intervals[g.Name]), g.EvaluationTime, cpu[g.Name])
		rs := append([]rule(nil), g.Rules...)
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].EvaluationTime > rs[j].EvaluationTime })
		for i, r := range rs {
			if r.Health != "ok" {
				fmt.Fprintf(w, "  %s: %s %s\n", r.Name, r.Health, r.LastError)
			}
			if i < 8 {
				fmt.Fprintf(w, "  %-58s %10.2f %14.1f\n", r.Name, r.EvaluationTime*1000, r.EvaluationTime*1000*per)
			}
		}
	}
}
