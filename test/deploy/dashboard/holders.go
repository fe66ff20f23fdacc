package dashboard

import (
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/table"
)

// The recording rules of group otelcol-nvml-holders (and the waste group's
// efficiency) that the Holders row reads.
const (
	namespaceQuota     = "namespace:nvidia_gpu_quota_gpus:hard"
	namespaceAllocated = "namespace:nvidia_gpu_allocated_gpus:5m"
	namespaceHeld      = "namespace:nvidia_gpu_held_gpus:5m"
	namespaceActive    = "namespace:nvidia_gpu_active_gpus:5m"
	namespaceQuotaUsed = "namespace:nvidia_gpu_quota_held:ratio"
	namespaceEff       = "namespace:nvidia_gpu_efficiency:1h"
	userHeldGPUs       = "user:nvidia_gpu_held_gpus:5m"
	userMemory         = "user:nvidia_gpu_process_memory_usage_bytes:sum"
	userHeldHours      = "user:nvidia_gpu_held_hours:1h"
	userBusyHours      = "user:nvidia_gpu_busy_hours:1h"
	userIdleHours1h    = "user:nvidia_gpu_idle_hours:1h"
	userActiveHours    = "user:nvidia_gpu_active_hours:1h"
	userHeldHours24h   = "user:nvidia_gpu_held_hours:24h"
	userIdleHours24h   = "user:nvidia_gpu_idle_hours:24h"
	userIdleCost24h    = "user:nvidia_gpu_idle_cost:24h"
	jobHeldGPUs        = "slurm_job:nvidia_gpu_held_gpus:5m"
	jobMemory          = "slurm_job:nvidia_gpu_process_memory_usage_bytes:sum"
	jobHeldHours       = "slurm_job:nvidia_gpu_held_hours:1h"
	jobActiveHours     = "slurm_job:nvidia_gpu_active_hours:1h"
	jobIdleHours       = "slurm_job:nvidia_gpu_idle_hours:1h"
	jobBusyHours       = "slurm_job:nvidia_gpu_busy_hours:1h"
	jobHeldHours24h    = "slurm_job:nvidia_gpu_held_hours:24h"
	jobIdleHours24h    = "slurm_job:nvidia_gpu_idle_hours:24h"
	jobIdleCost24h     = "slurm_job:nvidia_gpu_idle_cost:24h"
	jobSelector        = `slurm_job_id=~"$slurm_job"`
)

// holdersRow is who holds the GPUs beyond pods: namespaces against their
// GPU quota, users, Slurm jobs, and the chargeback table over the
// dashboard's time range.
func holdersRow(b *dashboard.DashboardBuilder, ds common.DataSourceRef) *dashboard.DashboardBuilder {
	return b.WithRow(dashboard.NewRowBuilder("Holders: quotas, users, Slurm jobs, chargeback")).
		WithPanel(joined(ds, "GPU quota per namespace: how much of it does work", 12,
			"Per namespace: its GPU quota (kube-state-metrics' kube_resourcequota, hard, where it is scraped), the GPUs allocated to its pods, held by them (allocated, or used by their processes), active (activity at or above the idle threshold) in the last 5 minutes, held over quota, and active over held GPU-hours over the trailing hour.",
			[]string{"k8s_namespace_name"},
			[]string{"Namespace"},
			[]string{"Quota", "Allocated", "Held", "Active", "Held of quota", "Active of held (1h)"},
			namespaceQuota, namespaceAllocated, namespaceHeld, namespaceActive, namespaceQuotaUsed, namespaceEff)).
		WithPanel(joined(ds, "Users: GPUs and memory held now, GPU-hours in the trailing hour and day", 12,
			"Per user (process.owner: the name from the host's passwd or NSS, the uid where neither knows it; for a GPU allocated to a Slurm job, the job's user): GPUs their processes or their jobs' allocations held in the last 5 minutes, GPU memory they hold now, held, busy, idle and active GPU-hours over the trailing hour, and held and idle GPU-hours and the idle cost over the trailing 24 hours.",
			[]string{"process_owner"},
			[]string{"User"},
			[]string{"GPUs held", "Memory", "Held (h)", "Busy (h)", "Idle (h)", "Active (h)", "Held (24h)", "Idle (24h)", "Idle cost (24h)"},
			userHeldGPUs, userMemory, userHeldHours, userBusyHours, userIdleHours1h, userActiveHours,
			userHeldHours24h, userIdleHours24h, userIdleCost24h)).
		WithPanel(joined(ds, "Slurm jobs: GPUs and memory held now, GPU-hours in the trailing hour and day", 12,
			"Per Slurm job (slurm.job.id, from its processes' cgroups and the allocation files: a GPU allocated to the job counts, with a process or not) and its user: GPUs held in the last 5 minutes, GPU memory held now, held, busy, active and idle GPU-hours over the trailing hour, and held and idle GPU-hours and the idle cost over the trailing 24 hours; the Slurm job variable filters it.",
			[]string{"slurm_job_id", "process_owner"},
			[]string{"Job", "User"},
			[]string{"GPUs held", "Memory", "Held (h)", "Busy (h)", "Active (h)", "Idle (h)", "Held (24h)", "Idle (24h)", "Idle cost (24h)"},
			jobHeldGPUs+`{`+jobSelector+`}`, jobMemory+`{`+jobSelector+`}`, jobHeldHours+`{`+jobSelector+`}`,
			jobBusyHours+`{`+jobSelector+`}`, jobActiveHours+`{`+jobSelector+`}`, jobIdleHours+`{`+jobSelector+`}`,
			jobHeldHours24h+`{`+jobSelector+`}`, jobIdleHours24h+`{`+jobSelector+`}`, jobIdleCost24h+`{`+jobSelector+`}`)).
		WithPanel(chargebackTable(ds))
}

// joined is a table of instant queries that share the labels by, one row
// per value of them: the merge transformation joins the queries' rows on
// those labels, and organize names the columns (byNames for the labels,
// valueNames for the queries in order).
func joined(ds common.DataSourceRef, title string, width uint32, description string, by, byNames, valueNames []string, exprs ...string) *table.PanelBuilder {
	qs := make([]*prometheus.DataqueryBuilder, len(exprs))
	for i, e := range exprs {
		qs[i] = query(`max by (`+strings.Join(by, ", ")+`) (`+e+`)`, "").Instant().Format(prometheus.PromQueryFormatTable)
	}
	index, rename := map[string]int{}, map[string]string{}
	for i, l := range by {
		index[l], rename[l] = i, byNames[i]
	}
	for i, name := range valueNames {
		col := "Value #" + string(rune('A'+i))
		index[col], rename[col] = len(by)+i, name
	}
	return tablePanel(ds, title, width, description, qs...).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true},
			"indexByName":   index,
			"renameByName":  rename,
		}})
}

// migParentsNow is the GPUs with a MIG device now: their own counters
// count their MIG devices' holders, so the chargeback leaves them out.
const migParentsNow = `group by (hw_id) (label_replace(nvidia_gpu_held_time_seconds_total{hw_parent!=""}, "hw_id", "$1", "hw_parent", "(.+)"))`

// holderKind is one kind of holder of the chargeback table: the label that
// names it, the matcher its series need, and whether its figures come from
// the GPU's own series (namespaces) or the processes' (users, jobs).
type holderKind struct {
	kind, label, matcher string
	fromGPU              bool
}

var chargebackKinds = []holderKind{
	{kind: "namespace", label: "k8s_namespace_name", matcher: `k8s_pod_name!=""`, fromGPU: true},
	{kind: "user", label: "process_owner", matcher: `process_owner!=""`},
	{kind: "slurm job", label: "slurm_job_id", matcher: `slurm_job_id!=""`},
}

// increaseOver is the increase of a counter over the dashboard's range.
func increaseOver(metric, matcher string) string {
	return `increase(` + metric + `{` + matcher + `}[$__range])`
}

// perGPU is a holder's seconds of one figure on each GPU (by node, GPU,
// model and the holder's label), as the waste rules count them: held once
// per GPU (max over its processes), busy and idle summed over them, active
// the GPU's own (for processes: split as the busy time is, busy without
// GPM).
func (h holderKind) perGPU(figure string) string {
	by := "k8s_node_name, hw_id, hw_model, " + h.label
	gpuBy := "k8s_node_name, hw_id, hw_model"
	if h.fromGPU {
		own := `sum by (` + by + `) (` + increaseOver("nvidia_gpu_"+figure+"_time_seconds_total", h.matcher) + ` unless on (hw_id) ` + migParentsNow + `)`
		if figure == "active" {
			return own
		}
		agg := "sum"
		if figure == "held" {
			agg = "max"
		}
		procs := agg + ` by (` + by + `) (` + increaseOver("nvidia_gpu_process_"+figure+"_time_seconds_total", h.matcher) + `)`
		return `max by (` + by + `) (label_replace(` + own + `, "source", "gpu", "", "") or label_replace(` + procs + `, "source", "process", "", ""))`
	}
	// A GPU allocated to a Slurm job (its own series carry slurm_job_id and
	// user_name) counts whole for the job and its user, process or not;
	// the processes count on the other GPUs.
	allocated := func(figure string) string {
		return `sum by (` + by + `) (label_replace(` + increaseOver("nvidia_gpu_"+figure+"_time_seconds_total", `slurm_job_id!="", user_name!=""`) +
			` unless on (hw_id) ` + migParentsNow + `, "process_owner", "$1", "user_name", "(.+)")) or on (k8s_node_name, hw_id, ` + h.label + `) `
	}
	switch figure {
	case "held":
		return `(` + allocated(figure) + `max by (` + by + `) (` + increaseOver("nvidia_gpu_process_held_time_seconds_total", h.matcher) + `))`
	case "active":
		busy := h.perGPU("busy")
		ratio := `(sum by (` + gpuBy + `) (` + increaseOver("nvidia_gpu_active_time_seconds_total", `hw_id!=""`) + `) / (sum by (` + gpuBy + `) (` + increaseOver("nvidia_gpu_busy_time_seconds_total", `hw_id!=""`) + `) > 0))`
		return `(` + busy + ` * on (` + gpuBy + `) group_left () ` + ratio + ` or ` + busy + `)`
	default:
		return `(` + allocated(figure) + `sum by (` + by + `) (` + increaseOver("nvidia_gpu_process_"+figure+"_time_seconds_total", h.matcher) + `))`
	}
}

// chargebackExpr is one column of the chargeback table: each kind's
// holders, as (kind, holder) rows, in GPU-hours or, with cost, in the
// price of the GPUs' models.
func chargebackExpr(figure string, cost bool) string {
	parts := make([]string, len(chargebackKinds))
	for i, h := range chargebackKinds {
		e := h.perGPU(figure) + ` / 3600`
		if cost {
			e = `(` + e + `) * on (hw_model) group_left () nvidia_gpu_price_per_hour`
		}
		parts[i] = `sum by (kind, holder) (label_replace(label_replace(` + e + `, "holder", "$1", "` + h.label + `", "(.+)"), "kind", "` + h.kind + `", "", ""))`
	}
	return strings.Join(parts, "\nor\n")
}

// chargebackTable is GPU-hours held, active and idle, and the cost of the
// held ones, per namespace, user and Slurm job over the dashboard's time
// range: a plain table of instant queries over $__range, merged on (kind,
// holder), which Grafana's table inspector downloads as CSV.
func chargebackTable(ds common.DataSourceRef) *table.PanelBuilder {
	instant := func(expr string) *prometheus.DataqueryBuilder {
		return query(expr, "").Instant().Format(prometheus.PromQueryFormatTable)
	}
	return tablePanel(ds, "Chargeback: GPU-hours and cost over the time range", 24,
		"Per namespace, user and Slurm job, over the dashboard's time range: GPU-hours held, active (busy where the GPU has no GPM) and idle, and the cost of the held hours at the model's hourly price (the chart's prometheusRule.waste.pricePerHour). Export: the panel menu, Inspect, Data, Download CSV.",
		instant(chargebackExpr("held", false)),
		instant(chargebackExpr("active", false)),
		instant(chargebackExpr("idle", false)),
		instant(chargebackExpr("held", true)),
	).Decimals(2).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true},
			"indexByName":   map[string]int{"kind": 0, "holder": 1, "Value #A": 2, "Value #B": 3, "Value #C": 4, "Value #D": 5},
			"renameByName": map[string]string{"kind": "Kind", "holder": "Holder", "Value #A": "Held (GPU-h)",
				"Value #B": "Active (GPU-h)", "Value #C": "Idle (GPU-h)", "Value #D": "Cost"},
		}})
}
