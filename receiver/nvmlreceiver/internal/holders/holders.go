// Package holders finds who holds each GPU: its processes with their
// owners (containers and pods, DRA claims, Slurm jobs, users, through
// internal/attribution), the MPS roles, the MIG devices' placements for
// DRA, the processes that processes::max_per_gpu leaves out, and the CPU
// of the containers that hold a GPU.
package holders // import "github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/holders"

import (
	"sort"
	"time"

	"github.com/otelcol-nvml/otelcol-nvml/internal/attribution"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient"
	"github.com/otelcol-nvml/otelcol-nvml/internal/nvmlclient/sample"
	"github.com/otelcol-nvml/otelcol-nvml/internal/procinfo"
	"github.com/otelcol-nvml/otelcol-nvml/receiver/nvmlreceiver/internal/metadata"
)

// Process is a GPU process with what /proc and its cgroup say of it, and
// its owner: container and pod from the process's cgroup, names from the
// kubelet.
type Process struct {
	sample.Process
	Info   procinfo.Info
	InfoOK bool
	Owner  attribution.Owner
	Cgroup attribution.Cgroup // what Owner was read from, for the container's CPU
}

// Device is who holds a GPU or a MIG device in one scrape.
type Device struct {
	Processes []Process         // on the whole GPU; empty on a GPU in MIG mode
	Owner     attribution.Owner // set only when the device has exactly one owner
	Holders   []attribution.Owner
}

// GPU is who holds a GPU and each of its MIG devices (in the sample's
// order) in one scrape; Dropped counts the processes left out since the
// session's start (when the processes were listed).
type GPU struct {
	Device
	MIGs    []Device
	Dropped int64
}

// Tracker attributes the GPUs' processes, scrape after scrape, and counts
// those left out. It is used from the scrape goroutine only.
type Tracker struct {
	owners  *attribution.Attributor
	limit   int              // processes::max_per_gpu; 0: all
	dropped map[string]int64 // per GPU UUID: processes left out, cumulative
	left    *leftOut         // which processes dropped has counted
}

// New tracks the holders found by owners, keeping at most maxPerGPU
// processes per device (0: all).
func New(owners *attribution.Attributor, maxPerGPU int) *Tracker {
	return &Tracker{owners: owners, limit: maxPerGPU, dropped: map[string]int64{}, left: &leftOut{seen: map[string]map[uint32]time.Time{}}}
}

// Reset starts the counts of processes left out again.
func (t *Tracker) Reset() {
	clear(t.dropped)
	clear(t.left.seen)
}

// GPU attributes one GPU's sample: its processes' owners and, when they
// all share one, the GPU's own. In MIG mode the processes go to their MIG
// devices instead. Holders are what the kubelet allocated each device to.
func (t *Tracker) GPU(info nvmlclient.DeviceInfo, smp *sample.Sample) GPU {
	a := t.owners
	a.SetMinor(info.UUID, info.MinorNumber)
	a.SetIndex(info.UUID, info.Index)
	setMIGPlacements(a, info, smp.MIG)
	g := GPU{Device: Device{Holders: a.Holders(info.UUID)}, MIGs: make([]Device, len(smp.MIG))}
	listed, left := smp.Processes, []sample.Process(nil)
	if smp.ProcessesListed && len(smp.MIG) == 0 {
		g.Processes, g.Owner, left = t.attribute(info.UUID, smp.Processes)
	}
	for i := range smp.MIG {
		s, m := &smp.MIG[i], &g.MIGs[i]
		if m.Holders = a.Holders(s.Info.UUID); !smp.ProcessesListed {
			continue
		}
		var l []sample.Process
		m.Processes, m.Owner, l = t.attribute(s.Info.UUID, s.Processes)
		left = append(left, l...)
		listed = append(listed[:len(listed):len(listed)], s.Processes...)
	}
	if !smp.ProcessesListed {
		return g
	}
	t.dropped[info.UUID] += int64(t.left.add(info.UUID, listed, left, a.Started))
	g.Dropped = t.dropped[info.UUID]
	return g
}

// setMIGPlacements tells the attributor where each MIG device of the GPU
// parent sits: NVIDIA's DRA driver names a MIG device by its parent's minor
// number, its GPU instance's profile id and placement start, and never
// publishes the uuid of one it makes on demand. The placement was read
// once per MIG device, when it was listed; one without (an unprivileged
// collector) is not matched by name, which is said once where claims name
// MIG devices.
func setMIGPlacements(a *attribution.Attributor, parent nvmlclient.DeviceInfo, migs []sample.MIGSample) {
	for i := range migs {
		mi := &migs[i].Info
		if mi.PlacementOK && parent.MinorNumber >= 0 {
			a.SetMIG(mi.UUID, attribution.MIGPlacement{ParentMinor: parent.MinorNumber, ProfileID: int(mi.GIProfileID), Start: int(mi.PlacementStart)})
		} else {
			a.MIGPlacementUnknown(mi.UUID)
		}
	}
}

// attribute keeps a device's largest processes (at most the limit) and
// returns them with their owners and MPS roles (markMPS), the device's
// owner, and the processes left out.
func (t *Tracker) attribute(deviceID string, procs []sample.Process) ([]Process, attribution.Owner, []sample.Process) {
	kept := append([]sample.Process(nil), procs...)
	sort.SliceStable(kept, func(i, j int) bool {
		mi, mj := kept[i].MemoryBytes(), kept[j].MemoryBytes()
		if mi.Value != mj.Value {
			return mi.Value > mj.Value
		}
		return kept[i].PID < kept[j].PID
	})
	var left []sample.Process
	if t.limit > 0 && len(kept) > t.limit {
		kept, left = kept[:t.limit], kept[t.limit:]
		shareAmong(kept)
	}
	pids := make([]int, len(kept))
	for i, p := range kept {
		pids[i] = int(p.PID)
	}
	who, deviceOwner := t.owners.Attribute(deviceID, pids)
	out := make([]Process, len(kept))
	for i, p := range kept {
		out[i] = Process{Process: p, Info: who[i].Info, InfoOK: who[i].InfoOK, Owner: who[i].Owner, Cgroup: who[i].Cgroup}
	}
	return out, markMPS(t.owners, deviceID, out, deviceOwner), left
}

// shareAmong renormalises the busy shares, which NVML's layer made over
// every listed process, over the processes kept at the cap: the GPU's busy
// time is split among the processes reported, so that their parts still
// sum to it (docs/design/waste.md). Where none of them had a share, none has one
// now: the busy time is split evenly, as in a window without a sample.
func shareAmong(kept []sample.Process) {
	var total float64
	for _, p := range kept {
		if p.BusyShare.OK {
			total += p.BusyShare.Value
		}
	}
	for i := range kept {
		switch {
		case total <= 0:
			kept[i].BusyShare = sample.Opt[float64]{}
		case kept[i].BusyShare.OK:
			kept[i].BusyShare.Value /= total
		}
	}
}

// SetOwner sets the owner's attributes that are known on rb: what is known
// of a container and its pod, and of a Slurm job and its user.
func SetOwner(rb *metadata.ResourceBuilder, o attribution.Owner) {
	set := func(v string, set func(*metadata.ResourceBuilder, string)) {
		if v != "" {
			set(rb, v)
		}
	}
	set(o.ContainerID, (*metadata.ResourceBuilder).SetContainerID)
	set(o.PodUID, (*metadata.ResourceBuilder).SetK8sPodUID)
	set(o.PodName, (*metadata.ResourceBuilder).SetK8sPodName)
	set(o.Namespace, (*metadata.ResourceBuilder).SetK8sNamespaceName)
	set(o.ContainerName, (*metadata.ResourceBuilder).SetK8sContainerName)
	set(o.ClaimName, (*metadata.ResourceBuilder).SetK8sResourceclaimName)
	set(o.SlurmJobID, (*metadata.ResourceBuilder).SetSlurmJobID)
	set(o.SlurmStep, (*metadata.ResourceBuilder).SetSlurmJobStep)
	set(o.UserName, (*metadata.ResourceBuilder).SetUserName)
}

// CUDA MPS (docs/design/waste.md, "MPS"): the server runs every client's
// kernels, and NVML samples only the server. So the server is
// infrastructure, never a holder: it has no GPU-time counters, does not
// make the device held, and is never its owner. A client holds the device;
// its busy and idle time are even parts of the clients' (collect/processes.go
// leaves its own utilization absent).

// markMPS marks the MPS server among procs also by its executable name
// (nvmlclient knows it from the lists only where it is the one compute
// process besides the clients), and returns the device's owner found
// without the server, where one is there: the device plugin's MPS daemon
// pod runs the server, and would otherwise make every MPS GPU shared with
// it, or its own.
func markMPS(a *attribution.Attributor, deviceID string, procs []Process, deviceOwner attribution.Owner) attribution.Owner {
	var pids, kept []int
	server := false
	for i := range procs {
		p := &procs[i]
		if p.MPS == sample.MPSNone && p.InfoOK && p.Info.ExecutableName == sample.MPSServerName {
			p.MPS = sample.MPSServer
		}
		if p.MPS == sample.MPSServer {
			server = true
			continue
		}
		pids, kept = append(pids, int(p.PID)), append(kept, i)
	}
	if !server {
		return deviceOwner
	}
	who, o := a.Attribute(deviceID, pids)
	for j, i := range kept {
		procs[i].Owner = who[j].Owner
	}
	return o
}

// Count counts the processes that hold the device: all but the MPS
// server.
func Count(procs []Process) int {
	n := 0
	for _, p := range procs {
		if p.MPS != sample.MPSServer {
			n++
		}
	}
	return n
}

// Shared says the device is shared through MPS: a server or a client on
// it (nvidia.gpu.sharing = "mps").
func Shared(procs []Process) bool {
	for _, p := range procs {
		if p.MPS != sample.MPSNone {
			return true
		}
	}
	return false
}

// Role is a process's nvidia.gpu.process.mps value; "" outside MPS.
func Role(r sample.MPSRole) string {
	switch r {
	case sample.MPSServer:
		return "server"
	case sample.MPSClient:
		return "client"
	}
	return ""
}
