package nvmlreceiver

import (
	"errors"
	"io/fs"
	"sort"

	"go.uber.org/zap"

	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/internal/procinfo"
)

// owner is who a GPU or one of its processes belongs to: container and
// pod from the process's cgroup, names from the kubelet.
type owner = attribution.Owner

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

// processOwners resolves each GPU process against /proc, and each GPU
// against the kubelet's allocation. It is used from the scrape goroutine
// only.
type processOwners struct {
	logger      *zap.Logger
	procs       *procinfo.Reader // nil when the proc root cannot be read
	cgroup      cgroupResolver   // nil when processes are off
	pods        *attribution.PodResourcesCache
	withCmdline bool
	warnedNS    bool
}

// allocated returns who the kubelet gave the GPU to; never blocks.
func (po *processOwners) allocated(uuid string) []owner {
	if po.pods == nil {
		return nil
	}
	return po.pods.Owners(uuid)
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
		if po.cgroup != nil {
			if o, err := po.cgroup(int(p.PID)); err == nil {
				op.owner = o
			} else if errors.Is(err, attribution.ErrPIDNamespace) {
				po.warnedNS = true // the resolver has said so, once
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

// gpuOwner returns the owner to put on the GPU's own resource: the one
// container or pod that the kubelet's allocation and every process on the
// GPU point to, if there is exactly one. Processes whose cgroup names no
// container (host processes) do not count.
func gpuOwner(allocated []owner, procs []ownedProcess) (owner, bool) {
	var fromProcs []owner
	for _, p := range procs {
		if !p.owner.IsZero() {
			fromProcs = append(fromProcs, p.owner)
		}
	}
	return attribution.GPUOwner(allocated, fromProcs)
}

// withPodNames adds the GPU owner's pod and container names to a process
// of that same pod (the kubelet's List knows names, the cgroup UIDs).
func withPodNames(p owner, gpu owner) owner {
	if p.PodUID == "" || p.PodUID != gpu.PodUID {
		return p
	}
	p.PodName, p.Namespace = gpu.PodName, gpu.Namespace
	if p.ContainerID != "" && p.ContainerID == gpu.ContainerID {
		p.ContainerName = gpu.ContainerName
	}
	return p
}
