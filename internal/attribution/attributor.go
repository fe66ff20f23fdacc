package attribution

import (
	"context"
	"errors"
	"io/fs"
	"sync/atomic"

	"go.uber.org/zap"

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

	hiddenWarned atomic.Bool // the PID namespace problem was logged
}

// New returns an Attributor; nothing is listed before Start. A proc root
// that cannot be read is logged once here, and processes are then reported
// by PID alone. A nil logger logs nothing.
func New(cfg Config, logger *zap.Logger) *Attributor {
	if logger == nil {
		logger = zap.NewNop()
	}
	a := &Attributor{cfg: cfg, logger: logger}
	if cfg.ProcRoot != "" {
		procs, err := procinfo.New(cfg.ProcRoot)
		if err != nil {
			logger.Warn("Cannot read the proc root; GPU processes are reported without executable, owner and container",
				zap.String("proc_root", cfg.ProcRoot), zap.Error(err))
		}
		a.procs = procs
		a.cgroup = newResolver(cfg.ProcRoot, logger)
	}
	if cfg.PodResources != nil {
		a.pods = NewPodResourcesCache(*cfg.PodResources, logger)
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
	return a.pods.Shutdown(ctx)
}

// Attribute returns each of pids' process (in the order of pids) and the
// owner of the device (a GPU's or a MIG device's UUID) they run on. The
// device's owner is zero unless its allocation and its processes point to
// one container or pod; host processes do not count. It reads a few small
// files per process and never blocks on the kubelet.
func (a *Attributor) Attribute(deviceID string, pids []int) ([]Process, Owner) {
	out := make([]Process, len(pids))
	var fromCgroups []Owner
	missing := 0
	// NVML's PIDs are the host's. In a proc root that shows only the
	// collector's own PID namespace they name other processes, or none:
	// nothing is read there (the resolver logs why, once).
	foreign := a.cgroup != nil && len(pids) > 0 && errors.Is(a.cgroup.check(), errPIDNamespace)
	for i, pid := range pids {
		p := Process{PID: pid}
		if foreign {
			out[i] = p
			continue
		}
		if a.procs != nil {
			info, err := a.procs.Read(pid, a.cfg.CommandLine)
			switch {
			case err == nil:
				p.Info, p.InfoOK = info, true
			case errors.Is(err, fs.ErrNotExist):
				missing++
			}
		}
		if a.cgroup != nil {
			o, err := a.cgroup.resolve(pid)
			switch {
			case err == nil && !o.IsZero():
				p.Owner = o
				fromCgroups = append(fromCgroups, o)
			case errors.Is(err, errPIDNamespace):
				a.hiddenWarned.Store(true) // the resolver has said so, once
			}
		}
		out[i] = p
	}
	if len(out) > 0 && missing == len(out) && a.hiddenWarned.CompareAndSwap(false, true) {
		// NVML reports host PIDs. None of them in our /proc means the
		// collector runs in its own PID namespace.
		a.logger.Warn("GPU processes are not visible in the configured /proc: the collector is in its own PID namespace. "+
			"Run it with hostPID, or mount the host's /proc and set the proc root to it; "+
			"processes are reported without executable, owner and container attributes",
			zap.String("proc_root", a.cfg.ProcRoot))
	}
	var allocated []Owner
	if a.pods != nil {
		allocated = a.pods.Owners(deviceID)
	}
	gpu, ok := gpuOwner(allocated, fromCgroups)
	if !ok {
		return out, Owner{}
	}
	for i := range out {
		out[i].Owner = withPodNames(out[i].Owner, gpu)
	}
	return out, gpu
}
