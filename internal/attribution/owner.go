package attribution

// Owner is who a GPU process, or a GPU, belongs to. An empty field is
// unknown. Each field is one resource attribute; the cgroup fills the
// container id, the pod UID and the Slurm job and step, the kubelet's
// PodResources API the pod's and container's names, and ClaimName for a
// device allocated through a DRA claim (dra.go).
//
// Keep the fields as they are: a struct with the same fields, in the same
// order, converts to and from Owner directly.
type Owner struct {
	ContainerID   string // container.id: the runtime's 64-hex container id
	PodUID        string // k8s.pod.uid
	PodName       string // k8s.pod.name
	Namespace     string // k8s.namespace.name
	ContainerName string // k8s.container.name
	// ClaimName is the DRA ResourceClaim that allocated the device:
	// k8s.resourceclaim.name. Its namespace is the pod's (a pod can only
	// reference claims of its own namespace), k8s.namespace.name.
	ClaimName  string
	SlurmJobID string // slurm.job.id: the Slurm job whose cgroup holds the process
	SlurmStep  string // slurm.job.step: its step, a number or batch, extern, interactive
	// UserName is user.name: the login name (or decimal uid) of the Slurm
	// job a GPU is allocated to (gpustat.go). Set on a GPU's owner only;
	// a process's user is its process.owner.
	UserName string
}

// IsZero reports whether nothing is known: a host process, or no
// allocation.
func (o Owner) IsZero() bool { return o == Owner{} }

// hasPod reports whether o names a pod, by UID or by namespace and name.
func (o Owner) hasPod() bool { return o.PodUID != "" || o.PodName != "" || o.Namespace != "" }

// singleOwner reports the one container or pod that all owners of one
// source (a GPU's processes, or its PodResources allocation) point to.
//
//   - Every owner in one container: that owner, ok.
//   - Every owner in one pod, several containers: the pod's fields only
//     (ContainerID and ContainerName cleared), ok.
//   - Every owner in one Slurm job, several steps: the job alone (SlurmStep
//     cleared), ok; several jobs are shared.
//   - Several pods, several non-Kubernetes containers, a mix of container
//     and host processes (a zero Owner), only host processes, or no owners:
//     Owner{}, false.
//
// Pass the owners of the processes whose cgroup could be read, a host
// process included as a zero Owner; leave out the processes that could not
// be resolved (exited, or invisible from the proc root).
func singleOwner(owners []Owner) (Owner, bool) {
	if len(owners) == 0 {
		return Owner{}, false
	}
	first := owners[0]
	sameContainer, sameClaim, sameStep := true, true, true
	for _, o := range owners[1:] {
		if o.PodUID != first.PodUID || o.PodName != first.PodName || o.Namespace != first.Namespace ||
			o.SlurmJobID != first.SlurmJobID {
			return Owner{}, false
		}
		if o.ContainerID != first.ContainerID || o.ContainerName != first.ContainerName {
			sameContainer = false
		}
		if o.ClaimName != first.ClaimName {
			// One pod's containers under several claims: the pod, no claim.
			sameClaim = false
		}
		if o.SlurmStep != first.SlurmStep {
			// Several steps of one job: the job, no step.
			sameStep = false
		}
	}
	if !sameClaim {
		first.ClaimName = ""
	}
	if !sameStep {
		first.SlurmStep = ""
	}
	if sameContainer {
		return first, !first.IsZero()
	}
	if !first.hasPod() {
		// Several containers and no pod that holds them all: shared.
		return Owner{}, false
	}
	first.ContainerID, first.ContainerName = "", ""
	return first, true
}

// gpuOwner is the owner to put on a GPU's own resource, from its
// PodResources allocation (allocated: Owners with PodName, Namespace,
// ContainerName, as PodResourcesCache.Owners returns them) and its
// processes (processes: Owners from the cgroup, as resolver.resolve returns
// them). A GPU gets an owner only when both sources agree on one.
//
//   - One source empty: singleOwner of the other.
//   - Both single: merged. Pod fields when both name one pod; container
//     fields (ContainerID from the processes, ContainerName from the
//     allocation) only when both name one container.
//   - Either source several, or the processes outside Kubernetes while the
//     GPU is allocated to a pod: Owner{}, false (shared: rely on the
//     per-process resources).
//   - Allocated to one Slurm job (the gpustat directory): slurmGPUOwner.
//
// The kubelet's List gives no pod UIDs, so when both sources name one pod
// they are taken to be the same pod: the pod the GPU is allocated to runs
// the processes on it. A process of a pod that did not request the GPU
// (NVIDIA_VISIBLE_DEVICES=all) alone on a GPU whose owner is idle would be
// merged with the owner's names; nothing in /proc or PodResources tells the
// two apart.
func gpuOwner(allocated, processes []Owner) (Owner, bool) {
	switch {
	case len(allocated) == 0:
		return singleOwner(processes)
	case len(processes) == 0:
		return singleOwner(allocated)
	}
	a, ok := singleOwner(allocated)
	if !ok {
		return Owner{}, false
	}
	if a.SlurmJobID != "" && !a.hasPod() {
		return slurmGPUOwner(a, processes)
	}
	p, ok := singleOwner(processes)
	if !ok || p.PodUID == "" {
		return Owner{}, false
	}
	merged := Owner{PodUID: p.PodUID, PodName: a.PodName, Namespace: a.Namespace, ClaimName: a.ClaimName}
	if p.ContainerID != "" && a.ContainerName != "" {
		merged.ContainerID, merged.ContainerName = p.ContainerID, a.ContainerName
	}
	return merged, true
}

// slurmGPUOwner is gpuOwner for a GPU allocated to one Slurm job (a,
// from the gpustat directory, with no pod) that has processes: the job and
// its user when every process whose cgroup names an owner is in that job,
// with their step when they share one; Owner{}, false (shared, as with a
// pod's allocation) when a process belongs to another job or to a
// container. Each process keeps its own attribution either way.
func slurmGPUOwner(a Owner, processes []Owner) (Owner, bool) {
	p, ok := singleOwner(processes)
	if !ok || p.SlurmJobID != a.SlurmJobID || p.hasPod() || p.ContainerID != "" {
		return Owner{}, false
	}
	return Owner{SlurmJobID: a.SlurmJobID, SlurmStep: p.SlurmStep, UserName: a.UserName}, true
}

// withPodNames adds the GPU owner's pod and container names to a process of
// that same pod: the kubelet's List knows names, the cgroup UIDs.
func withPodNames(p, gpu Owner) Owner {
	if p.PodUID == "" || p.PodUID != gpu.PodUID {
		return p
	}
	p.PodName, p.Namespace, p.ClaimName = gpu.PodName, gpu.Namespace, gpu.ClaimName
	if p.ContainerID != "" && p.ContainerID == gpu.ContainerID {
		p.ContainerName = gpu.ContainerName
	}
	return p
}
