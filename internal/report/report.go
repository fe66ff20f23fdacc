// Package report reads the GPU-time accounting of otelcol-nvml back from
// Prometheus (its HTTP API, through client_golang) into per-holder summaries
// (otelcol-nvml-report; docs/operations/report.md).
package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// RawMax is the longest range that auto reads from the raw counters: past
// it, the 5-minute resamples (a day of raw counters at a 10 s scrape is
// 8,640 samples a series; of the resamples, 288).
const RawMax = 6 * time.Hour

// Records the report needs from deploy/prometheus/rules.yaml.
const (
	recordDiagnosis = "gpu_holder:nvidia_gpu_diagnosis:5m"
	recordResampled = "series:nvidia_gpu_held_time_seconds_total:5m"
)

// Options are one report's.
type Options struct {
	// Prometheus is the server's URL, for the messages.
	Prometheus string
	Kind       Kind
	From, To   time.Time
	Source     Source
	// Chunk is the longest range one query reads (a day): a long report
	// is a query per chunk, summed, with progress between them.
	Chunk time.Duration
	// Price is the price of a GPU-hour of every model, when PriceSet;
	// ModelPrices by model (hw_model) come first. Without either, the
	// rules' nvidia_gpu_price_per_hour by model.
	Price       float64
	PriceSet    bool
	ModelPrices map[string]float64
	// RunbookURL is the runbook the advice links to (#<state> is added).
	RunbookURL string
	// Progress, when not nil, gets a line per chunk of a report of more
	// than one.
	Progress io.Writer
	// Parallel is how many of a chunk's queries run at once (1 when 0).
	Parallel int

	// A holder's summary: its series only (see JobOptions).
	gpuFilter, procFilter, diagnosisFilter []Matcher
}

// Row is one holder's figures over the range. Times are in seconds.
type Row struct {
	Holder                   map[string]string
	Held, Busy, Active, Idle float64
	// HasActive: some GPU of the holder has an active-time figure (GPM);
	// without it, efficiency is busy over held.
	HasActive bool
	// Cost at the price of each GPU-hour's model; CostKnown is false when
	// some held time's model has no price.
	Cost      float64
	CostKnown bool
	// PeakMemory is the most memory in use on one GPU of the holder, in
	// bytes; HasMemory is false when there was no memory figure.
	PeakMemory float64
	HasMemory  bool
	// States is each diagnosis state's share of the holder's diagnosed
	// time; State is the largest.
	States map[string]float64
	State  string

	costMissing bool
	stateCounts map[string]float64
}

// Efficiency is active (busy without an active figure) over held time.
func (r Row) Efficiency() float64 {
	if r.Held <= 0 {
		return 0
	}
	if r.HasActive {
		return r.Active / r.Held
	}
	return r.Busy / r.Held
}

// Summary is a report's result.
type Summary struct {
	Kind       Kind
	From, To   time.Time
	Source     Source
	Chunks     int
	RunbookURL string
	Rows       []Row
}

// Error is a report's failure, one line that says what to do.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func errorf(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// apiError turns a failed API call into one line.
func apiError(err error, o *Options, what string) error {
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) {
		return errorf("cannot reach Prometheus at %s (%v): start it, or point --prometheus at it", o.Prometheus, rootCause(err))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errorf("Prometheus at %s did not answer in time (%s): try a shorter range, or a larger --timeout", o.Prometheus, what)
	}
	return errorf("Prometheus at %s failed %s: %v", o.Prometheus, what, oneLine(err.Error()))
}

func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// resolve fills the defaults of o.
func (o *Options) resolve() error {
	if !o.To.After(o.From) {
		return errorf("--from (%s) is not before --to (%s): give a range forward in time", o.From.Format(time.RFC3339), o.To.Format(time.RFC3339))
	}
	if o.Chunk <= 0 {
		o.Chunk = 24 * time.Hour
	}
	switch o.Source {
	case "", SourceAuto:
		o.Source = SourceRaw
		if o.To.Sub(o.From) > RawMax {
			o.Source = SourceResampled
		}
	case SourceRaw, SourceResampled:
	default:
		return errorf("--source %q: give auto, raw or resampled", o.Source)
	}
	return nil
}

// checkRules fails when the Prometheus has not loaded the records the
// report reads. A server without the rules API (a remote store) is taken
// at its word.
func checkRules(ctx context.Context, api v1.API, o *Options) error {
	res, err := api.Rules(ctx, nil)
	if err != nil {
		var ae *v1.Error
		if errors.As(err, &ae) {
			return nil
		}
		return apiError(err, o, "the rules")
	}
	have := map[string]bool{}
	for _, g := range res.Groups {
		for _, r := range g.Rules {
			if rr, ok := r.(v1.RecordingRule); ok {
				have[rr.Name] = true
			}
		}
	}
	need := []string{recordDiagnosis}
	if o.Source == SourceResampled {
		need = append(need, recordResampled)
	}
	for _, n := range need {
		if !have[n] {
			return errorf("Prometheus at %s has not loaded otelcol-nvml's recording rules (no %s): add deploy/prometheus/rules.yaml to its rule_files and reload it", o.Prometheus, n)
		}
	}
	return nil
}

// Run reads the report of o from api.
func Run(ctx context.Context, api v1.API, o Options) (*Summary, error) {
	if err := o.resolve(); err != nil {
		return nil, err
	}
	if err := checkRules(ctx, api, &o); err != nil {
		return nil, err
	}
	prices, err := o.prices(ctx, api)
	if err != nil {
		return nil, err
	}
	q := Query{Kind: o.Kind, Source: o.Source, GPUFilter: o.gpuFilter, ProcFilter: o.procFilter, DiagnosisFilter: o.diagnosisFilter}
	rows := map[string]*Row{}
	row := func(m model.Metric) *Row {
		key := make([]string, len(o.Kind.Labels))
		for i, l := range o.Kind.Labels {
			key[i] = string(m[model.LabelName(l)])
		}
		k := strings.Join(key, "\x00")
		r := rows[k]
		if r == nil {
			r = &Row{Holder: map[string]string{}, stateCounts: map[string]float64{}}
			for i, l := range o.Kind.Labels {
				r.Holder[l] = key[i]
			}
			rows[k] = r
		}
		return r
	}
	chunks := splitRange(o.From, o.To, o.Chunk)
	began := time.Now()
	for i, c := range chunks {
		rng := c[1].Sub(c[0])
		at := c[1]
		steps := []struct {
			what, query string
			add         func(r *Row, m model.Metric, v float64)
		}{
			{"held time", q.Counter("held", rng, true), func(r *Row, m model.Metric, v float64) {
				r.Held += v
				if p, ok := prices.lookup(string(m["hw_model"])); ok {
					r.Cost += v / 3600 * p
				} else if v > 0 {
					r.costMissing = true
				}
			}},
			{"busy time", q.Counter("busy", rng, false), func(r *Row, _ model.Metric, v float64) { r.Busy += v }},
			{"active time", q.Counter("active", rng, false), func(r *Row, _ model.Metric, v float64) { r.Active += v; r.HasActive = true }},
			{"idle time", q.Counter("idle", rng, false), func(r *Row, _ model.Metric, v float64) { r.Idle += v }},
			{"peak memory", q.Memory(rng), func(r *Row, _ model.Metric, v float64) {
				r.PeakMemory = math.Max(r.PeakMemory, v)
				r.HasMemory = true
			}},
			{"diagnosis", q.States(rng), func(r *Row, m model.Metric, v float64) { r.stateCounts[string(m["state"])] += v }},
		}
		// The chunk's queries run Parallel at a time; their answers add up
		// in order.
		type answer struct {
			val model.Value
			err error
		}
		answers := make([]answer, len(steps))
		sem := make(chan struct{}, max(o.Parallel, 1))
		var wg sync.WaitGroup
		for j, s := range steps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				val, _, err := api.Query(ctx, s.query, at)
				answers[j] = answer{val, err}
			}()
		}
		wg.Wait()
		for j, s := range steps {
			val, err := answers[j].val, answers[j].err
			if err != nil {
				return nil, apiError(err, &o, "the "+s.what+" query")
			}
			vec, ok := val.(model.Vector)
			if !ok {
				return nil, errorf("Prometheus at %s answered the %s query with a %s, not a vector: is it a Prometheus?", o.Prometheus, s.what, val.Type())
			}
			for _, smp := range vec {
				v := float64(smp.Value)
				if math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				s.add(row(smp.Metric), smp.Metric, v)
			}
		}
		if o.Progress != nil && len(chunks) > 1 {
			fmt.Fprintf(o.Progress, "report: %d/%d  %s to %s  (%.1f s)\n", i+1, len(chunks),
				c[0].UTC().Format(time.RFC3339), c[1].UTC().Format(time.RFC3339), time.Since(began).Seconds())
		}
	}
	s := &Summary{Kind: o.Kind, From: o.From, To: o.To, Source: o.Source, Chunks: len(chunks), RunbookURL: o.RunbookURL}
	for _, r := range rows {
		r.finish()
		// A holder with states or memory but no held time is outside the
		// range's accounting (a diagnosis of its last minutes): no row.
		if r.Held <= 0 && r.Busy <= 0 {
			continue
		}
		s.Rows = append(s.Rows, *r)
	}
	sort.Slice(s.Rows, func(i, j int) bool {
		a, b := s.Rows[i], s.Rows[j]
		if a.Held != b.Held {
			return a.Held > b.Held
		}
		return holderKey(o.Kind, a) < holderKey(o.Kind, b)
	})
	return s, nil
}

func holderKey(k Kind, r Row) string {
	parts := make([]string, len(k.Labels))
	for i, l := range k.Labels {
		parts[i] = r.Holder[l]
	}
	return strings.Join(parts, "\x00")
}

func (r *Row) finish() {
	r.CostKnown = !r.costMissing
	total := 0.0
	for _, v := range r.stateCounts {
		total += v
	}
	if total > 0 {
		r.States = map[string]float64{}
		best := -1.0
		for _, st := range sortedKeys(r.stateCounts) {
			v := r.stateCounts[st]
			r.States[st] = v / total
			// Ties go to the more actionable state (stateOrder).
			if v > best || (v == best && stateRank(st) < stateRank(r.State)) {
				best, r.State = v, st
			}
		}
	}
}

// splitRange cuts [from, to] into chunks of at most chunk, from the start.
func splitRange(from, to time.Time, chunk time.Duration) [][2]time.Time {
	var out [][2]time.Time
	for s := from; s.Before(to); s = s.Add(chunk) {
		e := s.Add(chunk)
		if e.After(to) {
			e = to
		}
		out = append(out, [2]time.Time{s, e})
	}
	return out
}

// priceTable is the price of a GPU-hour by model: --price-model's, then
// --price for every model, then the rules' records
// (nvidia_gpu_price_per_hour).
type priceTable struct {
	models, recorded map[string]float64
	all              float64
	allSet           bool
}

func (p priceTable) lookup(hwModel string) (float64, bool) {
	if v, ok := p.models[hwModel]; ok {
		return v, true
	}
	if p.allSet {
		return p.all, true
	}
	v, ok := p.recorded[hwModel]
	return v, ok
}

func (o *Options) prices(ctx context.Context, api v1.API) (priceTable, error) {
	p := priceTable{models: o.ModelPrices, all: o.Price, allSet: o.PriceSet, recorded: map[string]float64{}}
	if o.PriceSet {
		return p, nil
	}
	rng := o.To.Sub(o.From)
	if rng < 24*time.Hour {
		rng = 24 * time.Hour // the records are written by the 24h group
	}
	val, _, err := api.Query(ctx, Prices(rng), o.To)
	if err != nil {
		return p, apiError(err, o, "the price query")
	}
	if vec, ok := val.(model.Vector); ok {
		for _, s := range vec {
			p.recorded[string(s.Metric["hw_model"])] = float64(s.Value)
		}
	}
	return p, nil
}
