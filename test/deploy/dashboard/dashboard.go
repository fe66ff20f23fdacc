// Package dashboard builds the otelcol-nvml Grafana dashboard
// (deploy/grafana/otelcol-nvml.json) with the Grafana Foundation SDK.
// `make dashboard` writes it; a test fails when the committed JSON differs,
// and the e2e suite runs every panel query against a real Prometheus.
//
// The queries read the series of the collector's prometheus exporter (or
// Prometheus's OTLP receiver) with every resource attribute as a label:
// hw_id is the GPU UUID, k8s_node_name the node (the chart sets it), and
// k8s_pod_name, k8s_container_name, container_id the GPU's (or process's)
// owner. Outside Kubernetes (make run, make demo, Docker) k8s_node_name is
// empty; the host variable reads instance, the label Prometheus gives every
// scraped target (and every OTLP push with service.instance.id), so a host
// can be picked there too. Outside Kubernetes (make run, make demo, Docker) k8s_node_name is
// empty; the host variable reads instance, the label Prometheus gives every
// scraped target (and every OTLP push with service.instance.id), so a host
// can be picked there too.
package dashboard

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// UID is the dashboard's stable uid (links and provisioning use it).
const UID = "otelcol-nvml"

// Metric names as the Prometheus exporter writes them (see the README's
// metric table; CHANGELOG.md for renames). The e2e suite fails on a name
// nobody emits.
const (
	gpuUtilization       = "hw_gpu_utilization_ratio"
	smActivity           = "nvidia_gpu_sm_activity_ratio"
	tensorActivity       = "nvidia_gpu_tensor_activity_ratio"
	memoryUsage          = "hw_gpu_memory_usage_bytes"
	memoryLimit          = "hw_gpu_memory_limit_bytes"
	processMemory        = "nvidia_gpu_process_memory_usage_bytes"
	power                = "hw_power_watts"
	powerLimit           = "nvidia_gpu_power_limit_watts"
	energy               = "hw_energy_joules_total"
	temperature          = "hw_temperature_celsius"
	clockFrequency       = "nvidia_gpu_clock_frequency_hertz"
	clockEventActive     = "nvidia_gpu_clock_event_active"
	clockEventTime       = "nvidia_gpu_clock_event_time_seconds_total"
	clockEventReason     = "nvidia_gpu_clock_event_reason"
	xidErrors            = "nvidia_gpu_xid_errors_total"
	eccErrors            = "hw_errors_total"
	rowRemapStatus       = "nvidia_gpu_memory_row_remap_status"
	rowRemapRows         = "nvidia_gpu_memory_row_remap_rows"
	status               = "hw_status"
	containerCPUTime     = "container_cpu_time_seconds_total"
	containerCPULimit    = "nvidia_gpu_container_cpu_limit"
	hostCPUTime          = "system_cpu_time_seconds_total"
	datasourceVar        = "datasource"
	hostSelector         = `k8s_node_name=~"$node", instance=~"$host"`
	gpuSelector          = hostSelector + `, hw_id=~"$gpu"`
	podSelector          = hostSelector + `, k8s_pod_name=~"$pod"`
	generalUtilization   = gpuUtilization + `{` + gpuSelector + `, hw_gpu_task="general"}`
	containerGPUSelector = gpuSelector + `, k8s_pod_name=~"$pod", container_id!=""`
)

// The recording rules of deploy/prometheus/rules.yaml the Waste row reads
// (docs/design/waste.md). The deploy tests fail on a name rules.yaml does not
// record.
const (
	namespaceIdleHours = "namespace:nvidia_gpu_idle_hours:24h"
	userIdleHours      = "user:nvidia_gpu_idle_hours:24h"
	namespaceIdleCost  = "namespace:nvidia_gpu_idle_cost:24h"
	userIdleCost       = "user:nvidia_gpu_idle_cost:24h"
	podEfficiency      = "namespace_pod:nvidia_gpu_efficiency:1h"
	nodeUnobserved     = "node:nvidia_gpu_unobserved_fraction:1h"
	holderDiagnosis    = "gpu_holder:nvidia_gpu_diagnosis:5m"
	holderActivity     = "gpu_holder:nvidia_gpu_activity:5m"
	holderCPUOfLimit   = "gpu_holder:nvidia_gpu_cpu_of_limit:5m"
	holderHeadroom     = "gpu_holder:nvidia_gpu_memory_headroom:5m"
	// holder is the labels of one GPU holder, the diagnosis's key.
	holder         = "hw_id, k8s_node_name, k8s_namespace_name, k8s_pod_name, container_id"
	holderSelector = `k8s_node_name=~"$node", hw_id=~"$gpu", k8s_pod_name=~"$pod"`
)

// Build returns the dashboard.
func Build() (dashboard.Dashboard, error) {
	ds := common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${" + datasourceVar + "}")}
	b := dashboard.NewDashboardBuilder("NVIDIA GPUs (otelcol-nvml)").
		Uid(UID).
		Description("GPU utilization against SM and tensor activity, memory and its trend, power, thermals, clocks, health, and which pod holds which GPU; from otelcol-nvml's nvml receiver.").
		Tags([]string{"gpu", "nvidia", "opentelemetry", "otelcol-nvml"}).
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder(datasourceVar).Label("Data source").Type("prometheus")).
		WithVariable(labelVariable(ds, "node", "Node", memoryLimit, "", "k8s_node_name").
			Description("The Kubernetes node (k8s.node.name, which the chart sets); empty outside Kubernetes, where All matches.")).
		WithVariable(labelVariable(ds, "host", "Host", memoryLimit, `k8s_node_name=~"$node"`, "instance").
			Description("The scraped collector (Prometheus's instance label): filled under make run, make demo and Docker as well as on Kubernetes. The Waste row's recording rules keep the node, not the instance, so this filter leaves them whole.")).
		WithVariable(labelVariable(ds, "gpu", "GPU", memoryLimit, hostSelector, "hw_id")).
		WithVariable(labelVariable(ds, "pod", "Pod", memoryLimit, gpuSelector, "k8s_pod_name")).
		WithVariable(labelVariable(ds, "slurm_job", "Slurm job", processMemory, hostSelector, "slurm_job_id").
			Description("The Slurm job of the GPU processes (slurm.job.id, from their cgroups); empty outside Slurm, where All matches."))

	b = wasteRow(b, ds)
	b = holdersRow(b, ds)

	b = b.WithRow(dashboard.NewRowBuilder("Truth: is the GPU doing work?")).
		WithPanel(series(ds, "Utilization, SM activity, tensor activity", "percentunit", 24,
			"Utilization says a kernel ran (100 % with one busy SM); SM activity (GPM) says how much of the GPU it used; tensor activity, how much of it was matrix math.",
			query(generalUtilization, "{{hw_id}} utilization"),
			query(smActivity+`{`+gpuSelector+`}`, "{{hw_id}} SM activity"),
			query(tensorActivity+`{`+gpuSelector+`}`, "{{hw_id}} tensor activity"),
		).Min(0).Max(1))

	b = b.WithRow(dashboard.NewRowBuilder("Memory: the OOM curve")).
		WithPanel(series(ds, "GPU memory: used, limit and the 30-minute trend", "bytes", 12,
			"The dashed trend is predict_linear over 15 minutes, 30 minutes ahead: where it crosses the limit, an out-of-memory error is coming.",
			query(memoryUsage+`{`+gpuSelector+`}`, "{{hw_id}} used"),
			query(memoryLimit+`{`+gpuSelector+`}`, "{{hw_id}} limit"),
			query(`predict_linear(`+memoryUsage+`{`+gpuSelector+`}[15m], 1800)`, "{{hw_id}} trend (+30m)"),
		).Min(0)).
		WithPanel(series(ds, "GPU memory per process", "bytes", 6, "",
			query(processMemory+`{`+gpuSelector+`}`, "{{process_executable_name}} ({{process_pid}}) on {{hw_id}}"),
		).Min(0).Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal))).
		WithPanel(series(ds, "GPU memory per pod", "bytes", 6, "",
			query(`sum by (k8s_namespace_name, k8s_pod_name) (`+processMemory+`{`+gpuSelector+`, k8s_pod_name=~"$pod", k8s_pod_name!=""})`, "{{k8s_namespace_name}}/{{k8s_pod_name}}"),
		).Min(0).Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)))

	b = b.WithRow(dashboard.NewRowBuilder("Power, thermals, clocks")).
		WithPanel(series(ds, "Power and limit", "watt", 6, "",
			query(power+`{`+gpuSelector+`}`, "{{hw_id}}"),
			query(powerLimit+`{`+gpuSelector+`}`, "{{hw_id}} limit"),
		).Min(0)).
		WithPanel(series(ds, "Energy rate", "watt", 6, "The rate of the energy counter: the average power over each interval, which instant power readings can miss.",
			query(`rate(`+energy+`{`+gpuSelector+`}[$__rate_interval])`, "{{hw_id}}"),
		).Min(0)).
		WithPanel(series(ds, "Temperature", "celsius", 6, "",
			query(temperature+`{`+gpuSelector+`}`, "{{hw_id}} {{hw_sensor_location}}"),
		)).
		WithPanel(series(ds, "Clocks", "hertz", 6, "",
			query(clockFrequency+`{`+gpuSelector+`}`, "{{hw_id}} {{nvidia_gpu_clock_type}}"),
		).Min(0)).
		WithPanel(series(ds, "Active clock event reasons (throttling)", "short", 12, "1 while NVML gives this reason for the clocks; idle and application clocks are normal, power cap and thermal slowdowns are not.",
			query(clockEventActive+`{`+gpuSelector+`} == 1`, "{{hw_id}} {{"+clockEventReason+"}}"),
		).Min(0).Max(1)).
		WithPanel(series(ds, "Time held down by each reason", "percentunit", 12, "The fraction of each interval the clocks spent held down, per reason.",
			query(`rate(`+clockEventTime+`{`+gpuSelector+`}[$__rate_interval]) > 0`, "{{hw_id}} {{"+clockEventReason+"}}"),
		).Min(0))

	b = b.WithRow(dashboard.NewRowBuilder("Health")).
		WithPanel(series(ds, "Critical Xid errors by code", "short", 6, "Counted since the collector started, by Xid code (79: fallen off the bus, 48: double-bit ECC, ...).",
			query(`sum by (hw_id, nvidia_gpu_xid) (`+xidErrors+`{`+gpuSelector+`})`, "{{hw_id}} Xid {{nvidia_gpu_xid}}"),
		).Min(0)).
		WithPanel(series(ds, "ECC errors", "short", 6, "Volatile ECC counters since the driver loaded.",
			query(eccErrors+`{`+gpuSelector+`}`, "{{hw_id}} {{error_type}}"),
		).Min(0)).
		WithPanel(series(ds, "Remapped rows", "short", 6, "",
			query(rowRemapRows+`{`+gpuSelector+`}`, "{{hw_id}} {{error_type}}"),
		).Min(0)).
		WithPanel(tablePanel(ds, "State: GPU and row remap", 6, "hw.status (ok, degraded, predicted_failure, failed) and the row remap state (none, pending, failed) of each GPU, now.",
			query(`max by (k8s_node_name, instance, hw_id, hw_state) (`+status+`{`+gpuSelector+`}) == 1`, "").Instant().Format(prometheus.PromQueryFormatTable),
			query(`max by (k8s_node_name, instance, hw_id, nvidia_gpu_memory_row_remap_state) (`+rowRemapStatus+`{`+gpuSelector+`}) == 1`, "").Instant().Format(prometheus.PromQueryFormatTable),
		))

	b = b.WithRow(dashboard.NewRowBuilder("Per pod")).
		WithPanel(tablePanel(ds, "Which pod holds which GPU", 12, "Each GPU with its owner (from the kubelet's allocation and the GPU processes' cgroups) and its utilization now.",
			query(`max by (k8s_node_name, k8s_namespace_name, k8s_pod_name, k8s_container_name, hw_id) (`+gpuUtilization+`{`+gpuSelector+`, hw_gpu_task="general", k8s_pod_name=~"$pod", k8s_pod_name!=""})`, "").
				Instant().Format(prometheus.PromQueryFormatTable),
		)).
		WithPanel(series(ds, "Utilization per pod", "percentunit", 12, "",
			query(`max by (k8s_namespace_name, k8s_pod_name, hw_id) (`+gpuUtilization+`{`+gpuSelector+`, hw_gpu_task="general", k8s_pod_name=~"$pod", k8s_pod_name!=""})`, "{{k8s_namespace_name}}/{{k8s_pod_name}} {{hw_id}}"),
		).Min(0).Max(1))

	b = b.WithRow(dashboard.NewRowBuilder("Input-bound or GPU-bound?")).
		WithPanel(series(ds, "GPU containers: CPU against its limit, beside GPU utilization", "percentunit", 12,
			"For each container that holds a GPU: its CPU time rate over its CPU limit (cgroup cpu.max; DataLoader workers included), beside its GPU's utilization. CPU near 100 % with the GPU low: input-bound. GPU high: GPU-bound.",
			query(`sum by (container_id, k8s_pod_name, k8s_container_name) (rate(`+containerCPUTime+`{`+podSelector+`}[$__rate_interval])) / on (container_id) group_left max by (container_id) (`+containerCPULimit+`{`+podSelector+`})`, "{{k8s_pod_name}}/{{k8s_container_name}} CPU / limit"),
			query(`max by (container_id, k8s_pod_name, k8s_container_name) (`+gpuUtilization+`{`+containerGPUSelector+`, hw_gpu_task="general"})`, "{{k8s_pod_name}}/{{k8s_container_name}} GPU utilization"),
		).Min(0)).
		WithPanel(series(ds, "GPU containers: CPU cores used and limit; the host's CPU", "short", 12,
			"CPU cores each GPU container uses and may use; and the node's busy CPU fraction (host_metrics) for GPU work outside containers.",
			query(`sum by (container_id, k8s_pod_name, k8s_container_name) (rate(`+containerCPUTime+`{`+podSelector+`}[$__rate_interval]))`, "{{k8s_pod_name}}/{{k8s_container_name}} cores used"),
			query(`max by (container_id, k8s_pod_name, k8s_container_name) (`+containerCPULimit+`{`+podSelector+`})`, "{{k8s_pod_name}}/{{k8s_container_name}} limit"),
			query(`1 - avg by (k8s_node_name, instance) (rate(`+hostCPUTime+`{`+hostSelector+`, state="idle"}[$__rate_interval]))`, "{{k8s_node_name}} {{instance}} host busy"),
		).Min(0))

	return b.Build()
}

// wasteRow is the dashboard's first row: the GPU time paid for and not
// used, from the waste recording rules (issue 15), and each holder's
// diagnosis now.
func wasteRow(b *dashboard.DashboardBuilder, ds common.DataSourceRef) *dashboard.DashboardBuilder {
	return b.WithRow(dashboard.NewRowBuilder("Waste: GPU time held and not used")).
		WithPanel(bars(ds, "Idle GPU-hours, last 24 h, by namespace", "h", 6,
			"GPU-hours each namespace held a GPU while its activity stayed under the idle threshold, over the last 24 hours; the longest bar wastes the most. Cluster-wide: the node, GPU and pod variables do not apply.",
			query(`sort_desc(`+namespaceIdleHours+` > 0)`, "{{k8s_namespace_name}}"))).
		WithPanel(bars(ds, "Idle GPU-hours, last 24 h, by user", "h", 6,
			"The same by the GPU processes' user (process.owner); an idle GPU shared by n processes counts 1/n to each, so the bars add up to GPU-hours. Cluster-wide.",
			query(`sort_desc(`+userIdleHours+` > 0)`, "{{process_owner}}"))).
		WithPanel(bars(ds, "Idle cost, last 24 h, by namespace", "short", 6,
			"Idle GPU-hours times the hourly price of the GPU's model (the chart's prometheusRule.waste.pricePerHour, in its currency): what each namespace's idle GPUs cost over the last 24 hours. Cluster-wide.",
			query(`sort_desc(`+namespaceIdleCost+` > 0)`, "{{k8s_namespace_name}}")).Decimals(2)).
		WithPanel(bars(ds, "Idle cost, last 24 h, by user", "short", 6,
			"Idle GPU-hours times the model's hourly price, by the GPU processes' user: what each user's idle GPUs cost over the last 24 hours. Cluster-wide.",
			query(`sort_desc(`+userIdleCost+` > 0)`, "{{process_owner}}")).Decimals(2)).
		WithPanel(series(ds, "GPU efficiency per pod, trailing hour", "percentunit", 10,
			"Active GPU time over held GPU time for each pod over the trailing hour (busy time where the GPU has no GPM): 100 % = every held second fully used, 0 = held and doing nothing.",
			query(podEfficiency+`{k8s_pod_name=~"$pod"}`, "{{k8s_namespace_name}}/{{k8s_pod_name}}"),
		).Min(0).Max(1)).
		WithPanel(diagnosisTable(ds)).
		WithPanel(series(ds, "GPU time unobserved per node, trailing hour", "percentunit", 24,
			"The part of each node's GPU time over the trailing hour whose holder the receiver could not observe (reads failed or stuck, lost GPUs, gaps between scrapes, restarts): the waste figures above are that much unknown. Held + free + unobserved is the wall-clock time; gpu:nvidia_gpu_unobserved_hours:1h has the GPUs and reasons.",
			query(nodeUnobserved+`{k8s_node_name=~"$node"}`, "{{k8s_node_name}}"),
		).Min(0).Max(1))
}

// diagnosisTable is each GPU holder's state with the figures it was read
// from, one row per holder. The four instant queries keep the same holder
// labels (max by holder), and the merge transformation joins their rows on
// the labels every query has; the diagnosis's state comes along.
func diagnosisTable(ds common.DataSourceRef) *table.PanelBuilder {
	sel := `{` + holderSelector + `}`
	instant := func(expr string) *prometheus.DataqueryBuilder {
		return query(expr, "").Instant().Format(prometheus.PromQueryFormatTable)
	}
	state := func(text, color string) dashboard.ValueMappingResult {
		return dashboard.ValueMappingResult{Text: cog.ToPtr(text), Color: cog.ToPtr(color)}
	}
	states := dashboard.ValueMapping{ValueMap: &dashboard.ValueMap{
		Type: dashboard.MappingTypeValueToText,
		Options: map[string]dashboard.ValueMappingResult{
			"memory_pressure": state("memory pressure", "red"),
			"idle":            state("idle", "red"),
			"input_bound":     state("input-bound", "orange"),
			"underused":       state("underused", "yellow"),
			"gpu_bound":       state("GPU-bound", "green"),
		},
	}}
	return tablePanel(ds, "Diagnosis: what each GPU holder is doing", 14,
		"Each pod holding a GPU in the last 5 minutes, in the first state that fits (chart defaults): memory pressure (95 % used, or full within 30 min), idle (activity under 5 %), input-bound (under 50 % with CPU at 90 % of its limit), GPU-bound (70 % or more), else underused; CPU is in cores where there is no limit.",
		instant(`max by (`+holder+`, state) (`+holderDiagnosis+sel+` == 1)`),
		instant(`max by (`+holder+`) (`+holderActivity+sel+`)`),
		instant(`max by (`+holder+`) (`+holderCPUOfLimit+sel+`)`),
		instant(`max by (`+holder+`) (`+holderHeadroom+sel+`)`),
	).Unit("percentunit").
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true, "Value #A": true, "container_id": true},
			"indexByName": map[string]int{
				"k8s_node_name": 0, "k8s_namespace_name": 1, "k8s_pod_name": 2, "hw_id": 3, "state": 4,
				"Value #B": 5, "Value #C": 6, "Value #D": 7,
			},
			"renameByName": map[string]string{
				"k8s_node_name": "Node", "k8s_namespace_name": "Namespace", "k8s_pod_name": "Pod", "hw_id": "GPU",
				"state": "State", "Value #B": "Activity", "Value #C": "CPU of limit", "Value #D": "Memory headroom",
			},
		}}).
		OverrideByName("State", []dashboard.DynamicConfigValue{
			{Id: "mappings", Value: []dashboard.ValueMapping{states}},
			{Id: "custom.cellOptions", Value: map[string]any{"type": "color-text"}},
		}).
		SortBy([]cog.Builder[common.TableSortByFieldState]{common.NewTableSortByFieldStateBuilder().DisplayName("Activity")})
}

// JSON returns the dashboard as the committed file holds it.
func JSON() ([]byte, error) {
	d, err := Build()
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal dashboard: %w", err)
	}
	return append(out, '\n'), nil
}

// labelVariable is a multi-value variable over one label's values, with
// "All" as the regex .* (which also matches series without the label).
func labelVariable(ds common.DataSourceRef, name, label, metric, matchers, labelName string) *dashboard.QueryVariableBuilder {
	sel := metric
	if matchers != "" {
		sel += "{" + matchers + "}"
	}
	q := fmt.Sprintf("label_values(%s, %s)", sel, labelName)
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Datasource(ds).
		Query(dashboard.StringOrMap{Map: map[string]any{"query": q, "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 1}}).
		Definition(q).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).
		IncludeAll(true).
		AllValue(".*")
}

func query(expr, legend string) *prometheus.DataqueryBuilder {
	q := prometheus.NewDataqueryBuilder().Expr(expr)
	if legend != "" {
		q = q.LegendFormat(legend)
	}
	return q
}

func withRefIDs(qs []*prometheus.DataqueryBuilder) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], len(qs))
	for i, q := range qs {
		out[i] = q.RefId(string(rune('A' + i)))
	}
	return out
}

func series(ds common.DataSourceRef, title, unit string, width uint32, description string, qs ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Datasource(ds).Unit(unit).Span(width).Height(8).
		FillOpacity(10).ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom))
	if description != "" {
		p = p.Description(description)
	}
	p = p.Targets(withRefIDs(qs))
	return p
}

// bars is a horizontal bar gauge of instant values, one bar per series, in
// the order of the query's result, in one color: a bar is waste, and a
// threshold color would call some of it fine.
func bars(ds common.DataSourceRef, title, unit string, width uint32, description string, q *prometheus.DataqueryBuilder) *bargauge.PanelBuilder {
	return bargauge.NewPanelBuilder().Title(title).Datasource(ds).Description(description).Unit(unit).Span(width).Height(8).
		Min(0).Orientation(common.VizOrientationHorizontal).DisplayMode(common.BarGaugeDisplayModeBasic).
		ShowUnfilled(true).ColorScheme(dashboard.NewFieldColorBuilder().Mode(dashboard.FieldColorModeIdFixed).FixedColor("orange")).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false)).
		Targets(withRefIDs([]*prometheus.DataqueryBuilder{q.Instant()}))
}

func tablePanel(ds common.DataSourceRef, title string, width uint32, description string, qs ...*prometheus.DataqueryBuilder) *table.PanelBuilder {
	p := table.NewPanelBuilder().Title(title).Datasource(ds).Span(width).Height(8).Targets(withRefIDs(qs))
	if description != "" {
		p = p.Description(description)
	}
	return p
}
