//go:build e2e

package e2e

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

var (
	demoWebhookPath  = flag.String("demowebhook", "", "path of the built tools/demowebhook (make demo builds it into _build); empty: the demo tests build it")
	alertmanagerPath = flag.String("alertmanager", "", "path of the Alertmanager server (Debian: /usr/bin/prometheus-alertmanager); empty: the Alertmanager tests are skipped, and the demo's is not started")
)

// TestDemoStops runs tools/demo.sh as make demo does, with its Prometheus
// and, with -alertmanager, its Alertmanager and notification log, and stops
// it the three ways a user does: Ctrl-C (SIGINT to the terminal's process
// group), SIGINT to the script started in the background by a
// non-interactive shell (which starts it with SIGINT ignored: `make demo &`
// in a script), and SIGTERM to it. Each time the script must exit, and
// every process it started (the collector, Prometheus, Alertmanager, the
// simulated kubelet, the notification log, the CPU counters' loop) must be
// gone.
func TestDemoStops(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	kubelet := *demoKubeletPath
	if kubelet == "" {
		kubelet = goBuild(t, root, "./tools/demokubelet")
	}
	webhook := *demoWebhookPath
	if webhook == "" {
		webhook = goBuild(t, root, "./tools/demowebhook")
	}
	am := "/nonexistent"
	if *alertmanagerPath != "" {
		am = testutil.AbsFlag(t, "alertmanager", *alertmanagerPath)
	}
	for _, c := range []struct {
		name string
		how  string // foreground: a terminal's job; background: a script's `&`
		sig  syscall.Signal
		code int
	}{
		{"Ctrl-C", "foreground", syscall.SIGINT, 130},
		{"SIGINT to a background demo", "background", syscall.SIGINT, 130},
		{"SIGTERM to a background demo", "background", syscall.SIGTERM, 143},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ports := map[string]int{}
			for _, p := range []string{"DEMO_METRICS_PORT", "DEMO_HEALTH_PORT", "DEMO_PROMETHEUS_PORT", "DEMO_ALERTMANAGER_PORT"} {
				ports[p] = testutil.FreePort(t)
			}
			env := []string{
				"OTELCOL=" + testutil.AbsFlag(t, "otelcol", *otelcolPath),
				"FAKENVML=" + testutil.AbsFlag(t, "fakenvml", *fakeNVMLPath),
				"DEMOKUBELET=" + kubelet, "DEMOWEBHOOK=" + webhook,
				"PROMETHEUS=" + testutil.AbsFlag(t, "prometheus", *prometheusPath), "ALERTMANAGER=" + am,
				"DEMO_SCENARIO=testdata/scenarios/demo.json", "DEMO_PODS=testdata/demo/pods.json",
			}
			for k, v := range ports {
				env = append(env, k+"="+strconv.Itoa(v))
			}
			log := filepath.Join(dir, "demo.log")
			pidFile := filepath.Join(dir, "demo.pid")
			var cmd *exec.Cmd
			if c.how == "foreground" {
				// A terminal's foreground job: a process group of its own,
				// SIGINT at its default.
				cmd = exec.Command("bash", "-c", `echo $$ >"$1"; exec bash tools/demo.sh >"$2" 2>&1`, "demo", pidFile, log)
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			} else {
				// `bash tools/demo.sh &` in a script: bash starts the job
				// with SIGINT ignored.
				cmd = exec.Command("bash", "-c", `bash tools/demo.sh >"$2" 2>&1 & echo $! >"$1"; wait $!`, "demo", pidFile, log)
			}
			cmd.Dir = root
			cmd.Env = append(os.Environ(), env...)
			require.NoError(t, cmd.Start())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var demo int
			var children []int
			t.Cleanup(func() {
				// A failed stop leaves nothing behind: everything by PID.
				for _, p := range append(children, demo) {
					if _, state, _, ok := procStat(p); ok && p > 0 && state != 'Z' {
						_ = syscall.Kill(p, syscall.SIGKILL)
					}
				}
				_ = cmd.Process.Kill()
				if t.Failed() {
					out, _ := os.ReadFile(log)
					t.Logf("---- the demo's output ----\n%s", out)
				}
			})

			deadline := time.Now().Add(90 * time.Second)
			for {
				b, _ := os.ReadFile(log)
				if strings.Contains(string(b), "demo: metrics http://127.0.0.1:") {
					break
				}
				select {
				case err := <-done:
					t.Fatalf("the demo exited before it was up: %v\n%s", err, b)
				default:
				}
				require.True(t, time.Now().Before(deadline), "the demo did not print its endpoints in 90 s:\n%s", b)
				time.Sleep(200 * time.Millisecond)
			}
			b, err := os.ReadFile(pidFile)
			require.NoError(t, err)
			demo, err = strconv.Atoi(strings.TrimSpace(string(b)))
			require.NoError(t, err)
			banner, _ := os.ReadFile(log)
			if am != "/nonexistent" {
				amAddr := fmt.Sprintf("127.0.0.1:%d", ports["DEMO_ALERTMANAGER_PORT"])
				assert.Contains(t, string(banner), "Alertmanager with the shipped routes http://"+amAddr)
				// The shipped config with the receivers rewritten loads.
				waitForHTTP(t, 30*time.Second, "http://"+amAddr+"/-/ready")
			}
			assert.Contains(t, string(banner), fmt.Sprintf("kill -INT %d", demo), "the banner names the script's PID")

			children = descendants(demo)
			names := map[string]bool{}
			for _, p := range children {
				names[procName(p)] = true
			}
			want := []string{"otelcol-nvml", "prometheus", "demokubelet", "demowebhook"}
			if am != "/nonexistent" {
				comm := filepath.Base(am)
				want = append(want, comm[:min(len(comm), 15)]) // the kernel cuts a name at 15 bytes
			}
			for _, n := range want {
				assert.True(t, names[n], "%s among the demo's processes %v", n, names)
			}

			if c.how == "foreground" {
				require.NoError(t, syscall.Kill(-cmd.Process.Pid, c.sig))
			} else {
				require.NoError(t, syscall.Kill(demo, c.sig))
			}
			select {
			case err := <-done:
				var code int
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
				assert.Equal(t, c.code, code, "the demo's exit status")
			case <-time.After(30 * time.Second):
				t.Fatalf("the demo (pid %d) still runs 30 s after %v", demo, c.sig)
			}
			// The CPU loop's last sleep may outlive it by a second.
			waitForGone(t, 5*time.Second, children)
		})
	}
}

// goBuild builds a package of the repository into a temporary directory.
func goBuild(t *testing.T, root, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkg, out)
	return bin
}

func waitForHTTP(t *testing.T, timeout time.Duration, url string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	waitFor(t, timeout, url, func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// procStat reads a process's name, state and parent from /proc; ok is false
// when it is gone.
func procStat(pid int) (name string, state byte, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, 0, false
	}
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return "", 0, 0, false
	}
	f := strings.Fields(s[close+1:])
	if len(f) < 2 {
		return "", 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return s[open+1 : close], f[0][0], ppid, true
}

func procName(pid int) string {
	n, _, _, _ := procStat(pid)
	return n
}

// descendants lists every process under pid, from the parents in /proc.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, _, ppid, ok := procStat(p); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			out = append(out, c)
			walk(c)
		}
	}
	walk(pid)
	return out
}

// waitForGone fails unless every process in pids has exited (a zombie
// counts as exited: only a reaper is missing) within timeout; the test's
// cleanup kills what is left.
func waitForGone(t *testing.T, timeout time.Duration, pids []int) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var left []string
		for _, p := range pids {
			if name, state, _, ok := procStat(p); ok && state != 'Z' {
				left = append(left, fmt.Sprintf("%s (pid %d)", name, p))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running after the demo stopped: %s", strings.Join(left, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
