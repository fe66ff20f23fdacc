package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A notification as Alertmanager 0.25 POSTs it: every alert printed with its
// receiver, status, holder, GPU and annotations; a body that is not one is
// refused.
func TestHandler(t *testing.T) {
	var out bytes.Buffer
	srv := httptest.NewServer(handler(&out))
	defer srv.Close()
	body := `{"version":"4","groupKey":"{}:{}","status":"firing","receiver":"team-vision",
	"groupLabels":{"k8s_namespace_name":"vision"},"commonLabels":{},"commonAnnotations":{},"externalURL":"http://127.0.0.1:9093",
	"alerts":[{"status":"firing","labels":{"alertname":"GPUHolderInputBound","state":"input_bound","k8s_namespace_name":"vision",
	"k8s_pod_name":"yolo-train-0","k8s_resourceclaim_name":"yolo-train-0-gpu","hw_id":"GPU-4"},
	"annotations":{"summary":"pod vision/yolo-train-0 is input-bound","advice":"raise num_workers\nand pin_memory","runbook_url":"https://x/runbook.md#input_bound"},
	"startsAt":"2026-01-01T00:00:00Z","endsAt":"0001-01-01T00:00:00Z"},
	{"status":"resolved","labels":{"alertname":"GPUHolderUnderused","slurm_job_id":"4711","process_owner":"dana","hw_id":"GPU-1"},"annotations":{}}]}`
	resp, err := http.Post(srv.URL+"/team-vision", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	want := `demo: notification to team-vision: FIRING GPUHolderInputBound, pod vision/yolo-train-0, claim yolo-train-0-gpu, GPU GPU-4
  summary: pod vision/yolo-train-0 is input-bound
  advice: raise num_workers
    and pin_memory
  runbook_url: https://x/runbook.md#input_bound
demo: notification to team-vision: RESOLVED GPUHolderUnderused, Slurm job 4711, user dana, GPU GPU-1
`
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}

	out.Reset()
	resp, err = http.Post(srv.URL, "application/json", strings.NewReader("{"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || out.Len() != 0 {
		t.Errorf("a bad body: status %d, printed %q", resp.StatusCode, out.String())
	}
}
