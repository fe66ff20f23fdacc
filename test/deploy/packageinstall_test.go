package deploy

import (
	"bufio"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// debianRoot is an empty Debian root for dpkg --root: the dpkg database
// and the account files useradd --prefix edits (what a debootstrap root
// has, without its packages).
func debianRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "etc", "tmp"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	require.NoError(t, os.Chmod(filepath.Join(root, "tmp"), 0o1777))
	for f, content := range map[string]string{
		"var/lib/dpkg/status":    "",
		"var/lib/dpkg/available": "",
		"etc/passwd":             "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":              "root:x:0:\n",
		"etc/shadow":             "root:*:19000:0:99999:7:::\n",
		"etc/gshadow":            "root:*::\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(root, f), []byte(content), 0o644))
	}
	return root
}

// dpkgInstall installs deb into root the way mmdebstrap does for a foreign
// root: the maintainer scripts run on this host with DPKG_ROOT=root. The
// root has no libc6 or passwd package, hence --force-depends.
func dpkgInstall(t *testing.T, root, deb string) string {
	t.Helper()
	return output(t, "dpkg", "--root="+root, "--force-script-chrootless", "--force-depends", "--install", deb)
}

// passwdEntry is the user's line of root's /etc/passwd, split.
func passwdEntry(t *testing.T, root, user string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	require.NoError(t, err)
	var found []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(line, ":"); f[0] == user {
			require.Nil(t, found, "%s is in /etc/passwd twice", user)
			found = f
		}
	}
	require.NotNil(t, found, "no user %s in the root's /etc/passwd:\n%s", user, data)
	require.Len(t, found, 7)
	return found
}

// hostUnits copies this host's systemd targets into root, as the systemd
// package would have installed them there: the unit's default dependencies
// (sysinit.target, ...) and its WantedBy= for systemd-analyze --root.
func hostUnits(t *testing.T, root string) {
	t.Helper()
	targets, err := filepath.Glob("/usr/lib/systemd/system/*.target")
	require.NoError(t, err)
	require.NotEmpty(t, targets, "no systemd targets on this host: apt-get install systemd")
	for _, f := range targets {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(root, f), data, 0o644))
	}
}

// chrootLibraries puts into root what the binary and the driver's library
// load: the loader and every library they need, found by soname in this
// host's library directories (where a Debian root has them).
func chrootLibraries(t *testing.T, root string, elfs ...string) {
	t.Helper()
	libdir := hostLibDir
	require.NoError(t, os.MkdirAll(filepath.Join(root, libdir), 0o755))
	var todo []string
	for _, e := range elfs {
		f, err := elf.Open(e)
		require.NoError(t, err)
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				b, err := io.ReadAll(p.Open())
				require.NoError(t, err)
				loader := strings.TrimRight(string(b), "\x00")
				require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(loader)), 0o755))
				copyTo(t, loader, filepath.Join(root, loader), 0o755)
			}
		}
		libs, err := f.ImportedLibraries()
		require.NoError(t, err)
		todo = append(todo, libs...)
		f.Close()
	}
	done := map[string]bool{}
	for len(todo) > 0 {
		lib := todo[0]
		todo = todo[1:]
		if done[lib] {
			continue
		}
		done[lib] = true
		dst := filepath.Join(root, libdir, lib)
		if _, err := os.Stat(dst); err == nil {
			continue // the driver's, already there
		}
		src := filepath.Join(libdir, lib)
		copyTo(t, src, dst, 0o644)
		f, err := elf.Open(src)
		require.NoError(t, err)
		libs, err := f.ImportedLibraries()
		require.NoError(t, err)
		todo = append(todo, libs...)
		f.Close()
	}
}

func copyTo(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, mode))
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// listeners are the addresses pid listens on (TCP, from /proc/net/tcp and
// tcp6, by the inodes of its sockets).
func listeners(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	inodes := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil {
			if m := regexp.MustCompile(`^socket:\[(\d+)\]$`).FindStringSubmatch(l); m != nil {
				inodes[m[1]] = true
			}
		}
	}
	var out []string
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
				continue
			}
			addr, port, _ := strings.Cut(fields[1], ":")
			b, err := hex.DecodeString(addr)
			require.NoError(t, err)
			for i := 0; i+4 <= len(b); i += 4 { // each 32-bit word is in host (little-endian) order
				b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
			}
			p, _ := strconv.ParseUint(port, 16, 16)
			out = append(out, net.JoinHostPort(net.IP(b).String(), strconv.FormatUint(p, 10)))
		}
		f.Close()
	}
	return out
}

// TestPackageDebInstall installs the .deb of this machine's architecture
// into a Debian root with dpkg, checks the user and the unit
// (systemd-analyze verify and security), runs the installed collector there
// as the unit does on the simulated NVML, then upgrades and removes the
// package, which keep the edited config.
func TestPackageDebInstall(t *testing.T) {
	dir := packagesFolder(t)
	v := projectVersion(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root (chroot, mount)")
	}
	require.NotEmpty(t, hostLibDir, "no package for %s", runtime.GOARCH)
	deb := filepath.Join(dir, debFile(v, runtime.GOARCH))
	root := debianRoot(t)
	dpkgInstall(t, root, deb)
	status := output(t, "dpkg", "--root="+root, "--status", "otelcol-nvml")
	assert.Contains(t, status, "Status: install ok installed")
	assert.Contains(t, status, "Version: "+v+"-1")

	// The preinst made the unit's user: a system account without a login.
	pw := passwdEntry(t, root, "otelcol-nvml")
	uid, err := strconv.Atoi(pw[2])
	require.NoError(t, err)
	gid, err := strconv.Atoi(pw[3])
	require.NoError(t, err)
	assert.True(t, uid > 0 && uid < 1000, "a system uid, got %d", uid)
	assert.Equal(t, "/usr/sbin/nologin", pw[6])
	group, err := os.ReadFile(filepath.Join(root, "etc/group"))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^otelcol-nvml:x:`+pw[3]+`:$`, string(group), "its own group")

	unitPath := "/usr/lib/systemd/system/otelcol-nvml.service"
	t.Run("systemd-analyze", func(t *testing.T) {
		hostUnits(t, root)
		// verify: the unit parses, with every key known (a warning fails
		// too), and its ExecStart binary is installed.
		cmd := exec.Command("systemd-analyze", "verify", "--man=no", "--root="+root, unitPath)
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "systemd-analyze verify:\n%s", out)
		assert.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify says something")
		// security: the exposure of the hardening, 0 (all) to 10 (none); the
		// threshold is in tenths. 1.9 with what NVML allows.
		out, err = exec.Command("systemd-analyze", "security", "--offline=yes", "--root="+root, "--threshold=20", "otelcol-nvml.service").CombinedOutput()
		assert.NoError(t, err, "systemd-analyze security: exposure above 2.0:\n%s", out)
		assert.Regexp(t, `Overall exposure level for otelcol-nvml.service: \d`, string(out))
	})

	t.Run("runs on the simulated NVML", func(t *testing.T) {
		fake := binFlag(t, "fakenvml", *fakeNVMLPath)
		scenario := *scenarioPath
		if scenario == "" {
			scenario = filepath.Join(repoRoot, "testdata", "scenarios", "demo.json")
		}
		// The driver's library where the NVIDIA driver's Debian packages put it.
		require.NoError(t, os.MkdirAll(filepath.Join(root, hostLibDir), 0o755))
		copyTo(t, fake, filepath.Join(root, hostLibDir, "libnvidia-ml.so.1"), 0o644)
		copyTo(t, scenario, filepath.Join(root, "tmp/scenario.json"), 0o644)
		chrootLibraries(t, root, filepath.Join(root, "usr/bin/otelcol-nvml"), fake)
		proc := filepath.Join(root, "proc")
		require.NoError(t, os.MkdirAll(proc, 0o555))
		require.NoError(t, syscall.Mount("proc", proc, "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""))
		t.Cleanup(func() { _ = syscall.Unmount(proc, syscall.MNT_DETACH) })

		// otelcol-nvml-report runs from the package as any user: here, no
		// Prometheus to reach, its one-line message and exit 1.
		out, err := exec.Command("chroot", fmt.Sprintf("--userspec=%d:%d", uid, gid), root,
			"/usr/bin/otelcol-nvml-report", fmt.Sprintf("--prometheus=http://127.0.0.1:%d", freePort(t))).CombinedOutput()
		var exit *exec.ExitError
		if assert.ErrorAs(t, err, &exit, "otelcol-nvml-report without a Prometheus: %s", out) {
			assert.Equal(t, 1, exit.ExitCode())
		}
		assert.Contains(t, string(out), "cannot reach Prometheus")

		// The admin's settings, in the unit's environment file.
		promPort, healthPort, telemetryPort := freePort(t), freePort(t), freePort(t)
		conf := filepath.Join(root, "etc/otelcol-nvml/otelcol-nvml.conf")
		f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = fmt.Fprintf(f, "PROMETHEUS_PORT=%d\nHEALTH_PORT=%d\nTELEMETRY_PORT=%d\nCOLLECTION_INTERVAL=1s\nFAKE_NVML_SCENARIO=/tmp/scenario.json\n",
			promPort, healthPort, telemetryPort)
		require.NoError(t, err)
		require.NoError(t, f.Close())

		u := readUnit(t, filepath.Join(root, unitPath))
		assert.Equal(t, "otelcol-nvml", u.one(t, "User"))
		env := u.environment(t, root)
		argv := u.execStart(t, env)
		assert.Equal(t, []string{"/usr/bin/otelcol-nvml", "--config=/etc/otelcol-nvml/config.yaml"}, argv)
		var environ []string
		for k, v := range env {
			environ = append(environ, k+"="+v)
		}
		slices.Sort(environ)
		cmd := exec.Command("chroot", append([]string{fmt.Sprintf("--userspec=%d:%d", uid, gid), root}, argv...)...)
		cmd.Env = environ
		cmd.Dir = "/"
		logs, done := startUntilCleanup(t, cmd)

		client := &http.Client{Timeout: 2 * time.Second}
		var metrics string
		deadline := time.Now().Add(60 * time.Second)
		for {
			select {
			case err := <-done:
				t.Fatalf("the collector exited: %v", err)
			default:
			}
			if resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", promPort)); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				metrics = string(b)
				if strings.Contains(metrics, "hw_gpu_memory_limit_bytes{") && strings.Contains(metrics, "system_cpu_time_seconds_total{") {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no GPU and host metrics on :%d/metrics after 60 s; got:\n%.2000s", promPort, metrics)
			}
			time.Sleep(300 * time.Millisecond)
		}
		assert.Regexp(t, `hw_gpu_memory_limit_bytes\{[^}]*hw_id="GPU-`, metrics)
		assert.Contains(t, logs.String(), "fakenvml: SIMULATED NVML", "the loader found the driver's library in the root")
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/status", healthPort))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "the health check")
		resp, err = client.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", telemetryPort))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "the collector's own metrics")

		pid := cmd.Process.Pid
		procStatus, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		require.NoError(t, err)
		assert.Regexp(t, fmt.Sprintf(`(?m)^Uid:\s+%d\s+%d\s+%d\s+%d$`, uid, uid, uid, uid), string(procStatus), "runs as the package's user")
		// Loopback only, by default.
		ls := listeners(t, pid)
		assert.ElementsMatch(t, []string{
			fmt.Sprintf("127.0.0.1:%d", promPort), fmt.Sprintf("127.0.0.1:%d", healthPort), fmt.Sprintf("127.0.0.1:%d", telemetryPort),
		}, ls, "the collector's listeners")
	})

	t.Run("upgrade keeps the config; remove keeps it too", func(t *testing.T) {
		cfg := filepath.Join(root, "etc/otelcol-nvml/config.yaml")
		edited := []byte("# the admin's config\n")
		require.NoError(t, os.WriteFile(cfg, edited, 0o644))
		out := dpkgInstall(t, root, deb) // the same version again: dpkg's upgrade path
		assert.NotContains(t, out, "Configuration file", "dpkg asked about a conffile:\n%s", out)
		data, err := os.ReadFile(cfg)
		require.NoError(t, err)
		assert.Equal(t, edited, data, "the admin's config after an upgrade")
		passwdEntry(t, root, "otelcol-nvml") // once, with the same uid
		assert.Equal(t, pw, passwdEntry(t, root, "otelcol-nvml"))

		output(t, "dpkg", "--root="+root, "--force-script-chrootless", "--remove", "otelcol-nvml")
		_, err = os.Stat(filepath.Join(root, "usr/bin/otelcol-nvml"))
		assert.ErrorIs(t, err, os.ErrNotExist, "the binary after dpkg --remove")
		data, err = os.ReadFile(cfg)
		require.NoError(t, err, "dpkg --remove keeps conffiles")
		assert.Equal(t, edited, data)
	})
}
