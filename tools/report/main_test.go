package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// emptyProm is a Prometheus with the rules and no data.
func emptyProm(t *testing.T) string {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/rules", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"status":"success","data":{"groups":[{"name":"g","file":"f","interval":60,"rules":[`+
			`{"type":"recording","name":"gpu_holder:nvidia_gpu_diagnosis:5m","query":"vector(1)","health":"ok"},`+
			`{"type":"recording","name":"series:nvidia_gpu_held_time_seconds_total:5m","query":"vector(1)","health":"ok"}]}]}}`)
	})
	mux.HandleFunc("/api/v1/query", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
	})
	mux.HandleFunc("/api/v1/query_range", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"matrix","result":[]}}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestExit: every failure is one line on stderr, nothing on stdout, and
// exit 1 (a report that failed) or 2 (bad usage).
func TestExit(t *testing.T) {
	url := emptyProm(t)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--prometheus", url}, 1, "no GPU was held by any namespace"},
		{[]string{"--prometheus", down.URL}, 1, "cannot reach Prometheus"},
		{[]string{"job", "4242", "--prometheus", url}, 1, "no Slurm job 4242"},
		{[]string{"pod", "ml/trainer", "--prometheus", url}, 1, "no pod ml/trainer"},
		{[]string{"job"}, 2, "job needs its Slurm job id"},
		{[]string{"pod", "trainer"}, 2, "give namespace/name"},
		{[]string{"--by", "team"}, 2, "--by \"team\""},
		{[]string{"--from", "yesterday"}, 2, "--from"},
		{[]string{"--format", "xml"}, 2, "--format \"xml\""},
		{[]string{"--price", "-1"}, 2, "--price"},
		{[]string{"--parallel", "0"}, 2, "--parallel 0"},
		{[]string{"--price-model", "H200"}, 2, "MODEL=PRICE"},
		{[]string{"--by", "pod", "extra"}, 2, "unexpected argument"},
		{[]string{"--from", "now", "--to", "-1d", "--prometheus", url}, 1, "is not before --to"},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb, now)
		msg := strings.TrimSpace(errb.String())
		if code != c.code || out.Len() != 0 || !strings.Contains(msg, c.want) || (c.code == 1 && strings.Contains(msg, "\n")) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d, one line with %q", c.args, code, out.String(), msg, c.code, c.want)
		}
	}
}
