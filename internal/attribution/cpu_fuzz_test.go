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
