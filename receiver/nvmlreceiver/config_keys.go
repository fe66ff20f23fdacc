package nvmlreceiver

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// Unknown keys are found before the configuration is decoded, so that the
// error names each key by its path as a user writes it (metrics::x), with
// the closest valid key. mapstructure's own error names the Go type that
// Unmarshal decodes into ('nvmlreceiver.plain' has invalid keys: ...) and
// suggests nothing.

// unknownKeysError lists every unknown key of the receiver's
// configuration, one per line, with a suggestion where one is close:
//
//	nvml receiver: unknown key colection_interval: did you mean collection_interval?
func unknownKeysError(raw map[string]any) error {
	var problems []string
	walkKeys(reflect.TypeOf(Config{}), raw, "", &problems)
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return errors.New(strings.Join(problems, "\n"))
}

// walkKeys checks m's keys against the mapstructure fields of t (a
// struct), and each known key's value against its field's type.
func walkKeys(t reflect.Type, m map[string]any, path string, problems *[]string) {
	fields := keyFields(t)
	for k, v := range m {
		ft, ok := fields[k]
		if !ok {
			*problems = append(*problems, unknownKey(path, k, fields))
			continue
		}
		walkValue(ft, v, path+k, problems)
	}
}

// walkValue checks a known key's value: a struct's keys, or each struct of
// a list.
func walkValue(t reflect.Type, v any, path string, problems *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if sub, ok := v.(map[string]any); ok {
			walkKeys(t, sub, path+"::", problems)
		}
	case reflect.Slice:
		if list, ok := v.([]any); ok {
			for i, e := range list {
				walkValue(t.Elem(), e, fmt.Sprintf("%s[%d]", path, i), problems)
			}
		}
	}
}

// keyFields maps each key a struct takes to its field's type: its
// mapstructure tags, with squashed structs' keys as its own.
func keyFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		switch {
		case name == "-":
		case strings.Contains(opts, "squash") || f.Anonymous && name == "":
			for k, ft := range keyFields(f.Type) {
				out[k] = ft
			}
		case name == "":
			out[strings.ToLower(f.Name)] = f.Type
		default:
			out[name] = f.Type
		}
	}
	return out
}

// unknownKey says that key, under path, is unknown, and what was likely
// meant.
func unknownKey(path, key string, valid map[string]reflect.Type) string {
	// The receiver's own name (nvml/<name>) is not known here; the
	// collector puts it before this error.
	msg := fmt.Sprintf("%s receiver: unknown key %s%s", metadata.Type, path, key)
	if path == "metrics::" {
		if name, ok := otlpName(key); ok {
			return fmt.Sprintf("%s: metrics: takes the OpenTelemetry metric names, not the Prometheus ones; did you mean %s?", msg, name)
		}
	}
	if best := closest(key, valid); best != "" {
		return fmt.Sprintf("%s: did you mean %s%s?", msg, path, best)
	}
	if path == "metrics::" || path == "resource_attributes::" || path == "events::" {
		return msg + " (the names are listed in the receiver's documentation.md)"
	}
	names := make([]string, 0, len(valid))
	for k := range valid {
		names = append(names, k)
	}
	sort.Strings(names)
	return fmt.Sprintf("%s (valid keys here: %s)", msg, strings.Join(names, ", "))
}

// closest is the valid key nearest to key, when it is near enough to be
// a misspelling: an edit distance of at most a third of its length (at
// least 1, at most 3). Ties go to the first in order.
func closest(key string, valid map[string]reflect.Type) string {
	names := make([]string, 0, len(valid))
	for k := range valid {
		names = append(names, k)
	}
	sort.Strings(names)
	limit := min(max(len(key)/3, 1), 3)
	best, bestD := "", limit+1
	for _, n := range names {
		if d := editDistance(strings.ToLower(key), n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// dcgmNames maps dcgm-exporter's metric names to the metric that
// deploy/prometheus/dcgm-compat.yaml computes each from (TestDCGMNames
// holds the two together).
var dcgmNames = map[string]string{
	"DCGM_FI_DEV_SM_CLOCK":                    "nvidia.gpu.clock.frequency",
	"DCGM_FI_DEV_MEM_CLOCK":                   "nvidia.gpu.clock.frequency",
	"DCGM_FI_DEV_MEMORY_TEMP":                 "hw.temperature",
	"DCGM_FI_DEV_GPU_TEMP":                    "hw.temperature",
	"DCGM_FI_DEV_POWER_USAGE":                 "hw.power",
	"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION":    "hw.energy",
	"DCGM_FI_DEV_PCIE_TX_THROUGHPUT":          "hw.gpu.io",
	"DCGM_FI_DEV_PCIE_RX_THROUGHPUT":          "hw.gpu.io",
	"DCGM_FI_DEV_PCIE_REPLAY_COUNTER":         "nvidia.gpu.pcie.replays",
	"DCGM_FI_DEV_GPU_UTIL":                    "hw.gpu.utilization",
	"DCGM_FI_DEV_MEM_COPY_UTIL":               "nvidia.gpu.memory.bandwidth.utilization",
	"DCGM_FI_DEV_ENC_UTIL":                    "hw.gpu.utilization",
	"DCGM_FI_DEV_DEC_UTIL":                    "hw.gpu.utilization",
	"DCGM_FI_DEV_XID_ERRORS":                  "nvidia.gpu.xid.errors",
	"DCGM_FI_DEV_POWER_VIOLATION":             "nvidia.gpu.clock.event.time",
	"DCGM_FI_DEV_THERMAL_VIOLATION":           "nvidia.gpu.clock.event.time",
	"DCGM_FI_DEV_SYNC_BOOST_VIOLATION":        "nvidia.gpu.clock.event.time",
	"DCGM_FI_DEV_BOARD_LIMIT_VIOLATION":       "nvidia.gpu.clock.event.time",
	"DCGM_FI_DEV_LOW_UTIL_VIOLATION":          "nvidia.gpu.clock.event.time",
	"DCGM_FI_DEV_RELIABILITY_VIOLATION":       "nvidia.gpu.clock.event.time",
	"DCGM_FI_DEV_FB_FREE":                     "hw.gpu.memory.usage",
	"DCGM_FI_DEV_FB_USED":                     "hw.gpu.memory.usage",
	"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL":           "hw.errors",
	"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL":           "hw.errors",
	"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "nvidia.gpu.memory.row_remap.rows",
	"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS":   "nvidia.gpu.memory.row_remap.rows",
	"DCGM_FI_DEV_ROW_REMAP_FAILURE":           "nvidia.gpu.memory.row_remap.status",
	"DCGM_FI_PROF_GR_ENGINE_ACTIVE":           "nvidia.gpu.graphics.activity",
	"DCGM_FI_PROF_SM_ACTIVE":                  "nvidia.gpu.sm.activity",
	"DCGM_FI_PROF_SM_OCCUPANCY":               "nvidia.gpu.sm.occupancy",
	"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE":         "nvidia.gpu.tensor.activity",
	"DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE":    "nvidia.gpu.tensor.pipe.activity",
	"DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE":    "nvidia.gpu.tensor.pipe.activity",
	"DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE":    "nvidia.gpu.tensor.pipe.activity",
	"DCGM_FI_PROF_PIPE_FP64_ACTIVE":           "nvidia.gpu.pipe.activity",
	"DCGM_FI_PROF_PIPE_FP32_ACTIVE":           "nvidia.gpu.pipe.activity",
	"DCGM_FI_PROF_PIPE_FP16_ACTIVE":           "nvidia.gpu.pipe.activity",
	"DCGM_FI_PROF_DRAM_ACTIVE":                "nvidia.gpu.memory.bandwidth.utilization",
	"DCGM_FI_PROF_PCIE_TX_BYTES":              "hw.gpu.io",
	"DCGM_FI_PROF_PCIE_RX_BYTES":              "hw.gpu.io",
	"DCGM_FI_PROF_NVLINK_TX_BYTES":            "nvidia.gpu.nvlink.io",
	"DCGM_FI_PROF_NVLINK_RX_BYTES":            "nvidia.gpu.nvlink.io",
}

// promSuffixes are what the Prometheus exporter appends to a metric's name:
// _total for a counter, and its unit (the units of metadata.yaml).
var promSuffixes = []string{"_total", "_ratio", "_seconds", "_bytes", "_joules", "_watts", "_celsius", "_hertz", "_percent"}

// otlpName returns the OpenTelemetry name of a metric written as
// Prometheus or dcgm-exporter names it: hw_gpu_utilization_ratio and
// DCGM_FI_DEV_GPU_UTIL are hw.gpu.utilization.
func otlpName(key string) (string, bool) {
	if name, ok := dcgmNames[strings.ToUpper(key)]; ok {
		return name, true
	}
	byUnderscores := map[string]string{}
	for k := range keyFields(reflect.TypeOf(metadata.MetricsConfig{})) {
		byUnderscores[strings.NewReplacer(".", "_").Replace(k)] = k
	}
	k := strings.ToLower(key)
	for {
		if name, ok := byUnderscores[k]; ok {
			return name, true
		}
		trimmed := k
		for _, s := range promSuffixes {
			trimmed = strings.TrimSuffix(trimmed, s)
		}
		if trimmed == k {
			return "", false
		}
		k = trimmed
	}
}
