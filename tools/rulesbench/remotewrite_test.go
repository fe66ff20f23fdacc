package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// decodeWriteRequest reads a WriteRequest back with protowire alone, field
// by field, the way Prometheus's prompb would.
func decodeWriteRequest(t *testing.T, b []byte) []timeSeries {
	t.Helper()
	fields := func(b []byte, each func(num protowire.Number, typ protowire.Type, b []byte) int) {
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				t.Fatalf("tag: %v", protowire.ParseError(n))
			}
			b = b[n:]
			m := each(num, typ, b)
			if m < 0 {
				t.Fatalf("field %d: %v", num, protowire.ParseError(m))
			}
			b = b[m:]
		}
	}
	var out []timeSeries
	fields(b, func(num protowire.Number, typ protowire.Type, b []byte) int {
		ts, n := protowire.ConsumeBytes(b)
		if num != 1 || typ != protowire.BytesType {
			t.Fatalf("WriteRequest field %d type %d", num, typ)
		}
		var s timeSeries
		fields(ts, func(num protowire.Number, typ protowire.Type, b []byte) int {
			msg, n := protowire.ConsumeBytes(b)
			switch num {
			case 1:
				var l label
				fields(msg, func(num protowire.Number, _ protowire.Type, b []byte) int {
					v, n := protowire.ConsumeString(b)
					if num == 1 {
						l.name = v
					} else {
						l.value = v
					}
					return n
				})
				s.labels = append(s.labels, l)
			case 2:
				var smp sample
				fields(msg, func(num protowire.Number, typ protowire.Type, b []byte) int {
					if num == 1 {
						v, n := protowire.ConsumeFixed64(b)
						smp.v = math.Float64frombits(v)
						return n
					}
					v, n := protowire.ConsumeVarint(b)
					smp.t = int64(v)
					return n
				})
				s.samples = append(s.samples, smp)
			default:
				t.Fatalf("TimeSeries field %d", num)
			}
			return n
		})
		out = append(out, s)
		return n
	})
	return out
}

func TestRemoteWriteCarriesEverySample(t *testing.T) {
	tmpl, err := readTemplate("testdata/demo.prom")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config{gpus: 8, perNode: countGPUs(tmpl), hours: 24, step: 10 * time.Second,
		historyStep: time.Minute, recent: time.Hour, holderLife: 6 * time.Hour, end: 1_800_000_000}
	var om bytes.Buffer
	if err := writeSlice(&om, tmpl, cfg, cfg.end-60, cfg.end+1); err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(om.String(), "\n") - 1 // # EOF
	series, err := parseSamples(bytes.NewReader(om.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	got := decodeWriteRequest(t, encodeWriteRequest(series))
	if len(got) != len(series) {
		t.Fatalf("%d series decoded, %d written", len(got), len(series))
	}
	samples := 0
	for i, s := range got {
		samples += len(s.samples)
		if s.labels[0].name != "__name__" || s.labels[0].value == "" {
			t.Fatalf("series %d: first label %v, want __name__", i, s.labels[0])
		}
		for j := 1; j < len(s.labels); j++ {
			if s.labels[j-1].name >= s.labels[j].name {
				t.Fatalf("series %d: labels out of order: %v", i, s.labels)
			}
		}
		for j, smp := range s.samples {
			if smp != series[i].samples[j] {
				t.Fatalf("series %d sample %d: %v, wrote %v", i, j, smp, series[i].samples[j])
			}
			if j > 0 && smp.t <= s.samples[j-1].t {
				t.Fatalf("series %d: samples out of order", i)
			}
		}
	}
	if samples != lines {
		t.Fatalf("%d samples decoded from %d lines", samples, lines)
	}
	// Seven 10 s steps in [end-60, end]: every series has each.
	if n := len(got[0].samples); n != 7 || got[0].samples[6].t != cfg.end*1000 {
		t.Fatalf("first series: %d samples ending %d, want 7 ending %d", n, got[0].samples[n-1].t, cfg.end*1000)
	}
}

func FuzzParseSamples(f *testing.F) {
	f.Add("a{b=\"c\"} 1 10\na{b=\"c\"} 2 20\n# EOF\n")
	f.Add("x{y=\"q\\\"\\\\\"} 1e3 5\n")
	f.Add("broken")
	f.Fuzz(func(t *testing.T, in string) {
		series, err := parseSamples(strings.NewReader(in))
		if err != nil {
			return
		}
		encodeWriteRequest(series)
		for _, s := range series {
			if len(s.labels) == 0 || s.labels[0].name != "__name__" {
				t.Fatalf("series without __name__: %v", s)
			}
		}
	})
}

// TestFaultCountersStayFlat: a simulated fleet raises no fault, so that no
// alert fires on every GPU (each firing alert costs its annotations at every
// evaluation), while the accounting and CPU counters grow.
func TestFaultCountersStayFlat(t *testing.T) {
	tmpl, err := readTemplate("testdata/demo.prom")
	if err != nil {
		t.Fatal(err)
	}
	faults, growing := 0, 0
	for _, s := range tmpl {
		switch {
		case errorCounters.MatchString(s.name):
			faults++
			if r := rate(s); r != 0 {
				t.Errorf("%s%v grows at %g a second", s.name, s.labels, r)
			}
		case s.name == "nvidia_gpu_held_time_seconds_total" || s.name == "container_cpu_time_seconds_total":
			if rate(s) > 0 {
				growing++
			}
		}
	}
	if faults == 0 || growing == 0 {
		t.Fatalf("the demo scrape has %d fault counters and %d growing counters; want both", faults, growing)
	}
}
