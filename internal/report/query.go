package report

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Source is which accounting counters a report reads: the raw ones the
// collector exports (every scrape), or the rules' 5-minute resamples of them
// (series:...:5m, deploy/prometheus/rules.yaml), 30 times fewer samples at a
// 10 s scrape, for long ranges.
type Source string

const (
	SourceAuto      Source = "auto"
	SourceRaw       Source = "raw"
	SourceResampled Source = "resampled"
)

// counter is the name of an accounting counter in the source.
func (s Source) counter(metric string) string {
	name := "nvidia_gpu_" + metric + "_time_seconds_total"
	if s == SourceResampled {
		return "series:" + name + ":5m"
	}
	return name
}

// Kind is what a report groups by: its output labels, and where each comes
// from on a GPU's own series and on a GPU process's series.
type Kind struct {
	Name string
	// Labels are the holder's labels in the output, in column order.
	Labels []string
	// GPU and Proc name, for each of Labels, the label it is read from on
	// the GPU's own series (the kubelet's or Slurm's allocation) and on its
	// processes' series; "" where that side has none.
	GPU, Proc []string
	// Require are the labels that must not be empty for a series to count
	// on each side (the holder's key).
	RequireGPU, RequireProc []string
	// Diagnosis names, for each of Labels, the labels of
	// gpu_holder:nvidia_gpu_diagnosis:5m it is read from, first non-empty
	// wins.
	Diagnosis [][]string
}

// The kinds of --by.
var (
	KindNamespace = Kind{
		Name: "namespace", Labels: []string{"k8s_namespace_name"},
		GPU: []string{"k8s_namespace_name"}, Proc: []string{"k8s_namespace_name"},
		RequireGPU: []string{"k8s_namespace_name"}, RequireProc: []string{"k8s_namespace_name"},
		Diagnosis: [][]string{{"k8s_namespace_name"}},
	}
	KindPod = Kind{
		Name: "pod", Labels: []string{"k8s_namespace_name", "k8s_pod_name"},
		GPU: []string{"k8s_namespace_name", "k8s_pod_name"}, Proc: []string{"k8s_namespace_name", "k8s_pod_name"},
		RequireGPU: []string{"k8s_pod_name"}, RequireProc: []string{"k8s_pod_name"},
		Diagnosis: [][]string{{"k8s_namespace_name"}, {"k8s_pod_name"}},
	}
	// A user is a process's owner, or the user a Slurm job's allocation
	// names on the GPU's own series (user_name).
	KindUser = Kind{
		Name: "user", Labels: []string{"user"},
		GPU: []string{"user_name"}, Proc: []string{"process_owner"},
		RequireGPU: []string{"user_name"}, RequireProc: []string{"process_owner"},
		Diagnosis: [][]string{{"process_owner", "user_name"}},
	}
	KindJob = Kind{
		Name: "job", Labels: []string{"slurm_job_id", "user"},
		GPU: []string{"slurm_job_id", "user_name"}, Proc: []string{"slurm_job_id", "process_owner"},
		RequireGPU: []string{"slurm_job_id"}, RequireProc: []string{"slurm_job_id"},
		Diagnosis: [][]string{{"slurm_job_id"}, {"process_owner", "user_name"}},
	}
)

// Kinds are the kinds of --by, by name.
var Kinds = map[string]Kind{"namespace": KindNamespace, "pod": KindPod, "user": KindUser, "job": KindJob}

// gpuKind groups one holder's figures by GPU (a job's or pod's summary):
// filter narrows every series to the holder. The GPU's node is read apart
// (nodes), so that a diagnosis without the host's label still meets its GPU.
func gpuKind() Kind {
	return Kind{
		Name: "gpu", Labels: []string{"hw_id"},
		GPU: []string{"hw_id"}, Proc: []string{"hw_id"},
		Diagnosis: [][]string{{"hw_id"}},
	}
}

// Query builds the PromQL of one report: its figures over one range ending
// at the query's evaluation time.
type Query struct {
	Kind   Kind
	Source Source
	// GPUFilter and ProcFilter are extra matchers on the GPU's and the
	// processes' series (a job's summary: slurm_job_id="42").
	GPUFilter, ProcFilter []Matcher
	// DiagnosisFilter narrows the diagnosis series the same way.
	DiagnosisFilter []Matcher
}

// Matcher is one label matcher: Label Op "Value" (Op is =, !=, =~ or !~).
type Matcher struct{ Label, Op, Value string }

func (m Matcher) String() string { return m.Label + m.Op + quote(m.Value) }

// quote writes a PromQL string literal.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func selector(metric string, ms []Matcher) string {
	if len(ms) == 0 {
		return metric
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return metric + "{" + strings.Join(parts, ", ") + "}"
}

func notEmpty(labels []string, more []Matcher) []Matcher {
	var ms []Matcher
	for _, l := range labels {
		ms = append(ms, Matcher{l, "!=", ""})
	}
	return append(ms, more...)
}

// promRange writes a range as PromQL does, in whole milliseconds.
func promRange(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

func uniq(ls ...[]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range ls {
		for _, s := range l {
			if s != "" && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// renamed wraps expr in the label_replace calls that copy each source label
// into the kind's output label of the same position.
func (q Query) renamed(expr string, from []string) string {
	for i, out := range q.Kind.Labels {
		if from[i] != "" && from[i] != out {
			expr = fmt.Sprintf(`label_replace(%s, %s, "$1", %s, "(.*)")`, expr, quote(out), quote(from[i]))
		}
	}
	return expr
}

func tagged(expr, source string) string {
	return fmt.Sprintf(`label_replace(%s, "source", %s, "", "")`, expr, quote(source))
}

// migParents are the GPUs in MIG mode over the range: their own series are
// left out, their MIG devices count (as the rules do).
func (q Query) migParents(rng string) string {
	return fmt.Sprintf(`group by (hw_id) (label_replace(last_over_time(%s{hw_parent!=""}[%s]), "hw_id", "$1", "hw_parent", "(.+)"))`,
		q.Source.counter("held"), rng)
}

func (q Query) gpuLabels() []string  { return uniq([]string{"hw_id", "hw_model"}, q.Kind.GPU) }
func (q Query) procLabels() []string { return uniq([]string{"hw_id", "hw_model"}, q.Kind.Proc) }

// Counter is the increase of one accounting counter (held, busy, active or
// idle) per holder over rng, in seconds. On each GPU the holder's figure is
// the larger of its GPU's own series (allocated to it) and its processes'
// (their held time added up and capped at the GPU's, their busy and idle
// time added up), as the rules' gpu_pod records read it. A process has no active time: its
// share of the GPU's is its busy time times the GPU's active over busy time,
// or its busy time on a GPU without an active figure. byModel keeps hw_model
// in the result (held time, for the price).
func (q Query) Counter(metric string, rng time.Duration, byModel bool) string {
	r := promRange(rng)
	gpuSel := selector(q.Source.counter(metric), notEmpty(q.Kind.RequireGPU, q.GPUFilter))
	gpu := fmt.Sprintf("sum by (%s) (increase(%s[%s]) unless on (hw_id) %s)",
		strings.Join(q.gpuLabels(), ", "), gpuSel, r, q.migParents(r))
	procBy := strings.Join(q.procLabels(), ", ")
	var proc string
	switch metric {
	case "held":
		// A holder's processes on a GPU, one after another (a new process
		// is a new series), add up; at the same time they overlap. Their
		// sum, capped at the GPU's own held time over the range (anyone's),
		// counts both; the longest one alone (the rules' 1h figure) would
		// miss every process of the day but one.
		sum := fmt.Sprintf("sum by (%s) (increase(%s[%s]))", procBy,
			selector(q.Source.counter("process_held"), notEmpty(q.Kind.RequireProc, q.ProcFilter)), r)
		gpuHeld := fmt.Sprintf("sum by (hw_id) (increase(%s[%s]))", q.Source.counter("held"), r)
		proc = fmt.Sprintf("((%s < on (hw_id) group_left () %s) or (%s * 0 + on (hw_id) group_left () %s) or %s)", sum, gpuHeld, sum, gpuHeld, sum)
	case "busy", "idle":
		proc = fmt.Sprintf("sum by (%s) (increase(%s[%s]))", procBy,
			selector(q.Source.counter("process_"+metric), notEmpty(q.Kind.RequireProc, q.ProcFilter)), r)
	case "active":
		busy := fmt.Sprintf("sum by (%s) (increase(%s[%s]))", procBy,
			selector(q.Source.counter("process_busy"), notEmpty(q.Kind.RequireProc, q.ProcFilter)), r)
		ratio := fmt.Sprintf("(sum by (hw_id) (increase(%s[%s])) / (sum by (hw_id) (increase(%s[%s])) > 0))",
			q.Source.counter("active"), r, q.Source.counter("busy"), r)
		proc = fmt.Sprintf("(%s * on (hw_id) group_left () %s or %s)", busy, ratio, busy)
	default:
		panic("report: no counter " + metric)
	}
	out := q.Kind.Labels
	if byModel {
		out = append([]string{"hw_model"}, out...)
	}
	return fmt.Sprintf("sum by (%s) (max by (%s) (%s or %s))",
		strings.Join(out, ", "), strings.Join(uniq([]string{"hw_id", "hw_model"}, q.Kind.Labels), ", "),
		tagged(q.renamed(gpu, q.Kind.GPU), "gpu"), tagged(q.renamed(proc, q.Kind.Proc), "process"))
}

// Memory is the most memory in use on one GPU of the holder over rng, in
// bytes: the GPU's own figure where the GPU is allocated to it, else its
// processes' largest.
func (q Query) Memory(rng time.Duration) string {
	r := promRange(rng)
	gpu := fmt.Sprintf("max by (%s) (max_over_time(%s[%s]))", strings.Join(uniq([]string{"hw_id"}, q.Kind.GPU), ", "),
		selector("hw_gpu_memory_usage_bytes", notEmpty(q.Kind.RequireGPU, q.GPUFilter)), r)
	proc := fmt.Sprintf("max by (%s) (max_over_time(%s[%s]))", strings.Join(uniq([]string{"hw_id"}, q.Kind.Proc), ", "),
		selector("nvidia_gpu_process_memory_usage_bytes", notEmpty(q.Kind.RequireProc, q.ProcFilter)), r)
	return fmt.Sprintf("max by (%s) (%s or %s)", strings.Join(q.Kind.Labels, ", "),
		tagged(q.renamed(gpu, q.Kind.GPU), "gpu"), tagged(q.renamed(proc, q.Kind.Proc), "process"))
}

// States counts the diagnosis' evaluations in each state per holder over
// rng (gpu_holder:nvidia_gpu_diagnosis:5m is 1 in the holder's state, 0 in
// the others): the share of the held time in each state.
func (q Query) States(rng time.Duration) string {
	expr := fmt.Sprintf("sum_over_time(%s[%s])", selector("gpu_holder:nvidia_gpu_diagnosis:5m", q.DiagnosisFilter), promRange(rng))
	for i, out := range q.Kind.Labels {
		// The last listed is applied first: the first non-empty wins.
		srcs := q.Kind.Diagnosis[i]
		for j := len(srcs) - 1; j >= 0; j-- {
			if srcs[j] != out {
				expr = fmt.Sprintf(`label_replace(%s, %s, "$1", %s, "(.+)")`, expr, quote(out), quote(srcs[j]))
			}
		}
	}
	return fmt.Sprintf("sum by (%s) (%s) > 0", strings.Join(append(append([]string(nil), q.Kind.Labels...), "state"), ", "), expr)
}

// Prices is the price of a GPU-hour by model that the rules record
// (nvidia_gpu_price_per_hour), the last one in rng.
func Prices(rng time.Duration) string {
	return fmt.Sprintf("max by (hw_model) (last_over_time(nvidia_gpu_price_per_hour[%s]))", promRange(rng))
}

// Life is the number of the holder's counter series at each instant: where
// it is above zero, the holder held a GPU (its life, for a job's summary).
func (q Query) Life() string {
	return fmt.Sprintf("count(%s or %s)",
		selector(SourceRaw.counter("held"), q.GPUFilter), selector(SourceRaw.counter("process_held"), q.ProcFilter))
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
