// Command otelcol-nvml-report reads otelcol-nvml's GPU-time accounting back
// from Prometheus: GPU-hours held, busy, active and idle per namespace, pod,
// user or Slurm job, with the cost, the peak memory and the diagnosis' advice;
// or one job's or pod's GPUs (docs/operations/report.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/otelcol-nvml/otelcol-nvml/internal/report"
)

const usage = `otelcol-nvml-report: GPU-hours, cost and advice from otelcol-nvml's data in Prometheus

  otelcol-nvml-report [--by namespace|pod|user|job] [--from -30d] [--to now] [flags]
  otelcol-nvml-report job <slurm job id> [flags]
  otelcol-nvml-report pod <namespace>/<name> [flags]

A job's or pod's summary covers its life as found in the data between --from
(default -7d) and --to; give --range to take --from and --to as they are.

Flags:
`

// modelPrices is --price-model, repeated: "MODEL=PRICE".
type modelPrices map[string]float64

func (m modelPrices) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.FormatFloat(m[k], 'f', -1, 64)
	}
	return strings.Join(parts, ",")
}

func (m modelPrices) Set(s string) error {
	i := strings.LastIndex(s, "=")
	if i <= 0 {
		return fmt.Errorf("want MODEL=PRICE, as in \"NVIDIA H200=4\"")
	}
	p, err := strconv.ParseFloat(strings.TrimSpace(s[i+1:]), 64)
	if err != nil || p < 0 {
		return fmt.Errorf("price %q: want a number of at least 0", s[i+1:])
	}
	m[strings.TrimSpace(s[:i])] = p
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, time.Now()))
}

// run is the command; its exit code: 0, 1 for a failed report, 2 for bad
// usage.
func run(args []string, stdout, stderr io.Writer, now time.Time) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "otelcol-nvml-report: "+format+"\n", a...)
		return code
	}
	var holder *report.Holder
	if len(args) > 0 && (args[0] == "job" || args[0] == "pod") {
		if len(args) < 2 || strings.HasPrefix(args[1], "-") {
			return fail(2, "%s needs its %s: otelcol-nvml-report %s %s", args[0],
				map[string]string{"job": "Slurm job id", "pod": "namespace/name"}[args[0]], args[0],
				map[string]string{"job": "1234", "pod": "ml-team/trainer-0"}[args[0]])
		}
		h, err := report.ParseHolder(args[0], args[1])
		if err != nil {
			return fail(2, "%v", err)
		}
		holder = &h
		args = args[2:]
	}
	fs := flag.NewFlagSet("otelcol-nvml-report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var (
		promURL    = fs.String("prometheus", "http://127.0.0.1:9090", "Prometheus' URL")
		by         = fs.String("by", "namespace", "group by: namespace, pod, user or job (Slurm)")
		fromFlag   = fs.String("from", "", "start: RFC 3339, a date, or relative to now (-30d, -12h); default -30d, or -7d for a job or pod")
		toFlag     = fs.String("to", "now", "end, as --from")
		fixed      = fs.Bool("range", false, "job or pod: report --from to --to as given, not the life found in it")
		format     = fs.String("format", "table", "output: table, csv, json or markdown")
		price      = fs.Float64("price", 0, "price of a GPU-hour for every model (default: the rules' nvidia_gpu_price_per_hour by model)")
		source     = fs.String("source", "auto", "counters read: raw, resampled (the rules' 5-minute series:...:5m), or auto (resampled past "+report.RawMax.String()+")")
		chunk      = fs.Duration("chunk", 24*time.Hour, "longest range one query reads; a longer report shows progress between them")
		runbook    = fs.String("runbook-url", report.DefaultRunbookURL, "the runbook the advice links to (#<state> is added)")
		timeout    = fs.Duration("timeout", 5*time.Minute, "give up after this long")
		parallel   = fs.Int("parallel", 2, "queries of a chunk sent to Prometheus at once")
		progress   = fs.String("progress", "auto", "progress lines on stderr: auto (when stderr is a terminal), always or never")
		perModel   = modelPrices{}
		priceGiven bool
	)
	fs.Var(perModel, "price-model", "price of a GPU-hour of one model, MODEL=PRICE (repeat it); before --price")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		return fail(2, "unexpected argument %q: flags go after job <id> or pod <ns>/<name>; see --help", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) { priceGiven = priceGiven || f.Name == "price" })
	if *parallel < 1 {
		return fail(2, "--parallel %d: at least 1", *parallel)
	}
	if *price < 0 {
		return fail(2, "--price %v: a price is at least 0", *price)
	}
	if fmtOK := strings.Contains(" "+strings.Join(report.Formats, " ")+" ", " "+*format+" "); !fmtOK {
		return fail(2, "--format %q: give one of %s", *format, strings.Join(report.Formats, ", "))
	}
	if *fromFlag == "" {
		*fromFlag = "-30d"
		if holder != nil {
			*fromFlag = "-7d"
		}
	}
	from, err := report.ParseTime(*fromFlag, now)
	if err != nil {
		return fail(2, "--from: %v", err)
	}
	to, err := report.ParseTime(*toFlag, now)
	if err != nil {
		return fail(2, "--to: %v", err)
	}
	kind, ok := report.Kinds[*by]
	if !ok {
		return fail(2, "--by %q: give namespace, pod, user or job", *by)
	}
	client, err := api.NewClient(api.Config{Address: *promURL})
	if err != nil {
		return fail(2, "--prometheus %q: %v", *promURL, err)
	}
	o := report.Options{
		Prometheus: *promURL, Kind: kind, From: from, To: to, Source: report.Source(*source), Chunk: *chunk,
		Price: *price, PriceSet: priceGiven, ModelPrices: perModel, RunbookURL: *runbook, Parallel: *parallel,
	}
	switch *progress {
	case "always":
		o.Progress = stderr
	case "auto":
		if f, ok := stderr.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				o.Progress = stderr
			}
		}
	case "never":
	default:
		return fail(2, "--progress %q: give auto, always or never", *progress)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	papi := v1.NewAPI(client)
	if holder != nil {
		js, err := report.Job(ctx, papi, *holder, o, *fixed)
		if err != nil {
			return fail(1, "%v", err)
		}
		if err := js.Write(stdout, *format); err != nil {
			return fail(1, "writing the report: %v", err)
		}
		return 0
	}
	s, err := report.Run(ctx, papi, o)
	if err != nil {
		return fail(1, "%v", err)
	}
	if len(s.Rows) == 0 {
		return fail(1, "no GPU was held by any %s between %s and %s in Prometheus at %s: widen --from/--to, or check that it scrapes otelcol-nvml (nvidia_gpu_held_time_seconds_total)",
			*by, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), *promURL)
	}
	if err := s.Write(stdout, *format); err != nil {
		return fail(1, "writing the report: %v", err)
	}
	return 0
}
