package report

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Holder names the one holder of a job's or pod's summary.
type Holder struct {
	// Kind is "job" (a Slurm job id) or "pod" (namespace/name).
	Kind      string
	ID        string
	Namespace string
	Name      string
}

// ParseHolder reads the argument of `job <id>` or `pod <ns>/<name>`.
func ParseHolder(kind, arg string) (Holder, error) {
	switch kind {
	case "job":
		if arg == "" || strings.ContainsAny(arg, " \t\n\"\\{}") {
			return Holder{}, fmt.Errorf("job %q: give a Slurm job id, as in: job 1234 (or job \"$SLURM_JOB_ID\")", arg)
		}
		return Holder{Kind: "job", ID: arg}, nil
	case "pod":
		ns, name, ok := strings.Cut(arg, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") || strings.ContainsAny(arg, " \t\n\"\\{}") {
			return Holder{}, fmt.Errorf("pod %q: give namespace/name, as in: pod ml-team/trainer-0", arg)
		}
		return Holder{Kind: "pod", Namespace: ns, Name: name}, nil
	}
	return Holder{}, fmt.Errorf("unknown holder kind %q: job or pod", kind)
}

func (h Holder) String() string {
	if h.Kind == "job" {
		return "Slurm job " + h.ID
	}
	return "pod " + h.Namespace + "/" + h.Name
}

// filters are the matchers that keep the holder's series.
func (h Holder) filters() (gpu, proc, diag []Matcher) {
	if h.Kind == "job" {
		m := []Matcher{{"slurm_job_id", "=", h.ID}}
		return m, m, m
	}
	m := []Matcher{{"k8s_namespace_name", "=", h.Namespace}, {"k8s_pod_name", "=", h.Name}}
	return m, m, m
}

// JobSummary is a job's or pod's figures per GPU over its life.
type JobSummary struct {
	Holder Holder
	// User is the job's user (the processes' owner, or the allocation's).
	User string
	// From and To are the range read: the holder's life as found in the
	// data, unless given.
	From, To time.Time
	*Summary
}

// Job reads the summary of one job or pod. o.From and o.To bound the search
// for its life (the range is the life within them); with FixedRange they are
// the range itself.
func Job(ctx context.Context, api v1.API, h Holder, o Options, fixedRange bool) (*JobSummary, error) {
	o.Kind = gpuKind()
	o.gpuFilter, o.procFilter, o.diagnosisFilter = h.filters()
	if !o.To.After(o.From) {
		return nil, errorf("--from (%s) is not before --to (%s): give a range forward in time", o.From.Format(time.RFC3339), o.To.Format(time.RFC3339))
	}
	from, to := o.From, o.To
	if !fixedRange {
		var err error
		from, to, err = life(ctx, api, h, o)
		if err != nil {
			return nil, err
		}
	}
	o.From, o.To = from, to
	s, err := Run(ctx, api, o)
	if err != nil {
		return nil, err
	}
	if len(s.Rows) == 0 {
		return nil, errorf("%s held no GPU between %s and %s in Prometheus at %s: check the %s, or give --from and --to around its life", h, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), o.Prometheus, map[string]string{"job": "id (sacct -j ID)", "pod": "namespace and name"}[h.Kind])
	}
	js := &JobSummary{Holder: h, From: from, To: to, Summary: s}
	if h.Kind == "job" {
		js.User, _ = jobUser(ctx, api, h, from, to)
	}
	// The node of each GPU: its Kubernetes node, else its host (host.name);
	// a summary without them still stands.
	nodes, _ := gpuNodes(ctx, api, h, from, to)
	for _, r := range s.Rows {
		if n := nodes[r.Holder["hw_id"]]; n != "" {
			r.Holder["node"] = n
		}
	}
	return js, nil
}

// gpuNodes are the node (k8s_node_name, else host_name) of each GPU the
// holder held in [from, to].
func gpuNodes(ctx context.Context, api v1.API, h Holder, from, to time.Time) (map[string]string, error) {
	gpu, proc, _ := h.filters()
	rng := promRange(to.Sub(from).Round(time.Second) + time.Second)
	q := fmt.Sprintf(`group by (hw_id, node) (label_replace(label_replace(last_over_time(%s[%s]) or last_over_time(%s[%s]), "node", "$1", "host_name", "(.+)"), "node", "$1", "k8s_node_name", "(.+)"))`,
		selector(SourceRaw.counter("held"), gpu), rng, selector(SourceRaw.counter("process_held"), proc), rng)
	val, _, err := api.Query(ctx, q, to)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if vec, ok := val.(model.Vector); ok {
		for _, s := range vec {
			out[string(s.Metric["hw_id"])] = string(s.Metric["node"])
		}
	}
	return out, nil
}

// lifeStep is the step of the search for a life over span: whole seconds,
// at most 10,000 points (Prometheus answers up to 11,000); a minute over a
// week.
func lifeStep(span time.Duration) time.Duration {
	step := (span/10000 + time.Second - 1).Truncate(time.Second)
	if step < time.Second {
		step = time.Second
	}
	return step
}

// life finds the first and last instant the holder had a GPU counter in
// [o.From, o.To], at lifeStep.
func life(ctx context.Context, api v1.API, h Holder, o Options) (time.Time, time.Time, error) {
	step := lifeStep(o.To.Sub(o.From))
	q := Query{GPUFilter: o.gpuFilter, ProcFilter: o.procFilter}
	val, _, err := api.QueryRange(ctx, q.Life(), v1.Range{Start: o.From, End: o.To, Step: step})
	if err != nil {
		return time.Time{}, time.Time{}, apiError(err, &o, "the query for "+h.String())
	}
	m, ok := val.(model.Matrix)
	var first, last time.Time
	if ok {
		for _, ss := range m {
			for _, p := range ss.Values {
				t := p.Timestamp.Time()
				if first.IsZero() || t.Before(first) {
					first = t
				}
				if t.After(last) {
					last = t
				}
			}
		}
	}
	if first.IsZero() {
		return first, last, errorf("no %s in Prometheus at %s between %s and %s: check the %s, or widen --from (the search starts at %s)", h, o.Prometheus,
			o.From.UTC().Format(time.RFC3339), o.To.UTC().Format(time.RFC3339), map[string]string{"job": "id (sacct -j ID)", "pod": "namespace and name"}[h.Kind], o.From.UTC().Format(time.RFC3339))
	}
	// One step either side: the counters' increase over the edges of the
	// life is read whole, and outside it they do not move.
	first = first.Add(-step)
	if first.Before(o.From) {
		first = o.From
	}
	last = last.Add(step)
	if last.After(o.To) {
		last = o.To
	}
	return first, last, nil
}

// jobUser is the user a job's series name.
func jobUser(ctx context.Context, api v1.API, h Holder, from, to time.Time) (string, error) {
	gpu, proc, _ := h.filters()
	rng := promRange(to.Sub(from).Round(time.Second) + time.Second)
	q := fmt.Sprintf(`group by (user) (label_replace(label_replace(last_over_time(%s[%s]) or last_over_time(%s[%s]), "user", "$1", "user_name", "(.+)"), "user", "$1", "process_owner", "(.+)"))`,
		selector(SourceRaw.counter("held"), gpu), rng, selector(SourceRaw.counter("process_held"), proc), rng)
	val, _, err := api.Query(ctx, q, to)
	if err != nil {
		return "", err
	}
	var users []string
	if vec, ok := val.(model.Vector); ok {
		for _, s := range vec {
			if u := string(s.Metric["user"]); u != "" {
				users = append(users, u)
			}
		}
	}
	return strings.Join(users, ","), nil
}
