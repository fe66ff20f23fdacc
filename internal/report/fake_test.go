package report

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// fakeProm is a Prometheus HTTP API that answers each query by what it
// reads (the first counter it increases, or the series it names) with
// canned JSON, and keeps every query it was asked.
type fakeProm struct {
	srv *httptest.Server
	// answers are the "result" arrays of instant queries, by what (held,
	// busy, active, idle, memory, states, prices); life is the matrix of
	// the range query.
	answers map[string]string
	life    string
	// rules is the data of /api/v1/rules; records lists recording rules.
	records []string
	noRules bool

	mu      sync.Mutex
	queries []string
}

var firstIncrease = regexp.MustCompile(`increase\((?:series:)?nvidia_gpu_(held|busy|active|idle)_time_seconds_total`)

func (f *fakeProm) what(q string) string {
	switch {
	case strings.Contains(q, "nvidia_gpu_price_per_hour"):
		return "prices"
	case strings.Contains(q, "gpu_holder:nvidia_gpu_diagnosis:5m"):
		return "states"
	case strings.Contains(q, "hw_gpu_memory_usage_bytes"):
		return "memory"
	case strings.Contains(q, "group by (user)"):
		return "user"
	case strings.Contains(q, "group by (hw_id, node)"):
		return "nodes"
	}
	if m := firstIncrease.FindStringSubmatch(q); m != nil {
		return m[1]
	}
	return "?"
}

func newFakeProm(t *testing.T) *fakeProm {
	f := &fakeProm{answers: map[string]string{}, records: []string{recordDiagnosis, recordResampled}}
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, data string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":%s}`, data)
	}
	mux.HandleFunc("/api/v1/query", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		q := r.Form.Get("query")
		f.mu.Lock()
		f.queries = append(f.queries, q)
		f.mu.Unlock()
		res := f.answers[f.what(q)]
		if res == "" {
			res = "[]"
		}
		reply(w, `{"resultType":"vector","result":`+res+`}`)
	})
	mux.HandleFunc("/api/v1/query_range", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		f.mu.Lock()
		f.queries = append(f.queries, "range: "+r.Form.Get("query"))
		f.mu.Unlock()
		res := f.life
		if res == "" {
			res = "[]"
		}
		reply(w, `{"resultType":"matrix","result":`+res+`}`)
	})
	mux.HandleFunc("/api/v1/rules", func(w http.ResponseWriter, r *http.Request) {
		if f.noRules {
			reply(w, `{"groups":[]}`)
			return
		}
		var rules []map[string]any
		for _, n := range f.records {
			rules = append(rules, map[string]any{"type": "recording", "name": n, "query": "vector(1)", "health": "ok"})
		}
		raw, _ := json.Marshal(map[string]any{"groups": []any{map[string]any{"name": "otelcol-nvml", "file": "rules.yaml", "interval": 60, "rules": rules}}})
		reply(w, string(raw))
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeProm) api(t *testing.T) v1.API {
	c, err := api.NewClient(api.Config{Address: f.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return v1.NewAPI(c)
}

// sample writes one vector element.
func sample(labels map[string]string, v float64) string {
	raw, _ := json.Marshal(labels)
	return fmt.Sprintf(`{"metric":%s,"value":[1700000000,"%g"]}`, raw, v)
}

func vector(samples ...string) string { return "[" + strings.Join(samples, ",") + "]" }
