package report

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

var (
	day0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	day2 = day0.Add(48 * time.Hour)
)

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"now":                       now,
		"-30d":                      now.Add(-30 * 24 * time.Hour),
		"now-12h":                   now.Add(-12 * time.Hour),
		"-1w2d":                     now.Add(-9 * 24 * time.Hour),
		"-90m":                      now.Add(-90 * time.Minute),
		" -15s ":                    now.Add(-15 * time.Second),
		"2026-11-01":                day0,
		"2026-11-01T00:00:00Z":      day0,
		"2026-11-01T01:00:00+01:00": day0,
		"2026-11-01T00:00:00.5Z":    day0.Add(500 * time.Millisecond),
	} {
		got, err := ParseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "yesterday", "-", "-30", "-d", "-30x", "now+1h", "30d", "-0d", "-99999999999w", "2026-13-01", "-1h-1h"} {
		if got, err := ParseTime(in, now); err == nil {
			t.Errorf("ParseTime(%q) = %v; want an error", in, got)
		}
	}
}

func FuzzParseTime(f *testing.F) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, s := range []string{"now", "-30d", "now-1w2d3h4m5s", "2026-11-01", "2026-11-01T00:00:00Z", "-9223372036854775807s", "-0s", "-1d1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTime(s, now)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("ParseTime(%q): a message of more than one line: %q", s, err)
			}
			return
		}
		rel := strings.HasPrefix(strings.TrimSpace(s), "-") || strings.HasPrefix(strings.TrimSpace(s), "now")
		if rel && (got.After(now) || now.Sub(got) > maxDuration) {
			t.Errorf("ParseTime(%q) = %v: a relative time must be up to ten years before now", s, got)
		}
	})
}

func FuzzParseHolder(f *testing.F) {
	for _, s := range []string{"1234", "ml/trainer-0", "a/b/c", "", `x"}`} {
		f.Add("job", s)
		f.Add("pod", s)
	}
	f.Fuzz(func(t *testing.T, kind, arg string) {
		h, err := ParseHolder(kind, arg)
		if err != nil {
			return
		}
		// A holder that parses is safe in a PromQL string: its matchers
		// quote it, and no value breaks out of the quotes.
		gpu, _, _ := h.filters()
		for _, m := range gpu {
			q := m.String()
			if strings.Count(q, `"`)-strings.Count(q, `\"`) != 2 {
				t.Errorf("%s %q: matcher %s", kind, arg, q)
			}
		}
	})
}

// TestQueries holds the PromQL of each kind and source to a golden file:
// the rules' records where they exist (the resampled counters), one
// increase() per range.
func TestQueries(t *testing.T) {
	var b strings.Builder
	for _, k := range []Kind{KindNamespace, KindPod, KindUser, KindJob} {
		for _, src := range []Source{SourceResampled, SourceRaw} {
			q := Query{Kind: k, Source: src}
			fmt.Fprintf(&b, "## --by %s, %s counters, a day\n", k.Name, src)
			fmt.Fprintf(&b, "held:   %s\n", q.Counter("held", 24*time.Hour, true))
			fmt.Fprintf(&b, "busy:   %s\n", q.Counter("busy", 24*time.Hour, false))
			fmt.Fprintf(&b, "active: %s\n", q.Counter("active", 24*time.Hour, false))
			fmt.Fprintf(&b, "idle:   %s\n", q.Counter("idle", 24*time.Hour, false))
			fmt.Fprintf(&b, "memory: %s\n", q.Memory(24*time.Hour))
			fmt.Fprintf(&b, "states: %s\n\n", q.States(24*time.Hour))
		}
	}
	h, _ := ParseHolder("job", "4242")
	g, p, d := h.filters()
	q := Query{Kind: gpuKind(), Source: SourceRaw, GPUFilter: g, ProcFilter: p, DiagnosisFilter: d}
	fmt.Fprintf(&b, "## job 4242, raw counters, 10m30s\n")
	fmt.Fprintf(&b, "life:   %s\n", q.Life())
	fmt.Fprintf(&b, "held:   %s\n", q.Counter("held", 10*time.Minute+30*time.Second, true))
	fmt.Fprintf(&b, "states: %s\n", q.States(1500*time.Millisecond))
	fmt.Fprintf(&b, "prices: %s\n", Prices(30*24*time.Hour))
	golden(t, "queries.golden", b.String())
}

// summaryFake answers a namespace report: two namespaces, one chunk's
// figures (the same each chunk).
func summaryFake(t *testing.T) *fakeProm {
	f := newFakeProm(t)
	ml := map[string]string{"k8s_namespace_name": "ml"}
	ci := map[string]string{"k8s_namespace_name": "ci"}
	h200 := func(m map[string]string) map[string]string {
		out := map[string]string{"hw_model": "NVIDIA H200"}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	f.answers["held"] = vector(sample(h200(ml), 36000), sample(map[string]string{"hw_model": "NVIDIA A10", "k8s_namespace_name": "ml"}, 7200), sample(h200(ci), 3600))
	f.answers["busy"] = vector(sample(ml, 9000), sample(ci, 3400))
	f.answers["active"] = vector(sample(ml, 7200), sample(ci, 3000))
	f.answers["idle"] = vector(sample(ml, 30000), sample(ci, 100))
	f.answers["memory"] = vector(sample(ml, 80e9), sample(ci, 140e9))
	f.answers["states"] = vector(
		sample(map[string]string{"k8s_namespace_name": "ml", "state": "idle"}, 700),
		sample(map[string]string{"k8s_namespace_name": "ml", "state": "underused"}, 300),
		sample(map[string]string{"k8s_namespace_name": "ci", "state": "memory_pressure"}, 50),
		sample(map[string]string{"k8s_namespace_name": "ci", "state": "gpu_bound"}, 50))
	f.answers["prices"] = vector(sample(map[string]string{"hw_model": "NVIDIA H200"}, 4))
	return f
}

func TestSummary(t *testing.T) {
	f := summaryFake(t)
	var progress bytes.Buffer
	s, err := Run(context.Background(), f.api(t), Options{Prometheus: f.srv.URL, Kind: KindNamespace, From: day0, To: day2,
		Source: SourceAuto, RunbookURL: DefaultRunbookURL, Progress: &progress, Parallel: 3})
	if err != nil {
		t.Fatal(err)
	}
	if s.Source != SourceResampled || s.Chunks != 2 {
		t.Errorf("a 48 h report read the %s counters in %d chunks; want resampled, 2 (a day each)", s.Source, s.Chunks)
	}
	if n := strings.Count(progress.String(), "\n"); n != 2 {
		t.Errorf("progress: %d lines; want one a chunk:\n%s", n, progress.String())
	}
	// Every query of a chunk is at the chunk's end, over the chunk.
	for _, q := range f.queries {
		if strings.Contains(q, "increase(") && !strings.Contains(q, "[86400s]") {
			t.Errorf("query not over a day: %s", q)
		}
	}
	// The A10 has no price: ml's cost is unknown, ci's is 2 h x 4.
	if len(s.Rows) != 2 || s.Rows[0].Holder["k8s_namespace_name"] != "ml" || s.Rows[0].CostKnown || s.Rows[1].Cost != 8 {
		t.Errorf("rows %+v", s.Rows)
	}
	for _, format := range Formats {
		var b bytes.Buffer
		if err := s.Write(&b, format); err != nil {
			t.Fatal(err)
		}
		golden(t, "summary."+format, b.String())
	}
	// --price for every model, --price-model before it.
	s, err = Run(context.Background(), f.api(t), Options{Prometheus: f.srv.URL, Kind: KindNamespace, From: day0, To: day2,
		Price: 2, PriceSet: true, ModelPrices: map[string]float64{"NVIDIA A10": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if ml := s.Rows[0]; !ml.CostKnown || ml.Cost != 2*20+1*4 {
		t.Errorf("ml's cost at 2 a GPU-hour, 1 for the A10 (20 and 4 GPU-hours): %v (known %v); want 44", ml.Cost, ml.CostKnown)
	}
}

func TestJobSummary(t *testing.T) {
	f := newFakeProm(t)
	from := time.Date(2026, 12, 4, 17, 0, 0, 0, time.UTC)
	// The job's counters exist from 17:00:30 to 17:10:30.
	f.life = `[{"metric":{},"values":[[` + fmt.Sprint(from.Add(30*time.Second).Unix()) + `,"2"],[` + fmt.Sprint(from.Add(630*time.Second).Unix()) + `,"2"]]}]`
	g1 := map[string]string{"hw_id": "GPU-01", "hw_model": "NVIDIA H200"}
	g2 := map[string]string{"hw_id": "GPU-02", "hw_model": "NVIDIA H200"}
	f.answers["held"] = vector(sample(g1, 600), sample(g2, 600))
	f.answers["busy"] = vector(sample(g1, 590), sample(g2, 0))
	f.answers["active"] = vector(sample(g1, 560), sample(g2, 0))
	f.answers["idle"] = vector(sample(g1, 0), sample(g2, 600))
	f.answers["memory"] = vector(sample(g1, 70e9), sample(g2, 0))
	f.answers["states"] = vector(sample(map[string]string{"hw_id": "GPU-01", "state": "gpu_bound"}, 600),
		sample(map[string]string{"hw_id": "GPU-02", "state": "idle"}, 600))
	f.answers["user"] = vector(sample(map[string]string{"user": "alice"}, 1))
	f.answers["nodes"] = vector(sample(map[string]string{"hw_id": "GPU-01", "node": "gpu-node-7"}, 1), sample(map[string]string{"hw_id": "GPU-02", "node": "gpu-node-7"}, 1))
	f.answers["prices"] = vector(sample(map[string]string{"hw_model": "NVIDIA H200"}, 4))
	h, _ := ParseHolder("job", "4242")
	js, err := Job(context.Background(), f.api(t), h, Options{Prometheus: f.srv.URL, From: from.Add(-7 * 24 * time.Hour), To: from.Add(time.Hour), RunbookURL: DefaultRunbookURL}, false)
	if err != nil {
		t.Fatal(err)
	}
	// The life found, one step either side: a week and an hour's search
	// at 61 s.
	if step := lifeStep(7*24*time.Hour + time.Hour); step != 61*time.Second {
		t.Errorf("the search's step over a week and an hour: %v; want 61s", step)
	}
	if !js.From.Equal(from.Add(30*time.Second-61*time.Second)) || !js.To.Equal(from.Add(630*time.Second+61*time.Second)) || js.Source != SourceRaw {
		t.Errorf("range %v to %v (%s); want the life found, 17:00:30 to 17:10:30, 61 s either side, raw counters", js.From, js.To, js.Source)
	}
	for _, q := range f.queries {
		if strings.Contains(q, "increase(") && !strings.Contains(q, `slurm_job_id="4242"`) {
			t.Errorf("a job's query without its job: %s", q)
		}
	}
	for _, format := range Formats {
		var b bytes.Buffer
		if err := js.Write(&b, format); err != nil {
			t.Fatal(err)
		}
		golden(t, "job."+format, b.String())
	}
}

// TestErrors: each failure is one line that says what to do.
func TestErrors(t *testing.T) {
	oneLine := func(name string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want one line with %q", name, err, want)
		}
	}
	ctx := context.Background()
	o := func(f *fakeProm) Options {
		return Options{Prometheus: f.srv.URL, Kind: KindNamespace, From: day0, To: day2}
	}

	down := newFakeProm(t)
	down.srv.Close()
	_, err := Run(ctx, down.api(t), o(down))
	oneLine("unreachable", err, "cannot reach Prometheus at "+down.srv.URL)

	bare := newFakeProm(t)
	bare.noRules = true
	_, err = Run(ctx, bare.api(t), o(bare))
	oneLine("no rules", err, "add deploy/prometheus/rules.yaml to its rule_files")

	// Raw counters need the diagnosis' rules only.
	half := newFakeProm(t)
	half.records = []string{recordDiagnosis}
	if _, err := Run(ctx, half.api(t), Options{Prometheus: half.srv.URL, Kind: KindNamespace, From: day0, To: day0.Add(time.Hour)}); err != nil {
		t.Errorf("an hour's report without the resampled counters' rule: %v", err)
	}
	_, err = Run(ctx, half.api(t), o(half))
	oneLine("no resampled counters", err, "no "+recordResampled)

	empty := newFakeProm(t)
	s, err := Run(ctx, empty.api(t), o(empty))
	if err != nil || len(s.Rows) != 0 {
		t.Errorf("no data: %v, %d rows; want no rows (the command says so)", err, len(s.Rows))
	}
	h, _ := ParseHolder("job", "77")
	_, err = Job(ctx, empty.api(t), h, o(empty), false)
	oneLine("unknown job", err, "no Slurm job 77 in Prometheus")
	_, err = Job(ctx, empty.api(t), h, o(empty), true)
	oneLine("a job with no data in a given range", err, "Slurm job 77 held no GPU")

	_, err = Run(ctx, empty.api(t), Options{Prometheus: empty.srv.URL, Kind: KindNamespace, From: day2, To: day0})
	oneLine("backwards", err, "is not before --to")
	_, err = Run(ctx, empty.api(t), Options{Prometheus: empty.srv.URL, Kind: KindNamespace, From: day0, To: day2, Source: "fast"})
	oneLine("bad source", err, "give auto, raw or resampled")
}

func TestSplitRange(t *testing.T) {
	c := splitRange(day0, day0.Add(50*time.Hour), 24*time.Hour)
	if len(c) != 3 || !c[2][0].Equal(day2) || !c[2][1].Equal(day0.Add(50*time.Hour)) {
		t.Errorf("chunks %v", c)
	}
}
