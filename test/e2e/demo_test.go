//go:build e2e

package e2e

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

// TestDemoConfig runs `make demo` as it ships, from testdata/: the collector
// config testdata/collector/demo.yaml on the scenario
// testdata/scenarios/demo.json. Its listeners move to free ports; every GPU
// of the scenario must reach the Prometheus endpoint under its UUID, with
// the README's names, and its health check must answer.
func TestDemoConfig(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..", "testdata")
	cfg, err := filepath.Abs(filepath.Join(root, "collector", "demo.yaml"))
	require.NoError(t, err)
	scenario, err := filepath.Abs(filepath.Join(root, "scenarios", "demo.json"))
	require.NoError(t, err)
	raw, err := os.ReadFile(scenario)
	require.NoError(t, err)
	var s Scenario
	require.NoError(t, json.Unmarshal(raw, &s))
	require.NotEmpty(t, s.GPUs)

	promAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	healthAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	p := startProcess(t, "demo collector",
		demoEnv(t, scenario),
		testutil.AbsFlag(t, "otelcol", *otelcolPath), "--config="+cfg,
		"--set=exporters::prometheus::endpoint="+promAddr,
		"--set=extensions::health_check::endpoint="+healthAddr)

	get := func(url string) (int, string) {
		client := &http.Client{Timeout: 2 * time.Second}
		resp, err := client.Get(url)
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	var body string
	waitFor(t, 40*time.Second, "every simulated GPU on the demo's Prometheus endpoint", func() bool {
		_, body = get("http://" + promAddr + "/metrics")
		for _, g := range s.GPUs {
			if !strings.Contains(body, `hw_id="`+g.UUID+`"`) {
				return false
			}
		}
		return true
	}, p)
	code, _ := get("http://" + healthAddr + "/")
	assert.Equal(t, http.StatusOK, code, "the demo's health check")
	for _, name := range []string{"hw_gpu_utilization_ratio", "hw_gpu_memory_utilization_ratio", "hw_temperature_celsius",
		"nvidia_gpu_memory_controller_utilization_ratio", "nvidia_gpu_performance_state", "hw_status"} {
		assert.Contains(t, body, "\n"+name+"{", "the demo serves %s", name)
	}
	assert.Contains(t, body, `hw_sensor_location="memory"`, "the demo scenario's memory temperatures")
	assert.Contains(t, body, "SIMULATED", "the model names say SIMULATED")
	assert.Contains(t, p.logs.String(), "fakenvml: SIMULATED NVML")
	p.requireAlive(t)
}

var demoKubeletPath = flag.String("demokubelet", "", "path of the built tools/demokubelet (make demo builds it into _build); empty: the demo tests build it")

// demoEnv is the environment `make demo` gives the collector: the fake
// library, the scenario, DEMO_DATA the demo's proc and cgroup trees (here
// testdata/demo as committed: its CPU counters do not move), and
// DEMO_KUBELET_SOCKET the socket of the simulated kubelet, which it starts
// as make demo does (startDemoKubelet).
func demoEnv(t *testing.T, scenario string) []string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return []string{scenarioEnv + "=" + scenario, "FAKENVML_LIBRARY=" + testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath),
		"DEMO_DATA=" + filepath.Join(root, "testdata", "demo"),
		"DEMO_KUBELET_SOCKET=" + startDemoKubelet(t)}
}

// startDemoKubelet starts tools/demokubelet as `make demo` does: on the
// demo's pods file (testdata/demo/pods.json, the Makefile's DEMO_PODS), with
// its socket in a temporary directory of its own, and waits for the socket.
// It is stopped by PID when the test ends, and returns the socket.
func startDemoKubelet(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	bin := *demoKubeletPath
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "demokubelet")
		build := exec.Command("go", "build", "-o", bin, "./tools/demokubelet")
		build.Dir = root
		out, err := build.CombinedOutput()
		require.NoError(t, err, "go build ./tools/demokubelet: %s", out)
	} else {
		bin = testutil.AbsFlag(t, "demokubelet", bin)
	}
	dir, err := os.MkdirTemp("", "kubelet") // short: a unix socket's path has 108 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "kubelet.sock")
	p := startProcess(t, "demokubelet", nil, bin, "-pods", filepath.Join(root, "testdata", "demo", "pods.json"), "-socket", sock)
	waitFor(t, 10*time.Second, "the simulated kubelet's socket", func() bool {
		fi, err := os.Stat(sock)
		return err == nil && fi.Mode()&os.ModeSocket != 0
	}, p)
	return sock
}
