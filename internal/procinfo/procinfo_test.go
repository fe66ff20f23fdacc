package procinfo

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type fakeProc struct {
	pid, comm, status, cmdline string
	exe                        string // the link's target; empty: no link
	startTicks                 uint64 // 0: no stat file
}

// statLine is a /proc/<pid>/stat line with every field the kernel writes;
// all zero but the start time (the 22nd field).
func statLine(pid, comm string, startTicks uint64) string {
	f := make([]string, 50)
	for i := range f {
		f[i] = "0"
	}
	f[18] = fmt.Sprint(startTicks) // the 20th field after the command
	return fmt.Sprintf("%s (%s) S %s\n", pid, comm, strings.Join(f, " "))
}

func writeProc(t *testing.T, root string, p fakeProc) {
	t.Helper()
	dir := filepath.Join(root, p.pid)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "comm"), []byte(p.comm+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "status"), []byte(p.status), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cmdline"), []byte(p.cmdline), 0o644))
	if p.exe != "" {
		require.NoError(t, os.Symlink(p.exe, filepath.Join(dir, "exe")))
	}
	if p.startTicks > 0 {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(statLine(p.pid, p.comm, p.startTicks)), 0o644))
	}
}

// writeBootTime writes the /proc/stat that procfs needs for btime.
func writeBootTime(t *testing.T, root string, btime int64) {
	t.Helper()
	stat := fmt.Sprintf("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 0\nctxt 0\nbtime %d\n"+
		"processes 1\nprocs_running 1\nprocs_blocked 0\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n", btime)
	require.NoError(t, os.WriteFile(filepath.Join(root, "stat"), []byte(stat), 0o644))
}

func TestRead(t *testing.T) {
	root := t.TempDir()
	writeBootTime(t, root, 1764460800) // 2025-11-30T00:00:00Z
	writeProc(t, root, fakeProc{pid: "4242", comm: "pt_main_thread", exe: "/usr/bin/python3.12", startTicks: 360_012,
		status: "Name:\tpt_main_thread\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n", cmdline: "python3\x00train.py\x00--token=secret\x00"})
	writeProc(t, root, fakeProc{pid: "4343", comm: "torchrun",
		status: "Name:\ttorchrun\nUid:\t4000123\t4000123\t4000123\t4000123\n", cmdline: "torchrun\x00"})
	writeProc(t, root, fakeProc{pid: "4444", comm: "python3", exe: "/opt/venv/bin/python3.11 (deleted)",
		status: "Name:\tpython3\nUid:\t0\t0\t0\t0\n"})
	writePasswd(t, root, "root:x:0:0:root:/root:/bin/bash\n")
	r, err := New(root)
	require.NoError(t, err)

	info, err := r.Read(4242, false)
	require.NoError(t, err)
	assert.Equal(t, Info{ExecutableName: "python3.12", Owner: "root", CreationTime: "2025-11-30T01:00:00.12Z",
		Started: time.Date(2025, 11, 30, 1, 0, 0, 120_000_000, time.UTC), CPUOK: true}, info,
		"the executable's base name, not the renamed comm; no command line unless asked")

	info, err = r.Read(4242, true)
	require.NoError(t, err)
	assert.Equal(t, "python3 train.py --token=secret", info.CommandLine)

	info, err = r.Read(4343, false)
	require.NoError(t, err)
	assert.Equal(t, "4000123", info.Owner, "a uid without a user name stays numeric")
	assert.Equal(t, "torchrun", info.ExecutableName, "comm where exe cannot be read")
	assert.Empty(t, info.CreationTime, "no stat: no creation time")

	info, err = r.Read(4444, false)
	require.NoError(t, err)
	assert.Equal(t, "python3.11", info.ExecutableName, "a replaced binary keeps its name")

	_, err = r.Read(999999, false)
	assert.Error(t, err, "an exited process")
}

func TestReadCPUTime(t *testing.T) {
	root := t.TempDir()
	writeBootTime(t, root, 1764460800)
	dir := filepath.Join(root, "77")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "comm"), []byte("python3\n"), 0o644))
	f := make([]string, 50)
	for i := range f {
		f[i] = "0"
	}
	f[10], f[11] = "12345", "678" // utime, stime: the 14th and 15th fields
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"),
		[]byte("77 (python3) R "+strings.Join(f, " ")+"\n"), 0o644))
	r, err := New(root)
	require.NoError(t, err)
	info, err := r.Read(77, false)
	require.NoError(t, err)
	require.True(t, info.CPUOK)
	assert.Equal(t, 123450*time.Millisecond, info.UserCPU)
	assert.Equal(t, 6780*time.Millisecond, info.SystemCPU)
}

func TestCreationTimeTellsAReusedPIDApart(t *testing.T) {
	root := t.TempDir()
	writeBootTime(t, root, 1764460800)
	writeProc(t, root, fakeProc{pid: "77", comm: "a", status: "Uid:\t0\t0\t0\t0\n", startTicks: 100})
	r, err := New(root)
	require.NoError(t, err)
	first, err := r.Read(77, false)
	require.NoError(t, err)

	// The process exits and the kernel hands PID 77 to a new one.
	require.NoError(t, os.RemoveAll(filepath.Join(root, "77")))
	writeProc(t, root, fakeProc{pid: "77", comm: "a", status: "Uid:\t0\t0\t0\t0\n", startTicks: 250})
	second, err := r.Read(77, false)
	require.NoError(t, err)
	assert.Equal(t, "2025-11-30T00:00:01.00Z", first.CreationTime)
	assert.Equal(t, "2025-11-30T00:00:02.50Z", second.CreationTime)
}

func TestNoBootTimeNoCreationTime(t *testing.T) {
	root := t.TempDir() // no /proc/stat
	writeProc(t, root, fakeProc{pid: "5", comm: "x", status: "Uid:\t0\t0\t0\t0\n", startTicks: 100})
	r, err := New(root)
	require.NoError(t, err)
	info, err := r.Read(5, false)
	require.NoError(t, err)
	assert.Empty(t, info.CreationTime)
	assert.Equal(t, "x", info.ExecutableName)
}

func TestReadsTheRealProcessTable(t *testing.T) {
	r, err := New("/proc")
	require.NoError(t, err)
	info, err := r.Read(os.Getpid(), false)
	require.NoError(t, err)
	exe, err := os.Executable()
	require.NoError(t, err)
	assert.Equal(t, filepath.Base(exe), info.ExecutableName)
	started, err := time.Parse(time.RFC3339Nano, info.CreationTime)
	require.NoError(t, err, "ISO 8601")
	assert.WithinDuration(t, time.Now(), started, time.Hour, "this test started moments ago")
}

func TestNewBadRoot(t *testing.T) {
	_, err := New(filepath.Join(t.TempDir(), "missing"))
	assert.Error(t, err)
}

// A process started 1157 days after boot (1e10 ticks) has its true start:
// the conversion does not overflow on a long-running host.
func TestCreationTimeAfterYearsOfUptime(t *testing.T) {
	root := t.TempDir()
	writeBootTime(t, root, 1600000000)
	writeProc(t, root, fakeProc{pid: "42", comm: "python", status: "Uid:\t0\t0\t0\t0\n", startTicks: 10_000_000_000})
	r, err := New(root)
	require.NoError(t, err)
	info, err := r.Read(42, false)
	require.NoError(t, err)
	assert.Equal(t, time.Unix(1600000000+100_000_000, 0).UTC().Format(creationTimeLayout), info.CreationTime)
}
