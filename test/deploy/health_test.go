package deploy

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// podIP is the address the test gives the pod: a loopback address other
// than 127.0.0.1, so that a listener on 127.0.0.1 would not answer there.
const (
	podIP   = "127.0.11.2"
	otherIP = "127.0.11.3"
)

// chartHealthCollector starts the built collector with the chart's
// health_check (defaults: component status on, its feature gate in the
// pod's arguments), the nvml receiver configured by nvml, and the debug
// exporter; it returns the probe's URL on the pod IP and the container.
func chartHealthCollector(t *testing.T, nvml map[string]any, env ...string) (string, corev1.Container, func() bool) {
	t.Helper()
	objs := decodeAll(t, helmTemplate(t))
	ds := only[appsv1.DaemonSet](t, objs)[0]
	c := ds.Spec.Template.Spec.Containers[0]
	var cm *corev1.ConfigMap
	for _, o := range only[corev1.ConfigMap](t, objs) {
		cm = o
	}
	require.NotNil(t, cm)
	var full map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data["collector.yaml"]), &full))
	service := full["service"].(map[string]any)
	cfg := map[string]any{
		"receivers":  map[string]any{"nvml": nvml},
		"exporters":  map[string]any{"debug": map[string]any{"verbosity": "basic"}},
		"extensions": full["extensions"],
		"service": map[string]any{
			"extensions": service["extensions"],
			"pipelines":  map[string]any{"metrics": map[string]any{"receivers": []string{"nvml"}, "exporters": []string{"debug"}}},
			"telemetry":  map[string]any{"metrics": map[string]any{"level": "none"}},
		},
	}
	data, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "collector.yaml")
	require.NoError(t, os.WriteFile(path, data, 0o600))

	args := append([]string{"--config=" + path}, c.Args[1:]...) // and the pod's feature gates
	cmd := exec.Command(binFlag(t, "otelcol", *otelcolPath), args...)
	cmd.Env = append(append(os.Environ(), "POD_IP="+podIP), env...)
	_, done := startUntilCleanup(t, cmd)
	probe := c.LivenessProbe.HTTPGet
	port := containerPort(t, c, probe.Port.String())
	exited := func() bool {
		select {
		case err := <-done:
			done <- err
			return true
		default:
			return false
		}
	}
	return fmt.Sprintf("http://%s:%d%s", podIP, port, probe.Path), c, exited
}

// probeOK is the kubelet's rule for an HTTP probe.
func probeOK(code int) bool { return code >= 200 && code < 400 }

// waitProbe polls url until the kubelet's verdict on it is want, for up to
// 30 s.
func waitProbe(t *testing.T, url string, want bool, exited func() bool) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	last := "no answer"
	for {
		require.False(t, exited(), "the collector exited")
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if probeOK(resp.StatusCode) == want {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the probe %s never succeeded=%v (last: %s)", url, want, last)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestChartHealthCheckServesOnThePodIP: the kubelet's probe, an HTTP GET of
// the probe's path on the pod IP, answers 200 while NVML is not there yet
// (a recoverable error, within healthCheck.recoveryDuration), and nothing
// listens on other addresses.
func TestChartHealthCheckServesOnThePodIP(t *testing.T) {
	url, c, exited := chartHealthCollector(t, map[string]any{"collection_interval": "1s"})
	waitProbe(t, url, true, exited)
	// Another loopback address: a listener on every address would answer.
	port := containerPort(t, c, c.LivenessProbe.HTTPGet.Port.String())
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", otherIP, port), time.Second)
	if err == nil {
		conn.Close()
	}
	assert.Error(t, err, "health_check must listen on the pod IP only")
}

// TestChartHealthCheckTurnsRedOnAFailedReceiver: a receiver that reports a
// permanent error (here: NVML comes up after a failed first init, and the
// configured GPU is not there) turns the probe red, so that the kubelet
// restarts the pod and the readiness shows it.
func TestChartHealthCheckTurnsRedOnAFailedReceiver(t *testing.T) {
	fake, err := filepath.Abs(*fakeNVMLPath)
	require.NoError(t, err)
	if *fakeNVMLPath == "" {
		t.Fatal("-fakenvml is required (see the package comment)")
	}
	scenario := filepath.Join(t.TempDir(), "scenario.json")
	require.NoError(t, os.WriteFile(scenario, []byte(`{"init": {"fail_first": 1, "return": "DRIVER_NOT_LOADED"},
  "gpus": [{"uuid": "GPU-5151a7ed-de30-4000-8000-000000000000", "memory": {"total_bytes": 1000, "used_bytes": 1}}]}`), 0o600))
	url, _, exited := chartHealthCollector(t, map[string]any{
		"collection_interval": "1s",
		"library_path":        fake,
		"devices":             []string{"GPU-00000000-0000-4000-8000-00000000dead"},
	}, "FAKE_NVML_SCENARIO="+scenario)
	waitProbe(t, url, false, exited)
}

// syncBuffer collects a child's output.
// startUntilCleanup starts the collector cmd with its output in a buffer,
// and stops it when the test ends (SIGTERM, then a kill after 10 s),
// printing its output if the test failed. done gets cmd.Wait's result.
func startUntilCleanup(t *testing.T, cmd *exec.Cmd) (*syncBuffer, chan error) {
	t.Helper()
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("---- collector output ----\n%s", out.String())
		}
	})
	return out, done
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
