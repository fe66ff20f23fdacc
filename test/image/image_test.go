//go:build image

// Package image runs an otelcol-nvml image (make image) the way a GPU
// node would, without a container runtime: podman run cannot start
// containers in this sandbox, so the test creates a container from the
// image, mounts its root, drops the simulated libnvidia-ml.so.1 where the
// NVIDIA container toolkit puts the driver's, and chroot-runs the image's
// entrypoint and command as the image's user with the image's environment.
// A foreign image (arm64 on an amd64 host) runs the same way under
// qemu-user: qemu-aarch64-static (static, it needs nothing from the host)
// is copied into the root and runs the entrypoint there, so the image's own
// loader and libraries are used (binfmt_misc is not needed).
// Run it with `make image-test` (root, podman; once per platform), or:
//
//	go test -tags image -count=1 -v ./test/image -arch=amd64 -image=localhost/otelcol-nvml:0.1.0-amd64 \
//	    -fakenvml=/abs/libnvidia-ml.so.1 -libdir=/usr/lib/x86_64-linux-gnu -scenario=/abs/scenario.json
//	go test -tags image -count=1 -v ./test/image -arch=arm64 -image=localhost/otelcol-nvml:0.1.0-arm64 \
//	    -fakenvml=/abs/arm64/libnvidia-ml.so.1 -libdir=/usr/lib/aarch64-linux-gnu \
//	    -qemu=/usr/bin/qemu-aarch64-static -scenario=/abs/scenario.json
package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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

	"github.com/otelcol-nvml/otelcol-nvml/test/testutil"
)

var (
	imageRef     = flag.String("image", "", "the image to test, e.g. localhost/otelcol-nvml:0.1.0")
	archivePath  = flag.String("archive", "", "the OCI archive make image wrote (checked to hold the image)")
	fakeNVMLPath = flag.String("fakenvml", "", "the simulated libnvidia-ml.so.1 (make fakenvml)")
	scenarioPath = flag.String("scenario", "", "the fake library's scenario")
	podmanPath   = flag.String("podman", "podman", "the podman binary")
	archFlag     = flag.String("arch", "amd64", "the image's architecture: amd64 or arm64")
	indexPath    = flag.String("index", "", "the OCI archive of the image index (both platforms)")
	libDir       = flag.String("libdir", "/usr/lib/x86_64-linux-gnu", "where this host keeps the libraries of -arch that the simulated NVML links (cJSON)")
	qemuPath     = flag.String("qemu", "", "qemu-user for a foreign -arch (qemu-aarch64-static)")
)

// multiarch is the Debian/Ubuntu multiarch triplet per architecture: the
// NVIDIA container toolkit mounts the driver's libraries into
// /usr/lib/<triplet>, one of the loader's default directories.
var multiarch = map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}

// elfMachine is readelf's name of each architecture.
var elfMachine = map[string]string{"amd64": "Advanced Micro Devices X86-64", "arm64": "AArch64"}

func driverDir(t *testing.T) string {
	t.Helper()
	m, ok := multiarch[*archFlag]
	require.True(t, ok, "-arch %q: amd64 or arm64", *archFlag)
	return "/usr/lib/" + m
}

func podman(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(*podmanPath, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// imageConfig is the part of `podman image inspect` the test runs by.
type imageConfig struct {
	ID           string `json:"Id"`
	Architecture string `json:"Architecture"`
	Os           string `json:"Os"`
	Config       struct {
		User       string            `json:"User"`
		Env        []string          `json:"Env"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels"`
	} `json:"Config"`
}

func inspect(t *testing.T) imageConfig {
	t.Helper()
	var out []imageConfig
	require.NoError(t, json.Unmarshal([]byte(podman(t, "image", "inspect", *imageRef)), &out))
	require.Len(t, out, 1)
	return out[0]
}

func TestImageLabelsAndArchive(t *testing.T) {
	cfg := inspect(t)
	assert.Equal(t, "linux", cfg.Os)
	assert.Equal(t, *archFlag, cfg.Architecture, "the image's platform")
	for _, l := range []string{"title", "description", "version", "revision", "created"} {
		assert.NotEmpty(t, cfg.Config.Labels["org.opencontainers.image."+l], "OCI label org.opencontainers.image.%s", l)
	}
	if *archivePath == "" {
		t.Skip("-archive not given")
	}
	// An OCI archive: a tar with oci-layout, index.json and the blobs.
	out, err := exec.Command("tar", "-tf", *archivePath).Output()
	require.NoError(t, err)
	names := strings.Fields(string(out))
	assert.Contains(t, names, "oci-layout")
	assert.Contains(t, names, "index.json")
}

// TestImageInIndex: the image index (make image's archive of both
// platforms) holds this image, by its config digest (podman's image ID), as
// its -arch entry.
func TestImageInIndex(t *testing.T) {
	if *indexPath == "" {
		t.Skip("-index not given")
	}
	cfg := inspect(t)
	f, err := os.Open(*indexPath)
	require.NoError(t, err)
	defer f.Close()
	blobs := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if h.Typeflag != tar.TypeReg || h.Size > 1<<20 { // layers: not read
			continue
		}
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		blobs[strings.TrimPrefix(h.Name, "./")] = b
	}
	type desc struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Platform  struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		} `json:"platform"`
	}
	type manifest struct {
		Manifests []desc `json:"manifests"`
		Config    *desc  `json:"config"`
	}
	read := func(name string) manifest {
		var m manifest
		b, ok := blobs[name]
		require.True(t, ok, "%s not in %s", name, *indexPath)
		require.NoError(t, json.Unmarshal(b, &m), name)
		return m
	}
	blobName := func(d string) string { return "blobs/" + strings.Replace(d, ":", "/", 1) }
	found := map[string]string{} // platform -> config digest
	var walk func(ds []desc)
	walk = func(ds []desc) {
		for _, d := range ds {
			m := read(blobName(d.Digest))
			if m.Config == nil {
				walk(m.Manifests)
				continue
			}
			found[d.Platform.OS+"/"+d.Platform.Architecture] = m.Config.Digest
		}
	}
	walk(read("index.json").Manifests)
	assert.Len(t, found, 2, "the index: linux/amd64 and linux/arm64; got %v", found)
	assert.Equal(t, "sha256:"+strings.TrimPrefix(cfg.ID, "sha256:"), found["linux/"+*archFlag],
		"the index's linux/%s image is the image under test", *archFlag)
}

// TestImageRunsChrooted is the image on a simulated GPU node.
func TestImageRunsChrooted(t *testing.T) {
	cfg := inspect(t)
	uid, gid := parseUser(t, cfg.Config.User)
	require.NotZero(t, uid, "the image's default user must not be root")

	// A container's writable root, as a runtime would prepare it.
	ctr := podman(t, "create", *imageRef)
	t.Cleanup(func() { podman(t, "rm", "--force", ctr) })
	root := podman(t, "mount", ctr)
	t.Cleanup(func() { podman(t, "unmount", ctr) })
	driverDir := driverDir(t)

	// The binary is for the image's platform.
	assert.Equal(t, elfMachine[*archFlag], readelfMachine(t, filepath.Join(root, strings.TrimPrefix(cfg.Config.Entrypoint[0], "/"))))

	// The image carries no NVML of its own.
	_, err := os.Stat(filepath.Join(root, driverDir, "libnvidia-ml.so.1"))
	require.ErrorIs(t, err, os.ErrNotExist, "the image must not ship libnvidia-ml.so.1")

	// What the toolkit does: the driver's library into the multiarch dir. The
	// simulated driver also brings the cJSON it links (Debian ships no
	// static libcjson); every other library it needs must be in the image.
	fake := absFile(t, *fakeNVMLPath)
	require.Equal(t, elfMachine[*archFlag], readelfMachine(t, fake), "-fakenvml is built for another platform")
	copyFile(t, fake, filepath.Join(root, driverDir, "libnvidia-ml.so.1"))
	for _, dep := range neededNotIn(t, fake, filepath.Join(root, driverDir)) {
		require.True(t, strings.HasPrefix(dep, "libcjson"), "libnvidia-ml.so.1 needs %s, which the image lacks", dep)
		copyFile(t, filepath.Join(*libDir, dep), filepath.Join(root, driverDir, dep))
	}
	copyFile(t, absFile(t, *scenarioPath), filepath.Join(root, "tmp", "scenario.json"))

	// The runtime's /proc (host_metrics reads it); nothing else from outside.
	procDir := filepath.Join(root, "proc")
	require.NoError(t, os.MkdirAll(procDir, 0o555))
	require.NoError(t, syscall.Mount("proc", procDir, "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""))
	t.Cleanup(func() { _ = syscall.Unmount(procDir, syscall.MNT_DETACH) })

	promPort, healthPort := testutil.FreePort(t), testutil.FreePort(t)
	argv := append(slices.Clone(cfg.Config.Entrypoint), cfg.Config.Cmd...)
	require.NotEmpty(t, argv)
	if *archFlag != runtime.GOARCH {
		// A foreign image: qemu-user, inside the root, runs the entrypoint
		// with the image's loader (PT_INTERP resolves inside the chroot).
		require.NotEmpty(t, *qemuPath, "-arch %s on %s needs -qemu", *archFlag, runtime.GOARCH)
		copyFile(t, absFile(t, *qemuPath), filepath.Join(root, ".qemu-user"))
		t.Cleanup(func() { _ = os.Remove(filepath.Join(root, ".qemu-user")) })
		argv = append([]string{"/.qemu-user"}, argv...)
	}
	// Only the image's environment and the test's knobs.
	env := append(slices.Clone(cfg.Config.Env), "FAKE_NVML_SCENARIO=/tmp/scenario.json",
		"PROMETHEUS_PORT="+strconv.Itoa(promPort), "HEALTH_PORT="+strconv.Itoa(healthPort), "COLLECTION_INTERVAL=1s")
	for _, e := range env {
		require.False(t, strings.HasPrefix(e, "LD_LIBRARY_PATH="), "the image must not need LD_LIBRARY_PATH")
	}
	// chroot(8) from the host; the entrypoint runs inside the root with
	// exactly env (no inherited environment).
	cmd := exec.Command("chroot", append([]string{"--userspec=" + fmt.Sprintf("%d:%d", uid, gid), root}, argv...)...)
	cmd.Env = env
	cmd.Dir = "/"
	logs := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
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
			t.Logf("---- collector output ----\n%s", logs.String())
		}
	})

	// GPU metrics come out, through the image's own loader and libraries
	// (under qemu-user the collector starts in some 10 s).
	var metrics string
	deadline := time.Now().Add(90 * time.Second)
	client := &http.Client{Timeout: 2 * time.Second}
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
			if strings.Contains(metrics, "hw_gpu_memory_limit_bytes{") && strings.Contains(metrics, "hw_power_watts{") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no GPU metrics on :%d/metrics after 90 s; got:\n%.2000s", promPort, metrics)
		}
		time.Sleep(500 * time.Millisecond)
	}
	gpus := regexp.MustCompile(`hw_gpu_memory_limit_bytes\{[^}]*hw_id="(GPU-[0-9a-f-]+)"`).FindAllStringSubmatch(metrics, -1)
	assert.NotEmpty(t, gpus, "GPU series carry hw_id")
	assert.Contains(t, logs.String(), "fakenvml: SIMULATED NVML", "the simulated library was loaded")

	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/status", healthPort))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the default config's health check")

	// The process: the image's non-root user, and every file it maps from
	// inside the image root (the loader found libnvidia-ml.so.1 in
	// /usr/lib/x86_64-linux-gnu on its own).
	pid := cmd.Process.Pid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, field := range []string{"Uid", "Gid"} {
		m := regexp.MustCompile(`(?m)^` + field + `:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)`).FindStringSubmatch(string(status))
		require.NotNil(t, m, field)
		want := strconv.Itoa(map[string]int{"Uid": uid, "Gid": gid}[field])
		assert.Equal(t, []string{want, want, want, want}, m[1:], "%s (real, effective, saved, fs)", field)
	}
	maps := mappedFiles(t, pid)
	assert.Contains(t, maps, filepath.Join(root, driverDir, "libnvidia-ml.so.1"))
	for _, f := range maps {
		assert.True(t, strings.HasPrefix(f, root+"/"), "the collector maps %s, outside the image root %s", f, root)
	}
}

func parseUser(t *testing.T, user string) (int, int) {
	t.Helper()
	u, g, ok := strings.Cut(user, ":")
	require.True(t, ok, "the image's User %q should be numeric uid:gid (a runtime checks runAsNonRoot by it)", user)
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	require.NoError(t, err1)
	require.NoError(t, err2)
	return uid, gid
}

// mappedFiles lists the files a process maps (its binary and libraries).
func mappedFiles(t *testing.T, pid int) []string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	require.NoError(t, err)
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], "/") {
			continue // anonymous, [heap], [vdso], ...
		}
		if p := fields[5]; !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// neededNotIn returns the sonames elf needs (readelf's NEEDED, which reads a
// foreign ELF too) that dir does not hold.
func neededNotIn(t *testing.T, elf, dir string) []string {
	t.Helper()
	out, err := exec.Command("readelf", "-d", elf).Output()
	require.NoError(t, err)
	var missing []string
	for _, m := range regexp.MustCompile(`\(NEEDED\)\s+Shared library: \[([^\]]+)\]`).FindAllStringSubmatch(string(out), -1) {
		if _, err := os.Stat(filepath.Join(dir, m[1])); err != nil {
			missing = append(missing, m[1])
		}
	}
	return missing
}

func readelfMachine(t *testing.T, elf string) string {
	t.Helper()
	out, err := exec.Command("readelf", "-h", elf).Output()
	require.NoError(t, err, elf)
	m := regexp.MustCompile(`(?m)^\s*Machine:\s*(.+?)\s*$`).FindStringSubmatch(string(out))
	require.NotNil(t, m, "readelf -h %s", elf)
	return m[1]
}

func absFile(t *testing.T, p string) string {
	t.Helper()
	require.NotEmpty(t, p, "a required flag is missing (see the package comment)")
	a, err := filepath.Abs(p)
	require.NoError(t, err)
	return a
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, 0o755))
}

// TestImageReport: otelcol-nvml-report is in the image beside the collector,
// for the image's platform, and runs there as the image's user (static: it
// needs none of the image's libraries); with no Prometheus to reach it says
// so in one line and exits 1.
func TestImageReport(t *testing.T) {
	cfg := inspect(t)
	uid, gid := parseUser(t, cfg.Config.User)
	ctr := podman(t, "create", *imageRef)
	t.Cleanup(func() { podman(t, "rm", "--force", ctr) })
	root := podman(t, "mount", ctr)
	t.Cleanup(func() { podman(t, "unmount", ctr) })

	bin := filepath.Join(root, "otelcol-nvml-report")
	assert.Equal(t, elfMachine[*archFlag], readelfMachine(t, bin))
	argv := []string{"/otelcol-nvml-report", fmt.Sprintf("--prometheus=http://127.0.0.1:%d", testutil.FreePort(t))}
	if *archFlag != runtime.GOARCH {
		require.NotEmpty(t, *qemuPath, "-arch %s on %s needs -qemu", *archFlag, runtime.GOARCH)
		copyFile(t, absFile(t, *qemuPath), filepath.Join(root, ".qemu-user"))
		t.Cleanup(func() { _ = os.Remove(filepath.Join(root, ".qemu-user")) })
		argv = append([]string{"/.qemu-user"}, argv...)
	}
	cmd := exec.Command("chroot", append([]string{"--userspec=" + fmt.Sprintf("%d:%d", uid, gid), root}, argv...)...)
	cmd.Env = cfg.Config.Env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if assert.ErrorAs(t, err, &exit, "otelcol-nvml-report without a Prometheus: %s", out) {
		assert.Equal(t, 1, exit.ExitCode())
	}
	assert.Regexp(t, `^otelcol-nvml-report: cannot reach Prometheus at \S+ .*\n$`, string(out))
}
