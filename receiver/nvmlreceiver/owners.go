package nvmlreceiver

import (
	"errors"
	"io/fs"
	"sort"

	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/internal/procinfo"
)

// owner is who a GPU or one of its processes belongs to. Empty fields are
// unknown.
type owner struct {
	ContainerID   string
	PodUID        string
	PodName       string
	Namespace     string
	ContainerName string
}

func (o owner) empty() bool { return o == owner{} }

// ownedProcess is a GPU process with what /proc and its cgroup say of it.
type ownedProcess struct {
	nvmlclient.Process
	info   procinfo.Info
	infoOK bool
	owner  owner
}

// cgroupResolver maps a host PID to its container and pod from
// /proc/<pid>/cgroup.
type cgroupResolver func(pid int) (owner, error)

// processOwners resolves each GPU process against /proc. It is used from
// the scrape goroutine only.
type processOwners struct {
	logger      *zap.Logger
	procs       *procinfo.Reader // nil when the proc root cannot be read
	cgroup      cgroupResolver   // nil when not wired
	withCmdline bool
	warnedNS    bool
}

// resolve returns the GPU's processes with their owners, largest memory
// first, keeping at most limit (0: all), and how many were left out.
func (po *processOwners) resolve(procs []nvmlclient.Process, limit int) ([]ownedProcess, int) {
	sorted := append([]nvmlclient.Process(nil), procs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		mi, mj := sorted[i].MemoryBytes(), sorted[j].MemoryBytes()
		if mi.Value != mj.Value {
			return mi.Value > mj.Value
		}
		return sorted[i].PID < sorted[j].PID
	})
	dropped := 0
	if limit > 0 && len(sorted) > limit {
		dropped = len(sorted) - limit
		sorted = sorted[:limit]
	}
	out := make([]ownedProcess, 0, len(sorted))
	missing := 0
	for _, p := range sorted {
		op := ownedProcess{Process: p}
		if po.procs != nil {
			info, err := po.procs.Read(int(p.PID), po.withCmdline)
			switch {
			case err == nil:
				op.info, op.infoOK = info, true
			case errors.Is(err, fs.ErrNotExist):
				missing++
			}
		}
		if po.cgroup != nil && op.infoOK {
			if o, err := po.cgroup(int(p.PID)); err == nil {
				op.owner = o
			}
		}
		out = append(out, op)
	}
	if len(out) > 0 && missing == len(out) && !po.warnedNS {
		// NVML reports host PIDs. None of them in our /proc means the
		// collector runs in its own PID namespace.
		po.warnedNS = true
		po.logger.Warn("GPU processes are not visible in the configured /proc: the collector is in its own PID namespace. " +
			"Run it with hostPID, or mount the host's /proc and set processes::proc_root; " +
			"processes are reported without executable, owner and container attributes")
	}
	return out, dropped
}

// singleOwner returns the one owner shared by every process, if there is
// exactly one and it is known.
func singleOwner(procs []ownedProcess) (owner, bool) {
	if len(procs) == 0 {
		return owner{}, false
	}
	first := procs[0].owner
	if first.empty() {
		return owner{}, false
	}
	for _, p := range procs[1:] {
		if p.owner != first {
			return owner{}, false
		}
	}
	return first, true
}
