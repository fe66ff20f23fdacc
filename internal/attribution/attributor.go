package attribution

import (
	"context"
	"errors"
	"io/fs"
	"regexp"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/logonce"
	"github.com/otelcol-nvml/otelcol-nvml/internal/procinfo"
)

// Config configures an Attributor.
type Config struct {
	// ProcRoot is the /proc in which NVML's (host) PIDs are looked up:
	// "/proc" with hostPID, the host's /proc mounted elsewhere without.
	// Empty: processes are reported by PID alone.
	ProcRoot string
	// CommandLine adds each process's command line; it can hold secrets.
	CommandLine bool
	// PodResources, when set, reads the kubelet's GPU allocation for pod
	// and container names.
	PodResources *PodResourcesConfig
	// ResourceSlices, when set with PodResources, watches the node's
	// ResourceSlices to map DRA claims to GPUs; without it, or where they
	// cannot be read, claims are matched by the fallback (dra.go).
	ResourceSlices *ResourceSlicesConfig
	// SlurmGPUStatDir, when set, is the directory where Slurm's prolog
	// writes each allocated GPU's job and uid (gpustat.go): such a GPU is
	// held by that job. Absent: nothing, silently.
	SlurmGPUStatDir string
}

// Process is what is known of one GPU process.
type Process struct {
	PID int
	// Info is what /proc says of the process; valid when InfoOK.
	Info   procinfo.Info
	InfoOK bool
	// Owner is the process's container and pod, from its cgroup, with the
	// pod's names when the GPU's owner is the same pod. Zero for a host
	// process, or when the cgroup cannot be read.
	Owner Owner
	// Cgroup is the cgroup Owner was read from, by which its container's
	// CPU is read (CgroupCPUReader.ReadCgroup); zero when not read.
	Cgroup Cgroup
}

// Attributor tells whom a GPU's processes, and the GPU itself, belong to.
// It reads /proc (procinfo), each process's cgroup and the kubelet's
// allocation, and never blocks on the kubelet. It is safe for concurrent
// use.
type Attributor struct {
	cfg    Config
	logger *zap.Logger
	procs  *procinfo.Reader   // nil: no proc root, or an unreadable one
	cgroup *resolver          // nil: no proc root
	pods   *PodResourcesCache // nil: no kubelet
	slices *sliceWatcher      // nil: no ResourceSlices, the fallback only
	minors sync.Map           // GPU UUID -> NVML minor number (int), for the fallback
	migs   sync.Map           // MIG device UUID -> MIGPlacement, for DRA's MIG device names (dra.go)
	slurm  *gpuStatDir        // nil: no gpustat directory configured
	index  sync.Map           // GPU UUID -> NVML index (int), for the gpustat files

	// warned holds the causes of failed reads already logged (what read
	// failed, and ErrorCause), at most maxWarnedCauses: an unreadable proc
	// root fails every process the same way, and is logged once.
	warned *logonce.Log
	// cache keeps each process's details and owner for its life, once
	// Refresh delimits the scrapes (proccache.go).
	cache *procCache
}

// maxWarnedCauses bounds the causes of failed reads remembered; later
// causes are logged at debug level.
const maxWarnedCauses = 16

// What a failed read was reading, for warnRead.
const (
	readDetails = "details"
	readCgroup  = "cgroup"
)

var (
	// pathInError matches the paths in an error, which name a process's
	// or container's files.
	pathInError = regexp.MustCompile(`/[^\s:"']*`)
	// pidInError matches "pid <n>", with which errors here name their
	// process.
	pidInError = regexp.MustCompile(`\bpid -?[0-9]+\b`)
)

// ErrorCause is what a failed read of a process's files says, less the
// process and the paths it happened to: errors with one cause give one
// ErrorCause, so that they are logged once, not once per process.
func ErrorCause(err error) string {
	return pathInError.ReplaceAllString(pidInError.ReplaceAllString(err.Error(), "pid N"), "...")
}

// processGone reports whether err says that a process has exited (or is
// hidden from the proc root, as with hidepid=2): nothing worth a log.
func processGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrProcessNotFound) || errors.Is(err, syscall.ESRCH)
}

// New returns an Attributor; nothing is listed before Start. A proc root
// that cannot be read is logged once here, and processes are then reported
// by PID alone. A nil logger logs nothing.
func New(cfg Config, logger *zap.Logger) *Attributor {
	if logger == nil {
		logger = zap.NewNop()
	}
	a := &Attributor{cfg: cfg, logger: logger, warned: NewCauseLog(maxWarnedCauses), cache: newProcCache()}
	if cfg.ProcRoot != "" {
		procs, err := procinfo.New(cfg.ProcRoot)
		if err != nil {
			logger.Warn("Cannot read the proc root; GPU processes are reported without executable, owner and container",
				zap.String("proc_root", cfg.ProcRoot), zap.Error(err))
		}
		a.procs = procs
		a.cgroup = newResolver(cfg.ProcRoot, logger)
	}
	if cfg.SlurmGPUStatDir != "" {
		// The job's user is named as a process's owner is: from the host's
		// passwd through the proc root; without one, by uid.
		var userName func(string) string
		if a.procs != nil {
			userName = a.procs.UserName
		}
		a.slurm = newGPUStatDir(cfg.SlurmGPUStatDir, userName, logger)
	}
	if cfg.PodResources != nil {
		a.pods = NewPodResourcesCache(*cfg.PodResources, logger)
		if cfg.ResourceSlices != nil {
			a.slices = newSliceWatcher(*cfg.ResourceSlices, a.pods.drivers, logger)
			a.pods.onClaims = func(ci *claimIndex) {
				a.slices.start()
				a.slices.checkClaims(ci)
			}
		}
	}
	return a
}

// Start starts listing the kubelet's allocation in the background; it
// returns at once.
func (a *Attributor) Start(ctx context.Context) error {
	if a.pods == nil {
		return nil
	}
	return a.pods.Start(ctx)
}

// Shutdown stops the kubelet client, waiting at most until ctx ends.
func (a *Attributor) Shutdown(ctx context.Context) error {
	if a.pods == nil {
		return nil
	}
	err := a.pods.Shutdown(ctx)
	if a.slices != nil {
		a.slices.shutdown()
	}
	return err
}

// Attribute returns each of pids' process (in the order of pids) and the
// owner of the device (a GPU's or a MIG device's UUID) they run on. The
// device's owner is zero unless its allocation and its processes point to
// one container or pod; host processes do not count. It reads a few small
// files per process and never blocks on the kubelet.
func (a *Attributor) Attribute(deviceID string, pids []int) ([]Process, Owner) {
	out := make([]Process, len(pids))
	var fromCgroups []Owner
	// NVML's PIDs are the host's. In a proc root that shows only the
	// collector's own PID namespace they name other processes, or none:
	// nothing is read there (the resolver logs why, once).
	foreign := a.cgroup != nil && len(pids) > 0 && errors.Is(a.cgroup.check(), errPIDNamespace)
	if !foreign {
		a.cache.mu.Lock()
		defer a.cache.mu.Unlock()
	}
	for i, pid := range pids {
		p := Process{PID: pid}
		if foreign {
			out[i] = p
			continue
		}
		p = a.process(pid)
		if !p.Owner.IsZero() {
			fromCgroups = append(fromCgroups, p.Owner)
		}
		out[i] = p
	}
	allocated := a.allocatedTo(deviceID)
	gpu, ok := gpuOwner(allocated, fromCgroups)
	if !ok {
		return out, Owner{}
	}
	for i := range out {
		out[i].Owner = withPodNames(out[i].Owner, gpu)
	}
	return out, gpu
}

// process returns what is known of process pid: from the cache while it
// holds the same process (proccache.go), else read; a.cache.mu is held.
func (a *Attributor) process(pid int) Process {
	c := a.cache
	if a.procs == nil || c.gen == 0 {
		p, _ := a.readProcess(pid, nil)
		return p
	}
	e := c.entry(pid, a.procs.ReadStat)
	if e.statErr != nil {
		// Gone, or an odd stat: read as without a cache, which says why.
		e.forget()
		p, _ := a.readProcess(pid, nil)
		return p
	}
	if c.fresh(e) {
		p := Process{PID: pid, Info: procinfo.WithCPU(e.info, e.stat), InfoOK: e.infoOK, Owner: e.owner, Cgroup: e.cgroup}
		if a.cfg.CommandLine {
			// It can change without a new comm (setproctitle may leave
			// comm): read every time, as it was before the cache.
			p.Info.CommandLine = a.procs.CommandLine(pid)
		}
		return p
	}
	p, ok := a.readProcess(pid, &e.stat)
	if ok {
		c.store(e, p)
	} else {
		e.forget()
	}
	return p
}

// readProcess reads process pid's details (with st when given: this
// scrape's stat) and cgroup, logging a failed read once per cause; ok says
// that both were read, and the answer can be kept.
func (a *Attributor) readProcess(pid int, st *procinfo.Stat) (p Process, ok bool) {
	p, ok = Process{PID: pid}, true
	if a.procs != nil {
		var info procinfo.Info
		var err error
		if st != nil {
			info, err = a.procs.ReadDetails(pid, *st, a.cfg.CommandLine)
		} else {
			info, err = a.procs.Read(pid, a.cfg.CommandLine)
		}
		switch {
		case err == nil:
			p.Info, p.InfoOK = info, true
		case !processGone(err):
			a.warnRead(readDetails, pid, err)
			ok = false
		default:
			ok = false
		}
	}
	if a.cgroup != nil {
		o, cg, err := a.cgroup.resolveCgroup(pid)
		switch {
		case err == nil:
			p.Owner, p.Cgroup = o, cg
		case processGone(err):
			ok = false
		case a.cgroup.check() != nil:
			// The proc root itself: the resolver has said why, once.
			ok = false
		default:
			a.warnRead(readCgroup, pid, err)
			ok = false
		}
	}
	return p, ok
}

// Started returns when process pid started, from /proc; zero when that
// cannot be read, or the proc root is of another PID namespace. It reads
// one file, and logs nothing: it tells a reused PID from its process.
func (a *Attributor) Started(pid int) time.Time {
	if a.procs == nil || a.cgroup != nil && errors.Is(a.cgroup.check(), errPIDNamespace) {
		return time.Time{}
	}
	t, err := a.procs.Started(pid)
	if err != nil {
		return time.Time{}
	}
	return t
}

// Refresh reads the Slurm allocation again (the gpustat directory): call it
// once per scrape, before the scrape's Attribute, Holders and Allocated.
// It also starts the scrape for the process cache: from the first Refresh
// on, each process's details and owner are read once in its life (and every
// procRecheck), its stat once per scrape, and a process that the last
// scrape did not ask for is forgotten (proccache.go). Without Refresh every
// Attribute reads everything.
func (a *Attributor) Refresh() {
	a.cache.refresh()
	if a.slurm != nil {
		a.slurm.refresh()
	}
}

// SetIndex tells the NVML index of a GPU, by which the gpustat files name
// it.
func (a *Attributor) SetIndex(uuid string, index int) { a.index.Store(uuid, index) }

// allocatedTo returns what the device (a GPU's or a MIG device's UUID) is
// allocated to: the kubelet's containers (kubeletAllocation), and the Slurm
// job of its gpustat file, as of the last Refresh.
func (a *Attributor) allocatedTo(deviceID string) []Owner {
	owners := a.kubeletAllocation(deviceID)
	if a.slurm == nil {
		return owners
	}
	index := -1
	if v, ok := a.index.Load(deviceID); ok {
		index = v.(int)
	}
	if o, ok := a.slurm.owner(deviceID, index); ok {
		owners = appendOwner(owners, o)
	}
	return owners
}

// Allocated reports whether the kubelet has allocated the device (a GPU's
// or a MIG device's UUID) to a pod, or Slurm's prolog to a job: such a GPU
// is held, with or without a process on it. False without a kubelet or a
// gpustat file, and while the kubelet's listing is stale.
func (a *Attributor) Allocated(deviceID string) bool {
	return len(a.allocatedTo(deviceID)) > 0
}

// warnRead logs a failed read of a process's details or cgroup once per
// cause, naming the first process it happened to. A process that has
// exited is not worth a log: it is not passed here.
func (a *Attributor) warnRead(what string, pid int, err error) {
	v := a.warned.Fail(what+": "+ErrorCause(err), "")
	msg := "Cannot read a GPU process's details under the proc root; it is reported without executable, owner and creation time"
	if what == readCgroup {
		msg = "Cannot read a GPU process's cgroup; it is reported without container and pod"
	}
	switch {
	case v.Full:
		a.logger.Debug(msg, zap.Int("pid", pid), zap.Error(err))
	case v.Log:
		a.logger.Warn(msg+", as are the other processes whose read fails the same way (logged once per cause)",
			zap.String("proc_root", a.cfg.ProcRoot), zap.Int("pid", pid), zap.Error(err))
	}
}
