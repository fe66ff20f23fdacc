//go:build cgo

package nvmlreceiver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-nvml/otelcol-nvml/test/nvmltest"
)

// The cost of each GPU process (issue 34, part 3): the full per-process
// path of a scrape on a fixture proc root.

// fixtureStatus is a /proc/<pid>/status as a 6.x kernel writes it, with
// the uid to fill in: what is parsed for process.owner.
const fixtureStatus = `Name:	%[1]s
Umask:	0022
State:	S (sleeping)
Tgid:	%[2]d
Ngid:	0
Pid:	%[2]d
PPid:	1
TracerPid:	0
Uid:	%[3]d	%[3]d	%[3]d	%[3]d
Gid:	%[3]d	%[3]d	%[3]d	%[3]d
FDSize:	256
Groups:	%[3]d
NStgid:	%[2]d
NSpid:	%[2]d
NSpgid:	%[2]d
NSsid:	%[2]d
Kthread:	0
VmPeak:	 32068000 kB
VmSize:	 31068000 kB
VmLck:	       0 kB
VmPin:	       0 kB
VmHWM:	 2101200 kB
VmRSS:	 2001200 kB
RssAnon:	 1801200 kB
RssFile:	  200000 kB
RssShmem:	       0 kB
VmData:	 2800000 kB
VmStk:	     132 kB
VmExe:	    2800 kB
VmLib:	  400000 kB
VmPTE:	    8000 kB
VmSwap:	       0 kB
HugetlbPages:	       0 kB
CoreDumping:	0
THP_enabled:	1
untag_mask:	0xffffffffffffffff
Threads:	42
SigQ:	2/96368
SigPnd:	0000000000000000
ShdPnd:	0000000000000000
SigBlk:	0000000000000000
SigIgn:	0000000001001000
SigCgt:	0000000180004a02
CapInh:	0000000000000000
CapPrm:	0000000000000000
CapEff:	0000000000000000
CapBnd:	000001ffffffffff
CapAmb:	0000000000000000
NoNewPrivs:	0
Seccomp:	0
Seccomp_filters:	0
Speculation_Store_Bypass:	thread vulnerable
SpeculationIndirectBranch:	conditional enabled
Cpus_allowed:	ffffffff
Cpus_allowed_list:	0-31
Mems_allowed:	00000000,00000001
Mems_allowed_list:	0
voluntary_ctxt_switches:	1200
nonvoluntary_ctxt_switches:	30
`

// procFixture is a proc root and a cgroup root with n GPU processes, pids
// from firstPID: of each four, three in containers of pods of their own
// (cgroup v2, systemd driver, each container with its cpu.stat and
// cpu.max), one in a Slurm job's step. Each has stat, status (a uid of
// its own, named in the host's passwd), comm, cmdline and an exe link.
type procFixture struct {
	procRoot, cgroupRoot string
	pids                 []uint32
}

const fixtureFirstPID = 10000

func newProcFixture(t testing.TB, n int) procFixture {
	t.Helper()
	f := procFixture{procRoot: t.TempDir(), cgroupRoot: t.TempDir()}
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(f.procRoot, "stat"), "cpu  1 2 3 4 5 6 7 8 9 10\nbtime 1764460800\n")
	write(filepath.Join(f.cgroupRoot, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	var passwd strings.Builder
	passwd.WriteString("root:x:0:0:root:/root:/bin/bash\n")
	for i := range n {
		pid := fixtureFirstPID + i
		uid := 2000 + i
		f.pids = append(f.pids, uint32(pid))
		fmt.Fprintf(&passwd, "user%d:x:%d:%d::/home/user%d:/bin/bash\n", i, uid, uid, i)
		dir := filepath.Join(f.procRoot, fmt.Sprint(pid))
		var cgroup string
		if i%4 == 3 {
			cgroup = fmt.Sprintf("/system.slice/slurmstepd.scope/job_%d/step_0/user/task_0", 4000+i)
		} else {
			pod := fmt.Sprintf("%08x-1111-4222-8333-%012x", i, i)
			cgroup = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(pod, "-", "_") +
				".slice/cri-containerd-" + fmt.Sprintf("%064x", 0xc0000000+i) + ".scope"
			write(filepath.Join(f.cgroupRoot, cgroup, "cpu.stat"), fmt.Sprintf("usage_usec %d\nuser_usec 1\nsystem_usec 1\n", 1000000*(i+1)))
			write(filepath.Join(f.cgroupRoot, cgroup, "cpu.max"), "400000 100000\n")
		}
		write(filepath.Join(dir, "cgroup"), "0::"+cgroup+"\n")
		write(filepath.Join(dir, "stat"), fmt.Sprintf("%d (pt_main_thread) S 1 %d %d 0 -1 4194304 0 0 0 0 %d %d 0 0 20 0 42 0 %d 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
			pid, pid, pid, 100*(i+1), 10*(i+1), 360000+i))
		write(filepath.Join(dir, "status"), fmt.Sprintf(fixtureStatus, "python3", pid, uid))
		write(filepath.Join(dir, "comm"), "pt_main_thread\n")
		write(filepath.Join(dir, "cmdline"), "python3\x00serve.py\x00--port\x00"+fmt.Sprint(8000+i)+"\x00")
		if err := os.Symlink("/usr/bin/python3.12", filepath.Join(dir, "exe")); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(f.procRoot, "1", "root", "etc", "passwd"), passwd.String())
	return f
}

// setProcesses puts the fixture's processes on gpu, each with a utilization
// sample per read (half a second old on clock), as NVML's sampler gives.
func (f procFixture) setProcesses(gpu *nvmltest.GPU, clock *nvmltest.Clock) {
	infos := make([]nvml.ProcessInfo, len(f.pids))
	for i, pid := range f.pids {
		infos[i] = proc(pid, uint64(i+1)<<28)
	}
	gpu.SetProcesses(infos...)
	gpu.GetProcessUtilizationFunc = func(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		at := uint64(clock.Now().Add(-500 * time.Millisecond).UnixMicro())
		if at <= last {
			return nil, nvml.ERROR_NOT_FOUND
		}
		out := make([]nvml.ProcessUtilizationSample, len(f.pids))
		for i, pid := range f.pids {
			out[i] = nvml.ProcessUtilizationSample{Pid: pid, TimeStamp: at, SmUtil: uint32(1 + i%50), MemUtil: uint32(i % 10)}
		}
		return out, nvml.SUCCESS
	}
}

// BenchmarkScrapeProcesses measures one scrape of a one-GPU H200 mock at
// the defaults, with 1, 8, 32 and 128 processes on the GPU: NVML's process
// list and utilization, each process's /proc (stat, status, exe), its
// cgroup (container and pod, or Slurm job), its user in the host's passwd,
// its container's CPU, the accounting and the pdata. The slope between
// sizes is the cost of one more process (docs/runs/h200-runs.md).
func BenchmarkScrapeProcesses(b *testing.B) {
	for _, n := range []int{1, 8, 32, 128} {
		b.Run(fmt.Sprintf("procs=%d", n), func(b *testing.B) {
			f := newProcFixture(b, n)
			m := nvmltest.NewH200GPUs(1)
			ts := newTestScraper(b, m, func(cfg *Config) {
				cfg.Processes.ProcRoot, cfg.Processes.CgroupRoot = f.procRoot, f.cgroupRoot
				cfg.Processes.MaxPerGPU = 0 // every process reported, 128 too (the default cap is 32)
			})
			ts.logs = nil
			f.setProcesses(m.GPUs[0], ts.clock)
			ts.start(b)
			ctx := context.Background()
			ts.clock.Advance(time.Second)
			md, err := ts.scrape(ctx) // the first scrape opens every window
			if err != nil {
				b.Fatal(err)
			}
			if got := len(processResources(md, nvmltest.UUID(0))); got != n {
				b.Fatalf("%d process resources, want %d", got, n)
			}
			b.ReportAllocs()
			for b.Loop() {
				ts.clock.Advance(time.Second)
				if _, err := ts.scrape(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Through the scrapes: a PID reused by a process of another container, for
// another user, is reported with the new process's owner and creation time
// at once, although the first process's were kept.
func TestReusedPIDGetsItsOwnOwner(t *testing.T) {
	t.Parallel()
	f := newProcFixture(t, 2)
	m := nvmltest.NewH200GPUs(1)
	ts := newTestScraper(t, m, func(cfg *Config) { cfg.Processes.ProcRoot, cfg.Processes.CgroupRoot = f.procRoot, f.cgroupRoot })
	f.setProcesses(m.GPUs[0], ts.clock)
	ts.start(t)
	ts.clock.Advance(time.Second)
	first := processResources(ts.scrapeOK(t), nvmltest.UUID(0))[fixtureFirstPID]
	require.Equal(t, "user0", first["process.owner"])
	require.NotEmpty(t, first["container.id"])

	// PID 10000 exits; a later process of user1, in the second process's
	// container, takes it.
	dir := filepath.Join(f.procRoot, fmt.Sprint(fixtureFirstPID))
	other := filepath.Join(f.procRoot, fmt.Sprint(fixtureFirstPID+1))
	for _, name := range []string{"cgroup", "status"} {
		b, err := os.ReadFile(filepath.Join(other, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	stat := fmt.Sprintf("%d (pt_main_thread) S 1 0 0 0 -1 0 0 0 0 0 5 1 0 0 20 0 1 0 %d 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		fixtureFirstPID, 370000)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
	ts.clock.Advance(time.Second)
	procs := processResources(ts.scrapeOK(t), nvmltest.UUID(0))
	assert.Equal(t, "user1", procs[fixtureFirstPID]["process.owner"])
	assert.Equal(t, procs[fixtureFirstPID+1]["container.id"], procs[fixtureFirstPID]["container.id"])
	assert.NotEqual(t, first["process.creation.time"], procs[fixtureFirstPID]["process.creation.time"])
}
