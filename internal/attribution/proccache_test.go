package attribution

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The process cache (proccache.go): a process's details and owner are read
// once in its life, its CPU every scrape.

// procStat is a /proc/<pid>/stat line with its comm, start time and user
// CPU (ticks).
func procStat(pid int, comm string, start, utime uint64) string {
	f := make([]string, 50)
	for i := range f {
		f[i] = "0"
	}
	f[10] = fmt.Sprint(utime)
	f[18] = fmt.Sprint(start)
	return fmt.Sprintf("%d (%s) S %s\n", pid, comm, strings.Join(f, " "))
}

// cacheProc writes process pid: its stat, status (uid), exe (as comm) and
// cgroup (a docker container of id digit x 64, or a host process for "").
func cacheProc(t *testing.T, root string, pid int, comm string, start, utime uint64, uid int, digit string) {
	t.Helper()
	cg := "0::/user.slice/session-1.scope\n"
	if digit != "" {
		cg = "0::/system.slice/docker-" + strings.Repeat(digit, 64) + ".scope\n"
	}
	writeTree(t, root, map[string]string{
		fmt.Sprintf("%d/stat", pid):   procStat(pid, comm, start, utime),
		fmt.Sprintf("%d/status", pid): fmt.Sprintf("Name:\t%s\nUid:\t%d\t%d\t%d\t%d\n", comm, uid, uid, uid, uid),
		fmt.Sprintf("%d/comm", pid):   comm + "\n",
		fmt.Sprintf("%d/cgroup", pid): cg,
	})
}

// newCacheAttributor is an Attributor on a fresh proc root (boot time and
// the host's passwd) whose cache runs on the returned clock.
func newCacheAttributor(t *testing.T) (*Attributor, string, *time.Time) {
	t.Helper()
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"stat":              "cpu  1 2 3 4 5 6 7 8 9 10\nbtime 1600000000\n",
		"1/root/etc/passwd": "alice:x:1000:1000::/home/alice:/bin/sh\nbob:x:1001:1001::/home/bob:/bin/sh\n",
	})
	a := New(Config{ProcRoot: root}, nil)
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	a.cache.now = func() time.Time { return now }
	return a, root, &now
}

// scrape is one scrape's attribution of pids on one GPU.
func scrape(a *Attributor, pids ...int) []Process {
	a.Refresh()
	procs, _ := a.Attribute(gpuTrain, pids)
	return procs
}

func TestProcCacheReadsDetailsOnceAndCPUEveryScrape(t *testing.T) {
	a, root, _ := newCacheAttributor(t)
	cacheProc(t, root, 100, "python3", 5000, 100, 1000, "a")
	p := scrape(a, 100)[0]
	require.True(t, p.InfoOK)
	assert.Equal(t, "alice", p.Info.Owner)
	assert.Equal(t, strings.Repeat("a", 64), p.Owner.ContainerID)
	assert.Equal(t, time.Second, p.Info.UserCPU)

	// The same process (pid, start, comm) a scrape later: its CPU is read
	// again; its user and cgroup are the cache's (the files changed here
	// only to show that they were not read).
	cacheProc(t, root, 100, "python3", 5000, 250, 1001, "b")
	p = scrape(a, 100)[0]
	assert.Equal(t, 2500*time.Millisecond, p.Info.UserCPU, "the CPU of this scrape")
	assert.Equal(t, "alice", p.Info.Owner, "read once in the process's life")
	assert.Equal(t, strings.Repeat("a", 64), p.Owner.ContainerID, "read once in the process's life")
	assert.False(t, p.Cgroup.IsZero(), "the cgroup, for the container's CPU")
}

func TestProcCacheReusedPIDIsReadAfresh(t *testing.T) {
	a, root, _ := newCacheAttributor(t)
	cacheProc(t, root, 100, "python3", 5000, 100, 1000, "a")
	assert.Equal(t, strings.Repeat("a", 64), scrape(a, 100)[0].Owner.ContainerID)

	// Process 100 exits and a new one, started later, takes its PID in
	// another container, for another user, under the same name.
	cacheProc(t, root, 100, "python3", 9000, 1, 1001, "b")
	p := scrape(a, 100)[0]
	assert.Equal(t, strings.Repeat("b", 64), p.Owner.ContainerID, "the new process's container")
	assert.Equal(t, "bob", p.Info.Owner)
	assert.Equal(t, time.Unix(1600000000+90, 0).UTC(), p.Info.Started)
}

func TestProcCacheExecIsReadAfresh(t *testing.T) {
	a, root, _ := newCacheAttributor(t)
	cacheProc(t, root, 100, "bash", 5000, 1, 1000, "")
	assert.Equal(t, "bash", scrape(a, 100)[0].Info.ExecutableName)
	// exec: same PID and start time, a new comm (and executable).
	cacheProc(t, root, 100, "python3", 5000, 1, 1000, "")
	assert.Equal(t, "python3", scrape(a, 100)[0].Info.ExecutableName)
}

// A process moved to another cgroup after it started (pam_slurm_adopt, or
// into a container by hand) keeps its old owner until procRecheck, then
// shows the new one.
func TestProcCacheCgroupMoveSeenWithinTheRecheck(t *testing.T) {
	a, root, now := newCacheAttributor(t)
	cacheProc(t, root, 100, "python3", 5000, 1, 1000, "")
	assert.Zero(t, scrape(a, 100)[0].Owner, "a host process")
	cacheProc(t, root, 100, "python3", 5000, 2, 1000, "a") // moved into a container
	*now = now.Add(procRecheck - time.Second)
	assert.Zero(t, scrape(a, 100)[0].Owner, "the cache's, within procRecheck")
	*now = now.Add(time.Second)
	assert.Equal(t, strings.Repeat("a", 64), scrape(a, 100)[0].Owner.ContainerID, "read again at procRecheck")
}

func TestProcCacheForgetsWhatTheScrapeNoLongerLists(t *testing.T) {
	a, root, _ := newCacheAttributor(t)
	for pid := 100; pid < 110; pid++ {
		cacheProc(t, root, pid, "python3", 5000, 1, 1000, "")
	}
	scrape(a, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109)
	assert.Len(t, a.cache.entries, 10)
	scrape(a, 100)
	a.Refresh() // the next scrape begins: the nine not listed are gone
	assert.Len(t, a.cache.entries, 1)
	assert.Contains(t, a.cache.entries, 100)
	a.Refresh()
	assert.Empty(t, a.cache.entries, "a scrape that lists nothing: nothing kept")
}

// A failed read is not kept: the next scrape reads again.
func TestProcCacheKeepsNoFailure(t *testing.T) {
	a, root, _ := newCacheAttributor(t)
	writeTree(t, root, map[string]string{"100/stat": procStat(100, "python3", 5000, 1)}) // no cgroup, no comm yet
	p := scrape(a, 100)[0]
	assert.False(t, p.InfoOK)
	cacheProc(t, root, 100, "python3", 5000, 1, 1000, "a")
	p = scrape(a, 100)[0]
	assert.True(t, p.InfoOK)
	assert.Equal(t, strings.Repeat("a", 64), p.Owner.ContainerID)
}

// Within one scrape a process on two GPUs is read once: the same CPU on
// both.
func TestProcCacheStatOncePerScrape(t *testing.T) {
	a, root, _ := newCacheAttributor(t)
	cacheProc(t, root, 100, "python3", 5000, 100, 1000, "")
	first := scrape(a, 100)[0]
	cacheProc(t, root, 100, "python3", 5000, 300, 1000, "")
	second, _ := a.Attribute(gpuShared, []int{100})
	assert.Equal(t, first.Info.UserCPU, second[0].Info.UserCPU)
}

// Without Refresh (no scrapes delimited) nothing is kept.
func TestProcCacheOffWithoutRefresh(t *testing.T) {
	a, root, _ := newCacheAttributor(t)
	cacheProc(t, root, 100, "python3", 5000, 1, 1000, "a")
	procs, _ := a.Attribute(gpuTrain, []int{100})
	assert.Equal(t, strings.Repeat("a", 64), procs[0].Owner.ContainerID)
	cacheProc(t, root, 100, "python3", 5000, 1, 1000, "b")
	procs, _ = a.Attribute(gpuTrain, []int{100})
	assert.Equal(t, strings.Repeat("b", 64), procs[0].Owner.ContainerID)
	assert.Empty(t, a.cache.entries)
}
