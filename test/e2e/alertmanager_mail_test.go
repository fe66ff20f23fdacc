//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// sentMail is one message the SMTP sink took.
type sentMail struct {
	to      []string
	subject string
	body    string // quoted-printable decoded
}

// mailSink is an SMTP server on 127.0.0.1 that keeps every message.
type mailSink struct {
	addr string
	mu   sync.Mutex
	got  []sentMail
}

type mailSession struct {
	sink *mailSink
	to   []string
}

func (s *mailSession) Reset()                                    { s.to = nil }
func (s *mailSession) Logout() error                             { return nil }
func (s *mailSession) Mail(string, *smtp.MailOptions) error      { return nil }
func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error { s.to = append(s.to, to); return nil }
func (s *mailSession) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m := sentMail{to: s.to}
	if msg, err := mail.ReadMessage(bytes.NewReader(raw)); err == nil {
		m.subject = msg.Header.Get("Subject")
	}
	decoded, _ := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(raw)))
	m.body = string(decoded)
	s.sink.mu.Lock()
	s.sink.got = append(s.sink.got, m)
	s.sink.mu.Unlock()
	return nil
}

func startMailSink(t *testing.T) *mailSink {
	t.Helper()
	sink := &mailSink{}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &mailSession{sink: sink}, nil }))
	srv.Domain = "127.0.0.1"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	sink.addr = l.Addr().String()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sink
}

func (s *mailSink) mails() []sentMail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sentMail(nil), s.got...)
}

// TestAlertmanagerMail runs the shipped deploy/alertmanager/alertmanager.yml
// as it is (email receivers, the templated address of a user), on Debian's
// Alertmanager, with only its relay pointed at an SMTP sink here and its
// timings in seconds, and posts alerts to its API as Prometheus does: each
// holder's mail goes to its team's address, or to the Slurm job's or
// shared server's user at <login>@example.org (one receiver for every
// user); a bare uid to the platform team; and each inhibition holds (a lost
// GPU's holder, a holder on a node whose GPU time is unobserved, underused
// under memory pressure for the same holder and GPU), while the same alerts
// elsewhere are sent.
func TestAlertmanagerMail(t *testing.T) {
	if *alertmanagerPath == "" {
		t.Skip("-alertmanager is needed (make e2e passes it)")
	}
	t.Parallel()
	sink := startMailSink(t)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(shippedAlertmanagerConfig(t, "http://unused"), &cfg))
	// Back to the shipped receivers: only the relay and the timings change.
	shipped := readShippedAlertmanagerConfig(t)
	cfg["receivers"] = shipped["receivers"]
	cfg["global"].(map[string]any)["smtp_smarthost"] = sink.addr
	out, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	addr, am := startAlertmanager(t, out)

	holder := func(name string, kv ...string) map[string]string {
		l := map[string]string{"alertname": name, "severity": "warning", "k8s_node_name": "node-1"}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	alerts := []map[string]string{
		holder("GPUHolderInputBound", "state", "input_bound", "k8s_namespace_name", "prod", "k8s_pod_name", "loader-0", "hw_id", "GPU-1"),
		holder("GPUHolderUnderused", "state", "underused", "slurm_job_id", "4711", "process_owner", "dana", "hw_id", "GPU-2"),
		holder("GPUHolderIdle", "state", "idle", "process_owner", "alice", "hw_id", "GPU-3"),
		holder("GPUHolderIdle", "state", "idle", "slurm_job_id", "4712", "process_owner", "2002", "hw_id", "GPU-4"),
		// A lost GPU and its holder.
		{"alertname": "GPULost", "severity": "critical", "k8s_node_name": "node-1", "hw_id": "GPU-5"},
		holder("GPUHolderIdle", "state", "idle", "k8s_namespace_name", "research", "k8s_pod_name", "notebook-0", "hw_id", "GPU-5"),
		// A node whose GPU time is unobserved, and a holder there and on
		// another node.
		{"alertname": "NodeGPUTimeUnobserved", "severity": "warning", "k8s_node_name": "node-2"},
		holder("GPUHolderIdle", "state", "idle", "k8s_namespace_name", "vision", "k8s_pod_name", "yolo-0", "hw_id", "GPU-6", "k8s_node_name", "node-2"),
		holder("GPUHolderIdle", "state", "idle", "k8s_namespace_name", "vision", "k8s_pod_name", "yolo-1", "hw_id", "GPU-7", "k8s_node_name", "node-3"),
		// Memory pressure and underuse of one holder and GPU.
		holder("GPUHolderMemoryPressure", "state", "memory_pressure", "slurm_job_id", "4800", "process_owner", "erin", "hw_id", "GPU-8"),
		holder("GPUHolderUnderused", "state", "underused", "slurm_job_id", "4800", "process_owner", "erin", "hw_id", "GPU-8"),
	}
	// The alerts that inhibit others go first, and the rest once
	// Alertmanager holds them: Prometheus sends every alert again at each
	// evaluation, so inhibitions settle there; one post of all at once can
	// reach the notifier before the inhibitor has seen its sources.
	inhibiting := map[string]bool{"GPULost": true, "NodeGPUTimeUnobserved": true, "GPUHolderMemoryPressure": true}
	var sources, targets []map[string]string
	for _, l := range alerts {
		if inhibiting[l["alertname"]] {
			sources = append(sources, l)
		} else {
			targets = append(targets, l)
		}
	}
	postAlerts := func(list []map[string]string) {
		var post []map[string]any
		for _, l := range list {
			post = append(post, map[string]any{"labels": l, "annotations": map[string]string{"summary": l["alertname"] + " on " + l["hw_id"]},
				"startsAt": time.Now().UTC().Format(time.RFC3339)})
		}
		body, err := json.Marshal(post)
		require.NoError(t, err)
		resp, err := http.Post("http://"+addr+"/api/v2/alerts", "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "POST /api/v2/alerts: %s", msg)
	}
	postAlerts(sources)
	waitFor(t, 30*time.Second, "Alertmanager holds the inhibiting alerts", func() bool {
		resp, err := http.Get("http://" + addr + "/api/v2/alerts")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var held []json.RawMessage
		return json.NewDecoder(resp.Body).Decode(&held) == nil && len(held) >= len(sources)
	}, am)
	time.Sleep(time.Second)
	postAlerts(targets)

	want := map[string][]string{ // address: the alerts (hw_id) its mail must name
		"prod-oncall@example.org":  {"GPU-1"},
		"dana@example.org":         {"GPU-2"},
		"alice@example.org":        {"GPU-3"},
		"gpu-platform@example.org": {"GPU-4", "GPU-5"},
		"vision-team@example.org":  {"GPU-7"},
		"erin@example.org":         {"GPU-8"},
	}
	byAddr := map[string][]sentMail{}
	waitFor(t, 30*time.Second, "a mail to every address", func() bool {
		byAddr = map[string][]sentMail{}
		for _, m := range sink.mails() {
			for _, to := range m.to {
				byAddr[to] = append(byAddr[to], m)
			}
		}
		for a, hws := range want {
			text := ""
			for _, m := range byAddr[a] {
				text += m.body
			}
			for _, hw := range hws {
				if !strings.Contains(text, hw) {
					return false
				}
			}
		}
		return true
	}, am)
	// Several group intervals more: an alert the inhibitions failed to
	// hold would be sent by now.
	time.Sleep(6 * time.Second)
	byAddr = map[string][]sentMail{}
	for _, m := range sink.mails() {
		for _, to := range m.to {
			byAddr[to] = append(byAddr[to], m)
		}
	}
	var addrs []string
	for a := range byAddr {
		addrs = append(addrs, a)
	}
	assert.ElementsMatch(t, keys(want), addrs, "the addresses mailed (ml-team: the lost GPU's holder alone; a vision holder on the unobserved node)")
	text := func(a string) string {
		var s string
		for _, m := range byAddr[a] {
			s += m.subject + "\n" + m.body
		}
		return s
	}
	assert.NotContains(t, text("vision-team@example.org"), "GPU-6", "the holder on the node whose GPU time is unobserved")
	assert.Contains(t, text("erin@example.org"), "GPUHolderMemoryPressure")
	assert.NotContains(t, text("erin@example.org"), "GPUHolderUnderused", "underused under memory pressure, same holder and GPU")
	assert.Contains(t, text("gpu-platform@example.org"), "GPULost")
	assert.NotContains(t, text("gpu-platform@example.org"), "notebook-0", "the lost GPU's holder")
	if t.Failed() {
		for _, m := range sink.mails() {
			t.Logf("mail to %v: %s\n%.2000s", m.to, m.subject, m.body)
		}
	}
}
