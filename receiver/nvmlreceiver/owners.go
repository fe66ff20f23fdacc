package nvmlreceiver

import (
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
	cgroup attribution.Cgroup // what owner was read from, for the container's CPU
	// account is the process's GPU-time counters (accounting.go).
	account *processAccount
}

// newAttributor configures attribution from the receiver's configuration:
// processes through processes::proc_root, pods through the kubelet, Slurm
// jobs through their cgroups and slurm::gpustat_dir.
func newAttributor(cfg *Config, logger *zap.Logger) *attribution.Attributor {
	var ac attribution.Config
	if cfg.Processes.Enabled {
		ac.ProcRoot = cfg.Processes.ProcRoot
		ac.CommandLine = cfg.ResourceAttributes.ProcessCommandLine.Enabled
	}
	ac.SlurmGPUStatDir = cfg.Slurm.GPUStatDir
	if cfg.Kubernetes.Enabled {
		pc := attribution.DefaultPodResourcesConfig()
		pc.Socket, pc.RefreshInterval = cfg.Kubernetes.PodResourcesSocket, cfg.Kubernetes.RefreshInterval
		pc.ResourcePrefixes = cfg.Kubernetes.ResourcePrefixes
		pc.DRADrivers = append([]string{}, cfg.Kubernetes.DRA.Drivers...)
		ac.PodResources = &pc
		if rs := cfg.Kubernetes.DRA.ResourceSlices; rs.Enabled {
			ac.ResourceSlices = &attribution.ResourceSlicesConfig{NodeName: cfg.Kubernetes.NodeName, Kubeconfig: rs.Kubeconfig}
		}
	}
	return attribution.New(ac, logger)
}

// attribute keeps a device's largest processes (at most limit, 0: all) and
// returns them with their owners, the device's owner, and the processes
// left out.
func attribute(a *attribution.Attributor, deviceID string, procs []nvmlclient.Process, limit int) ([]ownedProcess, owner, []nvmlclient.Process) {
	kept := append([]nvmlclient.Process(nil), procs...)
	sort.SliceStable(kept, func(i, j int) bool {
		mi, mj := kept[i].MemoryBytes(), kept[j].MemoryBytes()
		if mi.Value != mj.Value {
			return mi.Value > mj.Value
		}
		return kept[i].PID < kept[j].PID
	})
	var left []nvmlclient.Process
	if limit > 0 && len(kept) > limit {
		kept, left = kept[:limit], kept[limit:]
		shareAmong(kept)
	}
	pids := make([]int, len(kept))
	for i, p := range kept {
		pids[i] = int(p.PID)
	}
	who, deviceOwner := a.Attribute(deviceID, pids)
	out := make([]ownedProcess, len(kept))
	for i, p := range kept {
		out[i] = ownedProcess{Process: p, info: who[i].Info, infoOK: who[i].InfoOK, owner: who[i].Owner, cgroup: who[i].Cgroup}
	}
	return out, deviceOwner, left
}

// shareAmong renormalises the busy shares, which NVML's layer made over
// every listed process, over the processes kept at the cap: the GPU's busy
// time is split among the processes reported, so that their parts still
// sum to it (docs/design/waste.md). Where none of them had a share, none has one
// now: the busy time is split evenly, as in a window without a sample.
func shareAmong(kept []nvmlclient.Process) {
	var total float64
	for _, p := range kept {
		if p.BusyShare.OK {
			total += p.BusyShare.Value
		}
	}
	for i := range kept {
		switch {
		case total <= 0:
			kept[i].BusyShare = nvmlclient.Opt[float64]{}
		case kept[i].BusyShare.OK:
			kept[i].BusyShare.Value /= total
		}
	}
}
