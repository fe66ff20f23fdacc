package attribution

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzParseCPUStatUsage(f *testing.F) {
	for _, s := range []string{"usage_usec 2500000\nuser_usec 2000000\n", "usage_usec x\n", "", "nr_periods 1\nusage_usec 18446744073709551615\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseCPUStatUsage(strings.NewReader(s))
		if err != nil && n != 0 {
			t.Fatalf("error with a value: %d, %v", n, err)
		}
	})
}

func FuzzParseCPUMax(f *testing.F) {
	for _, s := range []string{"max 100000", "150000 100000\n", "0 0", "max", "-1 100000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		quota, period, limited, err := parseCPUMax(s)
		if err != nil {
			return
		}
		if period <= 0 || (limited && quota <= 0) || (!limited && quota != 0) {
			t.Fatalf("%q: quota %d period %d limited %v", s, quota, period, limited)
		}
	})
}

func FuzzParseCFSQuota(f *testing.F) {
	f.Add("50000", "100000")
	f.Add("-1\n", "100000\n")
	f.Add("0", "0")
	f.Fuzz(func(t *testing.T, q, p string) {
		quota, period, limited, err := parseCFSQuota(q, p)
		if err != nil {
			return
		}
		if period <= 0 || (limited && quota <= 0) || (!limited && quota != 0) {
			t.Fatalf("%q %q: quota %d period %d limited %v", q, p, quota, period, limited)
		}
	})
}

func FuzzParseCPUAcctUsage(f *testing.F) {
	f.Add("1500000000\n")
	f.Add("-1")
	f.Add("99999999999999999999")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseCPUAcctUsage(s)
	})
}

// FuzzCgroupCPUReader: any /proc/<pid>/cgroup content reads without a
// panic, and never a file outside the cgroup root.
func FuzzCgroupCPUReader(f *testing.F) {
	for _, s := range []string{"0::/a\n", "0::/../../a\n", "3:cpu,cpuacct:/docker/x\n", "0::/../../../../..\n", "bad\n", "0::/a/../../etc\n"} {
		f.Add(s)
	}
	procRoot, cgroupRoot := f.TempDir(), f.TempDir()
	if err := os.MkdirAll(filepath.Join(procRoot, "1"), 0o755); err != nil {
		f.Fatal(err)
	}
	for p, c := range map[string]string{"cgroup.controllers": "cpu\n", "a/cpu.stat": "usage_usec 1\n", "a/cpu.max": "max 100000\n"} {
		full := filepath.Join(cgroupRoot, p)
		_ = os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, content string) {
		if err := os.WriteFile(filepath.Join(procRoot, "1", "cgroup"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		r := NewCgroupCPUReader(procRoot, cgroupRoot)
		cpu, err := r.Read(1)
		if err == nil && cpu.UsageSeconds != 1e-6 {
			t.Fatalf("%q read %+v from outside a/", content, cpu)
		}
	})
}

// FuzzLocate: any cgroup path, as /proc/<pid>/cgroup gives it (relative to
// the reader's cgroup namespace), is located under the cgroup root or not
// at all, and the same way when asked again (from the cache).
func FuzzLocate(f *testing.F) {
	const (
		pod = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7c9e6679_7425_40de_944b_e07fc1f90ae7.slice"
		ctr = "cri-containerd-3f1d0c8d0b6a4ec5a3e2d1c0b9a8f7e6d5c4b3a29180706f5e4d3c2b1a0f9e8d.scope"
	)
	for _, p := range []string{
		"/" + pod + "/" + ctr, // the host's cgroup namespace
		"/../../kubepods-burstable-pod7c9e6679_7425_40de_944b_e07fc1f90ae7.slice/" + ctr, // another container's, seen from one
		"/../../../../system.slice/docker-0123.scope", "/", "/..", "..", "../..", "/../..", "/../../../../../../../..",
		"/a/../../..", "/..x/y", "//..//../" + ctr, "/./../.", "/../" + strings.Repeat("x/", 10),
	} {
		f.Add(p)
	}
	base := f.TempDir()
	for _, dir := range []string{pod + "/" + ctr, "system.slice/docker-0123.scope", "a/b/c/d/e/f/g/h", "user.slice"} {
		if err := os.MkdirAll(filepath.Join(base, dir), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, p string) {
		r := NewCgroupCPUReader(base, base) // no process is read
		dir, err := r.locate(base, p)
		again, errAgain := r.locate(base, p)
		if dir != again || (err == nil) != (errAgain == nil) {
			t.Fatalf("%q: %q (%v), then %q (%v)", p, dir, err, again, errAgain)
		}
		if err != nil {
			if !strings.Contains(p, "..") {
				t.Fatalf("%q: %v", p, err)
			}
			return
		}
		if rel, relErr := filepath.Rel(base, dir); relErr != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			t.Fatalf("%q: %q is outside the cgroup root", p, dir)
		}
		if !strings.Contains(p, "..") && dir != filepath.Join(base, p) {
			t.Fatalf("%q: %q", p, dir)
		}
	})
}
