package attribution

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ContainerCPU is what a container's cgroup says of its CPU: the time its
// processes used (every process in the cgroup, GPU or not: a DataLoader's
// workers count), and its quota.
type ContainerCPU struct {
	UsageSeconds float64
	// LimitCores is the quota in CPUs (quota / period); 0 when there is none.
	LimitCores float64
}

// CgroupCPUReader reads the CPU controller of a process's cgroup: cgroup v2
// cpu.stat usage_usec and cpu.max, or cgroup v1 cpuacct.usage and
// cpu.cfs_quota_us / cpu.cfs_period_us.
//
// The cgroup paths in <procRoot>/<pid>/cgroup are relative to the reader's
// cgroup namespace. A collector in its own namespace (the default for
// containers on cgroup v2) sees other containers' paths as "/../../x/y";
// the reader then finds the directory under which "x/y" exists, once, and
// reuses it. It is safe for concurrent use.
type CgroupCPUReader struct {
	procRoot   string
	cgroupRoot string

	mu       sync.Mutex
	prefixes map[string]string // per base dir and count of leading "..": the directory found
	// failed holds, per base dir and path, when a search for the path found
	// nothing: with a wrong cgroup root, every container would otherwise
	// walk up to maxSearched directories at every read.
	failed map[string]time.Time

	// readDir lists a directory during a search and now tells the time:
	// os.ReadDir and time.Now, but in tests.
	readDir func(string) ([]os.DirEntry, error)
	now     func() time.Time
}

// failedSearchTTL is how long a failed search for a namespace-relative
// path is remembered: a container whose cgroup is not found is searched
// for again after it, not at every read.
const failedSearchTTL = 5 * time.Minute

// maxFailedSearches bounds CgroupCPUReader.failed.
const maxFailedSearches = 4096

// NewCgroupCPUReader reads processes from procRoot and cgroups from the
// cgroup file system mounted at cgroupRoot (/sys/fs/cgroup on the host; the
// host's, mounted read-only, in a container).
func NewCgroupCPUReader(procRoot, cgroupRoot string) *CgroupCPUReader {
	return &CgroupCPUReader{procRoot: procRoot, cgroupRoot: cgroupRoot, prefixes: map[string]string{},
		failed: map[string]time.Time{}, readDir: os.ReadDir, now: time.Now}
}

// ErrContainerChanged is returned by ReadContainer when the process is
// not in the container it was attributed to: it has exited and its PID has
// been reused. The error matches ErrProcessNotFound too.
var ErrContainerChanged = errors.New("the process is no longer in the container it was attributed to")

// ReadContainer returns the CPU of the cgroup the process pid is in, a
// process found in the container containerID (its 64-hex id; "" for none)
// some time before. A process that is gone gives an error matching
// ErrProcessNotFound. When the process's cgroup names another container
// now, the process has exited and its PID has been reused, and the error
// matches ErrContainerChanged and ErrProcessNotFound. Another container's
// CPU is never read for containerID.
func (r *CgroupCPUReader) ReadContainer(pid int, containerID string) (ContainerCPU, error) {
	return r.read(pid, containerID, true)
}

func (r *CgroupCPUReader) read(pid int, containerID string, check bool) (ContainerCPU, error) {
	if pid <= 0 {
		return ContainerCPU{}, fmt.Errorf("pid %d: %w", pid, ErrProcessNotFound)
	}
	f, err := os.Open(filepath.Join(r.procRoot, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return ContainerCPU{}, fmt.Errorf("pid %d: %w: %w", pid, ErrProcessNotFound, err)
		}
		return ContainerCPU{}, err
	}
	v1, unified, err := parseCgroupFile(io.LimitReader(f, maxCgroupFile))
	f.Close()
	if err != nil {
		return ContainerCPU{}, fmt.Errorf("pid %d: parse cgroup file: %w", pid, err)
	}
	if check {
		if now := ownerOf(v1, unified).ContainerID; now != containerID {
			return ContainerCPU{}, fmt.Errorf("pid %d is in container %q, not %q: %w: %w", pid, now, containerID, ErrContainerChanged, ErrProcessNotFound)
		}
	}
	return r.readPaths(v1, unified)
}

// ReadCgroup returns the CPU of the cgroup c, a process's as attribution
// read it (Process.Cgroup), without reading /proc again: the cgroup of the
// container that process was attributed to, whatever process is in it now,
// so that another container's CPU is never read for it. A cgroup that is
// gone gives the read's error: ReadContainer then tells whether the
// process is gone too.
func (r *CgroupCPUReader) ReadCgroup(c Cgroup) (ContainerCPU, error) {
	if !c.ok {
		return ContainerCPU{}, errors.New("no cgroup was read for the process")
	}
	return r.readPaths(c.v1, c.unified)
}

func (r *CgroupCPUReader) readPaths(v1 map[string]string, unified string) (ContainerCPU, error) {
	if _, err := os.Stat(filepath.Join(r.cgroupRoot, "cgroup.controllers")); err == nil {
		return r.readV2(unified)
	}
	return r.readV1(v1)
}

func (r *CgroupCPUReader) readV2(unified string) (ContainerCPU, error) {
	if unified == "" {
		return ContainerCPU{}, fmt.Errorf("the cgroup root %s is cgroup v2, and the process has no v2 path", r.cgroupRoot)
	}
	dir, err := r.locate(r.cgroupRoot, unified)
	if err != nil {
		return ContainerCPU{}, err
	}
	var cpu ContainerCPU
	stat, err := readSmall(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return cpu, err
	}
	usec, err := parseCPUStatUsage(strings.NewReader(stat))
	if err != nil {
		return cpu, fmt.Errorf("%s: %w", filepath.Join(dir, "cpu.stat"), err)
	}
	cpu.UsageSeconds = float64(usec) / 1e6
	// cpu.max is absent in the root cgroup, and where the cpu controller is
	// not enabled: no quota.
	if max, err := readSmall(filepath.Join(dir, "cpu.max")); err == nil {
		quota, period, limited, err := parseCPUMax(max)
		if err != nil {
			return cpu, fmt.Errorf("%s: %w", filepath.Join(dir, "cpu.max"), err)
		}
		if limited {
			cpu.LimitCores = float64(quota) / float64(period)
		}
	}
	return cpu, nil
}

func (r *CgroupCPUReader) readV1(v1 map[string]string) (ContainerCPU, error) {
	var cpu ContainerCPU
	acctPath, ok := v1["cpuacct"]
	if !ok {
		return cpu, errors.New("the process has no cpuacct cgroup (cgroup v1), and the cgroup root is not cgroup v2")
	}
	acctBase, err := r.controllerDir("cpuacct")
	if err != nil {
		return cpu, err
	}
	dir, err := r.locate(acctBase, acctPath)
	if err != nil {
		return cpu, err
	}
	usage, err := readSmall(filepath.Join(dir, "cpuacct.usage"))
	if err != nil {
		return cpu, err
	}
	ns, err := parseCPUAcctUsage(usage)
	if err != nil {
		return cpu, fmt.Errorf("%s: %w", filepath.Join(dir, "cpuacct.usage"), err)
	}
	cpu.UsageSeconds = float64(ns) / 1e9
	cpuPath, ok := v1["cpu"]
	if !ok {
		return cpu, nil
	}
	cpuBase, err := r.controllerDir("cpu")
	if err != nil {
		return cpu, nil // usage without a limit
	}
	if dir, err = r.locate(cpuBase, cpuPath); err != nil {
		return cpu, nil
	}
	quotaStr, err1 := readSmall(filepath.Join(dir, "cpu.cfs_quota_us"))
	periodStr, err2 := readSmall(filepath.Join(dir, "cpu.cfs_period_us"))
	if err1 != nil || err2 != nil {
		return cpu, nil
	}
	quota, period, limited, err := parseCFSQuota(quotaStr, periodStr)
	if err != nil {
		return cpu, fmt.Errorf("%s: %w", dir, err)
	}
	if limited {
		cpu.LimitCores = float64(quota) / float64(period)
	}
	return cpu, nil
}

// controllerDir is a v1 controller's hierarchy under the root: "cpuacct",
// or the combined "cpu,cpuacct" some distributions mount.
func (r *CgroupCPUReader) controllerDir(controller string) (string, error) {
	for _, name := range []string{controller, "cpu,cpuacct", "cpuacct,cpu"} {
		p := filepath.Join(r.cgroupRoot, name)
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("no %s hierarchy under the cgroup root %s", controller, r.cgroupRoot)
}

// maxSearched bounds the directories one search for a namespace-relative
// path visits.
const maxSearched = 20000

// locate returns the directory of the cgroup path p under base. A path
// that climbs out of the reader's cgroup namespace ("/../../x/y") is looked
// for under every directory of base, breadth first, up to 6 levels down;
// the first directory under which x/y exists is remembered for paths that
// climb as far, and a search that finds nothing is not done again for
// failedSearchTTL.
func (r *CgroupCPUReader) locate(base, p string) (string, error) {
	ups := 0
	for rest := strings.TrimPrefix(p, "/"); rest == ".." || strings.HasPrefix(rest, "../"); rest = strings.TrimPrefix(strings.TrimPrefix(rest, ".."), "/") {
		ups++
	}
	rel := path.Clean("/" + p) // leading ".." are dropped at the root: never above base
	if ups == 0 {
		return filepath.Join(base, rel), nil
	}
	key := base + "\x00" + strconv.Itoa(ups)
	failedKey := key + "\x00" + rel
	notFound := func() error {
		return fmt.Errorf("cgroup %q (outside the collector's cgroup namespace) not found under %s", p, base)
	}
	r.mu.Lock()
	prefix, ok := r.prefixes[key]
	failedAt, failed := r.failed[failedKey]
	r.mu.Unlock()
	if ok {
		return filepath.Join(base, prefix, rel), nil
	}
	if failed && r.now().Sub(failedAt) < failedSearchTTL {
		return "", notFound()
	}
	queue := []string{""}
	for visited := 0; len(queue) > 0 && visited < maxSearched; visited++ {
		dir := queue[0]
		queue = queue[1:]
		if isDir(filepath.Join(base, dir, rel)) {
			r.mu.Lock()
			r.prefixes[key] = dir
			r.mu.Unlock()
			return filepath.Join(base, dir, rel), nil
		}
		if strings.Count(dir, "/") >= 6 {
			continue
		}
		entries, err := r.readDir(filepath.Join(base, dir))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				queue = append(queue, dir+"/"+e.Name())
			}
		}
	}
	r.mu.Lock()
	r.rememberFailure(failedKey)
	r.mu.Unlock()
	return "", notFound()
}

// rememberFailure notes a failed search for failedSearchTTL; r.mu is held.
func (r *CgroupCPUReader) rememberFailure(key string) {
	now := r.now()
	if len(r.failed) >= maxFailedSearches {
		for k, at := range r.failed {
			if now.Sub(at) >= failedSearchTTL {
				delete(r.failed, k)
			}
		}
		if len(r.failed) >= maxFailedSearches {
			clear(r.failed)
		}
	}
	r.failed[key] = now
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// readSmall reads a cgroup interface file (always small).
func readSmall(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	return string(b), err
}

// parseCPUStatUsage returns usage_usec from a cgroup v2 cpu.stat file.
func parseCPUStatUsage(r io.Reader) (uint64, error) {
	s := bufio.NewScanner(r)
	for s.Scan() {
		key, val, ok := strings.Cut(strings.TrimSpace(s.Text()), " ")
		if !ok || key != "usage_usec" {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("usage_usec: %w", err)
		}
		return n, nil
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no usage_usec line")
}

// parseCPUMax parses a cgroup v2 cpu.max file: "$MAX $PERIOD", MAX being
// "max" for no quota. limited is false without a quota.
func parseCPUMax(s string) (quota, period int64, limited bool, err error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, false, fmt.Errorf("cpu.max: want \"$MAX $PERIOD\", got %q", s)
	}
	period, err = strconv.ParseInt(f[1], 10, 64)
	if err != nil || period <= 0 {
		return 0, 0, false, fmt.Errorf("cpu.max: bad period %q", f[1])
	}
	if f[0] == "max" {
		return 0, period, false, nil
	}
	quota, err = strconv.ParseInt(f[0], 10, 64)
	if err != nil || quota <= 0 {
		return 0, 0, false, fmt.Errorf("cpu.max: bad quota %q", f[0])
	}
	return quota, period, true, nil
}

// parseCFSQuota parses cgroup v1 cpu.cfs_quota_us (-1: no quota) and
// cpu.cfs_period_us.
func parseCFSQuota(quotaStr, periodStr string) (quota, period int64, limited bool, err error) {
	quota, err = strconv.ParseInt(strings.TrimSpace(quotaStr), 10, 64)
	if err != nil {
		return 0, 0, false, fmt.Errorf("cpu.cfs_quota_us: %w", err)
	}
	period, err = strconv.ParseInt(strings.TrimSpace(periodStr), 10, 64)
	if err != nil || period <= 0 {
		return 0, 0, false, fmt.Errorf("cpu.cfs_period_us: bad period %q", strings.TrimSpace(periodStr))
	}
	if quota < 0 {
		return 0, period, false, nil
	}
	if quota == 0 {
		return 0, 0, false, errors.New("cpu.cfs_quota_us: 0")
	}
	return quota, period, true, nil
}

// parseCPUAcctUsage parses cgroup v1 cpuacct.usage (nanoseconds).
func parseCPUAcctUsage(s string) (uint64, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cpuacct.usage: %w", err)
	}
	if n > math.MaxInt64 {
		return 0, fmt.Errorf("cpuacct.usage: %d out of range", n)
	}
	return n, nil
}
