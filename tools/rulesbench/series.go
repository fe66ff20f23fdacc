package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// label is one name="value" pair, the value kept as the exposition escapes it.
type label struct{ name, value string }

// series is one line of the template scrape: a node's series as the
// shipped config's prometheus exporter serves it.
type series struct {
	name   string
	labels []label
	value  float64
}

// accounting is the counters the waste rules read over 1h and 24h: they
// get the whole history, every other series only the recent window.
var accounting = regexp.MustCompile(`^nvidia_gpu_(process_)?(held|busy|active|idle|free|unobserved)_time_seconds_total$`)

// identity labels name one device or holder: each simulated node gets its
// own values, each holder generation its own too.
var deviceIdentity = map[string]bool{"hw_id": true, "hw_parent": true, "hw_serial_number": true}
var holderIdentity = map[string]bool{"k8s_pod_name": true, "k8s_pod_uid": true, "container_id": true, "process_pid": true}

func (s series) holder() bool {
	for _, l := range s.labels {
		if holderIdentity[l.name] {
			return true
		}
	}
	return false
}

func (s series) get(name string) string {
	for _, l := range s.labels {
		if l.name == name {
			return l.value
		}
	}
	return ""
}

// readTemplate parses a Prometheus text exposition (comments skipped).
func readTemplate(path string) ([]series, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []series
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %q", path, err, line)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseLine(line string) (series, error) {
	var s series
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			if rest == "" {
				return s, fmt.Errorf("unterminated labels")
			}
			if rest[0] == '}' {
				break
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return s, fmt.Errorf("bad label")
			}
			name := rest[:eq]
			j := eq + 2
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' {
					j++
				}
			}
			if j >= len(rest) {
				return s, fmt.Errorf("unterminated label value")
			}
			s.labels = append(s.labels, label{name, rest[eq+2 : j]})
			rest = strings.TrimPrefix(rest[j+1:], ",")
		}
		rest = rest[1:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

// errorCounters count faults: flat in the simulation, a healthy fleet. One
// that grows fires an alert on every GPU that has it (the uncorrected ECC
// counter on half of them, an Xid on a quarter), and Prometheus expands
// each firing alert's annotations at every evaluation.
var errorCounters = regexp.MustCompile(`^(hw_errors|nvidia_gpu_xid_errors|nvidia_gpu_pcie_replays|nvidia_gpu_process_dropped)_total$`)

// rate is a counter's growth per second in the simulation: the accounting
// counters as a held GPU spends its time, no fault, any other counter
// slowly.
func rate(s series) float64 {
	switch {
	case errorCounters.MatchString(s.name):
		return 0
	case strings.Contains(s.name, "_held_time_"):
		return 1
	case strings.Contains(s.name, "_busy_time_"):
		return 0.6
	case strings.Contains(s.name, "_active_time_"):
		return 0.4
	case strings.Contains(s.name, "_idle_time_"):
		return 0.3
	case strings.Contains(s.name, "_free_time_"):
		return 0
	case strings.Contains(s.name, "_unobserved_time_"):
		if s.get("nvidia_gpu_unobserved_reason") == "gap" {
			return 0.01
		}
		return 0
	case strings.HasSuffix(s.name, "_total"):
		return 0.5
	}
	return 0
}

// dropped is the labels left off every series but keptOn's (-drop-labels:
// a GPU's constants on one series per GPU, to join on, rather than on all).
var (
	dropped = map[string]bool{}
	keptOn  = "hw_gpu_memory_limit_bytes"
)

// labelText is the series' label set for node n and holder generation g,
// sorted, with the labels Prometheus and the chart add (job, instance,
// k8s_node_name).
func labelText(s series, node, gen int) string {
	ls := make([]label, 0, len(s.labels)+3)
	for _, l := range s.labels {
		if dropped[l.name] && s.name != keptOn {
			continue
		}
		switch {
		case deviceIdentity[l.name]:
			l.value = fmt.Sprintf("%s-n%d", l.value, node)
		case holderIdentity[l.name]:
			l.value = fmt.Sprintf("%s-n%d-g%d", l.value, node, gen)
		case l.name == "k8s_node_name" || l.name == "job" || l.name == "instance":
			continue
		}
		ls = append(ls, l)
	}
	nodeName := fmt.Sprintf("node-%d", node)
	ls = append(ls, label{"job", "otelcol-nvml"}, label{"instance", nodeName + ":8889"}, label{"k8s_node_name", nodeName})
	sort.Slice(ls, func(i, j int) bool { return ls[i].name < ls[j].name })
	var b strings.Builder
	b.WriteString(s.name)
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.name)
		b.WriteString(`="`)
		b.WriteString(l.value)
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// writeSlice writes the samples of [from, to) (Unix seconds) of every
// node's series in OpenMetrics, time-major, each series' samples in order.
func writeSlice(w io.Writer, tmpl []series, cfg config, from, to int64) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	start := cfg.end - int64(cfg.hours)*3600
	recentFrom := cfg.end - int64(cfg.recent.Seconds())
	life := int64(cfg.holderLife.Seconds())
	names := make([][]string, len(tmpl)) // per template series, per generation
	for t := from - from%cfg.stepS(); t < to; t += cfg.stepS() {
		if t < from || t < start {
			continue
		}
		recent := t >= recentFrom
		if !recent && (t-start)%cfg.historyStepS() != 0 {
			continue
		}
		// Holders change half a life off the data's end, so that the
		// evaluations find holders midway (at the end itself, every
		// holder would be one sample old).
		gen := int((t - start + life/2) / life)
		genStart := start + int64(gen)*life - life/2
		for i, s := range tmpl {
			if !recent && !accounting.MatchString(s.name) {
				continue
			}
			v := s.value
			if r := rate(s); r > 0 || strings.HasSuffix(s.name, "_total") {
				since := t - start
				if s.holder() {
					since = t - genStart
				}
				v = r * float64(since)
			}
			for node := 0; node < cfg.nodes(); node++ {
				key := gen*cfg.nodes() + node
				for len(names[i]) <= key {
					names[i] = append(names[i], "")
				}
				if names[i][key] == "" {
					names[i][key] = labelText(s, node, gen)
				}
				fmt.Fprintf(bw, "%s %g %d\n", names[i][key], v, t)
			}
		}
	}
	if _, err := bw.WriteString("# EOF\n"); err != nil {
		return err
	}
	return bw.Flush()
}
