{{- define "otelcol-nvml.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "otelcol-nvml.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "otelcol-nvml.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "otelcol-nvml.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "otelcol-nvml.selectorLabels" -}}
app.kubernetes.io/name: {{ include "otelcol-nvml.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "otelcol-nvml.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "otelcol-nvml.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "otelcol-nvml.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "otelcol-nvml.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* k8sattributes runs only with attribution on. */}}
{{- define "otelcol-nvml.k8sattributes" -}}
{{- if and .Values.attribution.enabled .Values.attribution.k8sattributes -}}true{{- end -}}
{{- end -}}

{{/* The receiver reads ResourceSlices only with attribution on. */}}
{{- define "otelcol-nvml.draResourceSlices" -}}
{{- if and .Values.attribution.enabled .Values.attribution.draResourceSlices -}}true{{- end -}}
{{- end -}}

{{/* The pod talks to the API server: a ClusterRole and a token. */}}
{{- define "otelcol-nvml.apiAccess" -}}
{{- if or (include "otelcol-nvml.k8sattributes" .) (include "otelcol-nvml.draResourceSlices" .) -}}true{{- end -}}
{{- end -}}

{{- define "otelcol-nvml.otlpExporter" -}}
{{- if eq .Values.otlp.protocol "grpc" -}}otlp_grpc{{- else if eq .Values.otlp.protocol "http" -}}otlp_http{{- else -}}
{{- fail (printf "otlp.protocol: %q is neither grpc nor http" .Values.otlp.protocol) -}}
{{- end -}}
{{- end -}}

{{/*
A Go duration (e.g. 10s, 1m30s, 500ms) in milliseconds, as an int.
*/}}
{{- define "otelcol-nvml.durationMs" -}}
{{- $s := toString . -}}
{{- if not (regexMatch "^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$" $s) -}}
{{- fail (printf "%q is not a duration of ms, s, m or h (e.g. 10s, 1m30s)" $s) -}}
{{- end -}}
{{- $ms := 0.0 -}}
{{- $per := dict "ms" 1.0 "s" 1000.0 "m" 60000.0 "h" 3600000.0 -}}
{{- range regexFindAll "[0-9.]+(ms|s|m|h)" $s -1 -}}
{{- $unit := regexFind "(ms|s|m|h)$" . -}}
{{- $ms = addf $ms (mulf (float64 (trimSuffix $unit .)) (get $per $unit)) -}}
{{- end -}}
{{- printf "%d" (int64 (round $ms 0)) -}}
{{- end -}}

{{/*
The prometheus exporter's metric_expiration: prometheus.metricExpiration, or
3 collection intervals, so that a lost GPU's figures, an exited process or an
ended pod leave the endpoint within 3 intervals (the exporter's default: 5m).
*/}}
{{- define "otelcol-nvml.metricExpiration" -}}
{{- if .Values.prometheus.metricExpiration -}}
{{- .Values.prometheus.metricExpiration -}}
{{- else -}}
{{- $ms := mul 3 (int64 (include "otelcol-nvml.durationMs" .Values.collectionInterval)) -}}
{{- if eq (mod $ms 1000) 0 -}}{{- printf "%ds" (div $ms 1000) -}}{{- else -}}{{- printf "%dms" $ms -}}{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The collector config, as YAML. Extra components are merged in and appended
to the metrics pipeline.
*/}}
{{- define "otelcol-nvml.config" -}}
{{- $v := .Values -}}
{{- $exporters := list -}}
{{- $cfg := dict -}}
{{- $receivers := dict "nvml" (dict "collection_interval" $v.collectionInterval) -}}
{{- $_ := set $receivers "host_metrics" (dict "collection_interval" $v.collectionInterval "scrapers" (dict "cpu" (dict) "memory" (dict) "load" (dict))) -}}
{{- if $v.attribution.enabled -}}
{{- $_ := set $receivers.nvml "processes" (dict "enabled" true "max_per_gpu" (int $v.attribution.maxProcessesPerGPU) "proc_root" "/host/proc" "cgroup_root" "/host/sys/fs/cgroup") -}}
{{- $_ := set $receivers.nvml "kubernetes" (dict "enabled" true "pod_resources_socket" "/var/lib/kubelet/pod-resources/kubelet.sock"
      "node_name" "${env:K8S_NODE_NAME}"
      "dra" (dict "resource_slices" (dict "enabled" (eq (include "otelcol-nvml.draResourceSlices" .) "true")))) -}}
{{- end -}}
{{- $processors := dict "memory_limiter" (dict "check_interval" "1s" "limit_percentage" 80 "spike_limit_percentage" 20) "batch" (dict) -}}
{{- /* k8s.node.name from the downward API (K8S_NODE_NAME) on every resource that lacks it */ -}}
{{- $_ := set $processors "resource" (dict "attributes" (list (dict "key" "k8s.node.name" "value" "${env:K8S_NODE_NAME}" "action" "insert"))) -}}
{{- $procList := list "memory_limiter" -}}
{{- if include "otelcol-nvml.k8sattributes" . -}}
{{- $_ := set $processors "k8s_attributes" (dict
      "auth_type" "serviceAccount"
      "passthrough" false
      "filter" (dict "node_from_env_var" "K8S_NODE_NAME")
      "extract" (dict "metadata" (list "k8s.pod.name" "k8s.namespace.name" "k8s.pod.uid" "k8s.deployment.name" "k8s.statefulset.name" "k8s.job.name"))
      "pod_association" (list (dict "sources" (list (dict "from" "resource_attribute" "name" "k8s.pod.uid"))))) -}}
{{- $procList = append $procList "k8s_attributes" -}}
{{- end -}}
{{- $procList = concat $procList (list "resource" "batch") -}}
{{- $exp := dict -}}
{{- if $v.otlp.enabled -}}
{{- if not $v.otlp.endpoint -}}{{- fail "otlp.endpoint: required when otlp.enabled" -}}{{- end -}}
{{- $tls := dict "insecure" $v.otlp.tls.insecure -}}
{{- $tlsDir := "/etc/otelcol-nvml/tls" -}}
{{- range $k, $f := dict "ca_file" $v.otlp.tls.caFile "cert_file" $v.otlp.tls.certFile "key_file" $v.otlp.tls.keyFile -}}
{{- if $f -}}
{{- if not $v.otlp.tls.secretName -}}{{- fail (printf "otlp.tls: %s needs otlp.tls.secretName, the Secret that holds it" $k) -}}{{- end -}}
{{- $_ := set $tls $k (printf "%s/%s" $tlsDir $f) -}}
{{- end -}}
{{- end -}}
{{- if $v.otlp.tls.serverNameOverride -}}{{- $_ := set $tls "server_name_override" $v.otlp.tls.serverNameOverride -}}{{- end -}}
{{- $o := dict "endpoint" $v.otlp.endpoint "tls" $tls -}}
{{- if $v.otlp.headers -}}{{- $_ := set $o "headers" $v.otlp.headers -}}{{- end -}}
{{- $_ := set $exp (include "otelcol-nvml.otlpExporter" .) $o -}}
{{- $exporters = append $exporters (include "otelcol-nvml.otlpExporter" .) -}}
{{- end -}}
{{- if $v.prometheus.enabled -}}
{{- $_ := set $exp "prometheus" (dict "endpoint" (printf "${env:POD_IP}:%d" (int $v.prometheus.port)) "metric_expiration" (include "otelcol-nvml.metricExpiration" .) "resource_constant_labels" (dict "included" (list "*"))) -}}
{{- $exporters = append $exporters "prometheus" -}}
{{- end -}}
{{- $exp = mustMergeOverwrite $exp (deepCopy $v.extraExporters) -}}
{{- $exporters = concat $exporters (keys $v.extraExporters | sortAlpha) -}}
{{- if not $exporters -}}{{- fail "no exporter: enable otlp or prometheus, or add extraExporters" -}}{{- end -}}
{{- $hc := dict -}}
{{- if $v.healthCheck.componentStatus -}}
{{- $hc = dict
      "http" (dict "endpoint" (printf "${env:POD_IP}:%d" (int $v.healthCheck.port)) "status" (dict "enabled" true "path" "/status"))
      "component_health" (dict "include_permanent_errors" true "include_recoverable_errors" true "recovery_duration" $v.healthCheck.recoveryDuration) -}}
{{- else -}}
{{- $hc = dict "endpoint" (printf "${env:POD_IP}:%d" (int $v.healthCheck.port)) "path" "/status" -}}
{{- end -}}
{{- $metricsReceivers := concat (list "nvml" "host_metrics") (keys $v.extraReceivers | sortAlpha) -}}
{{- $metricsProcessors := concat (initial $procList) (keys $v.extraProcessors | sortAlpha) (list (last $procList)) -}}
{{- $pipelines := dict "metrics" (dict "receivers" $metricsReceivers "processors" $metricsProcessors "exporters" $exporters) -}}
{{- if $v.otlp.enabled -}}
{{- $_ := set $pipelines "logs" (dict "receivers" (list "nvml") "processors" (without $procList "k8s_attributes") "exporters" (list (include "otelcol-nvml.otlpExporter" .))) -}}
{{- end -}}
{{- $telemetry := dict "logs" (dict "encoding" "json") -}}
{{- if $v.telemetryPort -}}
{{- $_ := set $telemetry "metrics" (dict "level" "normal" "readers" (list (dict "pull" (dict "exporter" (dict "prometheus" (dict "host" "${env:POD_IP}" "port" (int $v.telemetryPort))))))) -}}
{{- else -}}
{{- $_ := set $telemetry "metrics" (dict "level" "none") -}}
{{- end -}}
{{- $cfg = dict
      "receivers" (mustMergeOverwrite $receivers (deepCopy $v.extraReceivers))
      "processors" (mustMergeOverwrite $processors (deepCopy $v.extraProcessors))
      "exporters" $exp
      "extensions" (dict "health_check" $hc)
      "service" (dict "extensions" (list "health_check") "pipelines" $pipelines "telemetry" $telemetry) -}}
{{- toYaml $cfg -}}
{{- end -}}
