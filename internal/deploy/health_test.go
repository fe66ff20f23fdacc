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

// TestChartHealthCheckServesOnThePodIP runs the built collector with the
// chart's health_check (defaults: component status on, its feature gate in
// the pod's arguments) and checks that the kubelet's probe, an HTTP GET of
// the probe's path on the pod IP, answers 200, and that nothing answers on
// 127.0.0.1. The pipeline is cut down to the nvml receiver (no driver here:
// it keeps running and retries) and the debug exporter.
func TestChartHealthCheckServesOnThePodIP(t *testing.T) {
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
		"receivers":  map[string]any{"nvml": map[string]any{"collection_interval": "1s"}},
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

	args := []string{"--config=" + path}
	args = append(args, c.Args[1:]...) // the feature gates
	cmd := exec.Command(binFlag(t, "otelcol", *otelcolPath), args...)
	cmd.Env = append(os.Environ(), "POD_IP="+podIP)
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
			t.Logf("collector output:\n%s", out.String())
		}
	})

	probe := c.LivenessProbe.HTTPGet
	port := containerPort(t, c, probe.Port.String())
	url := fmt.Sprintf("http://%s:%d%s", podIP, port, probe.Path)
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("the collector exited: %v", err)
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the probe %s never answered 200 (last: %v)", url, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// Another loopback address: a listener on every address would answer.
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", otherIP, port), time.Second)
	if err == nil {
		conn.Close()
	}
	assert.Error(t, err, "health_check must listen on the pod IP only")
}

// syncBuffer collects a child's output.
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
