package attribution

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	fixtureCtr    = "3f1d0c8d0b6a4ec5a3e2d1c0b9a8f7e6d5c4b3a29180706f5e4d3c2b1a0f9e8d"
	fixturePodUID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
)

// writeTree writes files (path relative to root: content) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
}

func TestCgroupCPUReader(t *testing.T) {
	v2Path := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(fixturePodUID, "-", "_") +
		".slice/cri-containerd-" + fixtureCtr + ".scope"
	tests := []struct {
		name    string
		cgroup  string            // /proc/<pid>/cgroup
		tree    map[string]string // under the cgroup root
		want    ContainerCPU
		wantErr string
	}{
		{
			name:   "v2 with a quota",
			cgroup: "0::" + v2Path + "\n",
			tree: map[string]string{
				"cgroup.controllers":     "cpuset cpu io memory pids\n",
				v2Path + "/cpu.stat":     "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 10\n",
				v2Path + "/cpu.max":      "150000 100000\n",
				"kubepods.slice/cpu.max": "max 100000\n",
			},
			want: ContainerCPU{UsageSeconds: 2.5, LimitCores: 1.5},
		},
		{
			name:   "v2 without a quota",
			cgroup: "0::" + v2Path + "\n",
			tree: map[string]string{
				"cgroup.controllers": "cpu\n",
				v2Path + "/cpu.stat": "usage_usec 7\n",
				v2Path + "/cpu.max":  "max 100000\n",
			},
			want: ContainerCPU{UsageSeconds: 7e-6},
		},
		{
			// A collector in its own cgroup namespace, at
			// /kubepods.slice/kubepods-besteffort.slice/<pod>/<ctr>: the GPU
			// container's path climbs three levels out of it.
			name:   "v2 path relative to the collector's cgroup namespace",
			cgroup: "0::/../../../kubepods-burstable.slice/kubepods-burstable-podx.slice/cri-containerd-" + fixtureCtr + ".scope\n",
			tree: map[string]string{
				"cgroup.controllers": "cpu\n",
				"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podx.slice/cri-containerd-" + fixtureCtr + ".scope/cpu.stat": "usage_usec 1000000\n",
				"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podx.slice/cri-containerd-" + fixtureCtr + ".scope/cpu.max":  "50000 100000\n",
				"system.slice/containerd.service/cpu.stat": "usage_usec 1\n",
			},
			want: ContainerCPU{UsageSeconds: 1, LimitCores: 0.5},
		},
		{
			name:   "v1, cpu and cpuacct mounted together",
			cgroup: "12:memory:/docker/" + fixtureCtr + "\n3:cpu,cpuacct:/docker/" + fixtureCtr + "\n0::/\n",
			tree: map[string]string{
				"cpu,cpuacct/docker/" + fixtureCtr + "/cpuacct.usage":     "1500000000\n",
				"cpu,cpuacct/docker/" + fixtureCtr + "/cpu.cfs_quota_us":  "50000\n",
				"cpu,cpuacct/docker/" + fixtureCtr + "/cpu.cfs_period_us": "100000\n",
			},
			want: ContainerCPU{UsageSeconds: 1.5, LimitCores: 0.5},
		},
		{
			name:   "v1, separate hierarchies, no quota",
			cgroup: "4:cpuacct:/kubepods/burstable/pod" + fixturePodUID + "/" + fixtureCtr + "\n3:cpu:/kubepods/burstable/pod" + fixturePodUID + "/" + fixtureCtr + "\n",
			tree: map[string]string{
				"cpuacct/kubepods/burstable/pod" + fixturePodUID + "/" + fixtureCtr + "/cpuacct.usage": "42000000000\n",
				"cpu/kubepods/burstable/pod" + fixturePodUID + "/" + fixtureCtr + "/cpu.cfs_quota_us":  "-1\n",
				"cpu/kubepods/burstable/pod" + fixturePodUID + "/" + fixtureCtr + "/cpu.cfs_period_us": "100000\n",
			},
			want: ContainerCPU{UsageSeconds: 42},
		},
		{
			name:    "v2, malformed cpu.stat",
			cgroup:  "0::/a\n",
			tree:    map[string]string{"cgroup.controllers": "cpu\n", "a/cpu.stat": "usage_usec many\n"},
			wantErr: "usage_usec",
		},
		{
			name:    "v2, the container's cgroup is gone",
			cgroup:  "0::/../b\n",
			tree:    map[string]string{"cgroup.controllers": "cpu\n", "a/cpu.stat": "usage_usec 1\n"},
			wantErr: "not found under",
		},
		{
			name:    "v1 without cpuacct",
			cgroup:  "4:memory:/docker/x\n",
			tree:    map[string]string{"memory/docker/x/memory.usage_in_bytes": "1\n"},
			wantErr: "no cpuacct cgroup",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			procRoot, cgroupRoot := t.TempDir(), t.TempDir()
			writeTree(t, procRoot, map[string]string{"4242/cgroup": tt.cgroup})
			writeTree(t, cgroupRoot, tt.tree)
			r := NewCgroupCPUReader(procRoot, cgroupRoot)
			got, err := r.Read(4242)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.InDelta(t, tt.want.UsageSeconds, got.UsageSeconds, 1e-9)
			assert.InDelta(t, tt.want.LimitCores, got.LimitCores, 1e-9)
			// A second read takes the remembered directory.
			again, err := r.Read(4242)
			require.NoError(t, err)
			assert.Equal(t, got, again)
		})
	}
}

func TestCgroupCPUReaderProcessGone(t *testing.T) {
	r := NewCgroupCPUReader(t.TempDir(), t.TempDir())
	_, err := r.Read(99)
	assert.True(t, errors.Is(err, ErrProcessNotFound), "%v", err)
	_, err = r.Read(0)
	assert.True(t, errors.Is(err, ErrProcessNotFound), "%v", err)
}

// ReadContainer reads a container's CPU only through a process that is
// still in it: a PID reused by another container's process is no read.
func TestCgroupCPUReaderReadContainer(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	procRoot, cgroupRoot := t.TempDir(), t.TempDir()
	writeTree(t, procRoot, map[string]string{
		"10/cgroup": "0::/system.slice/docker-" + b + ".scope\n",
		"11/cgroup": "0::/user.slice\n",
	})
	writeTree(t, cgroupRoot, map[string]string{
		"cgroup.controllers":                           "cpu\n",
		"system.slice/docker-" + b + ".scope/cpu.stat": "usage_usec 5000000\n",
		"user.slice/cpu.stat":                          "usage_usec 1000000\n",
	})
	r := NewCgroupCPUReader(procRoot, cgroupRoot)
	got, err := r.ReadContainer(10, b)
	require.NoError(t, err)
	assert.InDelta(t, 5.0, got.UsageSeconds, 1e-9)

	_, err = r.ReadContainer(10, a)
	assert.ErrorIs(t, err, ErrContainerChanged)
	assert.ErrorIs(t, err, ErrProcessNotFound)
	_, err = r.ReadContainer(11, a)
	assert.ErrorIs(t, err, ErrContainerChanged, "now a host process")
	_, err = r.ReadContainer(11, "")
	assert.NoError(t, err, "a host process, as attributed")
}

// Review 3, finding 7: a namespace-relative cgroup path that is not under
// the cgroup root (a wrong cgroup_root) was searched for again, up to
// maxSearched directories, for every container at every scrape. A failed
// search is remembered for failedSearchTTL.
func TestCgroupCPUReaderCachesAFailedSearch(t *testing.T) {
	procRoot, cgroupRoot := t.TempDir(), t.TempDir()
	writeTree(t, procRoot, map[string]string{
		"10/cgroup": "0::/../../kubepods-besteffort.slice/cri-containerd-" + fixtureCtr + ".scope\n",
		"11/cgroup": "0::/../../kubepods-besteffort.slice/cri-containerd-" + strings.Repeat("b", 64) + ".scope\n",
	})
	writeTree(t, cgroupRoot, map[string]string{
		"cgroup.controllers":        "cpu\n",
		"system.slice/a/cpu.stat":   "usage_usec 1\n",
		"user.slice/b/c/d/cpu.stat": "usage_usec 1\n",
	})
	r := NewCgroupCPUReader(procRoot, cgroupRoot)
	var walked int
	r.readDir = func(dir string) ([]os.DirEntry, error) {
		walked++
		return os.ReadDir(dir)
	}
	now := time.Unix(1_700_000_000, 0)
	r.now = func() time.Time { return now }

	_, err := r.Read(10)
	require.ErrorContains(t, err, "not found under")
	first := walked
	require.Positive(t, first)
	for range 5 {
		_, again := r.Read(10)
		assert.Equal(t, err, again, "the same error: one cause")
	}
	assert.Equal(t, first, walked, "no search again")

	_, err = r.Read(11)
	require.ErrorContains(t, err, "not found under")
	assert.Equal(t, 2*first, walked, "another path: its own search")

	now = now.Add(failedSearchTTL + time.Second)
	_, err = r.Read(10)
	require.ErrorContains(t, err, "not found under")
	assert.Equal(t, 3*first, walked, "searched again once the failure is old")

	// The container's cgroup appears under the root: found once the
	// failure is old.
	writeTree(t, cgroupRoot, map[string]string{
		"kubepods.slice/kubepods-besteffort.slice/cri-containerd-" + fixtureCtr + ".scope/cpu.stat": "usage_usec 2000000\n",
	})
	now = now.Add(failedSearchTTL + time.Second)
	cpu, err := r.Read(10)
	require.NoError(t, err)
	assert.InDelta(t, 2.0, cpu.UsageSeconds, 1e-9)
}

func TestParseCPUMax(t *testing.T) {
	for in, want := range map[string][3]int64{"max 100000": {0, 100000, 0}, "250000 100000\n": {250000, 100000, 1}} {
		q, p, limited, err := parseCPUMax(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, [3]int64{q, p, map[bool]int64{true: 1}[limited]}, in)
	}
	for _, bad := range []string{"", "max", "1 2 3", "max 0", "-5 100000", "x 100000", "100 y"} {
		_, _, _, err := parseCPUMax(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// TestCgroupCPUReaderRealCgroup reads a real cgroup this test creates, with
// a process that burns CPU in it, where the machine lets root create
// cgroups (v1 cpu and cpuacct hierarchies, or v2 with the cpu controller).
func TestCgroupCPUReaderRealCgroup(t *testing.T) {
	const root = "/sys/fs/cgroup"
	name := fmt.Sprintf("otelcol-nvml-test-%d", os.Getpid())
	var dirs []string
	v2 := false
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		v2 = true
		dirs = []string{filepath.Join(root, name)}
	} else {
		dirs = []string{filepath.Join(root, "cpu", name), filepath.Join(root, "cpuacct", name)}
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Skipf("cannot create a cgroup here (%v)", err)
		}
		t.Cleanup(func() {
			// The cgroup can go once its process has exited.
			for i := 0; i < 50 && os.Remove(d) != nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	quotaFile, quota := filepath.Join(dirs[0], "cpu.cfs_quota_us"), "50000"
	if v2 {
		quotaFile, quota = filepath.Join(dirs[0], "cpu.max"), "50000 100000"
	}
	if err := os.WriteFile(quotaFile, []byte(quota), 0o644); err != nil {
		t.Skipf("cannot set a CPU quota here (%v)", err)
	}

	// A shell that waits to be moved into the cgroup, then spins until killed.
	cmd := exec.Command("sh", "-c", `read go; while :; do :; done`)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for _, d := range dirs {
		require.NoError(t, os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644))
	}
	_, _ = stdin.Write([]byte("go\n"))

	r := NewCgroupCPUReader("/proc", root)
	before, err := r.Read(cmd.Process.Pid)
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond)
	after, err := r.Read(cmd.Process.Pid)
	require.NoError(t, err)
	assert.InDelta(t, 0.5, after.LimitCores, 1e-9, "the quota set on the cgroup")
	assert.Greater(t, after.UsageSeconds, before.UsageSeconds, "the spinning shell's CPU time")
	// Held to half a CPU by the quota, over 1.5 s.
	assert.Less(t, after.UsageSeconds-before.UsageSeconds, 1.2)
}
