// Package table renders the metric table of docs/reference/metrics.md from
// the receiver's metadata.yaml: each metric's OTLP name, the name the
// collector's prometheus exporter gives it, its type, unit and a short
// "what" taken from its description and attributes. Nothing in the table
// is hand-written, so a new metric costs no line of docs.
package table

import (
	"fmt"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// The markers between which the table is generated.
const (
	StartMarker = "<!-- metrics-table:start -->"
	EndMarker   = "<!-- metrics-table:end -->"
)

// Metric is what the table needs of one metadata.yaml metric.
type Metric struct {
	Name        string
	Description string
	Unit        string
	Enabled     bool
	Attributes  []string
	// Kind is gauge, counter (a monotonic sum) or updown (a sum that is not).
	Kind string
}

type metadataMetric struct {
	Enabled     bool           `yaml:"enabled"`
	Description string         `yaml:"description"`
	Unit        string         `yaml:"unit"`
	Gauge       map[string]any `yaml:"gauge"`
	Sum         *struct {
		Monotonic bool `yaml:"monotonic"`
	} `yaml:"sum"`
	Attributes []string `yaml:"attributes"`
}

// Parse reads the metrics of metadata.yaml, in the file's order
// (mdatagen keeps it alphabetical).
func Parse(metadata []byte) ([]Metric, error) {
	var doc struct {
		Metrics yaml.Node `yaml:"metrics"`
	}
	if err := yaml.Unmarshal(metadata, &doc); err != nil {
		return nil, err
	}
	if doc.Metrics.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("metadata.yaml has no metrics mapping")
	}
	var out []Metric
	for i := 0; i+1 < len(doc.Metrics.Content); i += 2 {
		name := doc.Metrics.Content[i].Value
		var m metadataMetric
		if err := doc.Metrics.Content[i+1].Decode(&m); err != nil {
			return nil, fmt.Errorf("metric %s: %w", name, err)
		}
		kind := "gauge"
		switch {
		case m.Sum != nil && m.Sum.Monotonic:
			kind = "counter"
		case m.Sum != nil:
			kind = "updown"
		case m.Gauge == nil:
			return nil, fmt.Errorf("metric %s is neither a gauge nor a sum", name)
		}
		out = append(out, Metric{Name: name, Description: m.Description, Unit: m.Unit,
			Enabled: m.Enabled, Attributes: m.Attributes, Kind: kind})
	}
	return out, nil
}

// unitWords are the prometheus exporter's words for UCUM units (the
// collector's Prometheus translator, otlptranslator's unit map).
var unitWords = map[string]string{
	"d": "days", "h": "hours", "min": "minutes", "s": "seconds",
	"ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds",
	"By": "bytes", "KiBy": "kibibytes", "MiBy": "mebibytes", "GiBy": "gibibytes", "TiBy": "tibibytes",
	"KBy": "kilobytes", "MBy": "megabytes", "GBy": "gigabytes", "TBy": "terabytes",
	"m": "meters", "V": "volts", "A": "amperes", "J": "joules", "W": "watts", "g": "grams",
	"Cel": "celsius", "Hz": "hertz", "%": "percent",
}

// perWords are its words for the unit after a slash.
var perWords = map[string]string{
	"s": "second", "m": "minute", "h": "hour", "d": "day", "w": "week", "mo": "month", "y": "year",
}

var annotation = regexp.MustCompile(`\{[^}]*\}`)

// PrometheusName is the name the collector's prometheus exporter gives a
// metric: the OTLP name with dots as underscores; then the unit's word
// (By: _bytes, s: _seconds, J: _joules, W: _watts, Cel: _celsius,
// Hz: _hertz, X/s: _X_per_second), unless a word of the name already is
// it; a {curly} unit adds nothing; unit 1 adds _ratio on a gauge and
// nothing on a sum; a counter (a monotonic sum) ends in _total. A unit it
// does not know is an error, so that a new unit is looked up once.
func PrometheusName(m Metric) (string, error) {
	name := strings.ReplaceAll(m.Name, ".", "_")
	words := strings.Split(name, "_")
	has := func(w string) bool {
		for _, x := range words {
			if x == w {
				return true
			}
		}
		return false
	}
	add := func(w string) {
		if w != "" && !has(w) {
			name += "_" + w
		}
	}
	unit := strings.TrimSpace(annotation.ReplaceAllString(m.Unit, ""))
	main, per, slash := strings.Cut(unit, "/")
	switch {
	case unit == "1" && m.Kind == "gauge":
		add("ratio")
	case unit == "1":
	default:
		if main != "" {
			w, ok := unitWords[main]
			if !ok {
				return "", fmt.Errorf("metric %s: unit %q: its Prometheus word is not known here (tools/metricstable/table unitWords)", m.Name, m.Unit)
			}
			add(w)
		}
		if slash {
			w, ok := perWords[per]
			if !ok {
				return "", fmt.Errorf("metric %s: unit %q: its Prometheus word per %q is not known here (tools/metricstable/table perWords)", m.Name, m.Unit, per)
			}
			add("per_" + w)
		}
	}
	if m.Kind == "counter" && !strings.HasSuffix(name, "_total") {
		name += "_total"
	}
	return name, nil
}

var parenthetical = regexp.MustCompile(`\s*\([^()]*\)`)

// What is the table's short note on a metric: its description without
// parentheticals, up to its first stop (". ", "; " or ": "), then the
// attributes it is split by in parentheses, and "off by default" where it
// is.
func What(m Metric) string {
	d := strings.Join(strings.Fields(m.Description), " ")
	d = parenthetical.ReplaceAllString(d, "")
	cut := len(d)
	for _, stop := range []string{". ", "; ", ": "} {
		if i := strings.Index(d, stop); i >= 0 && i < cut {
			cut = i
		}
	}
	d = strings.TrimRight(strings.TrimSpace(d[:cut]), ".")
	if len(m.Attributes) > 0 {
		var by []string
		for _, a := range m.Attributes {
			by = append(by, "`"+a+"`")
		}
		d += " (" + strings.Join(by, ", ") + ")"
	}
	if !m.Enabled {
		d += "; off by default"
	}
	return strings.ReplaceAll(d, "|", `\|`)
}

// Render is the table, from its header to its last row, each line ending
// in a newline.
func Render(metrics []Metric) (string, error) {
	var b strings.Builder
	b.WriteString("| OTLP name | Prometheus name | type | unit | what |\n|---|---|---|---|---|\n")
	for _, m := range metrics {
		prom, err := PrometheusName(m)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s |\n", m.Name, prom, m.Kind, m.Unit, What(m))
	}
	return b.String(), nil
}

// Block returns the text between the markers of doc (the table and its
// newlines), and where it starts and ends.
func Block(doc string) (block string, start, end int, err error) {
	s := strings.Index(doc, StartMarker)
	e := strings.Index(doc, EndMarker)
	if s < 0 || e < s {
		return "", 0, 0, fmt.Errorf("no %s ... %s block", StartMarker, EndMarker)
	}
	start = s + len(StartMarker)
	return doc[start:e], start, e, nil
}

// Rewrite returns doc with the block between the markers replaced by the
// table rendered from metadata.
func Rewrite(doc string, metadata []byte) (string, error) {
	metrics, err := Parse(metadata)
	if err != nil {
		return "", err
	}
	t, err := Render(metrics)
	if err != nil {
		return "", err
	}
	_, start, end, err := Block(doc)
	if err != nil {
		return "", err
	}
	return doc[:start] + "\n" + t + doc[end:], nil
}
